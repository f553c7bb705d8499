"""cmx's cached runs side by side with CM's (and MLCFlow's) cached `run script --tags=get,python3` (plan_speed.py --cm).

Both sides are timed the same way, in the same rounds: whole processes, one untimed warm-up of each
command, then `runs` rounds in which every command runs once, the starting command rotating from
round to round so that a load change on a shared machine falls on all of them alike. Before timing
it checks that each side's run is served from its cache; after timing, that CM's (MLCFlow's) cache
did not change (no run detected Python again) and that the run record of every cmx run it timed
says every step was cached.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
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


@dataclass(frozen=True)
class Tool:
    """How to drive one of MLCommons' automation CLIs: CM (`cm`) or MLCFlow (`mlc`)."""
    label: str
    home_var: str  # the environment variable naming its home (repos.json, repos/, the cache)
    home_dir: str  # bench/setup-cm.sh's name for that home beside the virtualenv
    list_cache: tuple[str, ...]  # the command listing cache entries by tags
    entry: str  # a regex whose group is an entry's path in that listing


CM = Tool("CM", "CM_REPOS", "cm-repos", ("show", "cache"), r"^\s*Path:\s*(\S+)")
MLC = Tool("MLCFlow", "MLC_REPOS", "mlc-repos", ("find", "cache"), r"Item path:\s*(\S+)")


def home_of(tool: Tool, exe: Path, given: str | None) -> Path:
    """The tool's home: the option, else its environment variable, else <venv>/<home_dir> (bench/setup-cm.sh)."""
    for candidate in (given, os.environ.get(tool.home_var), str(exe.resolve().parent.parent / tool.home_dir)):
        if candidate and (Path(candidate) / "repos.json").is_file():
            return Path(candidate)
    raise SetupError(f"no {tool.label} home (a folder with repos.json) for {exe}: pass --{exe.name}-repos DIR "
                     f"or set {tool.home_var}; bench/setup-cm.sh makes CM's")


