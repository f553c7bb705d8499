"""The llama3.1-405b eval set: load the MLCommons-processed pickle and check its format.

The file is the one MLCommons' R2 downloader fetches from
https://inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.uri (README.md,
"Preprocessed"): a pandas DataFrame pickle, one row per sample, 8313 of them, drawn from several
long-context sets (summaries, needle-in-a-haystack, question answering). The reference reads these
columns (mlcommons/inference b66003e, language/llama3.1-405b/):

- `input` (the prompt text), `tok_input` (its token ids, which the SUT feeds to vLLM as they are)
  and `tok_input_len` (their number): dataset.py `load_processed_dataset`;
- `gt_output` (the reference answer) and `metric` (which scorer grades the sample: `rouge`,
  `niah_em` or `qa_em`): evaluate-accuracy.py `get_groundtruth`.

Other columns are allowed and ignored. The token ids are kept as int32 arrays (the prompts are
long: a list of Python ints per row would cost several GB).

A pickle can run code when it is read: load only a file whose checksum was checked (the
get-dataset-llama3-405b recipe checks the md5 MLCommons lists) or one you made.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cmx.mlperf.benchmarks.base import DatasetError

SAMPLES = 8313  # dataset.py / SUT_VLLM.py total_sample_count; constants.py dataset-size; mlperf.conf perf count
TEXT_COLUMNS = ("input", "gt_output", "metric")
REQUIRED_COLUMNS = ("input", "tok_input", "tok_input_len", "gt_output", "metric")
METRICS = ("rouge", "niah_em", "qa_em")  # evaluate-accuracy.py `metrics`: the scorers a row can name
_INT32_MAX = 2**31 - 1
_HINT = ("it is not the llama3.1-405b dataset pickle MLCommons publishes; get it with "
         "`cmx run \"get dataset llama3.1-405b\"`")


@dataclass(frozen=True)
class Llama405bDataset:
    """The processed samples: prompts as token ids, reference answers and the scorer of each."""

    inputs: tuple[str, ...]
    token_ids: tuple[array, ...]  # array("i"): int32 ids of `tok_input`
    references: tuple[str, ...]
    metrics: tuple[str, ...]  # rouge, niah_em or qa_em per sample
    path: Path

    def __len__(self) -> int:
        return len(self.inputs)

    def prompt_ids(self, i: int) -> list[int]:
        """The prompt of sample i as token ids (`tok_input`), as the reference SUT feeds them to vLLM."""
        return self.token_ids[i].tolist()

    def prompt_text(self, i: int) -> str:
        return self.inputs[i]

    def reference(self, i: int) -> str:
        """The reference answer of sample i (`gt_output`)."""
        return self.references[i]

    def metric(self, i: int) -> str:
        """The scorer of sample i (`metric`): rouge, niah_em or qa_em."""
        return self.metrics[i]

    @cached_property
    def input_lengths(self) -> tuple[int, ...]:
        return tuple(len(ids) for ids in self.token_ids)

    def limit(self, n: int) -> Llama405bDataset:
        """The first n samples (for short test runs; a compliant run uses all of them)."""
        if not 1 <= n <= len(self):
            raise DatasetError(f"cannot keep {n} samples of {self.path}: it has {len(self)}",
                               hint=f"give a number from 1 to {len(self)}")
        return Llama405bDataset(self.inputs[:n], self.token_ids[:n], self.references[:n], self.metrics[:n],
                                self.path)


def load_llama405b(path: Path | str) -> Llama405bDataset:
    """Read the dataset pickle and check every column the reference reads. Raises DatasetError naming the
    file, the column and the first bad row."""
    path = Path(path)
    frame = _read_frame(path)
    where = str(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetError(f"{where} has no column{'s' if len(missing) > 1 else ''} {_names(missing)}; its columns "
                           f"are {_names(map(str, frame.columns)) or 'none'}", hint=_HINT)
    if len(frame) == 0:
        raise DatasetError(f"{where} holds no samples", hint=_HINT)
    texts = {c: frame[c].tolist() for c in TEXT_COLUMNS}
    for column, values in texts.items():
        for row, value in enumerate(values):
            if not isinstance(value, str):
                raise DatasetError(f"{where}: row {row}: {column!r} is {_kind(value)}, not text", hint=_HINT)
    for row, metric in enumerate(texts["metric"]):
        if metric not in METRICS:
            raise DatasetError(f"{where}: row {row}: metric {metric!r} is none of {', '.join(METRICS)} (the "
                               "scorers of evaluate-accuracy.py)", hint=_HINT)
    lengths = frame["tok_input_len"].tolist()
    token_ids = []
    for row, ids in enumerate(frame["tok_input"].tolist()):
        compact = _token_array(ids, f"{where}: row {row}: 'tok_input'")
        length = lengths[row]
        if isinstance(length, bool) or not _is_int(length) or int(length) != len(compact):
            raise DatasetError(f"{where}: row {row} has {len(compact)} ids in tok_input but tok_input_len "
                               f"{length!r}", hint="the file is damaged or was edited; download it again")
        token_ids.append(compact)
    return Llama405bDataset(tuple(texts["input"]), tuple(token_ids), tuple(texts["gt_output"]),
                            tuple(texts["metric"]), path)


def _read_frame(path: Path):  # -> pandas.DataFrame
    import pandas as pd

    if not path.is_file():
        raise DatasetError(f"no dataset file at {path}" if not path.exists() else f"{path} is not a file",
                           hint="check the path, or get the dataset with `cmx run \"get dataset llama3.1-405b\"`")
    try:
        frame = pd.read_pickle(path)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} is not a pandas pickle: {type(exc).__name__}: {_short(str(exc))}",
                           hint="a download that was cut short leaves a truncated file; download it again") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(frame, pd.DataFrame):
        raise DatasetError(f"{path} holds a {type(frame).__name__}, not a pandas DataFrame", hint=_HINT)
    return frame


def _token_array(ids: object, where: str) -> array:
    import numpy as np

    if not isinstance(ids, (list, tuple, np.ndarray)):
        raise DatasetError(f"{where} is {_kind(ids)}, not a list of token ids", hint=_HINT)
    values = np.asarray(ids)
    if values.ndim != 1 or len(values) == 0:
        raise DatasetError(f"{where} is {'empty' if len(values) == 0 else 'not a flat list'}", hint=_HINT)
    if values.dtype.kind not in "iu" or values.dtype == np.bool_:
        bad = next((t for t in values.tolist() if type(t) is not int), values.dtype)
        raise DatasetError(f"{where} holds {_short(repr(bad))}, not a token id (an integer)", hint=_HINT)
    if values.min() < 0 or values.max() > _INT32_MAX:
        raise DatasetError(f"{where} holds {values.min() if values.min() < 0 else values.max()}, not a token id "
                           f"(0 to {_INT32_MAX})", hint=_HINT)
    compact = array("i")
    compact.frombytes(values.astype("=i4").tobytes())
    return compact


def _is_int(value: object) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer))


def _kind(value: object) -> str:
    return "null" if value is None else f"a {type(value).__name__} ({_short(repr(value))})"


def _names(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


__all__ = ["METRICS", "REQUIRED_COLUMNS", "SAMPLES", "DatasetError", "Llama405bDataset", "load_llama405b"]
