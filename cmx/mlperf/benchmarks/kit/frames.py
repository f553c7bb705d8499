"""A benchmark's dataset frame, read (pickle or Parquet) and written once, and the checks every loader makes of it.

Every error is a DatasetError whose message names the file, and the row and column where one is at
fault; `hint` says what the file should have been (each benchmark passes its own: where to get
the real dataset). pandas and numpy are imported when a frame is read, not when cmx starts.

A pickle can run code when it is read: read only a file whose checksum was checked (the dataset
recipes do) or one you made.
"""

from __future__ import annotations

import math
import os
import pickle
from array import array
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.benchmarks.base import DatasetError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

INT32_MAX = 2**31 - 1  # token ids are kept as int32 arrays: a list of Python ints per row would cost GBs
DAMAGED = "the file is damaged or was edited; download it again"
_GZIP_MAGIC = b"\x1f\x8b"


def read_frame(path: Path | str, *, hint: str, get: str) -> pd.DataFrame:
    """The DataFrame in `path`: Parquet when it ends in .parquet, else a pandas pickle.

    `get` is the query that fetches the real file (`get dataset openorca`), named when the file is
    missing; `hint` says what the file is, named when it holds something else than a DataFrame.
    """
    import pandas as pd

    path = Path(path)
    require_file(path, get=get)
    frame = _read_parquet(path) if path.suffix == ".parquet" else _read_pickle(path)
    if not isinstance(frame, pd.DataFrame):
        raise DatasetError(f"{path} holds a {type(frame).__name__}, not a pandas DataFrame", hint=hint)
    return frame


def require_file(path: Path, *, get: str) -> None:
    """Refuse a path that is no file, saying how to get the real one (`get`: its cmx query)."""
    if not path.is_file():
        raise DatasetError(f"no dataset file at {path}" if not path.exists() else f"{path} is not a file",
                           hint=f"check the path, or get the dataset with `cmx run \"{get}\"`")


def _read_pickle(path: Path) -> object:
    import pandas as pd

    try:
        return pd.read_pickle(path)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} is not a pandas pickle: {type(exc).__name__}: {short(exc)}",
                           hint=_unreadable_hint(path)) from None
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_parquet(path: Path) -> object:
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except ImportError as exc:  # read_parquet needs pyarrow (or fastparquet)
        raise DatasetError(f"cannot read {path}: {short(exc)}", hint="pip install pyarrow") from None
    except (ValueError, OSError, TypeError) as exc:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise DatasetError(f"{path} is not a Parquet file: {type(exc).__name__}: {short(exc)}",
                           hint="a download that was cut short leaves a truncated file; download it again") from None


def _unreadable_hint(path: Path) -> str:
    try:
        with path.open("rb") as f:
            gzipped = f.read(2) == _GZIP_MAGIC
    except OSError:
        gzipped = False
    if gzipped:  # MLCommons serves some pickles as .pkl.gz
        return "it is gzip-compressed: give the .pkl file (decompress a .pkl.gz first, with gunzip)"
    return "a download that was cut short leaves a truncated file; download it again"


def write_frame(frame: pd.DataFrame, dest: Path | str, *, protocol: int) -> Path:
    """Pickle `frame` to `dest` with the pickle `protocol` the real file uses; a reader never sees half a file."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    frame.to_pickle(tmp, protocol=protocol)
    os.replace(tmp, dest)
    return dest


def require_columns(frame: pd.DataFrame, path: Path, columns: Sequence[str | tuple[str, ...]], *,
                    hint: str) -> tuple[str, ...]:
    """The column found for each of `columns` (a tuple: the first of those alternatives the frame has).

    Refuses a frame that lacks one, naming the columns it has, and a frame with no rows.
    """
    present = [str(c) for c in frame.columns]
    found, missing = [], []
    for wanted in columns:
        options = (wanted,) if isinstance(wanted, str) else wanted
        chosen = next((c for c in options if c in present), None)
        if chosen is None:
            missing.append(" or ".join(repr(c) for c in options))
        else:
            found.append(chosen)
    if missing:
        raise DatasetError(f"{path} has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; its "
                           f"columns are {names(present) or 'none'}", hint=hint)
    if len(frame) == 0:
        raise DatasetError(f"{path} holds no samples", hint=hint)
    return tuple(found)


def texts(frame: pd.DataFrame, column: str, path: Path, *, hint: str) -> list[str]:
    """Every value of `column`, each of which must be text (the first that is not is named)."""
    values: list[str] = frame[column].tolist()
    for row, value in enumerate(values):
        if not isinstance(value, str):
            raise DatasetError(f"{path}: row {row}: {column!r} is {kind(value)}, not text", hint=hint)
    return values


def token_arrays(values: Iterable[object], path: Path, column: str, *, hint: str,
                 vocab_size: int | None = None) -> tuple[array[int], ...]:
    """Each row's token ids (a list, tuple or 1-D integer ndarray) checked as `token_array` checks them, as
    int32 arrays.

    The whole column is checked at once (a real file holds millions of ids: one row at a time costs
    several times the read); only when that finds something wrong is it checked row by row, to name
    the first bad row.
    """
    rows: list[Any] = list(values)  # list, tuple or ndarray each, once _all_ids has said so
    top = INT32_MAX if vocab_size is None else vocab_size - 1
    flat = _all_ids(rows)
    if flat is not None and (len(flat) == 0 or (int(flat.min()) >= 0 and int(flat.max()) <= top)):
        data = flat.astype("=i4").tobytes()
        out, start = [], 0
        for ids in rows:
            compact = array("i")
            compact.frombytes(data[start:start + 4 * len(ids)])
            start += 4 * len(ids)
            out.append(compact)
        return tuple(out)
    return tuple(token_array(ids, f"{path}: row {row}: {column!r}", hint=hint, vocab_size=vocab_size)
                 for row, ids in enumerate(rows))


def _all_ids(rows: list[Any]) -> np.ndarray | None:
    """Every row's ids in one int64 (or unsigned) array, or None when a row is not a non-empty list of ints."""
    import numpy as np

    kinds = set(map(type, rows))
    if kinds <= {list, tuple}:
        if 0 in map(len, rows) or set(map(type, chain.from_iterable(rows))) - {int}:
            return None
        try:
            return np.fromiter(chain.from_iterable(rows), dtype=np.int64)
        except OverflowError:  # an id past int64
            return None
    if kinds == {np.ndarray}:
        if any(r.ndim != 1 or len(r) == 0 or r.dtype.kind not in "iu" for r in rows):
            return None
        flat: np.ndarray = np.concatenate(rows)
        return flat if flat.dtype.kind in "iu" else None  # int64 beside uint64 makes floats
    return None


