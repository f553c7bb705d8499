"""`cmx pareto`'s step: the curve, run on the app step's ctx in place of the app (as `cmx tune` runs its search).

`pareto_target` refuses, before any dep is built, a query that is not an MLPerf app of an Endpoints
benchmark (cmx/mlperf/rounds/endpoints-v1.0.yaml lists them), that does not run through an endpoint (`_endpoint`:
cmx's own vllm serve, or --input endpoint_url), or that names no device.

`pareto_step` starts the server (or uses the URL) and one endpoint backend, then:

1. C_max: the declared one (--max-concurrency), or probes: short fixed-concurrency runs at 32, 64, 128,
   ... while each doubling still gains 10 % of system tokens/s; C_max is the last that gained (at least
   64: the rules need it above 32). C_min is the lowest point's, 1.
2. The points (regions.plan_points): 1 + 3 + 3 at fixed concurrency, each for its region's minimum
   (600 s ultra-low, 1,200 s the others; `_short`: seconds), then the Offline point (whole passes at
   once). Each point's requests go to `r<N>/requests.jsonl`, its figures to cmx_pareto.json.
3. The accuracy gate: right after the performance run of each of the four mandatory points and of the
   Offline point, the accuracy set once through at the same concurrency, scored by the benchmark's
   evaluator against the round's closed targets.
4. With --input system_power=FILE, tokens/s per kW at every point.
5. One config per point for MLCommons' client (client_config.py); where the client is installed, the
   points are measured by it instead of cmx's loop, from those configs.

A run (a probe, a point, an accuracy pass) in which no request got an answer with tokens stops the curve at
once, with the server's first error (ParetoError): a dead server measures 0 tokens/s at every concurrency, and
doubling on from there only multiplies the failures. A server that stalls is stopped by the first-token deadline
(runner.FIRST_TOKEN_S; --first-token-timeout), and every fixed-concurrency run shows its progress meanwhile.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.errors import CmxError
from cmx.mlperf.app_verb import app_benchmark, require_device
from cmx.mlperf.pareto.client_config import ClientPoint, write_client_config, write_prompts
from cmx.mlperf.pareto.metrics import PointFigures, figures
from cmx.mlperf.pareto.power import ProvisionedPower, read_system_power
from cmx.mlperf.pareto.record import (
    LABEL,
    OFFICIAL_CLIENT_LABEL,
    OFFLINE,
    OFFLINE_DIR,
    PARETO_DIR,
    AccuracyGate,
    ParetoRecord,
    Point,
    Probe,
    write_record,
)
from cmx.mlperf.pareto.regions import OTHER_SECONDS, PlannedPoint, plan_points, structure_problems
from cmx.mlperf.pareto.runner import (
    FIRST_TOKEN_S,
    Answer,
    PointProgress,
    PointRun,
    request_builder,
    run_offline,
    run_point,
)
from cmx.secrets import Redactor

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.app import AppConfig
    from cmx.mlperf.backends.base import Backend, GenRequest
    from cmx.resolve.plan import Step

SHORT_POINT_S = 2.0
SHORT_PROBE_S = 1.5
SHORT_ACCURACY_ROWS = 32
PROBE_S = 60.0
PROBE_START, PROBE_CAP = 32, 4096
OFFLINE_ORDERING = 0.98      # the Offline point's system_tps against the C_max point's (rules §5.7)
KNEE_GAIN = 1.10             # a doubling that gains less than 10 % of system tokens/s has passed the knee
SEED = 2747215439041700203   # the sample draw's seed: v6.1's sample_index_rng_seed (the rules' seed set is MLCommons')
ERROR_CHARS = 300            # of the server's error quoted in a dead run's message


class ParetoError(CmxError):
    """A curve cannot be run as asked (not an Endpoints benchmark, no endpoint, no device) or could not be run."""


@dataclass(frozen=True)
class ParetoRequest:
    max_concurrency: int | None = None     # C_max declared; None: probed
    system_power: Path | None = None
    cooling: str | None = None
    first_token_timeout_s: float = FIRST_TOKEN_S   # no token for this long while a request waits: the server stalled

    def options(self) -> tuple[str, ...]:
        out: list[str] = []
        if self.first_token_timeout_s != FIRST_TOKEN_S:
            out += ["--first-token-timeout", f"{self.first_token_timeout_s:g}"]
        if self.max_concurrency is not None:
            out += ["--max-concurrency", str(self.max_concurrency)]
        if self.system_power is not None:
            out += ["--system-power", shlex.quote(str(self.system_power))]
        if self.cooling:
            out += ["--cooling", self.cooling]
        return tuple(out)


@dataclass(frozen=True)
class ParetoTarget:
    family: str
    benchmark: str
    round: str


def pareto_target(step: Step, query_variations: tuple[str, ...], context: dict[str, Any]) -> ParetoTarget:
    """Check the plan's root step can draw a curve; ParetoError says why not."""
    from cmx.mlperf.engines import http_backend
    from cmx.mlperf.rounds import endpoints_v1_benchmarks

    bench = app_benchmark(step, ParetoError, "is not an MLPerf benchmark app",
                          hint="give an app query: `cmx find app mlperf inference` lists them")
    name, endpoints = bench.names[0], endpoints_v1_benchmarks()
    if name not in endpoints:
        raise ParetoError(f"{name} is not an MLPerf Endpoints v1.0 benchmark",
                          hint=f"Endpoints v1.0 has {', '.join(endpoints)}")
    if http_backend() not in step.variations:
        raise ParetoError("a Pareto curve measures a served endpoint: the query does not run through one",
                          hint="add _endpoint (cmx starts vllm serve), or give --input endpoint_url=URL (a server "
                               "of your own)")
    require_device(step, query_variations, context, ParetoError, "a curve measures one machine's server")
    return ParetoTarget(family=bench.family, benchmark=name, round=str(step.inputs["round"]))


