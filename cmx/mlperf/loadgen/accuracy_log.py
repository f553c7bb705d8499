"""The llama2-70b accuracy metric: read LoadGen's accuracy log, score ROUGE, write accuracy.txt as the checker reads it.

What the MLCommons reference does, and cmx reproduces (mlcommons/inference):

- `language/llama2-70b/evaluate-accuracy.py`: each `data` field is the hex of the output
  token ids (int32 for this harness, `--dtype int32` in `run_accuracy.sh`); a `qsl_idx` seen
  before is skipped, so the first record of a sample counts; outputs are decoded with
  `skip_special_tokens=True` (the caller's `decode`); predictions and references are stripped
  and split into sentences joined by newlines; ROUGE comes from the `rouge-score` package
  with stemming (through Hugging Face `evaluate`, which calls `RougeScorer.score(reference,
  prediction)` pair by pair); each metric is `round(np.mean(fmeasures) * 100, 4)`;
  `gen_len` is the number of characters of the post-processed predictions, `gen_tok_len`
  the number of output tokens, and `tokens_per_sample = round(gen_tok_len / gen_num, 1)`.
- The script prints `"\\nResults\\n"` and the dict; `tools/submission/truncate_accuracy_log.py`
  appends `hash=<sha256 of the full log>` and keeps the first and last 4096 characters of
  the log with `"\\n\\n...\\n\\n"` between them.
- `tools/submission/submission_checker`: accuracy.txt is read with `readlines()` and each line
  matched with the `ACC_PATTERN` regexes of `constants.py` (`CHECKER_PATTERNS` below).

One deliberate difference: the reference splits sentences with nltk's punkt model, whose data
must be downloaded at run time (`nltk.download("punkt")`), which a reproducible, offline
pipeline cannot do. cmx splits with `split_sentences`, a documented regex splitter. Sentence
splitting changes only newlines between sentences, and the ROUGE tokenizer treats those as
spaces, so ROUGE-1, ROUGE-2 and ROUGE-L (the checked metrics) are unaffected. ROUGE-Lsum (which
reads sentences from newlines) and `gen_len` (which counts them) may differ slightly from the
reference; the checker reads neither for llama2-70b.

Only `evaluate` needs `rouge-score` and numpy (imported when called); reading logs, formatting
and parsing accuracy.txt, targets and truncation use the standard library.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cmx.errors import CmxError

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
TOKEN_BYTES = 4  # the harness logs int32 token ids
VIEWABLE_SIZE = 4096  # truncate_accuracy_log.py: characters kept at each end of the log
TRUNCATION_MARKER = b"\n\n...\n\n"
TRUNCATED_SIZE = 2 * VIEWABLE_SIZE + len(TRUNCATION_MARKER)

# tools/submission/submission_checker/constants.py, ACC_PATTERN: the lines the checker matches
CHECKER_PATTERNS: dict[str, str] = {
    "rouge1": r".*'rouge1':\s+'?([\d.]+)'?.*",
    "rouge2": r".*'rouge2':\s+'?([\d.]+)'?.*",
    "rougeL": r".*'rougeL':\s+'?([\d.]+)'?.*",
    "rougeLsum": r".*'rougeLsum':\s+'?([\d.]+)'?.*",
    "gen_len": r".*'gen_len':\s([\d.]+).*",
    "tokens_per_sample": r".*'tokens_per_sample':\s([\d.]+).*",
}
# not read by the checker; the same shape, so that accuracy.txt round-trips
_COUNT_PATTERNS: dict[str, str] = {
    "gen_num": r".*'gen_num':\s([\d.]+).*",
    "gen_tok_len": r".*'gen_tok_len':\s([\d.]+).*",
}
HASH_PATTERN = r"^hash=([\w\d]+)$"  # accuracy_check.py and truncate_accuracy_log.py
_INTEGER_KEYS = frozenset({"gen_len", "gen_num", "gen_tok_len"})
_SHA256 = re.compile(r"[0-9a-f]{64}")

_TRUNCATED_HINT = ("the submission tree keeps only the first and last 4096 characters; evaluate the full "
                   "mlperf_log_accuracy.json LoadGen wrote (its sha256 is the hash= line of accuracy.txt)")


class AccuracyError(CmxError):
    """The accuracy of a run cannot be computed or written: bad log, missing reference, bad value."""


class AccuracyLogError(AccuracyError):
    """mlperf_log_accuracy.json is missing, empty, truncated, or not what LoadGen writes."""


@dataclass(frozen=True)
class AccuracyRecord:
    """One entry of mlperf_log_accuracy.json.

    `data` holds the output token ids as LoadGen logged them (int32, little-endian);
    `token_data` the first token(s) recorded by FirstTokenComplete (Server, Interactive);
    `token_count` the n_tokens the SUT reported. Both are None when LoadGen wrote no such key.
    """

    seq_id: int
    qsl_idx: int
    data: bytes
    token_count: int | None = None
    token_data: bytes | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.data) // TOKEN_BYTES

    @property
    def tokens(self) -> list[int]:
        return _int32s(self.data)

    @property
    def first_tokens(self) -> list[int] | None:
        return None if self.token_data is None else _int32s(self.token_data)


@dataclass(frozen=True)
class AccuracyResult:
    """The llama2-70b metrics, rounded as the reference rounds them; `duplicates` counts skipped records."""

    rouge1: float
    rouge2: float
    rougeL: float  # the metric's own name, as accuracy.txt spells it
    rougeLsum: float
    gen_len: int
    gen_num: int
    gen_tok_len: int
    tokens_per_sample: float
    duplicates: int = 0

    def as_dict(self) -> dict[str, float | int]:
        """The reference's result dict, in its key order, with plain Python numbers only."""
        return {
            "rouge1": float(self.rouge1),
            "rouge2": float(self.rouge2),
            "rougeL": float(self.rougeL),
            "rougeLsum": float(self.rougeLsum),
            "gen_len": int(self.gen_len),
            "gen_num": int(self.gen_num),
            "gen_tok_len": int(self.gen_tok_len),
            "tokens_per_sample": float(self.tokens_per_sample),
        }


