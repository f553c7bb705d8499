#!/usr/bin/env python3
"""How many requests and streamed tokens a second cmx's endpoint client drives, per client core, against a server that
answers at once, beside `vllm bench serve` against the same server in the same run.

    .venv/bin/python bench/endpoint_ceiling.py                      # 2,000 prompts of 128 tokens, 64 output tokens
    .venv/bin/python bench/endpoint_ceiling.py --prompts 4000 --max-tokens 128 --runs 3
    .venv/bin/python bench/endpoint_ceiling.py --json               # the figures as JSON on stdout, after the table
    .venv/bin/python bench/endpoint_ceiling.py --runs 3 --mlcommons /tmp/mlc-venv   # and MLCommons' client beside it

No model: `bench/instant_server.py` (raw asyncio, `--server-processes` processes on one port) answers every
completion with exactly --max-tokens tokens, streamed as one server-sent event per token with vLLM's `token_ids`,
or as one JSON body. So what is measured is the client: its HTTP, its parsing of every event, LoadGen and the SUT.

Paths, each on the same prompts (random token ids of --input-len; vLLM's own random dataset of the same length for
its client), every request answered with exactly --max-tokens tokens:

  vllm bench serve       `vllm.benchmarks.serve` (as `python -c` calling its main: the CPU build's `vllm` command does
                         not start), --request-rate inf, streaming, with a tiny model's tokenizer; its CPU is measured
                         around its `benchmark()` coroutine (the timed run, with its one test request and its metrics);
  Server, in-process     LoadGen Server (real mlperf_loadgen, performance mode) at --server-qps (far above what any
                         client reaches: all samples at once, as vLLM's rate inf) through cmx's ServerSUT and
                         EndpointBackend, streaming; workers=0, the HTTP on a thread of the LoadGen process;
  Server, K workers      the same with EndpointConfig.workers = K, for K in 1, 2 and the machine's cores;
  Offline, ...           LoadGen Offline through cmx's OfflineSUT, not streamed, max_concurrency in flight, the same
                         worker counts;
  ..., asyncio loop      the in-process paths again on asyncio's own event loop (EndpointConfig.event_loop), beside
                         the default (uvloop's on Linux): uvloop measured with and without;
  MLCommons, ...         with --mlcommons VENV: MLCommons' endpoint client (`inference-endpoint`, mlcommons/endpoints,
                         installed in VENV) on the same prompts (a JSON file of `input_tokens`, its openai_completions
                         API), `benchmark online --load-pattern concurrency` streamed at --mlcommons-concurrency, and
                         `benchmark offline` not streamed, --mlcommons-workers HTTP worker processes. Its CPU is every
                         process of its tree (main, HTTP workers, metrics aggregator, event logger, whatever else it
                         starts): utime + stime from /proc, polled every 20 ms so that a process that ends is counted
                         to its last poll, from its log's "Starting phase: performance" to "Aggregator finalized"
                         (the services' work on the run's events included, its report's building after not, as
                         cmx's LoadGen log parsing after StartTest is not); its wall time to "Closing publisher"
                         (the last answer drained). No tokenizer is given to it (none is to cmx either): it logs
                         that ISL, OSL and TPOT are unavailable and tokenizes nothing.

Client CPU is the LoadGen process's CPU time (`time.process_time()`: every thread, LoadGen's included) plus every
worker process's (psutil) over the test; "per client core" divides a figure by the client's CPU seconds per wall
second. Budgets, printed as PASS or OVER, never asserted:

  - the in-process Server path's streamed requests/s per client core at or above vllm bench serve's;
  - with --mlcommons: the in-process Server path's at or above MLCommons' online streamed path's (1.0x), and the
    in-process Offline path's at or above MLCommons' offline path's;
  - near-linear scaling with workers: with K workers, requests/s per client core at least 0.8 of one worker's (each
    worker adds a core's worth). The wall-clock speed-up is printed too; it can only be near K where K client cores
    and the server's are free.

A benchmark, not a test: exit status 0 on a timing miss; non-zero when cmx fails or the set-up is wrong (a path
that did not generate what it was asked for).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/endpoint.py's LoadGen helpers

HERE = Path(__file__).resolve().parent
BUDGET_SCALING = 0.8  # per-core efficiency with K workers against one worker's

# vllm bench serve, with its timed coroutine wrapped to write the process's CPU seconds over it to argv[1]
BENCH_SERVE = """
import json, sys, time
import vllm.benchmarks.serve as serve
from vllm.utils.argparse_utils import FlexibleArgumentParser
inner = serve.benchmark
async def timed(*args, **kwargs):
    began = time.process_time()
    result = await inner(*args, **kwargs)
    open(sys.argv[1], "w").write(json.dumps(time.process_time() - began))
    return result
