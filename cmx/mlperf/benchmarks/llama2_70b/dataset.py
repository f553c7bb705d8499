"""The OpenOrca dataset of llama2-70b: load the MLCommons-processed pickle and check its format.

The file is `open_orca_gpt4_tokenized_llama.sampled_24576.pkl`, a pandas DataFrame written by the
reference's processorca.py: one row per sample, with (among others) `input` (the Llama 2 chat
prompt), `tok_input` (its token ids, ending with 29871), `output` (the reference answer) and the
integer lengths `tok_input_length` and `tok_output_length`. The reference SUT reads `tok_input`;
the accuracy script reads `output`. The tiny dataset (cmx.mlperf.benchmarks.llama2_70b.tiny) has the same format.

A pickle can run code when it is read: load only a file whose sha256 was checked (the
get-dataset-openorca recipe does) or one you made.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from cmx.mlperf.benchmarks.base import DatasetError

if TYPE_CHECKING:  # pandas is imported when a dataset is loaded, not when cmx starts
    import pandas as pd

# column -> what its values must be; the reference's dataset.py and evaluate-accuracy.py read these
TEXT_COLUMNS = ("input", "output")
TOKEN_COLUMNS = ("tok_input",)
LENGTH_COLUMNS = ("tok_input_length", "tok_output_length")
REQUIRED_COLUMNS = (*TEXT_COLUMNS, *TOKEN_COLUMNS, *LENGTH_COLUMNS)


@dataclass(frozen=True)
class OpenOrca:
    """The processed OpenOrca samples: prompts as token ids, reference answers as text.

    `dataframe` is the pickle's DataFrame (index 0..n-1); sample i is its row i.
    """

    dataframe: pd.DataFrame
    path: Path

    def __len__(self) -> int:
        return len(self.dataframe)

    def prompt_ids(self, i: int) -> list[int]:
        """The prompt of sample i as token ids (`tok_input`), as the reference SUT feeds them."""
        return [int(t) for t in self.dataframe["tok_input"].iat[i]]

    def prompt_text(self, i: int) -> str:
        """The prompt of sample i as text (`input`), the Llama 2 chat format."""
        return str(self.dataframe["input"].iat[i])

    def reference(self, i: int) -> str:
        """The reference answer of sample i (`output`), which ROUGE compares against."""
        return str(self.dataframe["output"].iat[i])

    @cached_property
    def input_lengths(self) -> tuple[int, ...]:
        """The number of prompt tokens of every sample (`tok_input_length`)."""
        return tuple(int(n) for n in self.dataframe["tok_input_length"].tolist())

    def limit(self, n: int) -> OpenOrca:
        """The first n samples (for short test runs; a compliant run uses all of them)."""
        if not 1 <= n <= len(self):
            raise DatasetError(f"cannot keep {n} samples of {self.path}: it has {len(self)}",
                               hint=f"give a number from 1 to {len(self)}")
        return OpenOrca(self.dataframe.iloc[:n].reset_index(drop=True), self.path)


def load_openorca(path: Path | str) -> OpenOrca:
    """Read an OpenOrca pickle and check it has the columns and dtypes the benchmark reads.

    Raises DatasetError naming the file and what is missing or wrong.
    """
    path = Path(path)
    frame = _read_frame(path)
    check_openorca_frame(frame, where=str(path))
    return OpenOrca(frame.reset_index(drop=True), path)


def check_openorca_frame(frame: pd.DataFrame, *, where: str) -> None:
    """Raise DatasetError unless `frame` has OpenOrca's required columns, with sensible values."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetError(f"{where} has no column{'s' if len(missing) > 1 else ''} {_names(missing)}; "
                           f"its columns are {_names(map(str, frame.columns)) or 'none'}",
                           hint="it is not the processed OpenOrca dataset of llama2-70b "
                                "(open_orca_gpt4_tokenized_llama.sampled_24576.pkl)")
    if len(frame) == 0:
        raise DatasetError(f"{where} holds no samples")
    for column in LENGTH_COLUMNS:
        _check_integers(frame, column, where)
    for column in TEXT_COLUMNS:
        _check_values(frame, column, where, (str,), "text")
    for column in TOKEN_COLUMNS:
        _check_values(frame, column, where, _sequence_types(), "a list of token ids")
        _check_token_ids(frame, column, where)
    lengths = frame["tok_input"].map(len)
    wrong = (lengths != frame["tok_input_length"]).to_numpy().nonzero()[0]
    if len(wrong):
        row = int(wrong[0])
        raise DatasetError(f"{where}: row {row} has {int(lengths.iat[row])} ids in tok_input but tok_input_length "
                           f"{int(frame['tok_input_length'].iat[row])} ({len(wrong)} rows disagree)",
                           hint="the file is damaged or was edited; download it again")


def _read_frame(path: Path) -> pd.DataFrame:
    import pandas as pd

    if not path.is_file():
        raise DatasetError(f"no dataset file at {path}" if not path.exists() else f"{path} is not a file",
                           hint="check the path, or get the dataset with `cmx run \"get dataset openorca\"`")
    try:
        frame = pd.read_pickle(path)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} is not a pandas pickle: {type(exc).__name__}: {_short(exc)}",
                           hint="give the .pkl file; a .pkl.gz must be decompressed first (gunzip)") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(frame, pd.DataFrame):
        raise DatasetError(f"{path} holds a {type(frame).__name__}, not a pandas DataFrame",
                           hint="it is not the processed OpenOrca dataset")
    return frame


def _check_integers(frame: pd.DataFrame, column: str, where: str) -> None:
    from pandas.api.types import is_bool_dtype, is_integer_dtype

    dtype = frame[column].dtype
    if not is_integer_dtype(dtype) or is_bool_dtype(dtype):
        raise DatasetError(f"{where}: column {column!r} has dtype {dtype}, not integers (int64)",
                           hint="the file was changed after processorca.py wrote it; get the original")


def _check_values(frame: pd.DataFrame, column: str, where: str, types: tuple[type, ...], what: str) -> None:
    """Every value of `column` is one of `types`; the first that is not is named."""
    values = frame[column].tolist()
    for row, value in enumerate(values):
        if not isinstance(value, types):
            raise DatasetError(f"{where}: column {column!r} holds {type(value).__name__} values "
                               f"(row {row}: {_short(repr(value))}), not {what}; its dtype is {frame[column].dtype}",
                               hint="the file was changed after processorca.py wrote it; get the original")


def _check_token_ids(frame: pd.DataFrame, column: str, where: str) -> None:
    """Token ids are non-negative integers; checked on the first and last rows (a full scan of
    24576 × ~200 ids would cost more than the rest of the load)."""
    import numpy as np

    for row in sorted({0, len(frame) - 1}):
        ids = frame[column].iat[row]
        if len(ids) == 0:
            raise DatasetError(f"{where}: row {row} of {column!r} is empty")
        bad = [t for t in ids if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or t < 0]
        if bad:
            raise DatasetError(f"{where}: row {row} of {column!r} holds {_short(repr(bad[0]))}, not a token id "
                               "(a non-negative integer)",
                               hint="the file was changed after processorca.py wrote it; get the original")


def _sequence_types() -> tuple[type, ...]:
    import numpy as np

    return (list, tuple, np.ndarray)


def _names(names: Sequence[str] | object) -> str:
    return ", ".join(repr(n) for n in names)  # type: ignore[union-attr]


def _short(text: object, limit: int = 80) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


__all__ = ["DatasetError", "OpenOrca", "REQUIRED_COLUMNS", "check_openorca_frame", "load_openorca"]
