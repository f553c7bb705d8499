"""Qwen3-VL's request as the v6.0 reference builds it: the system prompt (pinned by the sha256 of the reference's
own rendering, pydantic's schema included), the user text with the categories as Python prints a list, the image
re-encoded by Pillow in its own format behind an upper-case data URL, and a body that leaves sampling to the
model's generation config."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import pytest

from cmx.mlperf.backends.base import ChatPrompt
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.qwen3_vl.prompts import (
    MAX_IMAGE_PIXELS,
    MAX_VISUAL_TOKENS,
    PRODUCT_SCHEMA,
    chat_messages,
    image_data_url,
    refuse_oversized,
    system_prompt,
    user_text,
)

# multimodal/qwen3-vl task.py's system message rendered with pydantic 2.13 and 2.14 (ProductMetadata's
# model_json_schema, indent 2): its length and sha256
REFERENCE_SYSTEM = (1656, "0d1878a7ddab0ca73999e3b7db2e0b8aaa74069f1bcc4c4f8a49201b82151c48")


def test_the_system_prompt_is_the_references_character_for_character():
    text = system_prompt()
    assert (len(text), hashlib.sha256(text.encode()).hexdigest()) == REFERENCE_SYSTEM
    assert "specifc" in text and text.endswith("```\n")  # the reference's typo, kept: the prompt is the benchmark's
    assert json.loads(text.split("```json\n")[1].split("\n```")[0]) == PRODUCT_SCHEMA


def test_the_user_text_fences_the_fields_and_lists_the_categories_as_python_prints_them():
    text = user_text("Polo <b>shirt</b>", "line one\nline two", ["A > B", "C's > D"])
    assert text == ("The title of the product is the following:\n```text\nPolo <b>shirt</b>\n```\n\n"
                    "The description of the product is the following:\n```text\nline one\nline two\n```\n\n"
                    "The following are the possible product categories:\n```json\n['A > B', \"C's > D\"]\n```\n")


def _image(fmt: str) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 40)).save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_the_image_is_saved_again_in_its_own_format_behind_an_upper_case_data_url(fmt: str):
    from PIL import Image

    original = _image(fmt)
    url = image_data_url(original, "row 3")
    head, _, payload = url.partition(",")
    assert head == f"data:image/{fmt};base64"
    sent = base64.b64decode(payload)
    with Image.open(io.BytesIO(sent)) as img:
        assert (img.format, img.size) == (fmt, (8, 6))
    again = io.BytesIO()
    with Image.open(io.BytesIO(original)) as img:
        img.save(again, format=fmt)
    assert sent == again.getvalue()  # Pillow's re-encoding, not the file's own bytes


def test_an_image_that_does_not_decode_or_is_missing_is_refused_naming_the_row():
    with pytest.raises(DatasetError, match="row 7's image cannot be decoded"):
        image_data_url(b"not an image", "row 7")
    with pytest.raises(DatasetError, match="row 8 has no image"):
        image_data_url(b"", "row 8")


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and IHDR chunk (8-bit RGB), with no pixel data: Pillow opens it and reads its size, and
    fails only when asked to decode it."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [20000, 12000])
def test_an_image_larger_than_the_datasets_is_refused_from_its_header_naming_the_row(side: int):
    pytest.importorskip("PIL")
    with pytest.raises(DatasetError) as caught:  # decoding it would fail otherwise: it has no pixel data
        image_data_url(png_header(side, side), "row 5 of /data/catalogue")
    assert caught.value.message.startswith("row 5 of /data/catalogue's image ")
    assert "refused before decoding" in caught.value.message and "cannot be decoded" not in caught.value.message
    assert "\n" not in caught.value.message


def test_a_large_dimension_png_small_on_disk_is_refused_before_it_is_decoded(tmp_path: Path):
    from PIL import Image

    Image.new("1", (12000, 12000)).save(tmp_path / "big.png")  # 144 million pixels, a few kB on disk
    data = (tmp_path / "big.png").read_bytes()
    assert len(data) < 100_000
    with pytest.raises(DatasetError, match=r"row 9's image is 12000x12000 pixels \(140625 visual tokens\), larger "
                                           r"than any of the benchmark's dataset"):
        image_data_url(data, "row 9")
    assert Image.MAX_IMAGE_PIXELS == MAX_IMAGE_PIXELS  # Pillow's own decompression-bomb limit is the same


@pytest.mark.parametrize(("size", "refused"), [
    ((5248, 5248), False),  # 164 x 164 = 26,896 visual tokens
    ((5280, 5280), True),  # 165 x 165 = 27,225, more than the dataset's longest sample holds
    ((31, 3_000_000), False),  # no visual token, 93 million pixels
    ((31, 4_000_000), True),  # 124 million pixels
    ((1000, 800), False),
])
def test_the_size_limit_is_the_datasets_visual_tokens_and_the_pixels_they_allow(size: tuple[int, int],
                                                                                 refused: bool):
    assert (MAX_VISUAL_TOKENS, MAX_IMAGE_PIXELS) == (27_051, 110_800_896)
    if refused:
        with pytest.raises(DatasetError, match=rf"row 1's image is {size[0]}x{size[1]} pixels"):
            refuse_oversized(size, "row 1")
    else:
        refuse_oversized(size, "row 1")


def test_the_messages_are_the_references_and_the_body_sends_the_benchmarks_sampling_and_no_bound():
    from cmx.mlperf.backends.openai_api import chat_body
    from cmx.mlperf.benchmarks.qwen3_vl import BENCHMARK

    messages = chat_messages("t", "d", ["A"], "data:image/PNG;base64,AA==")
    assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == system_prompt()
    assert [p["type"] for p in messages[1]["content"]] == ["text", "image_url"]
    body = chat_body(ChatPrompt(tuple(messages)), "Qwen/Qwen3-VL-235B-A22B-Instruct", BENCHMARK.generation.sampling)
    assert "max_tokens" not in body and "max_completion_tokens" not in body and "response_format" not in body
    # the model's generation_config.json, which the reference's null fields leave the server to apply
    assert {k: body[k] for k in ("temperature", "top_p", "top_k")} == {"temperature": 0.7, "top_p": 0.8, "top_k": 20}


def test_a_products_chat_is_built_from_its_row_and_a_bad_image_names_the_row(tmp_path: Path):
    from cmx.mlperf.benchmarks.qwen3_vl.dataset import load_catalogue
    from cmx.mlperf.benchmarks.qwen3_vl.prompts import ProductPrompts
    from cmx.mlperf.benchmarks.qwen3_vl.tiny import make_tiny_catalogue

    catalogue = load_catalogue(make_tiny_catalogue(tmp_path / "cat", rows=4).path)
    prompts = ProductPrompts(catalogue)
    chat = prompts.chat(2)
    product = catalogue.product(2)
    assert len(prompts) == 4 and chat.max_tokens is None
    assert chat.messages[1]["content"][0]["text"] == user_text(product.title, product.description,
                                                                product.categories)
    assert chat.messages[1]["content"][1]["image_url"]["url"].startswith("data:image/")

    class Broken(type(catalogue)):  # type: ignore[misc]
        def image(self, i: int) -> bytes:
            return b"\xff\xd8 not a jpeg"

    broken = Broken(catalogue.path, catalogue._table)
    with pytest.raises(DatasetError, match=r"row 1 of .* image cannot be decoded"):
        ProductPrompts(broken).chat(1)