class AccuracyTargetsLike(Protocol):
    """What `meets_targets` needs: minimums for ROUGE-1/2/L and a range for tokens per sample."""

    @property
    def rouge1(self) -> float: ...

    @property
    def rouge2(self) -> float: ...

    @property
    def rougeL(self) -> float: ...

    @property
    def tokens_min(self) -> float: ...

    @property
    def tokens_max(self) -> float: ...


# --- the accuracy log ------------------------------------------------------------------------

def read_accuracy_log(path: Path | str) -> list[AccuracyRecord]:
    """Every record of an mlperf_log_accuracy.json, in file order (duplicates included).

    Refuses, with what to do: a missing or empty file, a truncated submission copy, invalid
    JSON, a log with no records (what LoadGen writes in performance mode), and a record whose
    fields are not what LoadGen writes (`data` must hold whole int32 token ids).
    """
    path = Path(path)
    raw = _read_bytes(path)
    if not raw.strip():
        raise AccuracyLogError(f"{path} is empty",
                               hint="LoadGen writes the log as the run ends: the run probably did not finish; "
                                    "run it again")
    if _looks_truncated(raw):
        raise AccuracyLogError(f"{path} is a truncated copy (first and last {VIEWABLE_SIZE} characters)",
                               hint=_TRUNCATED_HINT)
    try:
        entries = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AccuracyLogError(f"{path} is not valid JSON: {err}",
                               hint="a run that was killed leaves the log unfinished; run it again") from None
    if not isinstance(entries, list):
        raise AccuracyLogError(f"{path} holds a JSON {type(entries).__name__}, not the list LoadGen writes")
    if not entries:
        raise AccuracyLogError(f"{path} has no records",
                               hint="LoadGen logs outputs only in accuracy mode, or in performance mode with an "
                                    "audit.config that samples them (TEST06): check the mode and that audit.config "
                                    "was in the working folder")
    return [_record(entry, i, path) for i, entry in enumerate(entries)]


def unique_samples(records: Iterable[AccuracyRecord]) -> tuple[list[AccuracyRecord], int]:
    """The first record of each qsl_idx, in file order, and how many later ones were dropped.

    The reference evaluator does the same (`if qsl_idx in seen: continue`): only the first
    output of a sample is scored and counted in gen_tok_len.
    """
    seen: set[int] = set()
    kept: list[AccuracyRecord] = []
    dropped = 0
    for record in records:
        if record.qsl_idx in seen:
            dropped += 1
            continue
        seen.add(record.qsl_idx)
        kept.append(record)
    return kept, dropped


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise AccuracyLogError(f"{path} does not exist",
                               hint="LoadGen writes mlperf_log_accuracy.json into the run's log folder") from None
    except IsADirectoryError:
        raise AccuracyLogError(f"{path} is a folder, not mlperf_log_accuracy.json") from None


