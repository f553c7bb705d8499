"""The files a packaged accuracy/ folder holds besides the logs and accuracy.txt (text-to-video's 10 videos).

The round names them (its `accuracy_files`, from constants.py REQUIRED_ACC_BENCHMARK, as paths inside accuracy/);
the benchmark says which file of the accuracy run each one is (`Benchmark.accuracy_files`, given the run's folder
and the dataset it read, since a sample's file may be named after its prompt). The dataset is the one cmx_run.json
records (`dataset`: the path the app's tests read; `rows`: how many of its samples they read). The packager asks
only for a benchmark whose round lists such files, so a result of another benchmark never needs its dataset back.
A file of a sample beyond the rows a rows-limited accuracy run read is left out, not refused: that run never made it,
and the run, never compliant, is packaged for the open division only, where the checker reports the gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cmx.errors import CmxError
from cmx.mlperf.rounds import Round
from cmx.mlperf.submission.sources import SourceResult
from cmx.tools.fs import resolves_inside


@dataclass(frozen=True)
class AccuracyFiles:
    """What the packager copies into a result's accuracy/ folder besides the logs, or why it cannot."""

    files: dict[str, Path]          # a path inside accuracy/ -> the accuracy run's file copied there
    refusals: tuple[str, ...] = ()  # each a sentence saying what is missing and what to do
    # wanted of samples a rows-limited accuracy run never read: left out, as the run never made them (such a run is
    # never compliant, so it goes to the open division only, where `cmx check` reports each as accuracy.extra-files)
    uncovered: tuple[str, ...] = ()


def _inside(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def accuracy_files(source: SourceResult, round_: Round) -> AccuracyFiles:
    """The files the round wants in `source`'s packaged accuracy/ folder, each found in its accuracy run through the
    benchmark's `accuracy_files`; a refusal for each that cannot be found."""
    from cmx.mlperf.benchmarks import benchmark_for

    required = round_.benchmark(source.benchmark).accuracy_files
    if not required:
        return AccuracyFiles({})
    wanted = f"{len(required)} file(s) in accuracy/ ({', '.join(required[:3])}{', ...' if len(required) > 3 else ''})"
    recorded = source.facts.get("dataset")
    if not recorded:
        return AccuracyFiles({}, (f"{round_.name} wants {wanted}, and its cmx_run.json does not record the dataset the "
                                  "run read, which names each file: an older cmx wrote it; run the scenario again "
                                  "with this cmx",))
    dataset_path = Path(str(recorded))
    if not dataset_path.exists():
        return AccuracyFiles({}, (f"{round_.name} wants {wanted}, named after samples of the dataset the run read, "
                                  f"and {dataset_path} is gone: run the dataset's recipe again (cmx run \"get "
                                  "dataset ...\" makes the same path from its inputs) or run the scenario again",))
    bench = benchmark_for(source.benchmark)
    rows = source.facts.get("rows")
    try:
        dataset = bench.load_dataset_for(dataset_path, "accuracy")
        if rows is not None:
            dataset = dataset.limit(min(int(rows), len(dataset)))
    except CmxError as exc:
        return AccuracyFiles({}, (f"the dataset the run read, {dataset_path}, cannot be loaded: {exc.message}",))
    run = source.run_dir("accuracy")
    files = dict(bench.accuracy_files(run, dataset))
    out = [f"{source.benchmark}'s accuracy_files names {name!r}, which is not a path inside accuracy/: fix the "
           "benchmark's accuracy_files" for name in files if not _inside(name)]
    uncovered: list[str] = []
    for name in required:
        src = files.get(name)
        if src is None and rows is not None:
            uncovered.append(name)  # the run read only the first `rows` samples (the tiny app's few)
        elif src is None:
            out.append(f"{round_.name} wants accuracy/{name}, and {source.benchmark}'s accuracy_files gives no file "
                       "for it: add it to the benchmark's accuracy_files")
        elif not resolves_inside(src, run):
            out.append(f"accuracy/{name} would be copied from {src}, outside the accuracy run's folder {run}: the "
                       "packaged accuracy/ holds the run's own files")
        elif not src.is_file():
            out.append(f"accuracy/{name} is copied from {src}, which is missing: the accuracy run did not write it "
                       f"(it covered {len(dataset)} samples); run the accuracy test again over the whole dataset")
    # the round decides what goes in; a file the benchmark names beyond it stays out of the tree
    return AccuracyFiles({name: files[name] for name in required if name in files}, tuple(out), tuple(uncovered))


__all__ = ["AccuracyFiles", "accuracy_files"]