serve.benchmark = timed
parser = FlexibleArgumentParser()
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[2:]))
"""


def say(text: str = "") -> None:
    print(text, file=sys.stderr if QUIET else sys.stdout, flush=True)


QUIET = False  # --json: the table goes to stderr


@dataclass(frozen=True)
class Figure:
    """One path's run: what it served and what the client spent."""

    path: str
    requests: int
    tokens: int
    wall_s: float
    client_cpu_s: float
    server_cpu_s: float

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.wall_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s

    @property
    def client_cores(self) -> float:
        return self.client_cpu_s / self.wall_s

    @property
    def requests_per_core(self) -> float:
        return self.requests / self.client_cpu_s

    @property
    def tokens_per_core(self) -> float:
        return self.tokens / self.client_cpu_s


class InstantServer:
    """bench/instant_server.py in a process group of its own, for a `with` block; its processes' CPU on demand."""

    def __init__(self, processes: int) -> None:
        from cmx.mlperf.backends.vllm_server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.processes = processes
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> InstantServer:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "instant_server.py"), "--port", str(self.port),
                                      "--processes", str(self.processes)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if not self.proc.stdout.readline().startswith("ready"):
            raise SystemExit("bench: set-up is wrong: the instant server did not start")
        return self

    def cpu_s(self) -> float:
        import psutil

        assert self.proc is not None
        return sum(sum(p.cpu_times()[:2]) for p in psutil.Process(self.proc.pid).children())

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(30)


