"""Qwen3-VL's accuracy: the category hierarchical F1 of the replies, as multimodal/qwen3-vl's evaluation.py
(mlcommons/inference b66003e) computes it, and the accuracy.txt it writes.

A reply is the model's text, sent to LoadGen as UTF-8 bytes. It is read as the reference reads it, with
pydantic's `ProductMetadata.model_validate_json` on the raw text (`parse_reply` is that validation, in
cmx's code): one JSON object, surrounding whitespace allowed, with exactly the keys `category` and
`brand` (strings) and `is_secondhand` (a boolean in pydantic's lax sense: true/false, 0/1, or a string
such as "yes", "off", "f"). Anything else is unparsable: text around the object, a ```json fence, an
extra key, a missing one, a null, a number for a string. Its category then counts as a path of
padding as deep as the true one: it adds the true depth to the predicted levels and nothing to the
matches.

Per reply, both paths are split on " > " with each level stripped; the matches are the longest common
prefix. Over every record of the log, repeats included (the reference keeps no set of samples seen),
hP = matches / predicted levels, hR = matches / true levels, and F1 = 2 hP hR / (hP + hR), 0 when
both are 0. Only this F1 is the benchmark's accuracy; the reference's brand and is_secondhand scores
and its random baselines are printed, not checked, and cmx does not compute them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, read_accuracy_log

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.base import Dataset

SEPARATOR = " > "
CATEGORY_PAD = "<|__PRED_CATEGORY_PAD__|>"  # evaluation.py: an unparsable reply's category, per true level
FIELDS = ("category", "brand", "is_secondhand")
# pydantic's lax bool from a JSON string (case-insensitive), and from a JSON number
_TRUE_STRINGS = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_STRINGS = frozenset({"0", "off", "f", "false", "n", "no"})


@dataclass(frozen=True)
class Reply:
    """A parsed reply: ProductMetadata's three fields."""

    category: str
    brand: str
    is_secondhand: bool


def _lax_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, float) and value in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()  # pydantic strips before it compares
        if lowered in _TRUE_STRINGS:
            return True
        if lowered in _FALSE_STRINGS:
            return False
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Python's json takes them, pydantic's parser does not


def parse_reply(text: str) -> Reply | None:
    """The reply as ProductMetadata.model_validate_json reads it (extra keys forbidden, lax types); None when that
    raises a ValidationError."""
    try:
        data = json.loads(text, parse_constant=_no_constants)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) != set(FIELDS):
        return None
    category, brand, secondhand = data["category"], data["brand"], _lax_bool(data["is_secondhand"])
    if not isinstance(category, str) or not isinstance(brand, str) or secondhand is None:
        return None
    return Reply(category, brand, secondhand)


def category_levels(predicted: str, true: str) -> tuple[int, int, int]:
    """evaluation.py get_hierarchical_components: (matching levels from the top, predicted levels, true levels)."""
    pred = [level.strip() for level in predicted.split(SEPARATOR)]
    truth = [level.strip() for level in true.split(SEPARATOR)]
    matched = 0
    for p, t in zip(pred, truth, strict=False):
        if p != t:
            break
        matched += 1
    return matched, len(pred), len(truth)


def hierarchical_f1(pairs: Sequence[tuple[str, str]]) -> float:
    """calculate_hierarchical_f1: micro F1 of (predicted, true) category paths."""
    matched = predicted = true = 0
    for pred, truth in pairs:
        m, p, t = category_levels(pred, truth)
        matched, predicted, true = matched + m, predicted + p, true + t
    hp = matched / predicted if predicted else 0.0
    hr = matched / true if true else 0.0
    return 0.0 if hp + hr == 0 else 2 * hp * hr / (hp + hr)


@dataclass(frozen=True)
class Qwen3VLAccuracy:
    """What an accuracy run scored: the F1 (the checker's F1_HIERARCHICAL), and how many replies were scored and
    how many of them could not be parsed."""

    f1: float
    replies: int
    unparsable: int

    def as_dict(self) -> dict[str, float | int]:
        return {"f1": self.f1, "replies": self.replies, "unparsable": self.unparsable}


def evaluate(records: Sequence[AccuracyRecord], truths: Sequence[str]) -> Qwen3VLAccuracy:
    """Score every record against `truths` (ground_truth_category, indexed by qsl_idx)."""
    if not records:
        raise AccuracyError("there are no records to evaluate",
                            hint="read them with read_accuracy_log from an accuracy-mode run")
    pairs, unparsable = [], 0
    for record in records:
        where = f"record seq_id {record.seq_id}"
        if not 0 <= record.qsl_idx < len(truths):
            raise AccuracyError(f"{where} has qsl_idx {record.qsl_idx}, outside the {len(truths)} rows",
                                hint="evaluate against the dataset the run used")
        try:
            text = record.data.decode("utf-8")
        except UnicodeDecodeError as exc:  # the reference stops there too (bytes.decode raises)
            raise AccuracyError(f"{where} (qsl_idx {record.qsl_idx}) is not UTF-8 text: {exc}",
                                hint="the SUT answers LoadGen with the reply's UTF-8 bytes") from None
        truth = truths[record.qsl_idx]
        reply = parse_reply(text)
        if reply is None:
            unparsable += 1
            pairs.append((SEPARATOR.join([CATEGORY_PAD] * len(truth.split(SEPARATOR))), truth))
        else:
            pairs.append((reply.category, truth))
    return Qwen3VLAccuracy(hierarchical_f1(pairs), len(pairs), unparsable)


def score_log(accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *, jobs: int = 1) -> Qwen3VLAccuracy:
    """BENCHMARK.score: an accuracy run's log against `dataset`'s true categories (`reference(i)`)."""
    del tokenizer_dir, jobs  # the replies are text: no tokenizer, and scoring 48,289 replies takes seconds
    truths = [dataset.reference(i) for i in range(len(dataset))]
    return evaluate(read_accuracy_log(accuracy_log, item_size=1), truths)


def result_line(f1: float) -> str:
    """evaluation.py's result: json.dumps({"f1": F1}, sort_keys=True)."""
    if not math.isfinite(f1):
        raise AccuracyError(f"the F1 {f1} is not a number")
    return json.dumps({"f1": f1}, sort_keys=True)


def format_accuracy_txt(values: Mapping[str, float | int], log_sha256: str) -> str:
    """accuracy.txt as evaluation.py writes it ("Results", the result line, and a hash= line that is the sha256 of
    that line, not of the log; no final newline), then the log's hash as truncate_accuracy_log.py appends it to an
    accuracy.txt whose log is over 10 KiB (the checker reads the first hash= line, and checks only that it is
    there)."""
    from cmx.mlperf.scoring.accuracy_txt import valid_sha256

    line = result_line(float(values["f1"]))
    own = hashlib.sha256(line.encode()).hexdigest()
    return f"Results\n\n{line}\n\nhash={own}\nhash={valid_sha256(log_sha256)}\n"


__all__ = ["CATEGORY_PAD", "SEPARATOR", "Qwen3VLAccuracy", "Reply", "category_levels", "evaluate",
           "format_accuracy_txt", "hierarchical_f1", "parse_reply", "result_line", "score_log"]
