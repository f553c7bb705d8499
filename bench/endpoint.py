#!/usr/bin/env python3
"""What cmx's endpoint SUT costs against vLLM's own client, on one vLLM server of the tiny model (CPU build).

    .venv/bin/python bench/endpoint.py                    # 256 prompts of 128 tokens, 32 output tokens, 2 runs
    .venv/bin/python bench/endpoint.py --prompts 512 --input-len 256 --max-tokens 64 --runs 3
    .venv/bin/python bench/endpoint.py --skip-in-process  # (a) and (b) only

One server (`VllmServer`: the cpu profile's engine arguments, 127.0.0.1, a free port) of the tiny
random Llama 2 made here. The prompts are vLLM's own `random` dataset (its RandomDataset, seed
--seed), which `vllm bench serve` sends as text; for cmx the same texts are tokenized with the
same tokenizer the way the server tokenizes them, so both send the server the same token ids
(the script checks the input token totals agree). Every request generates exactly --max-tokens
tokens: `--ignore-eos` for vLLM's client, min_tokens = max_tokens for cmx.

  (a) vllm bench serve:  `vllm.benchmarks.serve` (run as `python -c` calling its main, since the
                         `vllm` command of the CPU build does not start), --request-rate inf, all
                         prompts at once, streaming; output tokens/s as it reports them;
  (b) cmx endpoint:      LoadGen Offline (real mlperf_loadgen, performance mode, each prompt
                         once) through cmx's OfflineSUT and EndpointBackend (non-streaming,
                         max_concurrency in flight); LoadGen's tokens/s;
  (c) cmx in-process:    after the server is stopped, the same LoadGen Offline run through the
                         in-process VllmBackend (the same profile), so the cost of HTTP shows.

(a) and (b) alternate within each of --runs repeats, after one untimed warm-up of each; the
medians are printed with b/a (design budget >= 0.97) and b/c.

Then Server at one rate (--server-qps, Poisson arrivals in both), streaming, against the same
server, the same prompts and output lengths:

  (a') vllm bench serve --request-rate Q: its p99 TTFT and TPOT (per request, first token excluded);
  (b') LoadGen Server at target_qps Q through cmx's ServerSUT and EndpointBackend: LoadGen's p99
       TTFT and TPOT (FirstTokenComplete; (latency - TTFT) / (tokens - 1) per sample).

The latency limits are set out of reach, so LoadGen's verdict does not depend on them; the
figures are what each client measured, printed side by side with the ratios b'/a'.

A benchmark, not a test: it never fails on a timing; it exits non-zero when cmx fails or the
set-up is wrong (a path that did not generate what it was asked for).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/harness.py's LoadGen helpers

BUDGET_B_OVER_A = 0.97
MAX_MODEL_LEN = 2048

BENCH_SERVE = ("import sys; from vllm.benchmarks.serve import add_cli_args, main; "
               "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
               "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))")


def say(text: str = "") -> None:
    print(text, flush=True)


class Prompts:
    """The prompts as token ids, in the shape cmx's QSL reads (`__len__`, `prompt_ids`)."""

    def __init__(self, ids: list[list[int]]) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def prompt_ids(self, i: int) -> list[int]:
        return self.ids[i]


def make_prompts(model: Path, args: argparse.Namespace) -> Prompts:
    """vLLM's random dataset exactly as `vllm bench serve` samples it, tokenized as the server does."""
    from vllm.benchmarks.datasets.datasets import RandomDataset
    from vllm.tokenizers import get_tokenizer

    tokenizer = get_tokenizer(str(model))
    samples = RandomDataset(random_seed=args.seed).sample(
        tokenizer=tokenizer, num_requests=args.prompts, input_len=args.input_len, output_len=args.max_tokens,
        range_ratio=0.0)
    return Prompts([list(tokenizer(s.prompt).input_ids) for s in samples])


