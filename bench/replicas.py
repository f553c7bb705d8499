#!/usr/bin/env python3
"""Offline tokens/s of one engine replica against two, on Ray, with the tiny model and vLLM's CPU build.

    .venv/bin/python bench/replicas.py                          # 512 prompts, 32 tokens each, 3 runs
    .venv/bin/python bench/replicas.py --prompts 1024 --runs 5
    .venv/bin/python bench/replicas.py --ray-address HOST:PORT  # an existing cluster instead of a local Ray
    .venv/bin/python bench/replicas.py --json

Each configuration is `RayReplicaBackend` (cmx.mlperf.backends.ray_replicas), Offline, as a run with
`--input replicas=N` builds it: N Ray actors, each holding one vLLM engine on --cpus-per-replica
CPUs (on one host, disjoint cores). The baseline, one replica, is measured in the same run, first;
then two. Every path serves the same prompts (the first --prompts rows of a tiny OpenOrca made
here) and generates exactly --max-tokens tokens per prompt (min_tokens = max_tokens, checked), so
tokens/s is tokens generated / wall seconds of `generate()` over the whole batch (the token-balanced
split across replicas included). The median of --runs is printed, and the ratio two/one.

The configurations run one after the other, never together: engines spinning on the same CPUs would
disturb each other. With 2 cores, one replica computes on one core and two on both, so the ratio
says how well the split and Ray's transport keep a second engine busy, not what a GPU node gains.

A benchmark, not a test: it never fails on a timing; it exits non-zero only when cmx fails or a
path does not generate the tokens it was asked for.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # before vLLM's import (in the replicas)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MAX_MODEL_LEN = 2048


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cpus-per-replica", type=int, default=1)
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: Ray started here)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p.parse_args()


def make_requests(root: Path, prompts: int, max_tokens: int) -> tuple[Path, list[Any]]:
    from cmx.mlperf.backends.base import GenRequest
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama, make_tiny_openorca
    from cmx.mlperf.samples import PromptSource

    model = make_tiny_llama(root / "model")
    bench = benchmark_for("llama2-70b")
    dataset = bench.load_dataset(make_tiny_openorca(root / "openorca.pkl", model.path, rows=prompts).path)
    source = bench.prompt_source(dataset, model.path)
    assert isinstance(source, PromptSource)  # llama2's samples are token ids, not conversations
    return model.path, [GenRequest(id=i, prompt_ids=source.prompt_ids(i), max_tokens=max_tokens,
                                   min_tokens=max_tokens) for i in range(len(dataset))]


def measure(replicas: int, model: Path, requests: list[Any], args: argparse.Namespace,
            log: logging.Logger) -> dict[str, Any]:
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.ray_replicas import RayReplicaBackend, RayReplicasConfig
    from cmx.mlperf.backends.vllm import VllmBackendConfig

    engine = VllmBackendConfig(model=model, options=EngineOptions(device="cpu"), max_model_len=MAX_MODEL_LEN,
                               output_tokens_estimate=args.max_tokens)
    config = RayReplicasConfig(engine=engine, replicas=replicas, address=args.ray_address,
                               cpus_per_replica=args.cpus_per_replica)
    samples = []
    with RayReplicaBackend(config, log) as backend:
        for _ in range(args.runs):
            began = time.monotonic()
            results = list(backend.generate(requests))
            seconds = time.monotonic() - began
            tokens = sum(r.n_tokens for r in results)
            if len(results) != len(requests) or tokens != len(requests) * args.max_tokens:
                raise SystemExit(f"{replicas} replica(s) generated {tokens} tokens for {len(results)} prompts, not "
                                 f"{args.max_tokens} for each of {len(requests)}")
            samples.append(tokens / seconds)
        placed = backend.details()["replicas"]
    return {"replicas": replicas, "tokens_per_second": statistics.median(samples), "samples": samples,
            "placement": [{k: r[k] for k in ("node_ip", "devices", "samples", "tokens")} for r in placed]}


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    log = logging.getLogger("bench.replicas")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="cmx-bench-replicas-") as tmp:
        model, requests = make_requests(Path(tmp), args.prompts, args.max_tokens)
        one = measure(1, model, requests, args, log)
        two = measure(2, model, requests, args, log)
    ratio = two["tokens_per_second"] / one["tokens_per_second"]
    figures = {"prompts": args.prompts, "max_tokens": args.max_tokens, "runs": args.runs,
               "cpus_per_replica": args.cpus_per_replica, "cpus": os.cpu_count(), "load_before": load,
               "one": one, "two": two, "two_over_one": ratio}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"Offline, tiny Llama 2, {args.prompts} prompts x {args.max_tokens} tokens, median of {args.runs}, "
          f"{args.cpus_per_replica} CPU(s) per replica, {os.cpu_count()} CPUs, load {load:.2f} before")
    for row in (one, two):
        where = "; ".join(f"{p['node_ip']} {','.join(p['devices'])}" for p in row["placement"])
        print(f"  {row['replicas']} replica(s): {row['tokens_per_second']:9,.0f} tokens/s   ({where})")
    print(f"  two / one: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