def _looks_truncated(raw: bytes) -> bool:
    return len(raw) == TRUNCATED_SIZE and raw[VIEWABLE_SIZE:VIEWABLE_SIZE + len(TRUNCATION_MARKER)] == TRUNCATION_MARKER


def _record(entry: object, index: int, path: Path) -> AccuracyRecord:
    where = f"{path}: record {index}"
    if not isinstance(entry, dict):
        raise AccuracyLogError(f"{where} is a {type(entry).__name__}, not an object")
    seq_id = _int_field(entry, "seq_id", where)
    qsl_idx = _int_field(entry, "qsl_idx", where)
    where = f"{path}: record {index} (seq_id {seq_id}, qsl_idx {qsl_idx})"
    data = _hex_field(entry, "data", where)
    if data is None:
        raise AccuracyLogError(f"{where} has no data")
    token_count = _int_field(entry, "token_count", where) if "token_count" in entry else None
    return AccuracyRecord(seq_id, qsl_idx, data, token_count, _hex_field(entry, "token_data", where))


def _int_field(entry: dict, key: str, where: str) -> int:
    value = entry.get(key)
    if type(value) is not int:  # bool is an int subclass; LoadGen never writes one
        raise AccuracyLogError(f"{where}: {key} is {value!r}, not an integer")
    return value


def _hex_field(entry: dict, key: str, where: str) -> bytes | None:
    text = entry.get(key)
    if text is None:
        return None
    try:
        value = bytes.fromhex(text)
    except (TypeError, ValueError):
        raise AccuracyLogError(f"{where}: {key} is not a hex string") from None
    if len(value) % TOKEN_BYTES:
        raise AccuracyLogError(f"{where}: {key} has {len(value)} bytes, not a whole number of int32 token ids",
                               hint="the SUT must hand LoadGen int32 token ids (numpy int32 .tobytes())")
    return value


def _int32s(data: bytes) -> list[int]:
    values = array("i")
    if values.itemsize != TOKEN_BYTES:  # pragma: no cover - no such platform in practice
        raise AccuracyError(f"this Python's C int is {values.itemsize} bytes, not {TOKEN_BYTES}")
    values.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover - LoadGen logs little-endian bytes
        values.byteswap()
    return values.tolist()


# --- the metric --------------------------------------------------------------------------------

_CLOSERS = "\"'”’)]"
_OPENERS = "\"'“‘(["
_SENTENCE_END = re.compile(r"([.!?]+)[" + re.escape(_CLOSERS) + r"]*$")
_DOTTED_ABBREVIATION = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # e.g  i.e  U.S  a.m
_INITIAL = re.compile(r"[A-Za-z]")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "fig", "approx"})
_WORD = re.compile(r"\S+")


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences; cmx's stand-in for nltk's punkt `sent_tokenize`.

    A sentence ends at a word ending in `.`, `!` or `?` (possibly several, possibly followed by
    closing quotes or brackets) that is followed by more text. A `.` does not end a sentence
    after a title or common abbreviation (Mr., Dr., vs., ...), a single-letter initial (J.),
    or a dotted abbreviation (e.g., i.e., U.S.). Whitespace between sentences is dropped and
    whitespace inside one (newlines included) is kept, as punkt does.
    """
    words = list(_WORD.finditer(text))
    sentences: list[str] = []
    start: int | None = None
    for i, word in enumerate(words):
        if start is None:
            start = word.start()
        if i + 1 < len(words) and _ends_sentence(word.group()):
            sentences.append(text[start:word.end()])
            start = None
    if start is not None:
        sentences.append(text[start:words[-1].end()])
    return sentences


def postprocess_text(text: str) -> str:
    """The reference's postprocess_text for one text: strip, one sentence per line."""
    return "\n".join(split_sentences(text.strip()))


def _ends_sentence(word: str) -> bool:
    end = _SENTENCE_END.search(word)
    if end is None:
        return False
    if end.group(1) != ".":
        return True
    body = word[:end.start()].lstrip(_OPENERS)
    return not (body.lower() in _ABBREVIATIONS or _INITIAL.fullmatch(body) or _DOTTED_ABBREVIATION.fullmatch(body))


