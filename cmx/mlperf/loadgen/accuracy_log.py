"""LoadGen's accuracy log (mlperf_log_accuracy.json): read its records, and truncate it for a submission tree.

Each record's `data` is the hex of the output token ids the SUT handed LoadGen (int32 in
cmx's harness); `token_data` the first token(s) of a streamed answer. A `qsl_idx` seen before
is a duplicate the reference evaluators skip (`unique_samples`). The submission copy keeps the
first and last 4096 characters with `"\\n\\n...\\n\\n"` between them, as
tools/submission/truncate_accuracy_log.py writes it; its sha256 is the `hash=` line of
accuracy.txt. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.tools.fs import sha256_file

TOKEN_BYTES = 4  # the harness logs int32 token ids
VIEWABLE_SIZE = 4096  # truncate_accuracy_log.py: characters kept at each end of the log
TRUNCATION_MARKER = b"\n\n...\n\n"
TRUNCATED_SIZE = 2 * VIEWABLE_SIZE + len(TRUNCATION_MARKER)
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


def read_accuracy_log(path: Path | str, *, item_size: int = TOKEN_BYTES) -> list[AccuracyRecord]:
    """Every record of an mlperf_log_accuracy.json, in file order (duplicates included).

    Refuses, with what to do: a missing or empty file, a truncated submission copy, invalid
    JSON, a log with no records (what LoadGen writes in performance mode), and a record whose
    fields are not what LoadGen writes (`data` must hold whole items of `item_size` bytes: int32
    token ids by default; 1 for a benchmark that answers with text bytes).
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
    return [_record(entry, i, path, item_size) for i, entry in enumerate(entries)]


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


def _record(entry: object, index: int, path: Path, item_size: int = TOKEN_BYTES) -> AccuracyRecord:
    where = f"{path}: record {index}"
    if not isinstance(entry, dict):
        raise AccuracyLogError(f"{where} is a {type(entry).__name__}, not an object")
    seq_id = _int_field(entry, "seq_id", where)
    qsl_idx = _int_field(entry, "qsl_idx", where)
    where = f"{path}: record {index} (seq_id {seq_id}, qsl_idx {qsl_idx})"
    data = _hex_field(entry, "data", where, item_size)
    if data is None:
        raise AccuracyLogError(f"{where} has no data")
    token_count = _int_field(entry, "token_count", where) if "token_count" in entry else None
    return AccuracyRecord(seq_id, qsl_idx, data, token_count, _hex_field(entry, "token_data", where, item_size))


def _int_field(entry: dict, key: str, where: str) -> int:
    value = entry.get(key)
    if type(value) is not int:  # bool is an int subclass; LoadGen never writes one
        raise AccuracyLogError(f"{where}: {key} is {value!r}, not an integer")
    return value


def _hex_field(entry: dict, key: str, where: str, item_size: int = TOKEN_BYTES) -> bytes | None:
    text = entry.get(key)
    if text is None:
        return None
    try:
        value = bytes.fromhex(text)
    except (TypeError, ValueError):
        raise AccuracyLogError(f"{where}: {key} is not a hex string") from None
    if item_size == TOKEN_BYTES and len(value) % TOKEN_BYTES:
        raise AccuracyLogError(f"{where}: {key} has {len(value)} bytes, not a whole number of int32 token ids",
                               hint="the SUT must hand LoadGen int32 token ids (numpy int32 .tobytes())")
    if len(value) % item_size:
        raise AccuracyLogError(f"{where}: {key} has {len(value)} bytes, not a whole number of {item_size}-byte items")
    return value


def _int32s(data: bytes) -> list[int]:
    values = array("i")
    if values.itemsize != TOKEN_BYTES:  # pragma: no cover - no such platform in practice
        raise AccuracyError(f"this Python's C int is {values.itemsize} bytes, not {TOKEN_BYTES}")
    values.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover - LoadGen logs little-endian bytes
        values.byteswap()
    return values.tolist()



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
