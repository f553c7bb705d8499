"""accuracy.txt: write it as the references print it, read it as the official checker reads it, and check targets.

The text LLMs' reference evaluators print `"\\nResults\\n"` and their result dict (Whisper's prints one
line of its own: cmx.mlperf.benchmarks.whisper.accuracy);
tools/submission/truncate_accuracy_log.py appends `hash=<sha256 of the full log>`. The checker
(tools/submission/submission_checker) reads the file with `readlines()` and matches each line
with the `ACC_PATTERN` regexes of `constants.py` (`CHECKER_PATTERNS` below), then compares each
value with the round's accuracy targets and upper limits. Standard library only.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from cmx.mlperf.loadgen.accuracy_log import AccuracyError

# tools/submission/submission_checker/constants.py, ACC_PATTERN: the lines the checker matches
CHECKER_PATTERNS: dict[str, str] = {
    "rouge1": r".*'rouge1':\s+'?([\d.]+)'?.*",
    "rouge2": r".*'rouge2':\s+'?([\d.]+)'?.*",
    "rougeL": r".*'rougeL':\s+'?([\d.]+)'?.*",
    "rougeLsum": r".*'rougeLsum':\s+'?([\d.]+)'?.*",
    "gen_len": r".*'gen_len':\s([\d.]+).*",
    "tokens_per_sample": r".*'tokens_per_sample':\s([\d.]+).*",
    "exact_match": r".*'exact_match':\s([\d.]+).*",
    "gsm8k": r".*'gsm8k':\s([\d.]+).*",  # ACC_PATTERN gsm8k_accuracy
    "mbxp": r".*'mbxp':\s([\d.]+).*",    # ACC_PATTERN mbxp_accuracy
    "accuracy": r"Word Error Rate\:.*, accuracy=([0-9\.]+)%",  # ACC_PATTERN ACCURACY (whisper)
    "f1": r'\{.*"f1":\s*([\d\.]+).*\}',  # ACC_PATTERN F1_HIERARCHICAL (qwen3-vl-235b-a22b)
    "vbench_score": r".*'vbench_score':\s([\d.]+).*",  # ACC_PATTERN vbench_score (cmx.mlperf.scoring.vbench)
}
# not read by the checker; the same shape, so that accuracy.txt round-trips
_COUNT_PATTERNS: dict[str, str] = {
    "gen_num": r".*'gen_num':\s([\d.]+).*",
    "gen_tok_len": r".*'gen_tok_len':\s([\d.]+).*",
    "wer": r"Word Error Rate\:\s*([0-9.e+-]+)%, accuracy=",
}
HASH_PATTERN = r"^hash=([\w\d]+)$"  # accuracy_check.py and truncate_accuracy_log.py
_INTEGER_KEYS = frozenset({"gen_len", "gen_num", "gen_tok_len"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


# the checker's names for the values it reads (constants.py accuracy-target), and how people read them
CHECKER_NAMES = {"rouge1": "ROUGE1", "rouge2": "ROUGE2", "rougeL": "ROUGEL", "rougeLsum": "ROUGELSUM",
                 "gen_len": "GEN_LEN", "tokens_per_sample": "TOKENS_PER_SAMPLE",
                 "exact_match": "exact_match", "gsm8k": "gsm8k_accuracy", "mbxp": "mbxp_accuracy",
                 "accuracy": "ACCURACY", "f1": "F1_HIERARCHICAL", "vbench_score": "vbench_score"}
LABELS = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum",
          "gen_len": "generated length (characters)", "tokens_per_sample": "tokens per sample",
          "exact_match": "exact match (%)", "gsm8k": "GSM8K exact match (%)", "mbxp": "MBXP pass@1 (%)",
          "accuracy": "100 - word error rate (%)", "f1": "category hierarchical F1",
          "vbench_score": "VBench score (mean of its dimensions, %)"}


class BoundLike(Protocol):
    """One bound of a round's accuracy targets (cmx.mlperf.rounds.AccuracyBound)."""

    @property
    def metric(self) -> str: ...

    @property
    def value(self) -> float: ...


class AccuracyTargetsLike(Protocol):
    """What `meets_targets` needs: the minimums (accuracy-target) and maximums (accuracy-upper-limit)."""

    @property
    def minimums(self) -> Sequence[BoundLike]: ...

    @property
    def maximums(self) -> Sequence[BoundLike]: ...


