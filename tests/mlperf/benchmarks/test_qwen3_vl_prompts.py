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
    PRODUCT_SCHEMA,
    chat_messages,
    image_data_url,
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
