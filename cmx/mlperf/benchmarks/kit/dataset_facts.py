"""What a benchmark tells the dataset step (kit/dataset_step.py) of its dataset, and what its `finish_dataset` hands
back: plain records the Protocol (base.py), the shared defaults and the benchmark packages name without importing
the step, which reaches the benchmarks through the registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class DatasetFacts:
    """What the dataset step knows of a benchmark's real dataset (its `dataset_facts()`)."""

    samples: int                     # rows of the official set: a download with another count is warned about
    what: str | None = None          # how the warning names a generated sample (default: "<family>-format")
    default_name: str | None = None  # the file's name when neither the filename input nor an R2 listing gives one
    suffix: str = ".pkl"             # of the one file an R2 listing must hold when no name is given
    tiny_rows: int | None = None     # the tiny set's default size, when it is not `samples`
    whole_listing: bool = False      # every file of the R2 listing, into the folder `default_name`
    hub: bool = False                # a Hugging Face dataset repository (inputs repo, revision), into `default_name`


@dataclass(frozen=True)
class DatasetMade:
    """What a benchmark's `finish_dataset` made of a download or a tiny set: the path the loader reads, and
    the recipe's outputs besides path, rows and is_tiny."""

    path: Path
    outputs: Mapping[str, object] = field(default_factory=dict)


__all__ = ["DatasetFacts", "DatasetMade"]