class ResultLike(Protocol):
    def as_dict(self) -> Mapping[str, float | int]: ...


def format_accuracy_txt(result: ResultLike | Mapping[str, float | int], log_sha256: str) -> str:
    """accuracy.txt as the reference prints it and truncate_accuracy_log.py completes it.

    The dict holds plain Python numbers, so it reads `'rouge1': 44.4312` and never
    `np.float64(44.4312)`, which the checker's patterns would silently miss.
    """
    values = dict(result) if isinstance(result, Mapping) else result.as_dict()
    return f"\nResults\n\n{values!r}\n\nhash={valid_sha256(log_sha256)}\n"


def valid_sha256(log_sha256: str) -> str:
    """`log_sha256`, once it is checked to be a sha256 in hex (the hash= line's value)."""
    if not _SHA256.fullmatch(log_sha256):
        raise AccuracyError(f"{log_sha256!r} is not a sha256 (64 lowercase hex digits)",
                            hint="pass the value truncate_accuracy_log returned")
    return log_sha256


def parse_accuracy_txt(text: str) -> dict[str, float | int | str]:
    """The values the checker would find in accuracy.txt, read the way it reads them.

    Lines are split as `open().readlines()` splits them and matched with the checker's
    patterns; the first line that matches a key gives its value. Keys: rouge1, rouge2, rougeL,
    rougeLsum, tokens_per_sample, exact_match, gsm8k, mbxp, accuracy, vbench_score and wer (floats),
    gen_len, gen_num, gen_tok_len (ints) and hash (str); a key the text lacks is absent.
    """
    found: dict[str, float | int | str] = {}
    patterns = {**CHECKER_PATTERNS, **_COUNT_PATTERNS}
    for line in io.StringIO(text, newline=None).readlines():
        for key, pattern in patterns.items():
            match = re.match(pattern, line)
            if match and key not in found:
                found[key] = _number(key, match.group(1))
        match = re.match(HASH_PATTERN, line)
        if match and "hash" not in found:
            found["hash"] = match.group(1)
    return found


def _number(key: str, text: str) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise AccuracyError(f"accuracy.txt: {key} is {text!r}, not a number") from None
    if key in _INTEGER_KEYS and value.is_integer() and text.isdigit():
        return int(text)
    return value


def hash_lines(text: str) -> list[str]:
    """Every `hash=` value of accuracy.txt, in order. The checker reads only the first, and only that it is there;
    the log's sha256 is the one truncate_accuracy_log.py appends, which is not the first where the evaluator writes
    a hash of its own (Qwen3-VL's, of its result line)."""
    return [m.group(1) for line in io.StringIO(text, newline=None).readlines()
            if (m := re.match(HASH_PATTERN, line))]


def read_accuracy_txt(path: Path | str) -> dict[str, float | int | str]:
    """parse_accuracy_txt of a file, read as text the way the checker opens it."""
    path = Path(path)
    try:
        return parse_accuracy_txt(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccuracyError(f"{path} does not exist") from None


def meets_targets(result: ResultLike | Mapping[str, float | int | str], targets: AccuracyTargetsLike) -> list[str]:
    """One plain sentence per target `result` misses; empty when it meets them all.

    `result` is a benchmark's accuracy result or what parse_accuracy_txt returned. The
    comparisons are the checker's: a minimum is met by a value >= it, a maximum by a value <= it.
    """
    values = result if isinstance(result, Mapping) else result.as_dict()
    shortfalls: list[str] = []
    missing: set[str] = set()
    for bounds, below in ((targets.minimums, True), (targets.maximums, False)):
        for bound in bounds:
            label = LABELS.get(bound.metric, bound.metric)
            value = _value(values, bound.metric)
            if value is None:
                if bound.metric not in missing:
                    shortfalls.append(f"{label} is missing")
                    missing.add(bound.metric)
            elif below and value < bound.value:
                shortfalls.append(f"{label} is {_show(value)}, below the minimum {_show(bound.value)}")
            elif not below and value > bound.value:
                shortfalls.append(f"{label} is {_show(value)}, above the maximum {_show(bound.value)}")
    return shortfalls


def _value(values: Mapping[str, float | int | str], key: str) -> float | None:
    value = values.get(key)
    if value is None or isinstance(value, str):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _show(value: float) -> str:
    return repr(round(float(value), 6))
