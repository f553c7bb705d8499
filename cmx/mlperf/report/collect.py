"""What a report shows, read from a results folder: one ResultRow per LoadGen test, and where the run came from.

A results folder is what `app mlperf inference ...` writes: `<system>/<benchmark>/<Scenario>/`
holding `cmx_run.json` (the tests, their validity and problems, the run's origin) beside each
test's folder with LoadGen's logs, accuracy.txt, and the harness's per-sample `cmx_samples.csv`.
`cmx tune` writes the same tree for its confirm run, with `cmx_tune.json` (its probes) beside
cmx_run.json: each becomes a TuneRecord. Nothing here is computed anew: the figures are LoadGen's
(its summary and detail logs), the accuracy the evaluator's accuracy.txt, the limits and targets
the round's, the probes what the tune recorded. `cmx pareto` writes `<system>/<benchmark>/pareto/cmx_pareto.json`
(cmx.mlperf.pareto.record): each becomes a ParetoCurve, and a folder may hold only those, or be the pareto
folder itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.app import is_set_aside
from cmx.mlperf.loadgen.harness_config import recorded_validity
from cmx.mlperf.loadgen.log import LoadgenLogError, read_loadgen_run
from cmx.mlperf.loadgen.log_records import Latencies
from cmx.mlperf.loadgen.progress import SAMPLES_CSV
from cmx.mlperf.pareto.record import CMX_PARETO_JSON, ParetoRecord, find_records, read_record
from cmx.mlperf.provenance import RunOrigin
from cmx.mlperf.tune.record import CMX_TUNE_JSON
from cmx.mlperf.tune.search import Probe

CMX_RUN_JSON = "cmx_run.json"


class ReportError(CmxError):
    """A folder holds no results cmx can report on."""


@dataclass(frozen=True)
class Percentiles:
    """p50, p90 and p99 in milliseconds (None where LoadGen logged none)."""

    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, lat: Latencies | None) -> Percentiles | None:
        if lat is None:
            return None
        ms = [None if v is None else v / 1e6 for v in (lat.p50_ns, lat.p90_ns, lat.p99_ns)]
        return cls(*ms)


@dataclass(frozen=True)
class SampleTimes:
    """The harness's per-sample times (seconds): issue, first token (NaN when not streamed), completion, tokens."""

    issued: np.ndarray
    first_token: np.ndarray
    completed: np.ndarray
    tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.completed.size)

    @classmethod
    def read(cls, path: Path) -> SampleTimes | None:
        if not path.is_file():
            return None
        rows = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=np.float64, ndmin=2, missing_values="",
                             filling_values=np.nan)
        if rows.size == 0:
            rows = np.empty((0, 4))
        return cls(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3])

    def ttft_ms(self) -> np.ndarray:
        streamed = ~np.isnan(self.first_token)
        return (self.first_token[streamed] - self.issued[streamed]) * 1000.0

    def tpot_ms(self) -> np.ndarray:
        many = ~np.isnan(self.first_token) & (self.tokens > 1)
        return (self.completed[many] - self.first_token[many]) / (self.tokens[many] - 1) * 1000.0