def evaluate(records: Sequence[AccuracyRecord], references: Sequence[str],
             decode: Callable[[list[int]], str], *, jobs: int = 1) -> AccuracyResult:
    """Score `records` against `references` (indexed by qsl_idx) the way the reference does.

    `decode` turns token ids into text and must drop special tokens (the harness passes
    `lambda ids: tokenizer.decode(ids, skip_special_tokens=True)`). `jobs` > 1 scores in that
    many processes (ROUGE-L is quadratic in pure Python: about 45 ms a sample, so a full
    24,576-sample run takes about 20 minutes on one core); the result does not depend on it.
    The processes are spawned, so the program's main module must be safe to import.
    """
    if jobs < 1:
        raise AccuracyError(f"jobs must be 1 or more, not {jobs}")
    samples, duplicates = unique_samples(records)
    if not samples:
        raise AccuracyError("there are no records to evaluate",
                            hint="read them with read_accuracy_log from an accuracy-mode run")
    predictions: list[str] = []
    targets: list[str] = []
    gen_tok_len = 0
    for record in samples:
        target = _reference(references, record)
        tokens = record.tokens
        gen_tok_len += len(tokens)
        text = decode(tokens)
        if not isinstance(text, str):
            raise AccuracyError(f"decode returned a {type(text).__name__}, not text",
                                hint="pass lambda ids: tokenizer.decode(ids, skip_special_tokens=True)")
        predictions.append(postprocess_text(text))
        targets.append(postprocess_text(target))
    fmeasures = _rouge_fmeasures(list(zip(targets, predictions, strict=True)), jobs)
    gen_num = len(predictions)
    return AccuracyResult(
        **{name: _mean_percent(values) for name, values in fmeasures.items()},
        gen_len=sum(len(p) for p in predictions),
        gen_num=gen_num,
        gen_tok_len=gen_tok_len,
        tokens_per_sample=round(gen_tok_len / gen_num, 1),
        duplicates=duplicates,
    )


def _reference(references: Sequence[str], record: AccuracyRecord) -> str:
    if not 0 <= record.qsl_idx < len(references):
        raise AccuracyError(f"record seq_id {record.seq_id} has qsl_idx {record.qsl_idx}, outside the "
                            f"{len(references)} references",
                            hint="evaluate against the dataset the run used (llama2-70b: 24,576 OpenOrca samples)")
    target = references[record.qsl_idx]
    if not isinstance(target, str):
        raise AccuracyError(f"the reference for qsl_idx {record.qsl_idx} is a {type(target).__name__}, not text")
    return target


def _mean_percent(values: list[float]) -> float:
    # the reference's round(np.mean(v) * 100, 4): numpy's pairwise mean and numpy's rounding
    np = _numpy()
    return float(np.round(np.mean(values) * 100, 4))


_CHUNK = 256  # samples per task when scoring in several processes


def _rouge_fmeasures(pairs: list[tuple[str, str]], jobs: int) -> dict[str, list[float]]:
    if jobs == 1 or len(pairs) <= _CHUNK:
        return _score_chunk(pairs)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [pairs[i:i + _CHUNK] for i in range(0, len(pairs), _CHUNK)]
    merged: dict[str, list[float]] = {name: [] for name in ROUGE_TYPES}
    # spawn, not fork: the caller may hold threads (vLLM, LoadGen) that a fork would copy mid-flight
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for part in pool.map(_score_chunk, chunks):
            for name in ROUGE_TYPES:
                merged[name].extend(part[name])
    return merged


def _score_chunk(pairs: list[tuple[str, str]]) -> dict[str, list[float]]:
    scorer = _rouge_scorer()
    fmeasures: dict[str, list[float]] = {name: [] for name in ROUGE_TYPES}
    for target, prediction in pairs:
        scores = scorer.score(target, prediction)
        for name in ROUGE_TYPES:
            fmeasures[name].append(scores[name].fmeasure)
    return fmeasures


def _rouge_scorer():  # type: ignore[no-untyped-def]
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise AccuracyError("the rouge-score package is not installed",
                            hint="pip install rouge-score==0.1.2 (or install cmx with the cpu extra)") from None
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def _numpy():  # type: ignore[no-untyped-def]
    try:
        import numpy
    except ImportError:
        raise AccuracyError("numpy is not installed", hint="pip install numpy (rouge-score needs it too)") from None
    return numpy


# --- accuracy.txt ----------------------------------------------------------------------------

