"""The mixtral-8x7b eval set: load the MLCommons-processed pickle (OpenOrca, GSM8K and MBXP rows) and check its format.

The file is `09292024_mixtral_15k_mintoken2_v1.pkl` (language/mixtral-8x7b/README.md, "Get Dataset"),
a pandas DataFrame pickle of 15,000 rows: 5,000 sampled from each of OpenOrca (GPT-4 answers),
GSM8K (few-shot, "The answer is N.") and MBXP (code in six languages). Its columns, as
standalone_infer/hf_eval_all.py prints a row: dataset, id, question, input, ref_output, gt_output,
tok_input, tok_ref_output, stop_sequence, tok_stop_sequence, tok_input_len, tok_ref_output_len.

What the reference reads (mlcommons/inference b66003e, language/mixtral-8x7b/):
- dataset.py `load_processed_dataset`: `tok_input` (fed to the model as it is), `input`, `dataset`;
- evaluate-accuracy.py: `dataset` (OpenOrca and GSM8K by name, anything else is scored as
  MBXP), `gt_output` (the OpenOrca answer, the GSM8K number, the MBXP test code), and for MBXP
  `id` = "<language>_<entry point>" (`create_mbxp_dict`: `row["id"].split("_", 1)`).

Those columns are required, `dataset` must be one of the three names, and `tok_input_len`, where
present, must equal the length of `tok_input`. Other columns are allowed and ignored.

A pickle can run code when it is read: load only a file whose checksum was checked (the
get-dataset-mixtral-8x7b recipe checks the md5 MLCommons' R2 list holds) or one you made.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cmx.mlperf.benchmarks.base import DatasetError

SAMPLES = 15000  # README.md --total-sample-count 15000; constants.py dataset-size; mlperf.conf perf count
SUBSETS = ("OpenOrca", "GSM8K", "MBXP")  # the `dataset` column's values
REQUIRED_COLUMNS = ("dataset", "id", "input", "tok_input", "gt_output")
# the real file's columns in its order (standalone_infer/hf_eval_all.py); the tiny dataset writes them all
COLUMNS = ("dataset", "id", "question", "input", "ref_output", "gt_output", "tok_input", "tok_ref_output",
           "stop_sequence", "tok_stop_sequence", "tok_input_len", "tok_ref_output_len")
_TEXT_COLUMNS = ("dataset", "id", "input", "gt_output")
_INT32_MAX = 2**31 - 1
_HINT = ("it is not the mixtral-8x7b dataset pickle MLCommons publishes; get it with "
         "`cmx run \"get dataset mixtral-8x7b\"`")


@dataclass(frozen=True)
class MixtralDataset:
    """The processed samples: prompts as token ids, and per sample its subset, id and ground truth."""

    subsets: tuple[str, ...]  # OpenOrca, GSM8K or MBXP
    ids: tuple[str, ...]
    inputs: tuple[str, ...]
    token_ids: tuple[array, ...]  # array("i"): int32 ids of `tok_input`
    references: tuple[str, ...]  # gt_output
    path: Path

    def __len__(self) -> int:
        return len(self.subsets)

    def prompt_ids(self, i: int) -> list[int]:
        """The prompt of sample i as token ids (`tok_input`), as the reference feeds them to the model."""
        return self.token_ids[i].tolist()

    def prompt_text(self, i: int) -> str:
        return self.inputs[i]

    def reference(self, i: int) -> str:
        """`gt_output` of sample i: the OpenOrca answer, the GSM8K number, or the MBXP test code."""
        return self.references[i]

    def subset(self, i: int) -> str:
        return self.subsets[i]

    def sample_id(self, i: int) -> str:
        return self.ids[i]

    @cached_property
    def input_lengths(self) -> tuple[int, ...]:
        return tuple(len(ids) for ids in self.token_ids)

    def limit(self, n: int) -> MixtralDataset:
        """The first n samples (for short test runs; a compliant run uses all of them)."""
        if not 1 <= n <= len(self):
            raise DatasetError(f"cannot keep {n} samples of {self.path}: it has {len(self)}",
                               hint=f"give a number from 1 to {len(self)}")
        return MixtralDataset(self.subsets[:n], self.ids[:n], self.inputs[:n], self.token_ids[:n],
                              self.references[:n], self.path)


def mbxp_language(sample_id: str) -> tuple[str, str]:
    """(language, entry point) of an MBXP row's id, split as create_mbxp_dict splits it: at the first "_"."""
    language, _, entry_point = sample_id.partition("_")
    return language, entry_point


def load_mixtral(path: Path | str) -> MixtralDataset:
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
    texts = {c: frame[c].tolist() for c in _TEXT_COLUMNS}
    for column, values in texts.items():
        for row, value in enumerate(values):
            if not isinstance(value, str):
                raise DatasetError(f"{where}: row {row}: {column!r} is {_kind(value)}, not text", hint=_HINT)
    for row, (subset, sample_id) in enumerate(zip(texts["dataset"], texts["id"])):
        if subset not in SUBSETS:
            raise DatasetError(f"{where}: row {row}: dataset {subset!r} is none of {', '.join(SUBSETS)}", hint=_HINT)
        if subset == "MBXP" and not all(mbxp_language(sample_id)):
            raise DatasetError(f"{where}: row {row}: the MBXP id {sample_id!r} is not <language>_<entry point>",
                               hint=_HINT)
    lengths = frame["tok_input_len"].tolist() if "tok_input_len" in frame.columns else None
    token_ids = []
    for row, ids in enumerate(frame["tok_input"].tolist()):
        compact = _token_array(ids, f"{where}: row {row}: 'tok_input'")
        if lengths is not None and (isinstance(lengths[row], bool) or not _is_int(lengths[row])
                                    or int(lengths[row]) != len(compact)):
            raise DatasetError(f"{where}: row {row} has {len(compact)} ids in tok_input but tok_input_len "
                               f"{lengths[row]!r}", hint="the file is damaged or was edited; download it again")
        token_ids.append(compact)
    return MixtralDataset(tuple(texts["dataset"]), tuple(texts["id"]), tuple(texts["input"]), tuple(token_ids),
                          tuple(texts["gt_output"]), path)


def _read_frame(path: Path):  # -> pandas.DataFrame
    import pandas as pd

    if not path.is_file():
        raise DatasetError(f"no dataset file at {path}" if not path.exists() else f"{path} is not a file",
                           hint="check the path, or get the dataset with `cmx run \"get dataset mixtral-8x7b\"`")
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
    if values.dtype.kind not in "iu":
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


__all__ = ["COLUMNS", "REQUIRED_COLUMNS", "SAMPLES", "SUBSETS", "DatasetError", "MixtralDataset", "load_mixtral",
           "mbxp_language"]
