"""A cmx results folder's performance tests placed among the published rows of the same benchmark, scenario and
accelerator model: rank, best, median, and what differs.

What a run did is read from the cmx_run.json the app writes beside each scenario's tests (not from a
failed attempt a re-run set aside): the benchmark, the scenario, the performance test's tokens/s and
samples/s, the device (`device`: cpu, cuda, rocm), the GPUs detection found (`origin.system.gpus`), how
many the engine used (tensor x pipeline parallel x replicas, else every GPU found), the precision
(`engine.precision`) and vLLM's version. A CPU run's devices are its sockets, and its peers every
published CPU-only row of the benchmark and scenario, whatever the processor: there are few of them.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.app import is_set_aside
from cmx.mlperf.published.accelerators import same_model
from cmx.mlperf.published.table import PublishedResultsError, PublishedRow, normal_benchmark

CMX_RUN_JSON = "cmx_run.json"


@dataclass(frozen=True)
class RunFigure:
    """One performance test of a cmx results folder, with what it ran on."""

    folder: Path
    system: str
    benchmark: str
    scenario: str
    validity: str | None
    tokens_per_second: float | None
    samples_per_second: float | None
    on_cpu: bool
    device: str          # the GPU's name, or the CPU's model
    devices: int         # GPUs the engine used, or sockets
    precision: str
    framework: str       # "vLLM 0.32.0"
    nodes: int
    short: bool
    tiny: bool

    def figure(self, units: str) -> float | None:
        """The run's figure in a published row's units (Tokens/s; Samples/s and Queries/s: samples/s)."""
        return self.tokens_per_second if units == "Tokens/s" else self.samples_per_second

    def per_device(self, units: str) -> float | None:
        value = self.figure(units)
        return None if value is None or self.devices <= 0 else value / self.devices

    @property
    def device_label(self) -> str:
        return f"{self.devices}x {self.device}" + (" (sockets)" if self.on_cpu else "")


@dataclass(frozen=True)
class Peer:
    """A published row beside the run, with what differs from the run ("precision fp4", "TensorRT 10.14")."""

    row: PublishedRow
    per_device: float
    differs: tuple[str, ...]


@dataclass(frozen=True)
class Placement:
    """Where the run stands among its peers (best first); no peers: rank, best and median are None."""

    run: RunFigure
    units: str
    run_per_device: float | None
    peers: tuple[Peer, ...]
    rank: int | None            # 1 = the best, among peers + the run
    best: float | None
    median: float | None

    @property
    def of(self) -> int:
        return len(self.peers) + 1

    @property
    def to_best(self) -> float | None:
        return None if not self.best or self.run_per_device is None else self.run_per_device / self.best

    @property
    def to_median(self) -> float | None:
        return None if not self.median or self.run_per_device is None else self.run_per_device / self.median

    @property
    def peers_label(self) -> str:
        kind = "CPU-only" if self.run.on_cpu else f"{self.run.device}"
        return f"published {kind} rows of {self.run.benchmark} {self.run.scenario}"


def read_runs(results_dir: Path) -> tuple[RunFigure, ...]:
    """Every performance test under `results_dir` with a figure; PublishedResultsError when there is none."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise PublishedResultsError(f"{results_dir} is not a folder",
                                    hint="give the results_dir of an `app mlperf inference ...` run "
                                         "(the demo's is results/demo)")
    figures = []
    for path in sorted(results_dir.rglob(CMX_RUN_JSON)):
        if is_set_aside(path.parent):
            continue
        try:
            facts = json.loads(path.read_text(encoding="utf-8"))
            figures += [_figure(facts, run, path.parent) for run in facts.get("runs") or ()
                        if run.get("mode") == "performance"]
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise PublishedResultsError(f"{path} is not a run record cmx can read ({type(err).__name__}: {err})",
                                        hint=f"{CMX_RUN_JSON} is written by `cmx run \"app mlperf inference ...\"`")\
                from None
    if not figures:
        raise PublishedResultsError(f"no performance test under {results_dir} (no {CMX_RUN_JSON} with one)",
                                    hint="give the results_dir of an `app mlperf inference ...` run that ran "
                                         "the performance mode")
    return tuple(figures)


