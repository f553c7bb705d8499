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

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.frames import (
    check_lengths,
    read_frame,
    require_columns,
    texts,
    token_arrays,
)
from cmx.mlperf.benchmarks.kit.samples import check_limit

if TYPE_CHECKING:  # pandas is imported when a dataset is loaded, not when cmx starts
    import pandas as pd

SAMPLES = 24576  # the file's name says so; mlperf.conf llama2-70b.*.performance_sample_count_override
FACTS = DatasetFacts(SAMPLES, what="OpenOrca-format")  # what the dataset step fetches and checks
# column -> what its values must be; the reference's dataset.py and evaluate-accuracy.py read these
TEXT_COLUMNS = ("input", "output")
TOKEN_COLUMNS = ("tok_input",)
LENGTH_COLUMNS = ("tok_input_length", "tok_output_length")
REQUIRED_COLUMNS = (*TEXT_COLUMNS, *TOKEN_COLUMNS, *LENGTH_COLUMNS)
_HINT = "it is not the processed OpenOrca dataset of llama2-70b (open_orca_gpt4_tokenized_llama.sampled_24576.pkl)"
_EDITED = "the file was changed after processorca.py wrote it; get the original"


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
        check_limit(n, len(self), self.path)
        return OpenOrca(self.dataframe.iloc[:n].reset_index(drop=True), self.path)


def load_openorca(path: Path | str) -> OpenOrca:
    """Read an OpenOrca pickle and check it has the columns and dtypes the benchmark reads.

    Raises DatasetError naming the file and what is missing or wrong.
    """
    path = Path(path)
    frame = read_frame(path, hint=_HINT, get="get dataset openorca")
    check_openorca_frame(frame, path)
    return OpenOrca(frame.reset_index(drop=True), path)


def check_openorca_frame(frame: pd.DataFrame, path: Path) -> None:
    """Raise DatasetError unless `frame` has OpenOrca's required columns, with sensible values."""
    require_columns(frame, path, REQUIRED_COLUMNS, hint=_HINT)
    for column in LENGTH_COLUMNS:
        _check_integers(frame, column, path)
    for column in TEXT_COLUMNS:
        texts(frame, column, path, hint=_EDITED)
    token_ids = token_arrays(frame["tok_input"].tolist(), path, "tok_input", hint=_EDITED)  # every row, every id
    check_lengths(token_ids, frame["tok_input_length"].tolist(), path, column="tok_input",
                  length_column="tok_input_length")


def _check_integers(frame: pd.DataFrame, column: str, path: Path) -> None:
    """processorca.py writes the lengths as int64 columns."""
    from pandas.api.types import is_bool_dtype, is_integer_dtype

    dtype = frame[column].dtype
    if not is_integer_dtype(dtype) or is_bool_dtype(dtype):
        raise DatasetError(f"{path}: column {column!r} has dtype {dtype}, not integers (int64)", hint=_EDITED)


__all__ = ["FACTS", "REQUIRED_COLUMNS", "SAMPLES", "OpenOrca", "check_openorca_frame", "load_openorca"]