def format_accuracy_txt(result: AccuracyResult, log_sha256: str) -> str:
    """accuracy.txt as the reference prints it and truncate_accuracy_log.py completes it.

    The dict holds plain Python numbers, so it reads `'rouge1': 44.4312` and never
    `np.float64(44.4312)`, which the checker's patterns would silently miss.
    """
    if not _SHA256.fullmatch(log_sha256):
        raise AccuracyError(f"{log_sha256!r} is not a sha256 (64 lowercase hex digits)",
                            hint="pass the value truncate_accuracy_log returned")
    return f"\nResults\n\n{result.as_dict()!r}\n\nhash={log_sha256}\n"


def parse_accuracy_txt(text: str) -> dict[str, float | int | str]:
    """The values the checker would find in accuracy.txt, read the way it reads them.

    Lines are split as `open().readlines()` splits them and matched with the checker's
    patterns; the first line that matches a key gives its value. Keys: rouge1, rouge2, rougeL,
    rougeLsum, tokens_per_sample (floats), gen_len, gen_num, gen_tok_len (ints) and hash (str);
    a key the text lacks is absent.
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


def read_accuracy_txt(path: Path | str) -> dict[str, float | int | str]:
    """parse_accuracy_txt of a file, read as text the way the checker opens it."""
    path = Path(path)
    try:
        return parse_accuracy_txt(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccuracyError(f"{path} does not exist") from None


# --- targets ---------------------------------------------------------------------------------

def meets_targets(result: AccuracyResult | Mapping[str, float | int | str],
                  targets: AccuracyTargetsLike) -> list[str]:
    """One plain sentence per target `result` misses; empty when it meets them all.

    `result` is an AccuracyResult or what parse_accuracy_txt returned. The comparisons are the
    checker's: a minimum is met by a value >= it, the maximum by a value <= it.
    """
    values = result.as_dict() if isinstance(result, AccuracyResult) else result
    shortfalls: list[str] = []
    for key, label, minimum in (("rouge1", "ROUGE-1", targets.rouge1), ("rouge2", "ROUGE-2", targets.rouge2),
                                ("rougeL", "ROUGE-L", targets.rougeL)):
        value = _value(values, key)
        if value is None:
            shortfalls.append(f"{label} is missing")
        elif value < minimum:
            shortfalls.append(f"{label} is {_show(value)}, below the minimum {_show(minimum)}")
    tokens = _value(values, "tokens_per_sample")
    if tokens is None:
        shortfalls.append("tokens per sample is missing")
    elif tokens < targets.tokens_min:
        shortfalls.append(f"tokens per sample is {_show(tokens)}, below the minimum {_show(targets.tokens_min)}")
    elif tokens > targets.tokens_max:
        shortfalls.append(f"tokens per sample is {_show(tokens)}, above the maximum {_show(targets.tokens_max)}")
    return shortfalls


def _value(values: Mapping[str, float | int | str], key: str) -> float | None:
    value = values.get(key)
    if value is None or isinstance(value, str):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _show(value: float) -> str:
    return repr(round(float(value), 6))


# --- truncation --------------------------------------------------------------------------------

def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def truncate_accuracy_log(path: Path | str, dest: Path | str) -> str:
    """Write the submission copy of the log at `path` to `dest`; return the sha256 of the full log.

    As tools/submission/truncate_accuracy_log.py does: a log under 4096 bytes is copied whole;
    any other keeps its first 4096 and last 4096 characters with "\\n\\n...\\n\\n" between them
    (LoadGen's log is ASCII, so characters are bytes). `dest` may be `path`; it is replaced
    atomically. Keep the full log: the hash is all the tree keeps of it.
    """
    path, dest = Path(path), Path(dest)
    try:
        size = path.stat().st_size
        digest = sha256_file(path)
        with open(path, "rb") as f:
            if size < VIEWABLE_SIZE:
                content = f.read()
            else:
                head = f.read(VIEWABLE_SIZE)
                f.seek(size - VIEWABLE_SIZE)
                content = head + TRUNCATION_MARKER + f.read(VIEWABLE_SIZE)
    except FileNotFoundError:
        raise AccuracyLogError(f"{path} does not exist") from None
    _write_atomically(dest, content)
    return digest


def is_truncated_accuracy_log(path: Path | str) -> bool:
    """Whether the file is what truncate_accuracy_log wrote for a log of 4096 bytes or more."""
    path = Path(path)
    if path.stat().st_size != TRUNCATED_SIZE:
        return False
    return _looks_truncated(path.read_bytes())


def _write_atomically(dest: Path, content: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(content)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