def pareto_step(ctx: StepContext, target: ParetoTarget, request: ParetoRequest) -> dict[str, Any]:
    """The curve on the app step's ctx; its outputs (cmx_pareto.json's content and where it is)."""
    from cmx.mlperf.app import harness_config, serving
    from cmx.mlperf.app_step import app_config
    from cmx.mlperf.loadgen.harness import build_backend
    from cmx.mlperf.loadgen.harness_config import endpoint_environment
    from cmx.mlperf.pareto.client_config import client_command

    config = app_config(ctx, target.family)
    folder = config.results_dir / config.system / config.benchmark / PARETO_DIR
    if folder.exists() and any(folder.iterdir()):
        raise ParetoError(f"{folder} already holds a curve", hint="remove it, or give --input results_dir=DIR")
    power = _power(request)
    command = client_command()
    began = time.monotonic()
    bar = ctx.progress(None, "pareto")
    with serving(config, ctx.log, tokenizer=command is not None) as served:
        harness = harness_config(served, "Server", "performance", folder / "unused.conf")
        # the API key goes where the harness process finds it (its environment), here in this process
        key = served.api_key.reveal() if served.api_key else None
        backend = build_backend(harness, ctx.log, {**os.environ, **endpoint_environment(served.endpoint, key)})
        backend.start()
        try:
            curve = _Curve(served, target, backend, folder, ctx.log, lambda text: bar.update(0, None, text),
                           client=command)
            record = curve.run(request, power)
        finally:
            backend.stop()
    record = replace(record, command=shlex.join(ctx.run_argv) or "cmx pareto", seconds=time.monotonic() - began)
    path = write_record(record, folder)
    return {**record.to_json(), "record": str(path), "folder": str(folder),
            "results_dir": str(config.results_dir)}


def _power(request: ParetoRequest) -> ProvisionedPower | None:
    if request.system_power is None:
        return None
    return read_system_power(request.system_power, request.cooling)


