"""What the model is sent for one product: the two chat messages of multimodal/qwen3-vl's v6.0 reference
(`formulate_loaded_sample` in task.py, mlcommons/inference b66003e), and the request body around them.

The prompts are part of the benchmark: the closed division sends what the reference sends, so the
texts below are the reference's, character for character (its typos included), with the JSON schema
of its `ProductMetadata` as pydantic renders it (`model_json_schema()`, dumped with indent 2). The
system message is 1,656 characters; a test pins its sha256.

- The user message is a text part (the title, the description, and the candidate categories, each in
  a fenced block; the categories as Python prints a list, in single quotes, although the fence says
  json) and then an image part.
- The image is re-encoded, as the reference does: opened with Pillow and saved again in its own format
  with Pillow's default settings (JPEG at quality 75), then sent as a base64 data URL whose type is
  Pillow's format name, upper-case (`data:image/JPEG;base64,...`). The original file's bytes are
  not sent.
- An image larger than any of the real dataset's is refused from its header, naming its row, before it is
  decoded (a 12000x12000 one took 770 MB to decode and send): more than MAX_VISUAL_TOKENS visual tokens, or
  more than MAX_IMAGE_PIXELS pixels, which is also Pillow's decompression-bomb limit here.
- The reference's body sets no max_tokens and leaves every sampling field null, so that the server takes
  the model's generation_config.json (temperature 0.7, top_p 0.8, top_k 20). cmx's chat route
  (cmx.mlperf.backends.openai_api.chat_body) sends no max_tokens either, and sends those values, the
  benchmark's sampling, so that no server default chooses.
"""

from __future__ import annotations

import base64
import io
import json
import warnings
from collections.abc import Sequence
from typing import Any

from cmx.mlperf.backends.base import ChatPrompt
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.qwen3_vl.dataset import ProductCatalogue

# No image of the real dataset has more visual tokens: the reference's notebook
# (multimodal/qwen3-vl/notebooks/shopify-global-catalogue.ipynb, mlcommons/inference) counts an image's visual tokens
# as (width // 32) * (height // 32) (16-pixel patches, merged 2x2) and finds the longest sample, text and image
# together, at 27,051 tokens ("The longest sample is at index 17035 and has 27051 tokens").
MAX_VISUAL_TOKENS = 27_051
VISUAL_TOKEN_PIXELS = 32  # a visual token's side, in pixels
# The pixels an image within MAX_VISUAL_TOKENS can have when both its sides are at least 32: under
# (w // 32 + 1) * (h // 32 + 1) * 32 * 32, which is at most 4 * MAX_VISUAL_TOKENS * 32 * 32 (110,800,896). Pillow's
# decompression-bomb limit is set to it too, so that Pillow warns about no image cmx would send.
MAX_IMAGE_PIXELS = 4 * MAX_VISUAL_TOKENS * VISUAL_TOKEN_PIXELS ** 2

# schema.py ProductMetadata: its fields, and the docstrings pydantic turns into descriptions
PRODUCT_SCHEMA: dict[str, Any] = {
    "additionalProperties": False,
    "description": "Json format for the expected responses from the VLM.",
    "properties": {
        "category": {
            "description": "The complete category of the product, e.g.,\n\"Clothing & Accessories > Clothing > "
                           "Shirts > Polo Shirts\".\nEach categorical level is separated by \" > \".",
            "title": "Category",
            "type": "string",
        },
        "brand": {"description": "The brand of the product, e.g., \"giorgio armani\".", "title": "Brand",
                  "type": "string"},
        "is_secondhand": {"description": "True if the product is second-hand, False otherwise.",
                          "title": "Is Secondhand", "type": "boolean"},
    },
    "required": ["category", "brand", "is_secondhand"],
    "title": "ProductMetadata",
    "type": "object",
}

_SYSTEM = """Please analyze the product from the user prompt
and provide the following fields in a valid JSON object:
- category
- brand
- is_secondhand

You must choose only one, which is the most appropriate, correct, and specifc
category out of the list of possible product categories.

The description of the product sometimes contains various types of source code
(e.g., JavaScript, CSS, HTML, etc.), where useful product information is embedded
somewhere inside the source code. For this task, you should extract the useful
product information from the source code and leverage it, and discard the
programmatic parts of the source code.

Your response should only contain a valid JSON object and nothing more, e.g.,
you should not fence the JSON object inside a ```json code block.
The JSON object should match the followng JSON schema:
```json
{schema}
```
"""

_USER = """The title of the product is the following:
```text
{title}
```

The description of the product is the following:
```text
{description}
```

The following are the possible product categories:
```json
{categories}
```
"""


def system_prompt() -> str:
    """The system message's text."""
    return _SYSTEM.format(schema=json.dumps(PRODUCT_SCHEMA, indent=2))