@dataclass(frozen=True)
class ResultRow:
    """One LoadGen test as a report row."""

    system: str
    benchmark: str
    scenario: str
    mode: str
    folder: Path
    validity: str | None          # cmx's verdict: FAILED when the test went wrong, whatever LoadGen said
    loadgen_validity: str | None  # LoadGen's own result_validity
    ok: bool
    problems: tuple[str, ...]
    tokens_per_second: float | None
    samples_per_second: float | None
    target_qps: float | None
    ttft: Percentiles | None
    tpot: Percentiles | None
    ttft_limit_ms: float | None
    tpot_limit_ms: float | None
    accuracy: dict[str, float]           # metric -> value, as accuracy.txt says
    accuracy_minimums: dict[str, float]  # the closed division's targets for the metrics that have one
    accuracy_maximums: dict[str, float]
    short: bool
    tiny: bool
    compliant: bool
    samples: SampleTimes | None = field(default=None, compare=False)
    # a Server test judged on whole answers (no token latencies: Qwen3-VL): its end-to-end latency and the limit
    latency: Percentiles | None = None
    latency_limit_ms: float | None = None
    # a SingleStream test's result: LoadGen's early-stopping estimate of its 90th percentile, in its unit (ms, s)
    result_latency: float | None = None
    result_unit: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies the test across two results folders."""
        return self.system, self.benchmark, self.scenario, self.mode

    @property
    def label(self) -> str:
        return f"{self.benchmark} {self.scenario} {self.mode}"


@dataclass(frozen=True)
class TuneConfirm:
    """One confirm run of a tune, as cmx_tune.json keeps it."""

    qps: float
    ok: bool
    validity: str | None          # cmx's verdict on the run
    loadgen_validity: str | None  # LoadGen's (a tune record from an older cmx kept only this, as `validity`)
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    samples_per_second: float | None
    seconds: float | None
    problems: tuple[str, ...]


@dataclass(frozen=True)
class TuneRecord:
    """A `cmx tune` of one scenario: its probes in order, its confirm runs, the QPS it chose (None: none
    confirmed), the QPS the search settled on, and the round's p99 limits (None: Offline)."""

    path: Path
    benchmark: str
    scenario: str
    input: str
    qps: float | None
    found_qps: float | None
    confirmed: bool
    short: bool
    probes: tuple[Probe, ...]
    confirms: tuple[TuneConfirm, ...]
    ttft_limit_ms: float | None
    tpot_limit_ms: float | None
    seconds: float | None
    engine_start_s: float | None
    command: str
    round: str
    confirm_why: str = ""   # why the confirm runs stopped, as a sentence ("": none ran, or an older record)

    @property
    def label(self) -> str:
        return f"{self.benchmark} {self.scenario}"

    @classmethod
    def read(cls, path: Path) -> TuneRecord:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            limits = data.get("limits") or {}
            return cls(path=path, benchmark=data["benchmark"], scenario=data["scenario"], input=data["input"],
                       qps=data.get("qps"), found_qps=data.get("found_qps"), confirmed=bool(data.get("confirmed")),
                       short=bool(data.get("short")), probes=tuple(_known(Probe, p) for p in data["probes"]),
                       confirms=tuple(TuneConfirm(qps=c["qps"], ok=bool(c["ok"]),
                                                  validity=recorded_validity(c.get("validity"), not c["ok"]),
                                                  loadgen_validity=c.get("loadgen_validity", c.get("validity")),
                                                  ttft_p99_ms=c.get("ttft_p99_ms"), tpot_p99_ms=c.get("tpot_p99_ms"),
                                                  samples_per_second=c.get("samples_per_second"),
                                                  seconds=c.get("seconds"), problems=tuple(c.get("problems") or ()))
                                      for c in data.get("confirms", [])),
                       ttft_limit_ms=limits.get("ttft_p99_ms"), tpot_limit_ms=limits.get("tpot_p99_ms"),
                       seconds=data.get("seconds"), engine_start_s=data.get("engine_start_s"),
                       command=data.get("command", ""), round=data.get("round", ""),
                       confirm_why=data.get("confirm_why") or "")
        except (ValueError, KeyError, TypeError) as err:
            raise ReportError(f"{path} is not a tune record cmx can read ({type(err).__name__}: {err})",
                              hint=f"{CMX_TUNE_JSON} is written by `cmx tune`; remove the file if it is not one") \
                from None


def _known(cls: type, data: dict[str, Any]) -> Any:
    """`cls(**data)` with the fields `cls` has (a record from a later cmx may carry more)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class ParetoCurve:
    """A `cmx pareto` curve and the cmx_pareto.json it was read from."""

    path: Path
    record: ParetoRecord

    @classmethod
    def read(cls, path: Path) -> ParetoCurve:
        try:
            return cls(path=path, record=read_record(path))
        except (ValueError, KeyError, TypeError) as err:
            raise ReportError(f"{path} is not a Pareto record cmx can read ({type(err).__name__}: {err})",
                              hint=f"{CMX_PARETO_JSON} is written by `cmx pareto`; remove the file if it is not one") \
                from None


@dataclass(frozen=True)
class ResultsReport:
    """A results folder's tests, its tunes, and where they came from (the command, cmx, the software, the system)."""

    path: Path
    tests: tuple[ResultRow, ...]
    command: str
    cmx_version: str
    software: dict[str, str]
    system: dict[str, Any]
    round: str
    tunes: tuple[TuneRecord, ...] = ()
    pareto: tuple[ParetoCurve, ...] = ()


