"""The app step for gpt-oss-120b: everything benchmark-specific comes from its package and the round data."""

from __future__ import annotations

from cmx.mlperf.app_step import run_benchmark


def run(ctx):
    return run_benchmark(ctx, "gpt-oss-120b")