class _Curve:
    """The points of one curve on one started backend."""

    def __init__(self, config: AppConfig, target: ParetoTarget, backend: Backend, folder: Path,
                 log: logging.Logger, say: Callable[[str], None], *, client: str | None) -> None:
        from cmx.mlperf.benchmarks import benchmark_for, dataset_for_test
        from cmx.mlperf.rounds import load_round

        self.config, self.target, self.backend, self.folder, self.log, self.say = config, target, backend, folder, \
            log, say
        self.client = client
        self.plugin = benchmark_for(config.benchmark)
        self.rules = load_round(target.round).benchmark(config.benchmark)
        perf = dataset_for_test(self.plugin, config.dataset, "performance")
        acc = dataset_for_test(self.plugin, config.dataset, "accuracy")
        self.perf = perf.limit(config.rows) if config.rows is not None else perf
        acc = acc.limit(config.rows) if config.rows is not None else acc
        # a smoke test runs the gate on a few rows: it shows the gate works, and cannot pass it
        self.acc = acc.limit(SHORT_ACCURACY_ROWS) if config.short and len(acc) > SHORT_ACCURACY_ROWS else acc
        self.source: Any = self.plugin.prompt_source(self.perf, config.model)
        self.build = request_builder(self.source, config.max_tokens)
        self.build_acc = request_builder(self.plugin.prompt_source(self.acc, config.model), config.max_tokens)
        self.first_token_s = FIRST_TOKEN_S
        # the API key the backend sends, the URL's credentials and the environment's tokens, kept out of a quoted
        # server error (a server may echo the request's headers)
        self.redactor = Redactor.of((config.api_key, config.endpoint.url if config.endpoint else None))

    def fixed(self, run: PointRun, build: Callable[[int, int], GenRequest], what: str) -> list[Answer]:
        """A fixed-concurrency run under the first-token deadline, its progress on the step's line; ParetoError when
        no request of it got an answer with tokens."""
        def progress(p: PointProgress) -> None:
            waiting = f"; no token for {p.waiting_s:.0f} s (deadline {self.first_token_s:g} s)" \
                if p.waiting_s >= 5 else ""
            self.say(f"{what}: {p.issued} sent, {p.answered} answered, {p.failed} failed{waiting}")

        answers = run_point(self.backend, replace(run, first_token_s=self.first_token_s), build,
                            on_progress=progress)
        require_answers(answers, what, self.redactor)
        return answers

    def seconds(self, planned_min_s: float) -> float:
        return SHORT_POINT_S if self.config.short else planned_min_s

    def run(self, request: ParetoRequest, power: ProvisionedPower | None) -> ParetoRecord:
        self.first_token_s = request.first_token_timeout_s
        probes: list[Probe] = []
        if request.max_concurrency is not None:
            c_max, source = request.max_concurrency, "declared"
        else:
            probes = self.probe()
            c_max, source = knee(probes), "probes"
        regions, planned = plan_points(c_max)
        points = [self.point(p, power) for p in planned]
        points.append(self.offline(power))
        problems = structure_problems(regions, [p.concurrency for p in planned], offline=True)
        problems += [f"{_where(p)} ran {p.window_s:.1f} s, under the rules' {p.min_duration_s:g} s" for p in points
                     if not p.duration_met]
        problems += [f"{p.failed} requests failed at {_where(p)}" for p in points if p.failed]
        problems += offline_ordering(points, c_max)
        gates = [p for p in points if p.accuracy is not None and not p.accuracy.passed]
        problems += [f"the accuracy gate failed at {_where(p)}: {'; '.join(p.accuracy.shortfalls)}" for p in gates
                     if p.accuracy is not None]
        return ParetoRecord(
            benchmark=self.config.benchmark, system=self.config.system,
            client="inference-endpoint" if self.client else "cmx",
            label=OFFICIAL_CLIENT_LABEL if self.client else LABEL, short=self.config.short, c_min=regions.c_min,
            c_max=c_max, c_max_source=source, regions=regions.named(), points=tuple(points), probes=tuple(probes),
            provisioned_kw=power.kw if power else None, power_file=power.path if power else None,
            power_method=power.method if power else None, problems=tuple(problems),
            extra={"seed": SEED, "rows": len(self.perf), "accuracy_rows": len(self.acc),
                   "max_tokens": self.config.max_tokens, "endpoint": self.config.endpoint.url
                   if self.config.endpoint else None,
                   "window": "cmx's: from the first completion to the last issue (not the rules' steady-state "
                             "detector)"})

    # --- C_max -----------------------------------------------------------------------------------------
    def probe(self) -> list[Probe]:
        out: list[Probe] = []
        c = PROBE_START
        seconds = SHORT_PROBE_S if self.config.short else PROBE_S
        while c <= PROBE_CAP:
            self.say(f"probe at concurrency {c}")
            began = time.monotonic()
            answers = self.fixed(PointRun(c, seconds, len(self.perf), seed=SEED, whole_passes=False), self.build,
                                 f"the probe at concurrency {c}")
            f = figures([a.record for a in answers])
            out.append(Probe(concurrency=c, system_tps=f.system_tps or 0.0, tpot_p90_ms=f.tpot_p90_ms,
                             seconds=time.monotonic() - began))
            self.log.info("probe at concurrency %d: %.1f tokens/s", c, f.system_tps or 0.0)
            if len(out) >= 3 and not _gained(out[-2], out[-1]):
                break
            c *= 2
        return out

    # --- points ------------------------------------------------------------------------------------------
    def point(self, planned: PlannedPoint, power: ProvisionedPower | None) -> Point:
        name = f"r{planned.concurrency}"
        where = self.folder / name
        seconds = self.seconds(planned.min_duration_s)
        self.say(f"concurrency {planned.concurrency} ({planned.region}): {seconds:g} s")
        config_path = write_client_config(self._client_point(planned.concurrency, planned.min_duration_s, where))
        if self.client:
            from cmx.mlperf.pareto.official import run_client

            f = run_client(self.client, config_path, where / "client_report")
        else:
            answers = self.fixed(PointRun(planned.concurrency, seconds, len(self.perf), seed=SEED,
                                          whole_passes=not self.config.short), self.build,
                                 f"the point at concurrency {planned.concurrency}")
            _write_requests(where / "requests.jsonl", answers)
            f = figures([a.record for a in answers])
        gate = self.accuracy(planned.concurrency, where) if planned.accuracy else None
        return _point(planned.concurrency, planned.region, planned.role, name, f, planned.min_duration_s, power, gate)

    def offline(self, power: ProvisionedPower | None) -> Point:
        where = self.folder / OFFLINE_DIR
        seconds = self.seconds(OTHER_SECONDS)
        self.say(f"Offline: whole passes of {len(self.perf)} samples for {seconds:g} s")
        write_client_config(self._client_point(None, int(OTHER_SECONDS), where))
        answers = run_offline(self.backend, len(self.perf), seconds, self.build)
        require_answers(answers, "the Offline point", self.redactor)
        _write_requests(where / "requests.jsonl", answers)
        f = figures([a.record for a in answers], streamed=False)
        gate = self.accuracy(None, where)
        return _point(len(self.perf), OFFLINE, OFFLINE, OFFLINE_DIR, f, OTHER_SECONDS, power, gate)

    def _client_point(self, concurrency: int | None, min_s: float, where: Path) -> ClientPoint:
        e = self.config.endpoint
        assert e is not None, "serving() gives an endpoint"
        return ClientPoint(concurrency=concurrency, min_duration_ms=int(min_s * 1000), url=e.url,
                           model=e.model or str(self.config.model),
                           max_new_tokens=self.config.max_tokens, prompts=self._prompts(), folder=where)

    def _prompts(self) -> Path:
        path = self.folder / "prompts.jsonl"
        if not path.is_file():
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(self.config.tokenizer))
            write_prompts(path, len(self.perf), self.source.prompt_ids,
                          lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
        return path

    # --- the accuracy gate -------------------------------------------------------------------------------
    def accuracy(self, concurrency: int | None, where: Path) -> AccuracyGate:
        from cmx.mlperf.loadgen.sut import token_answer
        from cmx.mlperf.scoring.accuracy_txt import meets_targets

        rows = len(self.acc)
        self.say(f"accuracy at {'Offline' if concurrency is None else f'concurrency {concurrency}'}: {rows} rows")
        began = time.monotonic()
        if concurrency is None:
            answers = run_offline(self.backend, rows, 0.0, self.build_acc)
            require_answers(answers, "the accuracy pass at the Offline point", self.redactor)
        else:
            answers = self.fixed(PointRun(concurrency, 0.0, rows, accuracy=True), self.build_acc,
                                 f"the accuracy pass at concurrency {concurrency}")
        encode = self.plugin.response_encoder(self.config.model) or token_answer
        log = where / "accuracy" / "mlperf_log_accuracy.json"
        log.parent.mkdir(parents=True, exist_ok=True)
        entries = [{"seq_id": n, "qsl_idx": a.record.index, "data": encode(a.result).tobytes().hex().upper(),
                    "token_count": a.result.n_tokens} for n, a in enumerate(answers) if a.result is not None]
        log.write_text(json.dumps(entries), encoding="utf-8")
        values = self.plugin.score(log, self.acc, self.config.tokenizer)
        shortfalls = list(meets_targets(values, self.rules.accuracy))
        if len(entries) < rows:
            shortfalls.insert(0, f"{rows - len(entries)} of {rows} accuracy samples failed")
        numbers = {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}
        (where / "accuracy" / "accuracy.json").write_text(json.dumps({"metrics": numbers, "shortfalls": shortfalls},
                                                                     indent=2), encoding="utf-8")
        return AccuracyGate(metrics=numbers, shortfalls=tuple(shortfalls), samples=len(entries),
                            seconds=time.monotonic() - began)


def knee(probes: Sequence[Probe]) -> int:
    """C_max from the probes: the last concurrency whose doubling still gained 10 % (at least 64, above 32)."""
    best = probes[0].concurrency if probes else PROBE_START * 2
    for before, after in itertools.pairwise(probes):
        if not _gained(before, after):
            break
        best = after.concurrency
    return max(best, PROBE_START * 2)


def offline_ordering(points: Sequence[Point], c_max: int) -> list[str]:
    """The rules' check of a dedicated Offline run: at least 0.98 of the C_max point's system tokens/s."""
    top = next((p for p in points if p.concurrency == c_max and not p.offline), None)
    off = next((p for p in points if p.offline), None)
    if top is None or off is None or top.system_tps is None or off.system_tps is None:
        return []
    if off.system_tps >= OFFLINE_ORDERING * top.system_tps:
        return []
    return [f"the Offline point's {off.system_tps:.1f} tokens/s is under {OFFLINE_ORDERING:g} x the C_max point's "
            f"{top.system_tps:.1f}"]


def _where(p: Point) -> str:
    return "the Offline point" if p.offline else f"concurrency {p.concurrency}"


def _gained(before: Probe, after: Probe) -> bool:
    """A doubling gained: more tokens/s, by 10 % at least (0 against 0 is no gain)."""
    return after.system_tps > 0 and after.system_tps >= before.system_tps * KNEE_GAIN


def require_answers(answers: Sequence[Answer], what: str, redactor: Redactor | None = None) -> None:
    """ParetoError when no request of `what` got an answer with tokens: every one failed (named by the first
    failure, the server's HTTP status and message, truncated, through `redactor`: a server may echo the request's
    Authorization header in its error), or the server answered with nothing."""
    ok = [a for a in answers if a.record.error is None]
    if any(a.record.output_tokens > 0 for a in ok):
        return
    failed = [a.record.error for a in answers if a.record.error is not None]
    if failed:
        first = " ".join(failed[0].splitlines()[0].split())
        first = redactor.redact(first) if redactor is not None else first
        first = first if len(first) <= ERROR_CHARS else first[:ERROR_CHARS] + "..."
        raise ParetoError(f"{what}: {len(failed)} of {len(answers)} requests failed and none was answered; the "
                          f"first: {first}",
                          hint="the curve stops at the first run the server cannot answer: see the server's log")
    raise ParetoError(f"{what}: the server answered {len(answers)} requests with no tokens" if answers else
                      f"{what} sent no request", hint="the curve stops at the first run the server cannot answer: "
                                                      "see the server's log")


def _point(concurrency: int, region: str, role: str, folder: str, f: PointFigures, min_s: float,
           power: ProvisionedPower | None,
           gate: AccuracyGate | None) -> Point:
    return Point(concurrency=concurrency, region=region, role=role, folder=folder, system_tps=f.system_tps,
                 tps_per_user=f.tps_per_user if role != OFFLINE else None,
                 ttft_p90_ms=f.ttft_p90_ms, tpot_p90_ms=f.tpot_p90_ms,
                 system_tps_per_kw=f.system_tps / power.kw if power and f.system_tps is not None else None,
                 issued=f.issued, completed=f.completed, failed=f.failed, output_tokens=f.output_tokens,
                 window_s=f.window_s, duration_s=f.duration_s, min_duration_s=min_s, whole_run_tps=f.whole_run_tps,
                 accuracy=gate)


def _write_requests(path: Path, answers: Sequence[Answer]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for a in answers:
            out.write(json.dumps(asdict(a.record)) + "\n")


__all__ = ["ParetoError", "ParetoRequest", "ParetoTarget", "knee", "pareto_step", "pareto_target", "require_answers"]