def has_runs(results_dir: Path) -> bool:
    """Whether `results_dir` holds a performance test to place among the published results (read_runs finds one)."""
    try:
        return bool(read_runs(results_dir))
    except PublishedResultsError:
        return False


def _figure(facts: dict[str, Any], run: dict[str, Any], folder: Path) -> RunFigure:
    origin = facts.get("origin") or {}
    system = origin.get("system") or {}
    engine = facts.get("engine") or {}
    software = origin.get("software") or {}
    on_cpu = facts.get("device") == "cpu" or not system.get("gpus")
    if on_cpu:
        device, devices = str(system.get("cpu_model") or "CPU"), int(system.get("sockets") or 1)
    else:
        gpus = system["gpus"]
        device = str(gpus[0].get("name") or "GPU")
        used = (engine.get("tensor_parallel_size") or 0) * (engine.get("pipeline_parallel_size") or 1) \
            * (engine.get("replicas") or 1)
        devices = int(used or system.get("gpu_count") or len(gpus))
    return RunFigure(folder=folder, system=str(facts.get("system", "")), benchmark=str(facts["benchmark"]),
                     scenario=str(run.get("scenario") or facts["scenario"]), validity=run.get("validity"),
                     tokens_per_second=run.get("tokens_per_second"), samples_per_second=run.get("samples_per_second"),
                     on_cpu=on_cpu, device=device, devices=devices, precision=str(engine.get("precision") or ""),
                     framework=f"vLLM {software['vllm']}" if software.get("vllm") else "", nodes=1,
                     short=bool(facts.get("short")), tiny=bool(facts.get("tiny")))


def is_peer(run: RunFigure, row: PublishedRow) -> bool:
    """Same benchmark (MLCommons' name), scenario, and accelerator model (a CPU run: any CPU-only row)."""
    if normal_benchmark(row.benchmark) != normal_benchmark(run.benchmark) and \
            normal_benchmark(row.submitted_as) != normal_benchmark(run.benchmark):
        return False
    if row.scenario != run.scenario or row.is_power or row.per_device is None:
        return False
    return row.on_cpu if run.on_cpu else (not row.on_cpu and same_model(run.device, row.device))


def differences(run: RunFigure, row: PublishedRow) -> tuple[str, ...]:
    """What the row did otherwise, where the table says: precision, framework, nodes."""
    out = []
    precisions = {p.strip().lower() for p in row.precision.split(",") if p.strip()}
    if run.precision and precisions and run.precision.lower() not in precisions:
        out.append(f"precision {row.precision} (the run: {run.precision})")
    if run.framework and row.framework and run.framework.split()[0].lower() not in row.framework.lower():
        out.append(f"framework {row.framework} (the run: {run.framework})")
    if row.nodes != run.nodes:
        out.append(f"{row.nodes} nodes (the run: {run.nodes})")
    return tuple(out)


def place(run: RunFigure, rows: tuple[PublishedRow, ...]) -> Placement:
    """The run among the published rows that are its peers, best first."""
    chosen = [r for r in rows if is_peer(run, r)]
    units = chosen[0].units if chosen else ("Tokens/s" if run.tokens_per_second is not None else "Samples/s")
    peers = tuple(sorted((Peer(r, r.per_device or 0.0, differences(run, r)) for r in chosen if r.units == units),
                         key=lambda p: -p.per_device))
    mine = run.per_device(units)
    if not peers:
        return Placement(run, units, mine, (), None, None, None)
    values = [p.per_device for p in peers]
    rank = None if mine is None else 1 + sum(v > mine for v in values)
    return Placement(run, units, mine, peers, rank, max(values), statistics.median(values))


def field_of(p: Placement, rows: tuple[PublishedRow, ...]) -> tuple[PublishedRow, ...]:
    """Every published row of the run's benchmark and scenario with a figure in the placement's units, whatever
    the accelerator: what the report's chart draws, the run's peers among them."""
    run, want = p.run, normal_benchmark(p.run.benchmark)
    return tuple(r for r in rows if not r.is_power and r.per_device is not None and r.units == p.units
                 and r.scenario == run.scenario and want in (normal_benchmark(r.benchmark),
                                                              normal_benchmark(r.submitted_as)))
