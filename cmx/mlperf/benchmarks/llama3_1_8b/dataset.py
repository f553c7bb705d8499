"""The CNN/DailyMail eval set of llama3.1-8b: load the MLCommons-processed cnn_eval.json and check its format.

The file is what `language/llama3.1-8b/download_cnndm.py` of mlcommons/inference writes (and
MLCommons serves, see recipes/get-dataset-cnndm): a JSON list, one object per article of the
cnn_dailymail 3.0.0 validation split (13,368 of them), each with

- `instruction`: `{"llama": TEMPLATE}`, the prompt template with an `{input}` field (PROMPT_TEMPLATE);
- `input`: the article;
- `tok_input`: `tokenizer.encode(TEMPLATE.format(input=article))` with the Llama 3.1 tokenizer,
  so it starts with <|begin_of_text|> (128000); no chat template is applied;
- `output`: the reference summary (the article's highlights, one per line).

The reference's dataset.py reads `input`, `tok_input` (the SUT feeds these ids to vLLM) and
`output` (evaluation.py scores against it) with `pandas.read_json`; cmx reads the file with the
standard library and keeps the token ids as int32 arrays (about 50 MB for the full set instead
of several hundred MB of Python ints).
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.frames import (
    kind,
    names,
    require_file,
    short,
    token_array,
)
from cmx.mlperf.benchmarks.kit.samples import TokenSamples

SAMPLES = 13368  # dataset.py total_sample_count; loadgen/mlperf.conf performance_sample_count_override
FACTS = DatasetFacts(SAMPLES, what="CNN/DailyMail-format")  # what the dataset step fetches and checks
COLUMNS = ("instruction", "input", "tok_input", "output")  # download_cnndm.py, in the order it writes them
TEMPLATE_KEY = "llama"  # download_cnndm.py: instruction = "llama", the key of instruction_template
PROMPT_TEMPLATE = ("Summarize the following news article in 128 tokens. Please output the summary only, without "
                   "any other text.\n\nArticle:\n{input}\n\nSummary:")  # download_cnndm.py instruction_template
_HINT = ("it is not the llama3.1-8b cnn_eval.json that download_cnndm.py writes; get it with "
         "`cmx run \"get dataset cnndm\"`")


@dataclass(frozen=True)
class CnnDailyMail(TokenSamples):
    """The processed CNN/DailyMail samples: prompts as token ids, reference summaries as text.

    Sample i is row i of the file. `templates` holds each row's prompt template (the same
    string object for rows that share one).
    """

    articles: tuple[str, ...]
    references: tuple[str, ...]
    token_ids: tuple[array[int], ...]  # array("i"): int32 token ids, <|begin_of_text|> first
    templates: tuple[str, ...]
    path: Path

    def prompt_text(self, i: int) -> str:
        """The prompt of sample i as text: the template with the article in it (what `tok_input` encodes)."""
        return self.templates[i].format_map({"input": self.articles[i]})

    def reference(self, i: int) -> str:
        """The reference summary of sample i (`output`), which ROUGE compares against."""
        return self.references[i]


def load_cnndm(path: Path | str) -> CnnDailyMail:
    """Read a cnn_eval.json and check every row has the columns and value types the benchmark reads.

    Raises DatasetError naming the file, the row and what is missing or wrong.
    """
    path = Path(path)
    rows = _read_rows(path)
    articles: list[str] = []
    references: list[str] = []
    token_ids: list[array[int]] = []
    templates: list[str] = []
    checked: dict[str, str] = {}  # template text -> the one string kept for it
    for i, row in enumerate(rows):
        where = f"{path}: row {i}"
        _check_row(row, where)
        template = row["instruction"][TEMPLATE_KEY]
        if template not in checked:
            checked[template] = _checked_template(template, where)
        articles.append(row["input"])
        references.append(row["output"])
        token_ids.append(row["tok_input"])
        templates.append(checked[template])
    return CnnDailyMail(tuple(articles), tuple(references), tuple(token_ids), tuple(templates), path)


def _read_rows(path: Path) -> list[Any]:
    require_file(path, get="get dataset cnndm")
    compactor = _RowCompactor(path)
    try:
        with open(path, encoding="utf-8") as f:  # text: a bytes copy of the file is never held
            rows = json.load(f, object_hook=compactor)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} is not valid JSON: {exc}",
                           hint="a download that was cut short leaves a truncated file; download it again") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(rows, list):
        raise DatasetError(f"{path} holds a JSON {type(rows).__name__}, not a list of samples", hint=_HINT)
    if not rows:
        raise DatasetError(f"{path} holds no samples", hint=_HINT)
    return rows


class _RowCompactor:
    """json.load's object_hook: turns each row's tok_input into an int32 array as soon as the row is
    parsed, so that the ids of only one row at a time exist as Python ints. Counts the rows, to name the
    one whose ids are not token ids."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = 0

    def __call__(self, obj: dict[str, Any]) -> dict[str, Any]:
        if "tok_input" in obj or "input" in obj or "output" in obj:  # a row, not its instruction object
            self.rows += 1
        if "tok_input" in obj:
            obj["tok_input"] = token_array(obj["tok_input"], f"{self.path}: row {self.rows - 1}: 'tok_input'",
                                           hint=_HINT)
        return obj


def _check_row(row: object, where: str) -> None:
    if not isinstance(row, dict):
        raise DatasetError(f"{where} is a JSON {type(row).__name__}, not an object", hint=_HINT)
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise DatasetError(f"{where} has no {names(missing)}; it has {names(row) or 'no keys'}", hint=_HINT)
    for column in ("input", "output"):
        if not isinstance(row[column], str):
            raise DatasetError(f"{where}: {column!r} is {kind(row[column])}, not text", hint=_HINT)
    instruction = row["instruction"]
    if not isinstance(instruction, dict) or not isinstance(instruction.get(TEMPLATE_KEY), str):
        raise DatasetError(f"{where}: 'instruction' is {short(repr(instruction))}, not an object whose "
                           f"{TEMPLATE_KEY!r} is the prompt template", hint=_HINT)


def _checked_template(template: str, where: str) -> str:
    try:
        filled = template.format_map({"input": "\0"})
    except (KeyError, ValueError, IndexError, AttributeError) as exc:
        raise DatasetError(f"{where}: the prompt template {short(repr(template))} cannot be filled with the "
                           f"article: {type(exc).__name__}: {exc}", hint=_HINT) from None
    if "\0" not in filled:
        raise DatasetError(f"{where}: the prompt template {short(repr(template))} has no {{input}} field for the "
                           "article", hint=_HINT)
    return template


__all__ = ["COLUMNS", "FACTS", "PROMPT_TEMPLATE", "SAMPLES", "CnnDailyMail", "load_cnndm"]