def cache_entries(tool: Tool, cmd: Command) -> list[str]:
    """The paths of the tool's cache entries tagged get,python3."""
    shown = subprocess.run([cmd.argv[0], *tool.list_cache, f"--tags={CM_TAGS}"], env=cmd.env, cwd=cmd.cwd,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    return re.findall(tool.entry, shown.stdout + shown.stderr, flags=re.M)


def check_tool(tool: Tool, cmd: Command) -> dict:
    """Its version, its get,python3 cache entry (filled by one untimed run when absent), and a verbose run
    that reports loading it."""
    said = call(Command(cmd.name, (cmd.argv[0], "version"), cmd.env, cmd.cwd))
    version = (said.stdout + said.stderr).strip().splitlines()[-1]
    entries = cache_entries(tool, cmd)
    filled = False
    if not entries:  # the first run detects Python and fills the cache; it is not timed
        call(cmd)
        entries, filled = cache_entries(tool, cmd), True
    if len(entries) != 1:
        raise SetupError(f"{tool.label}'s cache lists {len(entries)} get,python3 entries, not 1: {entries}")
    verbose = call(cmd, "-v")
    said_v = verbose.stdout + verbose.stderr
    if "Found cached script output" not in said_v:
        raise SetupError(f"{tool.label}'s run with -v did not report a cached output:\n{said_v[-3000:]}")
    return {"version": version, "home": cmd.env[tool.home_var], "cache_entry": entries[0],
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


def run_records(cmd: Command) -> set[str]:
    """The run folders (each with its run.json) in the CMX_RUNS of a cmx command."""
    runs = Path(cmd.env["CMX_RUNS"])
    return {p.name for p in runs.iterdir()} if runs.is_dir() else set()


def check_records(cmd: Command, before: set[str], expected: int) -> dict[str, int]:
    """Every run the timing made of a cmx command recorded every step cached (or below a cached step)."""
    runs = Path(cmd.env["CMX_RUNS"])
    new = sorted(run_records(cmd) - before)
    if len(new) != expected:
        raise SetupError(f"`{' '.join(cmd.argv)}` left {len(new)} run records in {runs}, not {expected}")
    counts: dict[str, int] = {}
    for name in new:
        record = json.loads((runs / name / "run.json").read_text(encoding="utf-8"))
        statuses = [r["status"] for r in record["results"].values()]
        if record["status"] != "ok" or set(statuses) - {"cached", "not-needed"}:
            raise SetupError(f"a timed `{' '.join(cmd.argv)}` was not served from the cache: {runs / name}: "
                             f"{record['status']}, steps {statuses}")
        for status in statuses:
            counts[status] = counts.get(status, 0) + 1
    return counts


def timed(argv: list[str] | tuple[str, ...], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """The wall-clock and CPU (user + system) seconds of one whole process; SetupError if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True,
                          stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SetupError(f"`{' '.join(argv)}` exited with status {proc.returncode}\n"
                         f"--- stderr\n{proc.stderr.decode(errors='replace')[-3000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def time_rounds(commands: list[Command], runs: int) -> list[dict]:
    """Wall and CPU seconds of every command: one warm-up each, then `runs` rotated rounds."""
    walls: dict[str, list[float]] = {c.name: [] for c in commands}
    cpus: dict[str, list[float]] = {c.name: [] for c in commands}
    for r in range(runs + 1):  # round 0 is the warm-up
        for k in range(len(commands)):
            cmd = commands[(r + k) % len(commands)]
            elapsed, cpu = timed(cmd.argv, cmd.env, cmd.cwd)
            if r:
                walls[cmd.name].append(elapsed)
                cpus[cmd.name].append(cpu)
    return [{"name": c.name, "command": list(c.argv),
             "median_s": statistics.median(walls[c.name]), "min_s": min(walls[c.name]),
             "max_s": max(walls[c.name]), "cpu_median_s": statistics.median(cpus[c.name]),
             "samples_s": [round(s, 5) for s in walls[c.name]],
             "cpu_samples_s": [round(s, 5) for s in cpus[c.name]]} for c in commands]


def compare(cmx: str, python: str, root: Path, tmp: Path, base_env: dict[str, str], chain: Command,
            tools: list[tuple[Tool, Path, Path]], runs: int, say: Callable[[str], None]) -> dict:
    """Check every side's cached run, time them side by side, and return the rows and the ratios to each tool.

    tools: (CM or MLC, its executable, its home)."""
    plain = {k: v for k, v in base_env.items() if not k.startswith(("CMX_", "CM_", "MLC_"))}
    repo_home = tmp / "repo-registry"
    cmx_env = {**plain, "CMX_HOME": str(root), "CMX_CACHE": str(repo_home / "cache"),
               "CMX_RUNS": str(repo_home / "runs")}
    # their processes get no PYTHONPATH: one pointing at a cmx checkout (to time it) is no part of their set-up
    foreign = {k: v for k, v in plain.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    theirs = []
    for tool, exe, home in tools:
        cwd = tmp / f"{tool.home_dir}-cwd"  # they may write tmp-run files into their working folder
        cwd.mkdir(parents=True, exist_ok=True)
        theirs.append((tool, Command(f"{exe.name} run script --tags={CM_TAGS} --quiet (cached)",
                                     (str(exe), "run", "script", f"--tags={CM_TAGS}", "--quiet"),
                                     {**foreign, tool.home_var: str(home)}, cwd)))
    one = Command(f'cmx run "{CMX_ONE_STEP}" (cached, shipped registry)',
                  (cmx, "run", CMX_ONE_STEP, "--progress", "none"), cmx_env, root)
    detect_python = Command(f'cmx run "{CMX_PYTHON}" (not cached by design)',  # its own records (see check_records)
                            (cmx, "run", CMX_PYTHON, "--progress", "none"),
                            {**cmx_env, "CMX_RUNS": str(repo_home / "runs-detect-python")}, root)
    floor = Command("python -c pass (floor)", (python, "-c", "pass"), plain, root)

    facts: dict = {"cmx_registry": str(root / "registry.yaml")}
    for tool, cmd in theirs:
        f = facts[tool.label] = check_tool(tool, cmd)
        say(f"{tool.label} {f['version']} ({cmd.argv[0]}, {tool.home_var}={f['home']}): cached entry "
            f"{f['cache_entry']}" + (" (filled now by one untimed run)" if f["cache_filled_by_this_bench"] else "")
            + "; a run with -v reports 'Found cached script output'")
    facts["cmx_one_step"] = check_cmx_cached(one)
    say(f'cmx run "{CMX_ONE_STEP}" on {facts["cmx_registry"]}: first run {facts["cmx_one_step"]["first_run"]}, '
        f'second {facts["cmx_one_step"]["second_run"]}')
    commands = [floor, *(cmd for _, cmd in theirs), one, chain, detect_python]
    say(f"timing side by side: {runs} rounds of {len(commands)} commands after one warm-up round ...")
    before = {c.name: run_records(c) for c in (one, chain)}
    rows = time_rounds(commands, runs)
    for c in (one, chain):  # the warm-up and every timed run of cmx's cached commands
        counts = facts.setdefault("cmx_timed_run_records", {})[c.name] = check_records(c, before[c.name], runs + 1)
        say(f"{c.name}: {runs + 1} run records, steps {counts}")
    for tool, cmd in theirs:
        after = cache_entries(tool, cmd)
        if after != [facts[tool.label]["cache_entry"]]:
            raise SetupError(f"{tool.label}'s get,python3 cache changed while timing (a run was not cached): {after}")
    by_name = {r["name"]: r for r in rows}
    for row in rows:
        row["x_floor"] = row["median_s"] / rows[0]["median_s"]
        row["ratios"] = {}
        for tool, cmd in theirs:
            ref = by_name[cmd.name]
            row["ratios"][tool.label] = {
                "wall": row["median_s"] / ref["median_s"],
                "cpu": row["cpu_median_s"] / ref["cpu_median_s"] if ref["cpu_median_s"] else None}
        judged = row["name"].startswith("cmx ") and "not cached" not in row["name"] and "CM" in row["ratios"]
        row["goal"] = (("meets goal" if row["ratios"]["CM"]["wall"] <= GOAL else "OVER") if judged else None)
    return {"facts": facts, "rows": rows, "goal_x_cm": GOAL, "tools": [t.label for t, _ in theirs]}


def table(side: dict) -> str:
    head = ["command", "median s", "min s", "max s", "cpu s"]
    for label in side["tools"]:
        head += [f"x {label} wall", f"x {label} cpu"]
    head += ["x floor"] + ([f"goal <= {GOAL} x CM"] if "CM" in side["tools"] else [])
    rows = []
    for r in side["rows"]:
        row = [r["name"], f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['max_s']:.3f}", f"{r['cpu_median_s']:.3f}"]
        for label in side["tools"]:
            ratio = r["ratios"][label]
            row += [f"{ratio['wall']:.2f}", "-" if ratio["cpu"] is None else f"{ratio['cpu']:.2f}"]
        row += [f"{r['x_floor']:.1f}"] + ([r["goal"] or "-"] if "CM" in side["tools"] else [])
        rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths, strict=True))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
              for row in rows]
    return "\n".join(lines)