def user_text(title: str, description: str, categories: Sequence[str]) -> str:
    """The user message's text part: the title and description as they are, the categories as Python prints a
    list of strings (`str(list)`)."""
    return _USER.format(title=title, description=description, categories=str(list(categories)))


def image_data_url(image: bytes, where: str) -> str:
    """The image as the reference sends it: decoded with Pillow, saved again in its own format with Pillow's
    defaults, base64, behind `data:image/<FORMAT>;base64,`. An image Pillow cannot read is refused, naming
    `where` (the reference stops there too: its QSL raises while loading the sample), and so is one larger than
    any of the real dataset's, from its header, before it is decoded (`refuse_oversized`)."""
    Image = _pillow()
    if not image:
        raise DatasetError(f"{where} has no image", hint="every row of the catalogue has a product_image; check the "
                                                         "dataset's files against their checksums")
    try:
        with Image.open(io.BytesIO(image)) as img:  # reads the header only: the size, not the pixels
            refuse_oversized(img.size, where)
            img.load()
            fmt = img.format
            out = io.BytesIO()
            img.save(out, format=fmt)
    except Image.DecompressionBombError as exc:  # over twice Pillow's limit: refused by Image.open itself
        raise DatasetError(f"{where}'s image is refused before decoding: {exc}", hint=_OVERSIZED_HINT) from None
    except (Image.UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise DatasetError(f"{where}'s image cannot be decoded: {exc}",
                           hint="check the dataset's files against their checksums, or download it again") from None
    return f"data:image/{fmt};base64,{base64.b64encode(out.getvalue()).decode('ascii')}"


_OVERSIZED_HINT = "no image of the real Shopify/product-catalogue is that large; check the dataset's files against " \
                  "their checksums, or download it again"


def refuse_oversized(size: tuple[int, int], where: str) -> None:
    """A DatasetError naming `where` when an image of `size` (width, height) is larger than any of the real
    dataset's: more than MAX_VISUAL_TOKENS visual tokens, or more than MAX_IMAGE_PIXELS pixels."""
    width, height = size
    tokens = (width // VISUAL_TOKEN_PIXELS) * (height // VISUAL_TOKEN_PIXELS)
    if tokens > MAX_VISUAL_TOKENS or width * height > MAX_IMAGE_PIXELS:
        raise DatasetError(f"{where}'s image is {width}x{height} pixels ({tokens} visual tokens), larger than any of "
                           f"the benchmark's dataset (at most {MAX_VISUAL_TOKENS} visual tokens and "
                           f"{MAX_IMAGE_PIXELS} pixels): refused before decoding", hint=_OVERSIZED_HINT)


def _pillow() -> Any:
    """PIL.Image, with its decompression-bomb limit set to MAX_IMAGE_PIXELS (its warning, for an image over it,
    silenced: refuse_oversized refuses every such image itself, naming its row)."""
    try:
        from PIL import Image
    except ImportError:
        raise DatasetError("Pillow is needed to read the product images and is not installed",
                           hint="pip install pillow (vLLM depends on it: installing vLLM brings it)") from None
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    # each time: a caller's catch_warnings (pytest's, per test) may have reset the filters; an identical filter
    # replaces the one before it, so the list does not grow
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    return Image


def chat_messages(title: str, description: str, categories: Sequence[str], image_url: str, *,
                  system: str | None = None) -> list[dict[str, Any]]:
    """The two messages: the system prompt as a string (`system`: made once by the caller), then the user's text part
    and image part."""
    return [
        {"role": "system", "content": system if system is not None else system_prompt()},
        {"role": "user", "content": [{"type": "text", "text": user_text(title, description, categories)},
                                     {"type": "image_url", "image_url": {"url": image_url}}]},
    ]


class ProductPrompts:
    """The QSL's samples (a ChatSource): product i's two messages, its image re-encoded when LoadGen loads the
    sample, as the reference formats each sample when its QSL loads it."""

    def __init__(self, catalogue: ProductCatalogue) -> None:
        self.catalogue = catalogue
        self._system = system_prompt()

    def __len__(self) -> int:
        return len(self.catalogue)

    def chat(self, i: int) -> ChatPrompt:
        product = self.catalogue.product(i)
        url = image_data_url(self.catalogue.image(i), f"row {i} of {self.catalogue.path}")
        return ChatPrompt(tuple(chat_messages(product.title, product.description, product.categories, url,
                                              system=self._system)))


__all__ = ["MAX_IMAGE_PIXELS", "MAX_VISUAL_TOKENS", "PRODUCT_SCHEMA", "ProductPrompts", "chat_messages",
           "image_data_url", "refuse_oversized", "system_prompt", "user_text"]