def bench_serve(url: str, model: Path, args: argparse.Namespace, out: Path, rate: str = "inf") -> dict[str, Any]:
    """(a) at `rate` requests/s (inf: all at once); tokens/s, and p99 TTFT and TPOT in ms."""
    root = url.removesuffix("/v1")
    cmd = [sys.executable, "-c", BENCH_SERVE, "--backend", "vllm", "--base-url", root, "--endpoint", "/v1/completions",
           "--model", str(model), "--tokenizer", str(model), "--dataset-name", "random",
           "--random-input-len", str(args.input_len), "--random-output-len", str(args.max_tokens),
           "--random-range-ratio", "0", "--num-prompts", str(args.prompts), "--seed", str(args.seed), "--ignore-eos",
           "--request-rate", rate, "--percentile-metrics", "ttft,tpot", "--metric-percentiles", "99",
           "--disable-tqdm", "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"bench: vllm bench serve failed ({done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    data = json.loads(out.read_text())
    if data["completed"] != args.prompts or data["total_output_tokens"] != args.prompts * args.max_tokens:
        raise SystemExit(f"bench: set-up is wrong: vllm bench serve completed {data['completed']} requests, "
                         f"{data['total_output_tokens']} output tokens")
    return {"tokens_per_second": data["output_throughput"], "seconds": data["duration"],
            "input_tokens": data["total_input_tokens"], "tokens": data["total_output_tokens"],
            "ttft_p99_ms": data.get("p99_ttft_ms"), "tpot_p99_ms": data.get("p99_tpot_ms")}


def loadgen_offline(backend: Any, prompts: Prompts, args: argparse.Namespace, out: Path,
                    log: logging.Logger) -> dict[str, Any]:
    import mlperf_loadgen as lg
    from harness import fixed_length_sut, run_loadgen

    from cmx.mlperf.loadgen.sut import OfflineSUT

    n, m = len(prompts), args.max_tokens
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.offline_expected_qps = 1.0  # min_query_count, not the duration, sets the samples
    settings.min_query_count = settings.max_query_count = n
    settings.min_duration_ms = 1000
    settings.performance_sample_count_override = n
    settings.sample_concatenate_permutation = True  # each prompt exactly once
    settings.use_token_latencies = True
    sut, run, wall = run_loadgen(lg, fixed_length_sut(OfflineSUT), backend, prompts, settings, m, out, log)
    if sut.lengths != {m} or sut.completed != n or sorted(sut.indices) != list(range(n)):
        raise SystemExit(f"bench: set-up is wrong: LoadGen Offline gave {sut.completed} outputs of lengths "
                         f"{sorted(sut.lengths)} for {len(set(sut.indices))} distinct prompts, not {n} of {m}")
    tps = run.results.tokens_per_second
    if not tps:
        raise SystemExit("bench: LoadGen's log has no tokens per second")
    return {"tokens_per_second": tps, "seconds": sut.tokens / tps, "tokens": sut.tokens, "start_test_wall_s": wall,
            "input_tokens": sum(len(prompts.prompt_ids(i)) for i in range(n))}


def loadgen_server(backend: Any, prompts: Prompts, args: argparse.Namespace, out: Path,
                   log: logging.Logger) -> dict[str, Any]:
    """(b') LoadGen Server at --server-qps through cmx's ServerSUT; LoadGen's tokens/s and p99 TTFT and TPOT."""
    import mlperf_loadgen as lg
    from harness import fixed_length_sut, run_loadgen

    from cmx.mlperf.loadgen.sut import ServerSUT

    n, m = len(prompts), args.max_tokens
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Server
    settings.mode = lg.TestMode.PerformanceOnly
    settings.server_target_qps = args.server_qps
    settings.min_query_count = settings.max_query_count = n
    settings.min_duration_ms = 1000
    settings.performance_sample_count_override = n
    settings.use_token_latencies = True
    settings.ttft_latency = 60_000_000_000  # ns, out of reach: the figures, not the verdict, are the point
    settings.tpot_latency = 10_000_000_000
    settings.server_target_latency_ns = 60_000_000_000
    sut, run, _ = run_loadgen(lg, fixed_length_sut(ServerSUT), backend, prompts, settings, m, out, log)
    if sut.lengths != {m} or sut.completed != n:
        raise SystemExit(f"bench: set-up is wrong: LoadGen Server gave {sut.completed} outputs of lengths "
                         f"{sorted(sut.lengths)}, not {n} of {m}")
    r = run.results
    if r.ttft is None or r.tpot is None:
        raise SystemExit("bench: LoadGen's Server log has no TTFT/TPOT percentiles")
    return {"tokens_per_second": r.tokens_per_second, "ttft_p99_ms": r.ttft.p99_ms, "tpot_p99_ms": r.tpot.p99_ms,
            "tokens": sut.tokens}


def server_comparison(url: str, model: Path, backend: Any, prompts: Prompts, args: argparse.Namespace, work: Path,
                      log: logging.Logger) -> None:
    """(a') and (b') at one rate, once each after (a) and (b) warmed the server; printed side by side."""
    rate = f"{args.server_qps:g}"
    say(f"Server at {rate} queries/s (Poisson), streaming, {len(prompts)} prompts, {args.max_tokens} tokens each:")
    a = bench_serve(url, model, args, work / "a-server.json", rate=rate)
    b = loadgen_server(backend, prompts, args, work / "b-server", log)
    say(f"{'path':46} {'tokens/s':>10} {'TTFT p99 ms':>12} {'TPOT p99 ms':>12}")
    for name, row in (("(a') vllm bench serve --request-rate " + rate, a),
                      ("(b') LoadGen Server, cmx EndpointBackend", b)):
        say(f"{name:46} {row['tokens_per_second']:>10,.0f} {row['ttft_p99_ms']:>12.1f} {row['tpot_p99_ms']:>12.1f}")
    say(f"b'/a': TTFT p99 {b['ttft_p99_ms'] / a['ttft_p99_ms']:.2f}, "
        f"TPOT p99 {b['tpot_p99_ms'] / a['tpot_p99_ms']:.2f} "
        "(above 1: cmx's client measured longer latencies than vLLM's)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from cmx.mlperf.backends.endpoint_client import DEFAULT_MAX_CONCURRENCY

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--prompts", type=int, default=256, help="prompts, each sent once per run")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens (vLLM's random dataset)")
    p.add_argument("--max-tokens", type=int, default=32, help="output tokens per prompt (exactly)")
    p.add_argument("--runs", type=int, default=2, help="repeats of a and b (medians reported)")
    p.add_argument("--seed", type=int, default=0, help="the random dataset's seed")
    p.add_argument("--max-concurrency", type=int, default=DEFAULT_MAX_CONCURRENCY,
                   help="cmx's Offline requests in flight (the default is cmx's own)")
    p.add_argument("--server-qps", type=float, default=8.0, help="the Server comparison's rate (0: none)")
    p.add_argument("--skip-in-process", action="store_true", help="no (c)")
    p.add_argument("--keep", action="store_true", help="keep the temp folder (model, server log, LoadGen logs)")
    a = p.parse_args(argv)
    if a.prompts < 1 or a.max_tokens < 2 or a.runs < 1 or a.input_len + a.max_tokens > MAX_MODEL_LEN:
        p.error("--prompts and --runs must be >= 1, --max-tokens >= 2, input + output <= 2048")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    log = logging.getLogger("bench.endpoint")
    from cmx.mlperf.backends.endpoint import EndpointBackend
    from cmx.mlperf.backends.endpoint_client import EndpointConfig
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.vllm_server import VllmServer, VllmServerConfig
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    work = Path(tempfile.mkdtemp(prefix="cmx-bench-endpoint-"))
    say(f"cmx endpoint SUT vs vllm bench serve: tiny Llama (random weights), vLLM CPU build, cpu profile; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    model = make_tiny_llama(work / "model").path
    prompts = make_prompts(model, args)
    say(f"set-up: {len(prompts)} prompts of vLLM's random dataset ({args.input_len} tokens, seed {args.seed}), "
        f"{args.max_tokens} output tokens each; work folder {work}")
    load_before = os.getloadavg()[0]
    options = EngineOptions(device="cpu")
    samples: dict[str, list[dict[str, Any]]] = {"a": [], "b": [], "c": []}
    config = VllmServerConfig(model=model, options=options, log_path=work / "server.log", max_model_len=MAX_MODEL_LEN)
    with VllmServer(config, log) as server:
        assert server.info is not None  # set once the server has started
        say(f"server: {server.url}, started in {server.info.start_seconds:.1f} s; engine flags "
            f"{ {k: v for k, v in server.info.engine_kwargs.items()} }")
        with EndpointBackend(EndpointConfig(url=server.url, max_concurrency=args.max_concurrency), log) as backend:
            paths = {"a": lambda rep: bench_serve(server.url, model, args, work / f"a-{rep}.json"),
                     "b": lambda rep: loadgen_offline(backend, prompts, args, work / f"b-{rep}", log)}
            for key in ("a", "b"):
                paths[key]("warmup")
            for rep in range(args.runs):
                for key in ("a", "b") if rep % 2 == 0 else ("b", "a"):
                    sample = paths[key](rep)
                    samples[key].append(sample)
                    say(f"  run {rep + 1}/{args.runs} {key}: {sample['tokens']} tokens in {sample['seconds']:.3f} s = "
                        f"{sample['tokens_per_second']:,.0f} tokens/s")
            if args.server_qps > 0:
                server_comparison(server.url, model, backend, prompts, args, work, log)
    if samples["a"][0]["input_tokens"] != samples["b"][0]["input_tokens"]:
        raise SystemExit(f"bench: set-up is wrong: input tokens differ, (a) {samples['a'][0]['input_tokens']} vs "
                         f"(b) {samples['b'][0]['input_tokens']}")
    if not args.skip_in_process:
        from cmx.mlperf.backends.vllm import VllmBackend, VllmBackendConfig

        say("server stopped; (c) the in-process backend, the same profile:")
        backend_config = VllmBackendConfig(model=model, options=options, max_model_len=MAX_MODEL_LEN,
                                           output_tokens_estimate=args.max_tokens)
        with VllmBackend(backend_config, log) as backend:
            loadgen_offline(backend, prompts, args, work / "c-warmup", log)
            for rep in range(args.runs):
                sample = loadgen_offline(backend, prompts, args, work / f"c-{rep}", log)
                samples["c"].append(sample)
                say(f"  run {rep + 1}/{args.runs} c: {sample['tokens']} tokens in {sample['seconds']:.3f} s = "
                    f"{sample['tokens_per_second']:,.0f} tokens/s")
    med = {k: statistics.median(s["tokens_per_second"] for s in v) for k, v in samples.items() if v}
    say()
    names = {"a": "(a) vllm bench serve, rate inf (streaming)", "b": "(b) LoadGen Offline, cmx EndpointBackend",
             "c": "(c) LoadGen Offline, cmx in-process vLLM"}
    say(f"{'path':46} {'tokens/s (median)':>18} {'min':>9} {'max':>9}")
    for key, value in med.items():
        values = [s["tokens_per_second"] for s in samples[key]]
        say(f"{names[key]:46} {value:>18,.0f} {min(values):>9,.0f} {max(values):>9,.0f}")
    ratio = med["b"] / med["a"]
    verdict = "within budget" if ratio >= BUDGET_B_OVER_A else "UNDER budget"
    say(f"b/a = {ratio:.3f}  (budget >= {BUDGET_B_OVER_A}): {verdict}")
    if "c" in med:
        say(f"b/c = {med['b'] / med['c']:.3f}  "
            "(what HTTP and a separate server process cost against the in-process engine)")
    load_after = os.getloadavg()[0]
    say(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after, {os.cpu_count()} CPUs"
        + (" -- BUSY MACHINE" if max(load_before, load_after) > 0.5 * (os.cpu_count() or 1) else ""))
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
