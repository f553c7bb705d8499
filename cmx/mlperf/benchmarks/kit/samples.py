"""The shape benchmarks' datasets share: prompts kept as int32 token arrays, `limit`, and what a tiny generator made."""

from __future__ import annotations

import dataclasses
from array import array
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from typing_extensions import Self

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.base import DatasetError

S = TypeVar("S", bound="TokenSamples")


class TokenSamples:
    """Beside a frozen dataclass whose fields are `path` and tuples of one value per sample, one of them
    `token_ids` (the prompts): its length, prompt ids, input lengths and `limit`, written once."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # a dataclass: dataclasses.replace works on it
    token_ids: tuple[array[int], ...]  # array("i"): int32 prompt ids
    path: Path

    def __len__(self) -> int:
        return len(self.token_ids)

    def prompt_ids(self, i: int) -> list[int]:
        """The prompt of sample i as token ids, as the reference SUT feeds them to the engine."""
        return self.token_ids[i].tolist()

    @cached_property
    def input_lengths(self) -> tuple[int, ...]:
        """The number of prompt tokens of every sample."""
        return tuple(len(ids) for ids in self.token_ids)

    def limit(self, n: int) -> Self:
        """The first n samples (for short test runs; a compliant run uses all of them)."""
        check_limit(n, len(self), self.path)
        return dataclasses.replace(self, **{f.name: getattr(self, f.name)[:n] for f in dataclasses.fields(self)
                                            if f.name != "path"})


class TextSamples(TokenSamples):
    """TokenSamples whose prompts are kept as text too (`inputs`) and whose references are text (`references`)."""

    inputs: tuple[str, ...]
    references: tuple[str, ...]

    def prompt_text(self, i: int) -> str:
        """The prompt of sample i as text, which `token_ids[i]` encodes."""
        return self.inputs[i]

    def reference(self, i: int) -> str:
        """The reference answer of sample i, which the accuracy script compares against."""
        return self.references[i]


def check_limit(n: int, total: int, path: Path) -> None:
    """Refuse to keep n of `total` samples unless 1 <= n <= total."""
    if not 1 <= n <= total:
        raise DatasetError(f"cannot keep {n} samples of {path}: it has {total}",
                           hint=f"give a number from 1 to {total}")


@dataclass(frozen=True)
class TinyDataset:
    """A dataset file made by a benchmark's tiny generator: where, how many rows, from which seed."""

    path: Path
    rows: int
    seed: int


def check_tiny_rows(rows: int) -> None:
    """A tiny dataset has at least one row."""
    if rows < 1:
        raise CmxError(f"a dataset needs at least one row, not {rows}")


__all__ = ["TextSamples", "TinyDataset", "TokenSamples", "check_limit", "check_tiny_rows"]
