"""The benchmarks cmx runs, one package each (llama2_70b, llama3_1_8b): found here by name.

Each package's `__init__` defines `BENCHMARK` (see cmx.mlperf.benchmarks.base.Benchmark) and
imports nothing heavy; `benchmark_for("llama2-70b-99")` imports the packages on first use and
returns the one that lists that name. Adding a benchmark is adding a package and its recipes.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.base import Benchmark, Dataset


class UnknownBenchmark(CmxError):
    """No benchmark package lists the name asked for."""


@cache
def all_benchmarks() -> tuple[Benchmark, ...]:
    """Every benchmark package's BENCHMARK, in package-name order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg:
            module = importlib.import_module(f"{__name__}.{info.name}")
            if hasattr(module, "BENCHMARK"):
                found.append(module.BENCHMARK)
    return tuple(found)


def benchmark_for(name: str) -> Benchmark:
    """The benchmark whose family or MLPerf names include `name` (llama2-70b, llama2-70b-99.9, llama3.1-8b)."""
    for bench in all_benchmarks():
        if name == bench.family or name in bench.names:
            return bench
    known = ", ".join(n for b in all_benchmarks() for n in b.names)
    raise UnknownBenchmark(f"no benchmark is called {name!r}", hint=f"cmx knows {known}")


def dataset_for_test(bench: Benchmark, path: Path, mode: str) -> Dataset:
    """The samples the `mode` test (performance, accuracy, a compliance test) reads from the dataset at `path`.

    Most benchmarks read one set for every test (the kit's `load_dataset_for` is `load_dataset`); one
    whose tests read different sets (gpt-oss-120b: a performance set, an accuracy set, TEST07's own)
    defines its own `load_dataset_for(path, mode)`.
    """
    return bench.load_dataset_for(path, mode)