def token_array(ids: object, where: str, *, hint: str, vocab_size: int | None = None) -> array[int]:
    """`ids` as an int32 array, once they are known to be token ids.

    Refused, with `where` (file, row and column) in the message: anything but a list, tuple or
    1-D ndarray; an empty one; an element that is not an integer (a float, a bool, text); an id
    below 0, or from `vocab_size` on when the vocabulary is known (else past int32).
    """
    import numpy as np

    if isinstance(ids, np.ndarray) and ids.dtype.kind == "O" and ids.ndim == 1:
        ids = ids.tolist()  # Python objects in an array: checked one by one, as a list's are
    top = INT32_MAX if vocab_size is None else vocab_size - 1
    if isinstance(ids, (list, tuple)):
        if not ids:
            raise DatasetError(f"{where} is empty", hint=hint)
        # the types of all elements at C speed: a bool is an int to numpy and to array(), and would pass as 0 or 1
        kinds = set(map(type, ids))
        if not all(k is int or issubclass(k, np.integer) for k in kinds):
            bad = next(t for t in ids if not (type(t) is int or isinstance(t, np.integer)))
            raise DatasetError(f"{where} holds {short(repr(bad))}, not a token id (an integer)", hint=hint)
        if kinds == {int}:  # the common case, without numpy's cost per call (a JSON file's rows are short)
            low, high = min(ids), max(ids)
            _check_range(low, high, top, vocab_size, where, hint)
            return array("i", ids)
        ids = np.asarray(ids)
    if not isinstance(ids, np.ndarray):
        raise DatasetError(f"{where} is {kind(ids)}, not a list of token ids", hint=hint)
    if ids.ndim != 1:
        raise DatasetError(f"{where} is not a flat list of token ids (an array of {ids.ndim} dimensions)", hint=hint)
    if len(ids) == 0:
        raise DatasetError(f"{where} is empty", hint=hint)
    if ids.dtype.kind not in "iu":  # floats or bools
        raise DatasetError(f"{where} holds {short(repr(ids[0].item()))}, not a token id (an integer)", hint=hint)
    _check_range(int(ids.min()), int(ids.max()), top, vocab_size, where, hint)
    compact = array("i")
    compact.frombytes(ids.astype("=i4").tobytes())
    return compact


def _check_range(low: int, high: int, top: int, vocab_size: int | None, where: str, hint: str) -> None:
    if low < 0 or high > top:
        within = f"0 to {top}" if vocab_size is None else f"0 to {top}: the vocabulary has {vocab_size}"
        raise DatasetError(f"{where} holds {low if low < 0 else high}, not a token id ({within})", hint=hint)


def check_lengths(token_ids: Sequence[Sequence[int]], lengths: Sequence[object], path: Path, *, column: str,
                  length_column: str, hint: str = DAMAGED) -> None:
    """Each row's `length_column` is an integer equal to the number of ids in its `column`."""
    import numpy as np

    for row, (ids, length) in enumerate(zip(token_ids, lengths, strict=False)):
        if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) or int(length) != len(ids):
            raise DatasetError(f"{path}: row {row} has {len(ids)} ids in {column} but {length_column} {length!r}",
                               hint=hint)


def kind(value: object) -> str:
    """How an error names a value of the wrong kind: null (None or NaN), or its type and a short repr."""
    if value is None or (isinstance(value, float) and math.isnan(value)):  # NaN is what pandas stores for a gap
        return "null"
    return f"a {type(value).__name__} ({short(repr(value))})"


def names(values: Iterable[object]) -> str:
    return ", ".join(repr(str(v)) for v in values)


def short(text: object, limit: int = 80) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


__all__ = ["DAMAGED", "INT32_MAX", "check_lengths", "kind", "names", "read_frame", "require_columns", "require_file",
           "short", "texts", "token_array", "token_arrays", "write_frame"]
