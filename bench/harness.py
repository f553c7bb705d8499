#!/usr/bin/env python3
"""What cmx's LoadGen harness costs against vLLM alone, on the tiny model and vLLM's CPU build.

    .venv/bin/python bench/harness.py                  # 256 prompts, 32 tokens each, 3 runs
    .venv/bin/python bench/harness.py --runs 5 --prompts 512 --max-tokens 64
    .venv/bin/python bench/harness.py --skip-server    # Offline figures only
    .venv/bin/python bench/harness.py --json           # the figures (and every sample) as JSON
    .venv/bin/python bench/harness.py --only-overhead  # (d) alone: the streaming path's cost per token

In one process, on one engine built once with cmx's cpu profile (`VllmBackend`, Offline), every
path serves the same prompts (the first --prompts rows of a tiny OpenOrca made here) and
generates exactly --max-tokens tokens per prompt (min_tokens = max_tokens, checked):

  (a) direct:    one `LLM.generate` over all prompts, in dataset order (what a user would write);
  (b) loadgen:   LoadGen Offline (real mlperf_loadgen, TestSettings set in code, performance mode,
                 min_query_count = the number of prompts, each issued once) through cmx's
                 OfflineSUT and the backend; tokens/s = tokens generated / LoadGen's measured
                 duration (its "Tokens per second");
  (c) reference: the MLCommons reference SUT's way, fixed chunks of 16 prompts, one
                 `generate` call after the other.

The three alternate within each of --runs repeats, in a rotated order, so that drift on the
machine affects all equally; the medians are printed with the ratios b/a (goal >= 0.99, design
budget >= 0.97) and b/c (goal >= 2).

Then Server: the Offline engine is stopped and a streaming one (`AsyncLLM`, the same profile)
built (one after the other: two engines spinning on the same CPUs would disturb each other), and
a short bisection over target QPS, capped at the Offline samples/s, finds the highest that LoadGen judges VALID under
the TTFT/TPOT limits (by default llama2-70b's real Server limits, 2000 ms / 200 ms, unscaled)
with cmx's ServerSUT. Each probe is one short LoadGen run of --server-queries queries (LoadGen's
early stopping needs at least 459).

First, (d): the streaming path's own cost per output token, with no model at all: real LoadGen
Server, cmx's ServerSUT and the vLLM backend's event loop, the AsyncLLM replaced by a source that
yields each token at once (one delta per step, as vLLM's DELTA output does), --stream-samples
samples of --stream-tokens tokens (2,000 by default: reasoning-length outputs) all issued at once.
The wall time per token is what the harness's one Python thread spends on each, and its inverse
the ceiling on tokens/s one harness process can carry (`--only-overhead` runs just this).

A benchmark, not a test: it never fails on a timing. It exits non-zero only when cmx fails or
the set-up is wrong (a path that did not generate the tokens it was asked for).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # vLLM logs to stdout; before its import (in start())

GOAL_B_OVER_A = 0.99
BUDGET_B_OVER_A = 0.97
GOAL_B_OVER_C = 2.0
REFERENCE_CHUNK = 16  # the MLCommons reference SUT's batch size
MAX_MODEL_LEN = 2048
TTFT_LIMIT_MS = 2000.0  # llama2-70b Server
TPOT_LIMIT_MS = 200.0
EARLY_STOPPING_MIN_QUERIES = 459


def say(text: str = "", *, quiet: bool = False) -> None:
    if not quiet:
        print(text, flush=True)


# --------------------------------------------------------------------------------------------
# set-up: the tiny model and dataset, the backend
# --------------------------------------------------------------------------------------------

def make_inputs(root: Path, prompts: int) -> tuple[Path, Any]:
    from cmx.mlperf.benchmarks.llama2_70b.dataset import load_openorca
    from cmx.mlperf.benchmarks.llama2_70b.tiny import (
        make_tiny_llama,
        make_tiny_openorca,
    )

    model = make_tiny_llama(root / "model")
    pickle = make_tiny_openorca(root / "openorca.pkl", model.path, rows=prompts)
    return model.path, load_openorca(pickle.path)


def make_backend(model: Path, streaming: bool, max_tokens: int, log: logging.Logger) -> Any:
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.vllm import VllmBackend, VllmBackendConfig

    config = VllmBackendConfig(model=model, options=EngineOptions(device="cpu"), streaming=streaming,
                               max_model_len=MAX_MODEL_LEN, output_tokens_estimate=max_tokens)
    return VllmBackend(config, log)


def fixed_length_sut(base: type) -> type:
    """`base` (OfflineSUT or ServerSUT) asking for exactly max_tokens per sample (min_tokens =
    max_tokens), and recording the tokens it returned and the samples LoadGen issued."""
    from cmx.mlperf.backends.base import GenRequest, GenResult

    class FixedLength(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tokens = 0
            self.lengths: set[int] = set()
            self.indices: list[int] = []

        def request(self, query_id: int, index: int) -> GenRequest:
            self.indices.append(index)
            return GenRequest(id=query_id, prompt_ids=self.qsl.prompt(index), max_tokens=self.max_tokens,
                              min_tokens=self.max_tokens)

        def _complete(self, result: GenResult) -> None:
            self.tokens += result.n_tokens
            self.lengths.add(result.n_tokens)
            super()._complete(result)

    return FixedLength


def log_settings(lg: Any, out: Path) -> Any:
    log = lg.LogSettings()
    log.log_output.outdir = str(out)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    return log


def run_loadgen(lg: Any, sut_class: type, backend: Any, dataset: Any, settings: Any, max_tokens: int,
                out: Path, log: logging.Logger) -> tuple[Any, Any, float]:
    """One LoadGen test; (the SUT, the parsed LoadGen run, wall seconds of StartTest)."""
    from cmx.mlperf.loadgen.log import read_loadgen_run
    from cmx.mlperf.loadgen.progress import PROGRESS_JSON, ProgressWriter, RunShape, SampleClock
    from cmx.mlperf.loadgen.sut import QSL, OfflineSUT

    out.mkdir(parents=True, exist_ok=True)
    qsl = QSL(dataset, len(dataset), log)
    clock = SampleClock()
    sut = sut_class(lg, backend, qsl, max_tokens, log, clock)
    # live progress on, as the harness runs it: the SUT's sample clock and a writer thread, once a second
    scenario = "Offline" if issubclass(sut_class, OfflineSUT) else "Server"
    progress = ProgressWriter(out / PROGRESS_JSON, clock, RunShape(scenario, "performance")).start()
    sut.start()
    qsl.construct(lg)
    sut.construct()
    try:
        began = time.perf_counter()
        lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings, log_settings(lg, out), "")
        wall = time.perf_counter() - began
        if not sut.wait_idle(600):
            raise SystemExit("bench: samples still outstanding 600 s after LoadGen returned")
    finally:
        progress.stop()
        sut.stop()
        sut.destroy()
        qsl.destroy(lg)
    if sut.errors:
        raise SystemExit(f"bench: {len(sut.errors)} samples failed in the backend; the first: {sut.errors[0].message}")
    return sut, read_loadgen_run(out), wall


# --------------------------------------------------------------------------------------------
# Offline: (a) direct, (b) LoadGen through cmx, (c) chunks of 16
# --------------------------------------------------------------------------------------------

def check_lengths(name: str, lengths: list[int], max_tokens: int, count: int) -> int:
    if len(lengths) != count or set(lengths) != {max_tokens}:
        raise SystemExit(f"bench: set-up is wrong: path {name} returned {len(lengths)} outputs of lengths "
                         f"{sorted(set(lengths))}, not {count} of {max_tokens}")
    return sum(lengths)


def offline_runs(args: argparse.Namespace, backend: Any, dataset: Any, work: Path, log: logging.Logger) -> dict:
    import mlperf_loadgen as lg
    from vllm import SamplingParams

    from cmx.mlperf.loadgen.sut import OfflineSUT

    llm = backend._engines.llms[0]  # the backend's own engine: (a) and (c) use it as vLLM's user would
    n, m = len(dataset), args.max_tokens
    prompts = [{"prompt_token_ids": dataset.prompt_ids(i)} for i in range(n)]
    params = SamplingParams(temperature=0.0, max_tokens=m, min_tokens=m, detokenize=False)
    sut_class = fixed_length_sut(OfflineSUT)

    def direct() -> dict:
        began = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - began
        tokens = check_lengths("a", [len(o.outputs[0].token_ids) for o in outs], m, n)
        return {"seconds": seconds, "tokens": tokens, "tokens_per_second": tokens / seconds}

    def reference() -> dict:
        lengths: list[int] = []
        began = time.perf_counter()
        for start in range(0, n, REFERENCE_CHUNK):
            outs = llm.generate(prompts[start:start + REFERENCE_CHUNK], params, use_tqdm=False)
            lengths += [len(o.outputs[0].token_ids) for o in outs]
        seconds = time.perf_counter() - began
        tokens = check_lengths("c", lengths, m, n)
        return {"seconds": seconds, "tokens": tokens, "tokens_per_second": tokens / seconds}

    def loadgen(rep: int | str) -> dict:
        settings = lg.TestSettings()
        settings.scenario = lg.TestScenario.Offline
        settings.mode = lg.TestMode.PerformanceOnly
        settings.offline_expected_qps = 1.0  # min_query_count, not the duration, sets the samples
        settings.min_query_count = n
        settings.max_query_count = n
        settings.min_duration_ms = args.min_duration_ms
        settings.performance_sample_count_override = n
        settings.sample_concatenate_permutation = True  # each prompt exactly once
        settings.use_token_latencies = True
        sut, run, wall = run_loadgen(lg, sut_class, backend, dataset, settings, m, work / f"offline-{rep}", log)
        if sut.lengths != {m} or sut.completed != n:
            raise SystemExit(f"bench: set-up is wrong: path b returned {sut.completed} outputs of lengths "
                             f"{sorted(sut.lengths)}, not {n} of {m}")
        if sorted(sut.indices) != list(range(n)):
            raise SystemExit(f"bench: set-up is wrong: LoadGen issued {len(sut.indices)} samples, "
                             f"{len(set(sut.indices))} distinct, not each of the {n} prompts once")
        r = run.results
        duration = n / r.samples_per_second if r.samples_per_second else None
        tps = r.tokens_per_second or (sut.tokens / duration if duration else None)
        if tps is None:
            raise SystemExit("bench: LoadGen's log has no samples or tokens per second")
        return {"seconds": sut.tokens / tps, "tokens": sut.tokens, "tokens_per_second": tps,
                "loadgen_duration_s": duration, "start_test_wall_s": wall,
                "tokens_per_second_from_duration": sut.tokens / duration if duration else None,
                "validity": r.validity, "samples_per_second": r.samples_per_second}

    paths: dict[str, Callable[..., dict]] = {"a": direct, "b": loadgen, "c": reference}
    for key in ("a", "b", "c"):  # one untimed warm-up of each path: the first full batch allocates
        paths[key]("warmup") if key == "b" else paths[key]()
    samples: dict[str, list[dict]] = {"a": [], "b": [], "c": []}
    order = ["a", "b", "c"]
    for rep in range(args.runs):
        turn = order[rep % 3:] + order[:rep % 3]  # rotated: a b c, b c a, c a b, ...
        for key in turn:
            sample = paths[key](rep) if key == "b" else paths[key]()
            sample["repeat"], sample["position"] = rep, turn.index(key)
            samples[key].append(sample)
            say(f"  run {rep + 1}/{args.runs} {key}: {sample['tokens']} tokens in {sample['seconds']:.3f} s = "
                f"{sample['tokens_per_second']:,.0f} tokens/s", quiet=args.json)
    medians = {k: statistics.median(s["tokens_per_second"] for s in v) for k, v in samples.items()}
    return {"samples": samples, "median_tokens_per_second": medians,
            "b_over_a": medians["b"] / medians["a"], "b_over_c": medians["b"] / medians["c"]}


# --------------------------------------------------------------------------------------------
# Server: the highest valid target QPS
# --------------------------------------------------------------------------------------------

def server_probe(args: argparse.Namespace, backend: Any, dataset: Any, qps: float, work: Path,
                 log: logging.Logger) -> dict:
    import mlperf_loadgen as lg

    from cmx.mlperf.loadgen.sut import ServerSUT

    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Server
    settings.mode = lg.TestMode.PerformanceOnly
    settings.server_target_qps = qps
    settings.min_query_count = args.server_queries
    settings.max_query_count = args.server_queries
    settings.min_duration_ms = args.min_duration_ms
    settings.performance_sample_count_override = len(dataset)
    settings.sample_concatenate_permutation = True
    settings.use_token_latencies = True
    settings.ttft_latency = int(args.ttft_ms * 1e6)
    settings.tpot_latency = int(args.tpot_ms * 1e6)
    settings.server_target_latency_percentile = 0.99
    sut, run, wall = run_loadgen(lg, fixed_length_sut(ServerSUT), backend, dataset, settings, args.max_tokens,
                                 work / f"server-{qps:.3f}", log)
    if sut.lengths != {args.max_tokens}:
        raise SystemExit(f"bench: set-up is wrong: Server outputs of lengths {sorted(sut.lengths)}")
    r = run.results
    return {"qps": qps, "valid": r.validity == "VALID", "validity": r.validity,
            "ttft_p99_ms": r.ttft.p99_ms if r.ttft else None, "tpot_p99_ms": r.tpot.p99_ms if r.tpot else None,
            "perf_constraints_met": r.perf_constraints_met, "early_stopping_met": r.early_stopping_met,
            "min_duration_met": r.min_duration_met, "min_queries_met": r.min_queries_met,
            "completed_samples_per_second": r.samples_per_second, "tokens_per_second": r.tokens_per_second,
            "queries": sut.completed, "seconds": wall}


def server_search(args: argparse.Namespace, backend: Any, dataset: Any, offline_sps: float, work: Path,
                  log: logging.Logger) -> dict:
    """Bisection between 0 and the Offline samples/s (the most the engine can sustain, so the
    ceiling of a Server rate that a full-length run could hold; a short probe above it can still
    be VALID, because its queue has no time to grow): the first probe at --server-start of the
    ceiling, then --server-probes - 1 halvings of the interval."""
    probes: list[dict] = []

    def probe(qps: float) -> bool:
        p = server_probe(args, backend, dataset, round(qps, 3), work, log)
        probes.append(p)
        ttft = "-" if p["ttft_p99_ms"] is None else f"{p['ttft_p99_ms']:.1f}"
        tpot = "-" if p["tpot_p99_ms"] is None else f"{p['tpot_p99_ms']:.2f}"
        say(f"  probe qps {p['qps']:8.3f}: {p['validity'] or '?':7}  TTFT p99 {ttft:>8} ms  TPOT p99 {tpot:>7} ms"
            f"  (constraints {'met' if p['perf_constraints_met'] else 'NOT met'}, early stopping "
            f"{'met' if p['early_stopping_met'] else 'NOT met'}, {p['queries']} queries in {p['seconds']:.1f} s, "
            f"completed {p['completed_samples_per_second'] or 0:.1f}/s)",
            quiet=args.json)
        return p["valid"]

    lo, hi = 0.0, offline_sps
    qps = args.server_start * offline_sps
    for _ in range(args.server_probes):
        if probe(qps):
            lo = qps
        else:
            hi = qps
        qps = (lo + hi) / 2
    best = max((p for p in probes if p["valid"]), key=lambda p: p["qps"], default=None)
    return {"probes": probes, "best_valid_qps": best["qps"] if best else None,
            "lowest_invalid_qps": min((p["qps"] for p in probes if not p["valid"]), default=None),
            "offline_samples_per_second": offline_sps}


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# (d) the streaming path's own cost per output token, the engine taken out
# --------------------------------------------------------------------------------------------

def streaming_overhead(samples: int, tokens: int, work: Path, log: logging.Logger) -> dict:
    """Real LoadGen Server, cmx's ServerSUT and the vLLM backend's streaming loop (`_StreamingEngines`: one
    `async for` and one list extend per delta), with the AsyncLLM replaced by a source that yields every token
    at once, one delta per engine step as vLLM's DELTA output kind does. What is left is what the harness
    spends per token: the ceiling on tokens/s its one Python thread can carry, whatever the engine."""
    import asyncio
    from types import SimpleNamespace

    import mlperf_loadgen as lg

    from cmx.mlperf.backends import vllm as vllm_backend
    from cmx.mlperf.backends.profiles import EngineSpec
    from cmx.mlperf.loadgen.sut import ServerSUT

    class InstantEngine:
        async def generate(self, prompt: Any, params: dict, request_id: str) -> Any:
            n = params["max_tokens"]
            for i in range(n):
                yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7 + i % 97],
                                                               finish_reason="length" if i == n - 1 else None)])
                await asyncio.sleep(0)  # hand the loop back, as the wait for each engine step does

        def shutdown(self) -> None:
            pass

    engines = vllm_backend._StreamingEngines(log)
    engines._args_class = lambda **kw: kw
    engines._async_llm = SimpleNamespace(from_engine_args=lambda kw: InstantEngine())
    engines.params = vllm_backend._ParamsCache(lambda **kw: kw)
    engines.build([(EngineSpec(devices=(), engine_kwargs={}, env={}), {})])

    class Backend:  # the Backend protocol's submit, over the streaming loop
        def submit(self, request: Any, sink: Any) -> None:
            engines.submit(request, sink, tokens)

    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Server
    settings.mode = lg.TestMode.PerformanceOnly
    settings.use_token_latencies = True
    settings.server_target_qps = 100_000.0  # every query at once: the harness, not the schedule, sets the pace
    settings.min_duration_ms = 0
    settings.min_query_count = samples
    settings.max_query_count = samples
    settings.ttft_latency = 60_000_000_000
    settings.tpot_latency = 60_000_000_000
    class Prompts:  # the QSL's source: the prompt does not matter to an instant engine
        def __len__(self) -> int:
            return samples

        def prompt_ids(self, i: int) -> list[int]:
            return [1, 2, 3]

    try:
        sut, run, wall = run_loadgen(lg, fixed_length_sut(ServerSUT), Backend(), Prompts(), settings, tokens,
                                     work / "stream-overhead", log)
    finally:
        engines.shutdown()
    produced = sut.tokens
    if sut.lengths != {tokens} or produced != tokens * len(sut.indices):
        raise SystemExit(f"bench: set-up is wrong: path d returned lengths {sorted(sut.lengths)}, not {tokens}")
    per_token_us = wall / produced * 1e6
    return {"samples": len(sut.indices), "tokens_per_sample": tokens, "tokens": produced, "start_test_wall_s": wall,
            "loadgen_tokens_per_second": run.results.tokens_per_second, "harness_ceiling_tokens_per_second":
            produced / wall, "harness_us_per_token": per_token_us}


def verdict(value: float, goal: float, budget: float | None = None) -> str:
    if value >= goal:
        return "meets goal"
    if budget is not None and value >= budget:
        return "within budget, under goal"
    return "OVER budget" if budget is not None else "UNDER goal"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=256, help="prompts (tiny OpenOrca rows), default 256")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens generated per prompt (= min_tokens)")
    p.add_argument("--runs", type=int, default=3, help="repeats of a/b/c (medians reported), default 3")
    p.add_argument("--skip-server", action="store_true", help="Offline figures only")
    p.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    p.add_argument("--min-duration-ms", type=int, default=1000, help="LoadGen's min_duration (short)")
    p.add_argument("--server-queries", type=int, default=500, help="queries per Server probe (>= 459)")
    p.add_argument("--server-probes", type=int, default=5, help="Server probes in the bisection")
    p.add_argument("--server-start", type=float, default=0.5,
                   help="the first Server probe, as a fraction of the Offline samples/s")
    p.add_argument("--ttft-ms", type=float, default=TTFT_LIMIT_MS)
    p.add_argument("--tpot-ms", type=float, default=TPOT_LIMIT_MS)
    p.add_argument("--keep", action="store_true", help="keep the temp folder (model, dataset, LoadGen logs)")
    p.add_argument("--stream-samples", type=int, default=200, help="(d): Server samples through the instant engine")
    p.add_argument("--stream-tokens", type=int, default=2000,
                   help="(d): output tokens per sample (reasoning-length: gpt-oss-120b's run up to ~11k)")
    p.add_argument("--only-overhead", action="store_true", help="only (d): no model, no vLLM engine")
    a = p.parse_args(argv)
    if a.prompts < 1 or a.max_tokens < 2 or a.runs < 1 or a.server_probes < 1:
        p.error("--prompts, --runs and --server-probes must be >= 1, --max-tokens >= 2")
    if a.server_queries < EARLY_STOPPING_MIN_QUERIES:
        print(f"bench: note: --server-queries {a.server_queries} < {EARLY_STOPPING_MIN_QUERIES}: LoadGen's early "
              "stopping cannot pass, so no probe can be VALID", file=sys.stderr)
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    log = logging.getLogger("bench.harness")
    q = args.json
    work = Path(tempfile.mkdtemp(prefix="cmx-bench-harness-"))
    say(f"cmx LoadGen harness vs vLLM: tiny Llama (random weights), vLLM CPU build, cpu profile; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}", quiet=q)
    began = time.perf_counter()
    model, dataset = make_inputs(work, args.prompts)
    lengths = dataset.input_lengths
    say(f"set-up: {len(dataset)} prompts of {min(lengths)}-{max(lengths)} tokens (mean "
        f"{statistics.mean(lengths):.0f}), {args.max_tokens} output tokens each (min_tokens = max_tokens), "
        f"made in {time.perf_counter() - began:.1f} s; work folder {work}", quiet=q)

    load_before = os.getloadavg()[0]
    say(f"\n(d) the streaming path's own cost per token: real LoadGen Server, cmx ServerSUT and the backend's "
        f"event loop, the engine replaced by an instant token source; {args.stream_samples} samples x "
        f"{args.stream_tokens} tokens, all issued at once:", quiet=q)
    overhead = streaming_overhead(args.stream_samples, args.stream_tokens, work, log)
    say(f"    {overhead['tokens']:,} tokens in {overhead['start_test_wall_s']:.2f} s: "
        f"{overhead['harness_us_per_token']:.2f} us per token on one Python thread, a ceiling of "
        f"{overhead['harness_ceiling_tokens_per_second']:,.0f} tokens/s per harness process whatever the engine",
        quiet=q)
    if args.only_overhead:
        if args.json:
            print(json.dumps({"streaming_overhead": overhead, "cpus": os.cpu_count()}, indent=2))
        return 0
    backend = make_backend(model, False, args.max_tokens, log)
    info = backend.start()
    say(f"Offline engine (vllm.LLM, built once): started in {info.start_seconds:.1f} s, warm-up "
        f"{info.warmup_requests} requests in {info.warmup_seconds:.1f} s; engine kwargs "
        f"{ {k: v for k, v in info.engines[0]['engine_kwargs'].items() if k != 'model'} }", quiet=q)
    try:
        say(f"\nOffline, one untimed warm-up of each path, then {args.runs} runs of a (direct LLM.generate), "
            "b (LoadGen Offline via cmx), "
            f"c (chunks of {REFERENCE_CHUNK}), interleaved in rotated order:", quiet=q)
        offline = offline_runs(args, backend, dataset, work, log)
    finally:
        backend.stop()
    med = offline["median_tokens_per_second"]
    b_sps = statistics.median(s["samples_per_second"] for s in offline["samples"]["b"])
    say("", quiet=q)
    say(f"{'path':44} {'tokens/s (median)':>18} {'min':>9} {'max':>9}", quiet=q)
    names = {"a": "(a) direct LLM.generate, all prompts",
             "b": "(b) LoadGen Offline, cmx OfflineSUT+backend",
             "c": f"(c) reference: chunks of {REFERENCE_CHUNK}, sequential"}
    for key, name in names.items():
        values = [s["tokens_per_second"] for s in offline["samples"][key]]
        say(f"{name:44} {med[key]:>18,.0f} {min(values):>9,.0f} {max(values):>9,.0f}", quiet=q)
    say(f"b/a = {offline['b_over_a']:.3f}  (goal >= {GOAL_B_OVER_A}, budget >= {BUDGET_B_OVER_A}): "
        f"{verdict(offline['b_over_a'], GOAL_B_OVER_A, BUDGET_B_OVER_A)}", quiet=q)
    say(f"b/c = {offline['b_over_c']:.3f}  (goal >= {GOAL_B_OVER_C}): "
        f"{verdict(offline['b_over_c'], GOAL_B_OVER_C)}", quiet=q)
    wall = statistics.median(s["start_test_wall_s"] for s in offline["samples"]["b"])
    dur = statistics.median(s["loadgen_duration_s"] for s in offline["samples"]["b"])
    say(f"(b) LoadGen's measured duration {dur:.3f} s (median), StartTest wall {wall:.3f} s (its set-up and "
        f"log writing included); LoadGen's verdict {offline['samples']['b'][0]['validity']} "
        "(Offline validity is not the point here: the run is short by design)", quiet=q)

    server = None
    if not args.skip_server:
        say(f"\nServer: the Offline engine is stopped and a streaming one (AsyncLLM, same profile) built, one "
            f"after the other (two engines spinning on the same {os.cpu_count()} CPUs would disturb each other);"
            f" limits TTFT p99 {args.ttft_ms:g} ms, TPOT p99 {args.tpot_ms:g} ms"
            + (" (llama2-70b's real Server limits, unscaled)"
               if (args.ttft_ms, args.tpot_ms) == (TTFT_LIMIT_MS, TPOT_LIMIT_MS) else " (SCALED)")
            + f"; {args.server_queries} queries per probe", quiet=q)
        backend = make_backend(model, True, args.max_tokens, log)
        info = backend.start()
        say(f"streaming engine: started in {info.start_seconds:.1f} s, warm-up {info.warmup_seconds:.1f} s",
            quiet=q)
        try:
            server = server_search(args, backend, dataset, b_sps, work, log)
        finally:
            backend.stop()
        best = server["best_valid_qps"]
        say(f"highest VALID target QPS found: {best if best is not None else 'none'}"
            + (f" (lowest INVALID probed: {server['lowest_invalid_qps']})" if server["lowest_invalid_qps"] else "")
            + f"; Offline throughput {b_sps:.2f} samples/s"
            + (f", so Server/Offline = {best / b_sps:.2f}" if best else "")
            + (" (no probe INVALID: the search is capped at the Offline throughput)"
               if server["lowest_invalid_qps"] is None else ""), quiet=q)
        say(f"note: each probe is {args.server_queries} queries (a few seconds); a compliant Server run lasts "
            "10 minutes, where a rate above the sustainable throughput grows the queue and fails, so these "
            "short probes can overstate the QPS a full run would hold", quiet=q)

    load_after = os.getloadavg()[0]
    busy = max(load_before, load_after) > 0.5 * (os.cpu_count() or 1)
    say(f"\nload average (1 min): {load_before:.2f} before, {load_after:.2f} after, {os.cpu_count()} CPUs"
        + (" -- BUSY MACHINE: other processes compete for the CPUs (or this run's own engine kept them busy "
           "before the first reading)" if busy else ""), quiet=q)
    if args.json:
        print(json.dumps({"prompts": len(dataset), "max_tokens": args.max_tokens, "runs": args.runs,
                          "offline": offline, "server": server, "streaming_overhead": overhead,
                          "load_before": load_before,
                          "load_after": load_after, "cpus": os.cpu_count()}, indent=2))
    if not args.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