def workers_cpu_s(pids: list[int]) -> float:
    import psutil

    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def bench_serve(server: InstantServer, tokenizer: Path, args: argparse.Namespace, work: Path) -> Figure:
    out, cpu_file = work / "vllm.json", work / "vllm-cpu.json"
    cmd = [sys.executable, "-c", BENCH_SERVE, str(cpu_file), "--backend", "vllm", "--base-url",
           server.url.removesuffix("/v1"), "--endpoint", "/v1/completions", "--model", "instant", "--tokenizer",
           str(tokenizer), "--dataset-name", "random", "--random-input-len", str(args.input_len),
           "--random-output-len", str(args.max_tokens), "--random-range-ratio", "0", "--num-prompts",
           str(args.prompts), "--seed", "0", "--ignore-eos", "--request-rate", "inf", "--disable-tqdm",
           "--save-result", "--result-dir", str(work), "--result-filename", out.name]
    server_before = server.cpu_s()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    if done.returncode != 0 or not out.exists() or not cpu_file.exists():
        raise SystemExit(f"bench: vllm bench serve failed ({done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    data = json.loads(out.read_text())
    if data["completed"] != args.prompts or data["total_output_tokens"] != args.prompts * args.max_tokens:
        raise SystemExit(f"bench: set-up is wrong: vllm bench serve completed {data['completed']} requests, "
                         f"{data['total_output_tokens']} output tokens")
    return Figure("vllm bench serve, rate inf (streaming)", data["completed"], data["total_output_tokens"],
                  data["duration"], json.loads(cpu_file.read_text()), server.cpu_s() - server_before)


class Meter:
    """The client's CPU seconds (this process's every thread, and the worker processes') and the wall seconds over
    LoadGen's StartTest: the test itself, not the set-up around it or the parsing of its logs after."""

    def __init__(self, lg: Any, worker_pids: list[int], server: InstantServer) -> None:
        self.lg, self.pids, self.server = lg, worker_pids, server
        self.cpu_s = self.wall_s = self.server_cpu_s = 0.0

    def __getattr__(self, name: str) -> Any:  # the rest of mlperf_loadgen, as it is
        return getattr(self.lg, name)

    def StartTestWithLogSettings(self, *args: Any) -> Any:  # LoadGen's own name, timed
        cpu, workers, server = time.process_time(), workers_cpu_s(self.pids), self.server.cpu_s()
        wall = time.perf_counter()
        try:
            return self.lg.StartTestWithLogSettings(*args)
        finally:
            self.wall_s = time.perf_counter() - wall
            self.cpu_s = time.process_time() - cpu + workers_cpu_s(self.pids) - workers
            self.server_cpu_s = self.server.cpu_s() - server


def loadgen_settings(lg: Any, scenario: str, n: int, args: argparse.Namespace) -> Any:
    """Performance mode, each of the `n` prompts once; Server at --server-qps with latency limits out of reach."""
    settings = lg.TestSettings()
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_query_count = settings.max_query_count = settings.performance_sample_count_override = n
    settings.min_duration_ms = 0
    settings.use_token_latencies = True
    if scenario == "Offline":
        settings.scenario = lg.TestScenario.Offline
        settings.offline_expected_qps = 1.0  # min_query_count, not the duration, sets the samples
        settings.sample_concatenate_permutation = True
    else:
        settings.scenario = lg.TestScenario.Server
        settings.server_target_qps = args.server_qps
        settings.ttft_latency = settings.server_target_latency_ns = 600_000_000_000
        settings.tpot_latency = 600_000_000_000
    return settings


def cmx_path(scenario: str, workers: int, server: InstantServer, prompts: Any, args: argparse.Namespace,
             work: Path, log: logging.Logger, event_loop: str = "auto") -> Figure:
    """LoadGen `scenario` through cmx's SUT and EndpointBackend with `workers` (0: in-process)."""
    import mlperf_loadgen
    from harness import fixed_length_sut, run_loadgen

    from cmx.mlperf.backends.endpoint import EndpointBackend
    from cmx.mlperf.backends.endpoint_client import EndpointConfig
    from cmx.mlperf.loadgen.sut import OfflineSUT, ServerSUT

    n, m = len(prompts), args.max_tokens
    config = EndpointConfig(url=server.url, workers=workers, max_concurrency=args.max_concurrency,
                            event_loop=event_loop)
    with EndpointBackend(config, log) as backend:
        lg = Meter(mlperf_loadgen, backend.worker_pids, server)
        sut_class = fixed_length_sut(OfflineSUT if scenario == "Offline" else ServerSUT)
        sut, _, _ = run_loadgen(lg, sut_class, backend, prompts, loadgen_settings(mlperf_loadgen, scenario, n, args),
                                m, work / f"{scenario}-{workers}-{time.monotonic_ns()}", log)
    if sut.lengths != {m} or sut.completed != n:
        raise SystemExit(f"bench: set-up is wrong: LoadGen {scenario} gave {sut.completed} outputs of lengths "
                         f"{sorted(sut.lengths)}, not {n} of {m}")
    where = "in-process" if workers == 0 else f"{workers} worker{'s' * (workers > 1)}"
    where += "" if event_loop == "auto" else f", {event_loop} loop"
    kind = "streaming" if scenario == "Server" else "not streamed"
    return Figure(f"{scenario}, {where} ({kind})", n, sut.tokens, lg.wall_s, lg.cpu_s, lg.server_cpu_s)


# --- MLCommons' client -----------------------------------------------------------------------------------------------

MLC_START, MLC_DRAINED, MLC_DONE = "Starting phase: performance", "Closing publisher", "Aggregator finalized"


class ProcessTree:
    """The CPU seconds (utime + stime, from /proc) of a process and every descendant it ever had, polled on a thread
    every `every_s`: a process that ends is counted to its last poll."""

    def __init__(self, root: int, every_s: float = 0.02) -> None:
        self.root, self.every_s = root, every_s
        self.ticks: dict[int, int] = {}  # pid -> its latest utime + stime, in clock ticks
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    @staticmethod
    def _stats() -> dict[int, tuple[int, int]]:
        """pid -> (parent pid, utime + stime) of every process now."""
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue  # it ended meanwhile
            found[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
        return found

    def sample(self) -> None:
        stats = self._stats()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in stats.items():
            children.setdefault(parent, []).append(pid)
        tree, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        with self._lock:
            for pid in tree:
                if pid in stats:
                    self.ticks[pid] = stats[pid][1]

    def cpu_s(self) -> float:
        self.sample()
        with self._lock:
            return sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK")

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def mlcommons_path(venv: Path, mode: str, server: InstantServer, prompts_file: Path, n: int,
                   args: argparse.Namespace, work: Path) -> Figure:
    """MLCommons' client, `benchmark online` (streamed, fixed concurrency) or `benchmark offline` (not streamed),
    measured over its performance phase (see the module docstring)."""
    command = [str(venv / "bin" / "inference-endpoint"), "benchmark", mode, "--model", "instant", "--endpoints",
               server.url.removesuffix("/v1"), "--dataset", f"perf:{prompts_file}", "--api-type",
               "openai_completions", "--workers", str(args.mlcommons_workers), "--max-output-tokens",
               str(args.max_tokens), "--num-samples", str(n), "--report-dir",
               str(work / f"mlcommons-{mode}-{time.monotonic_ns()}"), "--no-cpu-affinity"]
    if mode == "online":
        command += ["--streaming", "on", "--load-pattern", "concurrency", "--concurrency",
                    str(args.mlcommons_concurrency), "--duration", "0"]
    else:
        command += ["--streaming", "off"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    tree = ProcessTree(proc.pid)
    marks: dict[str, tuple[float, float, float]] = {}  # mark -> (wall, client CPU, server CPU) when its line came
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # text mode: a progress bar's \r ends a line too
        for mark in (MLC_START, MLC_DRAINED, MLC_DONE):
            if mark in line and mark not in marks:
                marks[mark] = (time.perf_counter(), tree.cpu_s(), server.cpu_s())
        tail = [*tail[-40:], line.rstrip()] if "it/s" not in line else tail
    proc.wait()
    tree.stop()
    text = "\n".join(tail)
    if proc.returncode != 0 or len(marks) < 3 or f"Results: {n}/{n} successful" not in text:
        raise SystemExit(f"bench: MLCommons' client ({mode}) failed or did not answer every request "
                         f"(exit {proc.returncode}, marks {sorted(marks)}):\n{text[-4000:]}")
    (w0, c0, s0), (w1, _, _), (_, c2, s2) = marks[MLC_START], marks[MLC_DRAINED], marks[MLC_DONE]
    kind = "streaming" if mode == "online" else "not streamed"
    where = f"{args.mlcommons_workers} worker{'s' * (args.mlcommons_workers > 1)}"
    label = f", concurrency {args.mlcommons_concurrency}" if mode == "online" else ""
    return Figure(f"MLCommons {mode}, {where}{label} ({kind})", n, n * args.max_tokens, w1 - w0, c2 - c0, s2 - s0)


def mlcommons_prompts(prompts: Any, work: Path) -> Path:
    """The prompts as MLCommons' client reads pre-tokenized ones: a JSON list of records with `input_tokens`."""
    path = work / "mlcommons-prompts.json"
    path.write_text(json.dumps([{"input_tokens": list(ids)} for ids in prompts.ids]))
    return path


def median_figure(figures: list[Figure]) -> Figure:
    """The run with the median requests per client core (its own wall and CPU, not a mix of runs)."""
    return sorted(figures, key=lambda f: f.requests_per_core)[len(figures) // 2]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "OVER"


def table(figures: list[Figure], reference: Figure) -> None:
    say(f"{'path':40} {'req/s':>8} {'tokens/s':>10} {'client cores':>12} {'req/s/core':>10} "
        f"{'tokens/s/core':>13} {'vs vllm/core':>12} {'server cores':>12}")
    for f in figures:
        say(f"{f.path:40} {f.requests_per_s:>8,.0f} {f.tokens_per_s:>10,.0f} {f.client_cores:>12.2f} "
            f"{f.requests_per_core:>10,.0f} {f.tokens_per_core:>13,.0f} "
            f"{f.requests_per_core / reference.requests_per_core:>12.2f} {f.server_cpu_s / f.wall_s:>12.2f}")


def budgets(by_path: dict[str, Figure], reference: Figure, worker_counts: list[int], *,
            mlcommons: bool = False) -> list[dict[str, Any]]:
    lines = []
    single = by_path["Server, in-process (streaming)"]
    ratio = single.requests_per_core / reference.requests_per_core
    lines.append({"budget": "in-process Server per client core >= vllm bench serve's", "value": ratio,
                  "verdict": verdict(ratio >= 1.0)})
    if mlcommons:
        for ours, kind, mode in (("Server, in-process (streaming)", "streaming", "online"),
                                 ("Offline, in-process (not streamed)", "not streamed", "offline")):
            theirs = next(f for p, f in by_path.items() if p.startswith(f"MLCommons {mode},"))
            ratio = by_path[ours].requests_per_core / theirs.requests_per_core
            lines.append({"budget": f"cmx / MLCommons per client core, {kind} ({ours} / {theirs.path}) >= 1.0",
                          "value": ratio, "verdict": verdict(ratio >= 1.0)})
    for scenario, kind in (("Server", "streaming"), ("Offline", "not streamed")):
        one = by_path[f"{scenario}, 1 worker ({kind})"]
        for k in worker_counts[1:]:
            many = by_path[f"{scenario}, {k} workers ({kind})"]
            efficiency = many.requests_per_core / one.requests_per_core
            lines.append({"budget": f"{scenario}: {k} workers' requests/s per client core >= {BUDGET_SCALING} of one "
                                    f"worker's (wall speed-up {many.requests_per_s / one.requests_per_s:.2f}x)",
                          "value": efficiency, "verdict": verdict(efficiency >= BUDGET_SCALING)})
    for line in lines:
        say(f"{line['verdict']}  {line['budget']}: {line['value']:.2f}")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    cores = os.cpu_count() or 1
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--prompts", type=int, default=2000, help="requests per path and run")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens")
    p.add_argument("--max-tokens", type=int, default=64, help="output tokens per request (exactly)")
    p.add_argument("--runs", type=int, default=1, help="runs of every path (the median run is shown)")
    p.add_argument("--workers", type=int, nargs="*", default=sorted({1, 2, cores}),
                   help="worker counts to measure besides in-process (the first is the scaling baseline)")
    p.add_argument("--server-processes", type=int, default=1, help="instant server processes (SO_REUSEPORT)")
    p.add_argument("--server-qps", type=float, default=100_000.0,
                   help="LoadGen Server's target: far above any client's ceiling, so all samples go at once")
    p.add_argument("--max-concurrency", type=int, default=1024, help="Offline requests in flight")
    p.add_argument("--event-loops", nargs="*", default=["auto", "asyncio"], choices=["auto", "uvloop", "asyncio"],
                   help="event loops to run the in-process paths on (auto: uvloop's on Linux; the worker paths take "
                        "auto)")
    p.add_argument("--mlcommons", type=Path, metavar="VENV",
                   help="a venv where MLCommons' inference-endpoint is installed: its client runs beside cmx's")
    p.add_argument("--mlcommons-concurrency", type=int, default=1024, help="MLCommons online: requests in flight")
    p.add_argument("--mlcommons-workers", type=int, default=1, help="MLCommons: HTTP worker processes")
    p.add_argument("--json", action="store_true", help="the figures as JSON on stdout (the table on stderr)")
    a = p.parse_args(argv)
    if a.prompts < 1 or a.max_tokens < 2 or a.runs < 1 or not a.workers or min(a.workers) < 1:
        p.error("--prompts, --runs and each of --workers must be >= 1, --max-tokens >= 2")
    if a.mlcommons is not None and not (a.mlcommons / "bin" / "inference-endpoint").is_file():
        p.error(f"--mlcommons {a.mlcommons}: no bin/inference-endpoint there (bench/README.md says how to make it)")
    if "auto" not in a.event_loops:
        a.event_loops = ["auto", *a.event_loops]  # the budgets read the default loop's figures
    return a


def main(argv: list[str] | None = None) -> int:
    global QUIET
    args = parse_args(argv)
    QUIET = args.json
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    log = logging.getLogger("bench.endpoint_ceiling")
    from endpoint import Prompts

    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    work = Path(tempfile.mkdtemp(prefix="cmx-bench-ceiling-"))
    cores = os.cpu_count() or 1
    say(f"cmx endpoint client ceiling against an instant server: {platform.machine()}, {cores} CPUs, "
        f"Python {platform.python_version()}; {args.prompts} requests of {args.input_len} prompt tokens, "
        f"{args.max_tokens} output tokens each; {args.runs} run(s) per path")
    tokenizer = make_tiny_llama(work / "tokenizer", vocab_size=512, hidden_size=64, layers=1, heads=1).path
    rng = random.Random(0)
    prompts = Prompts([[rng.randrange(100, 500) for _ in range(args.input_len)] for _ in range(args.prompts)])
    load_before = os.getloadavg()[0]
    loops = args.event_loops
    paths: list[tuple[str, int, str]] = [*(("Server", 0, loop) for loop in loops),
                                         *(("Server", k, "auto") for k in args.workers),
                                         *(("Offline", 0, loop) for loop in loops),
                                         *(("Offline", k, "auto") for k in args.workers)]
    mlc_prompts = mlcommons_prompts(prompts, work) if args.mlcommons is not None else None
    runs: dict[str, list[Figure]] = {}
    with InstantServer(args.server_processes) as server:
        say(f"server: {server.url}, {args.server_processes} process(es); work folder {work}")
        for rep in range(args.runs):
            for scenario, workers, loop in paths:
                figure = cmx_path(scenario, workers, server, prompts, args, work, log, loop)
                runs.setdefault(figure.path, []).append(figure)
                say(f"  run {rep + 1}: {figure.path}: {figure.requests_per_s:,.0f} requests/s, "
                    f"{figure.client_cores:.2f} client cores")
            others = [bench_serve(server, tokenizer, args, work)]
            if args.mlcommons is not None and mlc_prompts is not None:
                others += [mlcommons_path(args.mlcommons, mode, server, mlc_prompts, len(prompts), args, work)
                           for mode in ("online", "offline")]
            for figure in others:
                runs.setdefault(figure.path, []).append(figure)
                say(f"  run {rep + 1}: {figure.path}: {figure.requests_per_s:,.0f} requests/s, "
                    f"{figure.client_cores:.2f} client cores")
    load_after = os.getloadavg()[0]
    by_path = {path: median_figure(figures) for path, figures in runs.items()}
    reference = by_path["vllm bench serve, rate inf (streaming)"]
    say()
    table(list(by_path.values()), reference)
    say()
    lines = budgets(by_path, reference, args.workers, mlcommons=args.mlcommons is not None)
    busy = max(load_before, load_after) > 0.5 * cores
    say(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after, {cores} CPUs"
        + (" -- BUSY MACHINE" if busy else ""))
    if args.json:
        print(json.dumps({"figures": {p: [asdict(f) for f in fs] for p, fs in runs.items()}, "budgets": lines,
                          "load_average": [load_before, load_after], "cpus": cores}, indent=1))
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
