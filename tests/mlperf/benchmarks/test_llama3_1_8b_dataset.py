"""cmx.mlperf.benchmarks.llama3_1_8b.dataset: cnn_eval.json as download_cnndm.py writes it, and every way it can be
wrong.

The rows are written here in the real file's layout (indent=4, keys in the order the script
writes them), with Llama 3.1 token ids: <|begin_of_text|> 128000 first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.llama3_1_8b.dataset import COLUMNS, PROMPT_TEMPLATE, SAMPLES, load_cnndm
from cmx.mlperf.benchmarks.llama3_1_8b.generation import BOS_TOKEN_ID

ARTICLES = ["(CNN) -- The river rose {fast} overnight.", "LONDON, England -- A quiet day in the city."]
SUMMARIES = ["River rose overnight .\nTown is safe .", "Quiet day in London ."]


def row(article: str, summary: str, ids: list[int], template: str = PROMPT_TEMPLATE) -> dict:
    return {"instruction": {"llama": template}, "input": article, "tok_input": ids, "output": summary}


def rows() -> list[dict]:
    return [row(ARTICLES[0], SUMMARIES[0], [BOS_TOKEN_ID, 9370, 5730, 553]),
            row(ARTICLES[1], SUMMARIES[1], [BOS_TOKEN_ID, 9370, 5730, 553, 279, 2768])]


def write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value, indent=4, ensure_ascii=False), encoding="utf-8")
    return path


def test_the_dataset_gives_prompts_as_ids_and_text_and_references(tmp_path: Path) -> None:
    data = load_cnndm(write(tmp_path / "cnn_eval.json", rows()))
    assert len(data) == 2 and data.path == tmp_path / "cnn_eval.json"
    assert data.prompt_ids(1) == [BOS_TOKEN_ID, 9370, 5730, 553, 279, 2768]
    assert all(type(t) is int for t in data.prompt_ids(0))
    # the article's own braces are text, not template fields
    assert data.prompt_text(0) == ("Summarize the following news article in 128 tokens. Please output the summary "
                                   "only, without any other text.\n\nArticle:\n(CNN) -- The river rose {fast} "
                                   "overnight.\n\nSummary:")
    assert data.reference(0) == "River rose overnight .\nTown is safe ."
    assert data.input_lengths == (4, 6)
    first = data.limit(1)
    assert len(first) == 1 and first.reference(0) == SUMMARIES[0] and first.input_lengths == (4,)
    assert SAMPLES == 13368 and COLUMNS == ("instruction", "input", "tok_input", "output")


def test_each_row_keeps_its_own_template(tmp_path: Path) -> None:
    other = rows()
    other[1]["instruction"]["llama"] = "Summarize:\n{input}\n"
    data = load_cnndm(write(tmp_path / "cnn_eval.json", other))
    assert data.prompt_text(1) == f"Summarize:\n{ARTICLES[1]}\n"
    assert data.prompt_text(0).startswith("Summarize the following news article")


def test_limit_outside_the_dataset_is_refused(tmp_path: Path) -> None:
    data = load_cnndm(write(tmp_path / "cnn_eval.json", rows()))
    for n in (0, 3):
        with pytest.raises(DatasetError, match=f"cannot keep {n} samples") as info:
            data.limit(n)
        assert info.value.hint == "give a number from 1 to 2"


def test_a_missing_file_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no dataset file at") as info:
        load_cnndm(tmp_path / "nope.json")
    assert 'cmx run "get dataset cnndm"' in (info.value.hint or "")


def test_a_truncated_download_is_not_valid_json(tmp_path: Path) -> None:
    path = write(tmp_path / "cnn_eval.json", rows())
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(DatasetError, match="is not valid JSON") as info:
        load_cnndm(path)
    assert "download it again" in (info.value.hint or "")


@pytest.mark.parametrize(("value", "message"), [
    ({"data": rows()}, "holds a JSON dict, not a list of samples"),
    ([], "holds no samples"),
    (["text"], "row 0 is a JSON str, not an object"),
])
def test_a_file_that_is_not_a_list_of_rows_is_refused(tmp_path: Path, value: object, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        load_cnndm(write(tmp_path / "cnn_eval.json", value))


def test_a_missing_column_names_the_file_the_row_and_the_column(tmp_path: Path) -> None:
    bad = rows()
    del bad[1]["output"]
    path = write(tmp_path / "cnn_eval.json", bad)
    with pytest.raises(DatasetError) as info:
        load_cnndm(path)
    assert f"{path}: row 1 has no 'output'; it has 'instruction', 'input', 'tok_input'" in str(info.value)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("tok_input", [BOS_TOKEN_ID, 1.5], "row 1: 'tok_input' holds 1.5, not a token id"),
    ("tok_input", [BOS_TOKEN_ID, True], "row 1: 'tok_input' holds True, not a token id"),
    ("tok_input", [BOS_TOKEN_ID, -3], "row 1: 'tok_input' holds -3, not a token id"),
    ("tok_input", [2**31], "row 1: 'tok_input' holds 2147483648, not a token id"),
    ("tok_input", [], "row 1: 'tok_input' is empty"),
    ("tok_input", "128000 9370", "row 1: 'tok_input' is a str"),
    ("input", None, "row 1: 'input' is null, not text"),
    ("output", ["River rose ."], "row 1: 'output' is a list"),
    ("instruction", "Summarize {input}", "row 1: 'instruction' is 'Summarize {input}', not an object"),
    ("instruction", {"gptj": PROMPT_TEMPLATE}, "row 1: 'instruction' is"),
])
def test_a_value_of_the_wrong_kind_names_the_row_and_the_column(tmp_path: Path, field: str, value: object,
                                                                message: str) -> None:
    bad = rows()
    bad[1][field] = value
    path = write(tmp_path / "cnn_eval.json", bad)
    with pytest.raises(DatasetError, match=r"cnn_eval.json") as info:
        load_cnndm(path)
    assert message in str(info.value)
    assert "get dataset cnndm" in (info.value.hint or "")


@pytest.mark.parametrize(("template", "message"), [
    ("Summarize the article.", "has no {input} field"),
    ("Summarize {article}.", "cannot be filled with the article: KeyError"),
    ("Summarize {input.", "cannot be filled with the article: ValueError"),
])
def test_a_template_that_cannot_take_the_article_is_refused(tmp_path: Path, template: str, message: str) -> None:
    bad = rows()
    bad[0]["instruction"]["llama"] = template
    with pytest.raises(DatasetError, match="row 0: the prompt template") as info:
        load_cnndm(write(tmp_path / "cnn_eval.json", bad))
    assert message in str(info.value)
