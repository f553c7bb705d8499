#!/usr/bin/env python3
"""`cmx tune` against a bisection of whole `cmx run`s: the QPS each finds, the wall time each takes, the ratios.

    .venv/bin/python bench/tune.py                       # the tiny model, _short, Server
    .venv/bin/python bench/tune.py --scenario Interactive
    .venv/bin/python bench/tune.py --json                # the figures (every probe and run) as JSON

(a) tune:      `cmx tune QUERY --scenario S --json`, one process: the deps (cached after the first run), one
               engine for every probe, the search, and the confirm run on the same engine.
(b) bisection: what a user does without it: `cmx run "QUERY _s" --input target_qps_s=X --input
               modes=performance` for each X, each a whole run (its own engine start), from the same start
               QPS: doubling until LoadGen says INVALID (or the run fails), then halving the bracket until it is
               narrower than the same --tolerance; the answer is the highest VALID X.

On the tiny model the "full length" of both is `_short`'s profile (4 s and at least 480 queries per Server
test): a real full-length Server run lasts 600 s, which this benchmark does not wait for. Goals: (a)'s QPS
within 5 % of (b)'s, in a third of (b)'s wall time or less.

The tune runs once before the bisection and once after it (--tune-runs 2), so that a change in the load on a
shared machine during the long bisection shows as a difference between the two tunes instead of passing for
the tune's error; both are printed and the ratios use their mean. The first tune builds any dep not cached yet
(a fresh cache: the tiny model and dataset, a few seconds). A benchmark, not a test: it never fails on a figure;
it exits non-zero only when a command fails to give one (no JSON, no answer).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
QUERY = "app mlperf inference llama2 _cpu _tiny _short"
GOAL_QPS = 0.05        # |a - b| / b
GOAL_TIME = 1 / 3      # a / b


def say(text: str = "", *, quiet: bool = False) -> None:
    if not quiet:
        print(text, flush=True)


def cmx(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cmx", *args], capture_output=True, text=True, env=env, cwd=REPO)
    return proc, time.perf_counter() - began


def run_tune(query: str, scenario: str, tolerance: float, out: Path) -> dict[str, Any]:
    proc, wall = cmx(["tune", query, "--scenario", scenario, "--json", "--tolerance", str(tolerance),
                      "--out", str(out / "tuned.yaml")])
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"bench: cmx tune printed no JSON (exit {proc.returncode}):\n{proc.stderr[-3000:]}") from None
    if data.get("qps") is None:
        raise SystemExit(f"bench: cmx tune found no target: {data.get('error') or data}")
    return {"wall_s": wall, **data}


def bisection_point(query: str, scenario: str, qps: float, out: Path) -> dict[str, Any]:
    """One whole `cmx run` at `qps`; passed = its performance test is VALID with no problem."""
    folder = out / f"qps-{qps:g}"
    proc, wall = cmx(["run", f"{query} _{scenario.lower()}", "--input", f"target_qps_{scenario.lower()}={qps:g}",
                      "--input", "modes=performance", "--input", f"results_dir={folder}", "--json"])
    facts = glob.glob(str(folder / "*" / "*" / scenario / "cmx_run.json"))
    if not facts:
        raise SystemExit(f"bench: cmx run at {qps:g} left no cmx_run.json (exit {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}")
    record = json.loads(Path(facts[0]).read_text(encoding="utf-8"))
    perf = next(r for r in record["runs"] if r["mode"] == "performance")
    return {"qps": qps, "passed": perf["validity"] == "VALID" and not perf["problems"], "validity": perf["validity"],
            "ttft_p99_ms": perf["ttft_p99_ms"], "tpot_p99_ms": perf["tpot_p99_ms"],
            "problems": perf["problems"], "wall_s": wall}


def run_bisection(query: str, scenario: str, start: float, tolerance: float, max_runs: int, out: Path,
                  quiet: bool) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    lo, hi = None, None
    qps = start
    began = time.perf_counter()
    while len(runs) < max_runs:
        point = bisection_point(query, scenario, qps, out)
        runs.append(point)
        say(f"  (b) run {len(runs)}: {qps:g}/s {point['validity'] or 'no result'} "
            f"{'pass' if point['passed'] else 'FAIL'} in {point['wall_s']:.1f} s", quiet=quiet)
        if point["passed"]:
            lo = qps
        else:
            hi = qps
        if lo is None:
            qps = qps / 2
        elif hi is None:
            qps = qps * 2
        elif hi - lo <= tolerance * lo:
            break
        else:
            qps = float(f"{(lo + hi) / 2:.3g}")
    return {"qps": lo, "runs": runs, "wall_s": time.perf_counter() - began}


def tuned(a: argparse.Namespace, out: Path, q: bool) -> dict[str, Any]:
    tune = run_tune(a.query, a.scenario, a.tolerance, out)
    say(f"\n(a) cmx tune: {tune['qps']:g}/s in {tune['wall_s']:.1f} s wall "
        f"(engine start {tune['engine_start_s']:.0f} s,"
        f" {len(tune['probes'])} probes and the confirm in {tune['seconds']:.0f} s)", quiet=q)
    for n, p in enumerate(tune["probes"], start=1):
        say(f"  (a) probe {n}: {p['qps']:g}/s {p['validity'] or '-'} {'pass' if p['passed'] else 'FAIL'} "
            f"TTFT p99 {p['ttft_p99_ms']} ms, TPOT p99 {p['tpot_p99_ms']} ms, {p['seconds']:.1f} s", quiet=q)
    for c in tune["confirms"]:
        say(f"  (a) confirm {c['qps']:g}/s: {c['validity']} ({'ok' if c['ok'] else 'FAILED'}), {c['seconds']:.1f} s",
            quiet=q)
    return tune


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--query", default=QUERY, help=f"the app query (default: {QUERY!r})")
    p.add_argument("--scenario", default="Server", choices=["Server", "Interactive"])
    p.add_argument("--start", type=float, default=None,
                   help="the bisection's first QPS (default: the tune's start, the query's target_qps input)")
    p.add_argument("--tolerance", type=float, default=0.04, help="the bracket width both stop at (of its low end)")
    p.add_argument("--max-runs", type=int, default=14, help="the most runs of the bisection")
    p.add_argument("--tune-runs", type=int, default=2, choices=[1, 2],
                   help="tunes: 1 (before the bisection) or 2 (before and after it; the default)")
    p.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    q = a.json
    out = Path(tempfile.mkdtemp(prefix="cmx-bench-tune-"))
    say(f"cmx tune vs a bisection of `cmx run`s: {a.query!r}, {a.scenario}; {os.cpu_count()} CPUs; "
        f"full length = the _short profile (tiny model); work folder {out}", quiet=q)
    load_before = os.getloadavg()[0]
    tunes = [tuned(a, out / "tune-1", q)]
    start = a.start or tunes[0]["probes"][0]["qps"]
    say(f"\n(b) bisection of whole `cmx run`s from {start:g}/s:", quiet=q)
    bisection = run_bisection(a.query, a.scenario, start, a.tolerance, a.max_runs, out / "bisection", q)
    if a.tune_runs == 2:
        tunes.append(tuned(a, out / "tune-2", q))
    load_after = os.getloadavg()[0]
    if bisection["qps"] is None:
        raise SystemExit("bench: the bisection found no VALID QPS")
    tune = {"qps": sum(t["qps"] for t in tunes) / len(tunes), "wall_s": sum(t["wall_s"] for t in tunes) / len(tunes),
            "probes": tunes[0]["probes"], "confirms": tunes[0]["confirms"]}
    qps_gap = abs(tune["qps"] - bisection["qps"]) / bisection["qps"]
    time_ratio = tune["wall_s"] / bisection["wall_s"]
    figures = {"query": a.query, "scenario": a.scenario, "tunes": tunes, "bisection": bisection,
               "tune_qps_mean": tune["qps"], "tune_wall_s_mean": tune["wall_s"],
               "qps_ratio": tune["qps"] / bisection["qps"], "qps_gap": qps_gap, "time_ratio": time_ratio,
               "load_before": load_before, "load_after": load_after}
    if q:
        json.dump(figures, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    say(f"\n{'':24}{'QPS':>10}{'wall s':>10}{'runs':>8}")
    for n, t in enumerate(tunes, start=1):
        when = "before" if n == 1 else "after"
        say(f"{f'(a) cmx tune, {when} (b)':24}{t['qps']:>10g}{t['wall_s']:>10.1f}"
            f"{len(t['probes']) + len(t['confirms']):>8}")
    if len(tunes) > 1:
        say(f"{'(a) mean':24}{tune['qps']:>10.1f}{tune['wall_s']:>10.1f}")
    say(f"{'(b) bisection of runs':24}{bisection['qps']:>10g}{bisection['wall_s']:>10.1f}{len(bisection['runs']):>8}")
    say(f"QPS a/b = {tune['qps'] / bisection['qps']:.3f} (|a-b|/b = {qps_gap:.1%}, goal <= {GOAL_QPS:.0%}): "
        f"{'meets goal' if qps_gap <= GOAL_QPS else 'OVER'}")
    say(f"time a/b = {time_ratio:.3f} (goal <= {GOAL_TIME:.3f}): {'meets goal' if time_ratio <= GOAL_TIME else 'OVER'}")
    busy = " (BUSY machine: the figures are inflated)" if max(load_before, load_after) > (os.cpu_count() or 1) else ""
    say(f"load average {load_before:.2f} before, {load_after:.2f} after{busy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
