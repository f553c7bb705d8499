"""cmx's cached runs side by side with MLCommons CM's cached `cm run script --tags=get,python3` (plan_speed.py --cm).

Both sides are timed the same way, in the same rounds: whole processes, one untimed warm-up of each
command, then `runs` rounds in which every command runs once, the starting command rotating from
round to round so that a load change on a shared machine falls on all of them alike. Before timing
it checks that each side's run is served from its cache, and after timing that CM's cache did not
grow (no run detected Python again).
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

CM_TAGS = "get,python3"
CMX_ONE_STEP = "detect gpu"  # the shipped registry's cached one-step detection (detect-python is never cached)
CMX_PYTHON = "detect python"  # the literal "get python" of cmx: not cached by design, it asks the interpreter
GOAL = 0.5  # issue 13: a cached cmx run in half of CM's time or less


class SetupError(Exception):
    """A command failed, or a side's cached run is not what it claims."""


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path


def call(cmd: Command, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([*cmd.argv, *extra], env=cmd.env, cwd=cmd.cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    if proc.returncode != 0:
        raise SetupError(f"`{' '.join([*cmd.argv, *extra])}` exited with status {proc.returncode}\n"
                         f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    return proc


def cm_repos_of(cm: Path, given: str | None) -> Path:
    """CM's home: --cm-repos, else $CM_REPOS, else the cm-repos/ that bench/setup-cm.sh made beside the venv."""
    for candidate in (given, os.environ.get("CM_REPOS"), str(cm.resolve().parent.parent / "cm-repos")):
        if candidate and (Path(candidate) / "repos.json").is_file():
            return Path(candidate)
    raise SetupError(f"no CM home (repos.json) for {cm}: pass --cm-repos DIR or set CM_REPOS; "
                     "bench/setup-cm.sh makes one")


def cm_cache_entries(cm: Command) -> list[str]:
    """The paths of CM's cache entries tagged get,python3 (`cm show cache`)."""
    shown = subprocess.run([cm.argv[0], "show", "cache", f"--tags={CM_TAGS}"], env=cm.env, cwd=cm.cwd,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    return re.findall(r"^\s*Path:\s*(\S+)", shown.stdout, flags=re.M)


def check_cm(cm: Command) -> dict:
    """CM's version, its get,python3 cache entry (filled by one run when absent), and a verbose run that loads it."""
    version = call(Command(cm.name, (cm.argv[0], "version"), cm.env, cm.cwd)).stdout.strip().splitlines()[-1]
    entries = cm_cache_entries(cm)
    filled = False
    if not entries:  # the first run detects Python and fills the cache; it is not timed
        call(cm)
        entries, filled = cm_cache_entries(cm), True
    if len(entries) != 1:
        raise SetupError(f"`cm show cache --tags={CM_TAGS}` lists {len(entries)} entries, not 1: {entries}")
    verbose = call(cm, "-v")
    said = verbose.stdout + verbose.stderr
    if "Found cached script output" not in said:
        raise SetupError(f"CM's run with -v did not report a cached output:\n{said[-3000:]}")
    return {"cm_version": version, "cm_repos": cm.env["CM_REPOS"], "cache_entry": entries[0],
            "cache_filled_by_this_bench": filled, "cached_run_verified": True}


def check_cmx_cached(cmd: Command) -> dict:
    """Run a one-step cmx query twice (--json): the second must be served from the cache."""
    runs = []
    for _ in range(2):
        proc = subprocess.run([*cmd.argv, "--json"], env=cmd.env, cwd=cmd.cwd, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=600)
        try:
            runs.append(json.loads(proc.stdout))
        except json.JSONDecodeError:
            raise SetupError(f"`{' '.join(cmd.argv)} --json` exited {proc.returncode} without JSON\n"
                             f"--- stderr\n{proc.stderr[-3000:]}") from None
    first, second = runs
    if not (first.get("ok") and second.get("ok")):
        raise SetupError(f"`{' '.join(cmd.argv)}` failed: {json.dumps(second)[:3000]}")
    statuses = {k: v["status"] for k, v in second["steps"].items()}
    if set(statuses.values()) - {"cached", "not-needed"} or statuses.get(second["root"]) != "cached":
        raise SetupError(f"the second `{' '.join(cmd.argv)}` is not served from the cache: {statuses}")
    return {"first_run": {k: v["status"] for k, v in first["steps"].items()}, "second_run": statuses}


def time_rounds(commands: list[Command], runs: int) -> list[dict]:
    """Wall and CPU seconds of every command: one warm-up each, then `runs` rotated rounds."""
    walls: dict[str, list[float]] = {c.name: [] for c in commands}
    cpus: dict[str, list[float]] = {c.name: [] for c in commands}
    for r in range(runs + 1):  # round 0 is the warm-up
        for k in range(len(commands)):
            cmd = commands[(r + k) % len(commands)]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(cmd.argv, env=cmd.env, cwd=cmd.cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode != 0:
                raise SetupError(f"`{' '.join(cmd.argv)}` exited with status {proc.returncode}\n"
                                 f"--- stderr\n{proc.stderr.decode(errors='replace')[-3000:]}")
            if r:
                walls[cmd.name].append(elapsed)
                cpus[cmd.name].append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return [{"name": c.name, "command": list(c.argv),
             "median_s": statistics.median(walls[c.name]), "min_s": min(walls[c.name]),
             "max_s": max(walls[c.name]), "cpu_median_s": statistics.median(cpus[c.name]),
             "samples_s": [round(s, 5) for s in walls[c.name]],
             "cpu_samples_s": [round(s, 5) for s in cpus[c.name]]} for c in commands]


def compare(cmx: str, python: str, root: Path, tmp: Path, base_env: dict[str, str], chain: Command,
            cm_path: Path, cm_repos: Path, runs: int, say) -> dict:
    """Check both sides' cached runs, time them side by side, and return the rows and the cmx/CM ratios."""
    plain = {k: v for k, v in base_env.items() if not k.startswith(("CMX_", "CM_"))}
    repo_home = tmp / "repo-registry"
    cmx_env = {**plain, "CMX_HOME": str(root), "CMX_CACHE": str(repo_home / "cache"),
               "CMX_RUNS": str(repo_home / "runs")}
    cm_cwd = tmp / "cm-cwd"  # CM may write tmp-run files into its working folder
    cm_cwd.mkdir(parents=True, exist_ok=True)
    cm = Command(f"cm run script --tags={CM_TAGS} --quiet (cached)",
                 (str(cm_path), "run", "script", f"--tags={CM_TAGS}", "--quiet"),
                 {**plain, "CM_REPOS": str(cm_repos)}, cm_cwd)
    one = Command(f'cmx run "{CMX_ONE_STEP}" (cached, shipped registry)',
                  (cmx, "run", CMX_ONE_STEP, "--progress", "none"), cmx_env, root)
    detect_python = Command(f'cmx run "{CMX_PYTHON}" (not cached by design)',
                            (cmx, "run", CMX_PYTHON, "--progress", "none"), cmx_env, root)
    floor = Command("python -c pass (floor)", (python, "-c", "pass"), plain, root)

    facts = {"cm": check_cm(cm), "cmx_one_step": check_cmx_cached(one), "cmx_registry": str(root / "registry.yaml")}
    say(f"CM {facts['cm']['cm_version']} ({cm_path}, CM_REPOS={facts['cm']['cm_repos']}): cached entry "
        f"{facts['cm']['cache_entry']}" + (" (filled now by one untimed run)" if facts['cm']['cache_filled_by_this_bench']
                                          else "") + "; a run with -v reports 'Found cached script output'")
    say(f'cmx run "{CMX_ONE_STEP}" on {facts["cmx_registry"]}: first run {facts["cmx_one_step"]["first_run"]}, '
        f'second {facts["cmx_one_step"]["second_run"]}')
    say(f"timing side by side: {runs} rounds of 5 commands after one warm-up round ...")
    rows = time_rounds([floor, cm, one, chain, detect_python], runs)
    after = cm_cache_entries(cm)
    if after != [facts["cm"]["cache_entry"]]:
        raise SetupError(f"CM's get,python3 cache changed while timing (a run was not cached): {after}")
    cm_row = rows[1]
    for row in rows:
        row["x_cm_wall"] = row["median_s"] / cm_row["median_s"]
        row["x_cm_cpu"] = row["cpu_median_s"] / cm_row["cpu_median_s"] if cm_row["cpu_median_s"] else None
        row["x_floor"] = row["median_s"] / rows[0]["median_s"]
        row["goal"] = (None if row["name"].startswith(("cm ", "python ")) or "not cached" in row["name"]
                       else ("meets goal" if row["x_cm_wall"] <= GOAL else "OVER"))
    return {"facts": facts, "rows": rows, "goal_x_cm": GOAL}


def table(side: dict) -> str:
    head = ("command", "median s", "min s", "max s", "cpu s", "x CM wall", "x CM cpu", "x floor", f"goal <= {GOAL}")
    rows = [(r["name"], f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['max_s']:.3f}", f"{r['cpu_median_s']:.3f}",
             f"{r['x_cm_wall']:.2f}", "-" if r["x_cm_cpu"] is None else f"{r['x_cm_cpu']:.2f}",
             f"{r['x_floor']:.1f}", r["goal"] or "-") for r in side["rows"]]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in rows]
    return "\n".join(lines)