def collect(results_dir: Path) -> ResultsReport:
    """Every test, tune and Pareto curve under `results_dir`, tests in the order the run made them; ReportError when
    there is none."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise ReportError(f"{results_dir} is not a folder", hint="give the results_dir a benchmark run wrote")
    # a failed attempt a re-run set aside is kept beside the new run's folder, but is no result of the run
    runs = sorted(p for p in results_dir.rglob(CMX_RUN_JSON) if not is_set_aside(p.parent))
    tunes = tuple(TuneRecord.read(p) for p in sorted(results_dir.rglob(CMX_TUNE_JSON)) if not is_set_aside(p.parent))
    pareto = tuple(ParetoCurve.read(p) for p in find_records(results_dir))
    if not runs and not tunes and not pareto:
        raise ReportError(f"no benchmark results under {results_dir} (no {CMX_RUN_JSON}, {CMX_TUNE_JSON} or "
                          f"{CMX_PARETO_JSON} in any folder)",
                          hint="give the results_dir of an `app mlperf inference ...` run (the demo's is "
                               "results/demo), of a `cmx tune` (it prints it), or of a `cmx pareto` (its results "
                               "folder, or the pareto folder in it)")
    tests: list[ResultRow] = []
    origin: RunOrigin | None = None
    round_name = ""
    for path in runs:
        facts = json.loads(path.read_text(encoding="utf-8"))
        if origin is None and facts.get("origin"):
            origin = RunOrigin.from_json(facts["origin"])
        round_name = round_name or facts.get("round", "")
        tests += [_record(facts, run) for run in facts.get("runs", [])]
    round_name = round_name or next((t.round for t in tunes if t.round), "")
    if origin is None:  # a tune with no confirm run, or a folder of Pareto curves, has only its own record of it
        command = next((t.command for t in tunes), "") or next(
            (c.record.command for c in pareto if c.record.command and not runs), "")
        return ResultsReport(path=results_dir, tests=tuple(tests), command=command, cmx_version="", software={},
                             system={}, round=round_name, tunes=tunes, pareto=pareto)
    return ResultsReport(path=results_dir, tests=tuple(tests), command=origin.command_line,
                         cmx_version=origin.cmx_version, software=dict(origin.software), system=dict(origin.system),
                         round=round_name, tunes=tunes, pareto=pareto)


def _record(facts: dict[str, Any], run: dict[str, Any]) -> ResultRow:
    from cmx.mlperf.rounds import load_round

    folder = Path(run["folder"])
    ttft = tpot = latency = None
    ttft_limit = tpot_limit = latency_limit = samples_per_second = result_latency = None
    rules = load_round(facts["round"]).benchmark(facts["benchmark"]).scenario(run["scenario"])
    try:
        log = read_loadgen_run(folder)
    except LoadgenLogError:
        log = None
    if log is not None:
        ttft, tpot = Percentiles.of(log.results.ttft), Percentiles.of(log.results.tpot)
        samples_per_second = log.results.samples_per_second
        s = log.settings
        ttft_limit = s.ttft_latency_ns / 1e6 if s.ttft_latency_ns and ttft else None
        tpot_limit = s.tpot_latency_ns / 1e6 if s.tpot_latency_ns and tpot else None
        performance = run["mode"] == "performance"
        if rules.latency_result and performance:  # SingleStream: its latencies, and its result among them
            latency = Percentiles.of(log.results.latency)
            ns = log.results.early_stopping_latency_ns
            result_latency = None if ns is None else rules.in_latency_unit(ns)
        elif ttft is None and rules.loadgen_scenario == "Server" and performance and s.target_latency_ns:
            # a Server test judged on whole answers
            latency, latency_limit = Percentiles.of(log.results.latency), s.target_latency_ns / 1e6
    targets = load_round(facts["round"]).benchmark(facts["benchmark"]).accuracy
    accuracy = {k: float(v) for k, v in (run.get("rouge") or {}).items()}
    return ResultRow(
        system=facts["system"], benchmark=facts["benchmark"], scenario=run["scenario"], mode=run["mode"],
        folder=folder, validity=recorded_validity(run.get("validity"), bool(run.get("problems"))),
        loadgen_validity=run.get("loadgen_validity", run.get("validity")), ok=not run.get("problems"),
        problems=tuple(run.get("problems") or ()), tokens_per_second=run.get("tokens_per_second"),
        samples_per_second=samples_per_second, target_qps=facts.get("target_qps"), ttft=ttft, tpot=tpot,
        ttft_limit_ms=ttft_limit, tpot_limit_ms=tpot_limit, accuracy=accuracy,
        accuracy_minimums={b.metric: b.value for b in targets.minimums if b.metric in accuracy},
        accuracy_maximums={b.metric: b.value for b in targets.maximums if b.metric in accuracy},
        short=bool(facts.get("short")), tiny=bool(facts.get("tiny")), compliant=bool(facts.get("compliant")),
        samples=SampleTimes.read(folder / SAMPLES_CSV), latency=latency, latency_limit_ms=latency_limit,
        result_latency=result_latency, result_unit=(rules.latency_unit or "ms") if rules.latency_result else None)
