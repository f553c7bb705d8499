"""docs/submitting.md's GPU-node commands (its ```sh blocks) plan here: every `cmx run`, `cmx tune` and `cmx run
--docker` on the page is turned into what checks it without a GPU (`cmx plan`, the tune's own refusals, `cmx docker
--print-run`), in a throw-away cmx home, with the page's inputs files written where the commands read them."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.docs.console import Block, Directive, items

PAGE = REPO / "docs" / "submitting.md"
CMX = [sys.executable, "-m", "cmx"]
# options of `cmx run` that `cmx plan` does not take and that change nothing in the plan
RUN_ONLY_FLAGS = {"--install-missing", "--dry-run", "--json"}
RUN_ONLY_VALUED = {"--progress", "--jobs", "-j"}
DOCKER_VALUED = {"--gpus", "--base-image", "--ca-bundle", "--wheelhouse"}
SCENARIO_VARIATIONS = ("_offline", "_server", "_interactive", "_all-scenarios")


def files(text: str) -> dict[str, str]:
    """The page's files by name: each block under a `<!-- console: file PATH -->` directive (the console runner's)."""
    found: dict[str, str] = {}
    path = None
    for item in items(text):
        if isinstance(item, Directive):
            path = item.argument if item.name == "file" else path
        elif path is not None:
            found[Path(path).name], path = item.text + "\n", None
    return found


def commands(block: Block) -> list[str]:
    """The block's shell lines, continuations joined, comments dropped."""
    joined: list[str] = []
    buf = ""
    for line in block.text.splitlines():
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        joined.append((buf + line).strip())
        buf = ""
    return [c for c in joined if c and not c.startswith("#")]


PAGE_TEXT = PAGE.read_text(encoding="utf-8")
BLOCKS = [item for item in items(PAGE_TEXT) if isinstance(item, Block)]
FILES = files(PAGE_TEXT)
CMX_COMMANDS = [c for b in BLOCKS if b.info == "sh" for c in commands(b)
                if re.match(r"cmx (run|tune|check|docker) ", c)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """The environment the commands run in: a cmx home over the checkout's recipes, and $WORK holding the page's
    inputs files (as `$WORK/<name>`, where the page says to save them) and the files the commands name."""
    root = tmp_path_factory.mktemp("submitting")
    home, work = root / "home", root / "work"
    home.mkdir()
    work.mkdir()
    (home / "registry.yaml").write_text(yaml.safe_dump({"sources": [{"name": "builtin",
                                                                     "path": str(REPO / "recipes")}]}))
    for name, text in FILES.items():
        (work / name).write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CMX_") and k not in ("HF_TOKEN", "HF_ENDPOINT", "DOCKER_HOST")}
    env.update(CMX_HOME=str(home), WORK=str(work), PYTHONUNBUFFERED="1")
    for command in CMX_COMMANDS:
        words = argv(command, env)
        if words[1] == "tune":
            write_tuned(split_options(words[2:])[1])
    return env, work


def write_tuned(valued: dict[str, list[str]]) -> None:
    """What a tune leaves for the commands after it: its `--out` file with the scenario's target merged in (the
    start stands for the answer), so that a command reading that file plans as it would on the node."""
    out = valued.get("--out", [None])[0]
    if out is None:
        return
    path = Path(out)
    (scenario,) = valued.get("--scenario", valued.get("-s", []))
    target = f"target_qps_{scenario.lower()}"
    values = yaml.safe_load(path.read_text()) if path.is_file() else {}
    start = (valued.get("--start") or [None])[0]
    if start is not None or target not in values:
        values[target] = float(start) if start is not None else None
    path.write_text(yaml.safe_dump(values, sort_keys=False))


def argv(command: str, env: dict[str, str]) -> list[str]:
    """The command's words, with $NAME and ${NAME} of `env` filled in as the shell would."""
    def fill(m: re.Match[str]) -> str:
        return env.get(m.group(1) or m.group(2), m.group(0))

    return [re.sub(r"\$(\w+)|\$\{(\w+)\}", fill, w) for w in shlex.split(command, comments=True)]


def split_options(words: list[str]) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """(the query's words, valued options by name, flags), `--input` and `-i` kept in their order."""
    query: list[str] = []
    valued: dict[str, list[str]] = {}
    flags: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-"):
            query.append(w)
        elif w in {"--docker", "--rebuild", "--keep", "--no-confirm", *RUN_ONLY_FLAGS}:
            flags.append(w)
        else:
            name, _, inline = w.partition("=")
            if inline:
                valued.setdefault(name, []).append(inline)
            else:
                valued.setdefault(name, []).append(words[i + 1])
                i += 1
        i += 1
    return query, valued, flags


def inputs_of(valued: dict[str, list[str]]) -> list[str]:
    return [*valued.get("--input", []), *valued.get("-i", [])]


def cmx(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMX, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def device_of(query: str) -> str | None:
    return next((d for d in ("rocm", "cuda", "cpu") if f"_{d}" in query.split()), None)


def test_the_page_has_the_commands_of_both_nodes_and_of_each_step() -> None:
    """The extraction below found what the page is about (a parser that found nothing would pass every test)."""
    text = "\n".join(CMX_COMMANDS)
    for needed in ("cmx run \"app mlperf inference llama2 _rocm _fp8\"",
                   "cmx run \"app mlperf inference llama2 _cuda\"",
                   "cmx tune \"app mlperf inference llama2 _rocm _fp8\" --scenario Server",
                   "cmx tune \"app mlperf inference llama2 _cuda\" --scenario Offline",
                   "cmx run \"generate mlperf submission\"", "cmx check ", "--docker",
                   "cmx run \"app mlperf inference gpt-oss-120b _cuda\""):
        assert needed in text, needed
    assert set(FILES) >= {"mi300x.yaml", "h200.yaml", "system-mi300x.yaml"}


def test_no_sh_block_holds_a_prompt_and_every_console_block_is_a_cpu_command() -> None:
    """GPU-node commands go in ```sh blocks without a `$ ` prompt; a console example (run and compared by
    tests/docs/console.py) must be one that needs no GPU: a plan or a container's settings."""
    for b in BLOCKS:
        first = b.text.splitlines()[0] if b.text.strip() else ""
        if b.info == "sh":
            assert not first.startswith("$ "), first
        if b.info == "" and first.startswith("$ "):
            for line in b.text.splitlines():
                if line.startswith("$ "):
                    assert re.search(r"\bcmx (plan|docker \S.* --print-run|show|find)\b", line), line


@pytest.mark.parametrize("command", CMX_COMMANDS,
                         ids=[f"{n}-" + "-".join(re.findall(r"[\w.-]+", c)[1:6]) for n, c in enumerate(CMX_COMMANDS)])
def test_each_command_on_the_page_plans_here(command: str, site: tuple[dict[str, str], Path]) -> None:
    env, work = site
    words = argv(command, env)
    verb, rest = words[1], words[2:]
    query_words, valued, flags = split_options(rest)
    assert verb == "check" or len(query_words) == 1, f"one quoted query: {words}"
    if verb == "check":
        check_parses(query_words, valued, env, work)
    elif verb == "tune":
        plan_tune(query_words[0], valued, env, work)
    elif "--docker" in flags:
        print_run(query_words[0], valued, env, work)
    else:
        plan_run(query_words[0], valued, env, work)


def plan_args(valued: dict[str, list[str]], drop: set[str]) -> list[str]:
    out: list[str] = []
    for name, values in valued.items():
        if name in drop:
            continue
        for v in values:
            out += [name, v]
    return out


def plan_run(query: str, valued: dict[str, list[str]], env: dict[str, str], work: Path) -> None:
    run = cmx(["plan", query, *plan_args(valued, RUN_ONLY_VALUED)], env, work)
    assert run.returncode == 0, run.stdout + run.stderr
    head = run.stdout.splitlines()[0]
    device = device_of(query)
    if device and query.startswith("app "):
        assert f"_{device}" in head.split(), head
    for v in (w for w in query.split() if w.startswith("_")):
        assert v in head.split() or v in run.stdout, (v, run.stdout)


def plan_tune(query: str, valued: dict[str, list[str]], env: dict[str, str], work: Path) -> None:
    """What the tune checks before it runs anything (`tune_target`), and the plan of the run its answer is for: the
    query with the tuned scenario's variation and the start as that scenario's target."""
    (scenario,) = valued.get("--scenario", valued.get("-s", []))
    start = (valued.get("--start") or [None])[0]
    inputs = dict(i.split("=", 1) for i in inputs_of(valued))
    files = valued.get("--inputs-file", [])
    for f in files:
        assert Path(f).is_file(), f"{f}: the page's inputs file is not among its file blocks"
        inputs = {**{k: str(v) for k, v in yaml.safe_load(Path(f).read_text()).items()}, **inputs}
    assert device_of(query), f"{query}: cmx tune refuses a query that names no device"
    words = [w for w in query.split() if w not in SCENARIO_VARIATIONS] + [f"_{scenario.lower()}"]
    target = f"target_qps_{scenario.lower()}"
    if start is not None:
        inputs[target] = start
    assert target in inputs, f"no --start and no {target} in the inputs: cmx tune has nothing to start from"
    args = ["plan", " ".join(words)] + [a for k, v in inputs.items() for a in ("--input", f"{k}={v}")]
    run = cmx(args, env, work)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"_{device_of(query)}" in run.stdout.splitlines()[0].split()
    tune_refusals(query, scenario, inputs, start, env)
    out = valued.get("--out", [None])[0]
    assert out is None or Path(out).parent.is_dir(), out


def tune_refusals(query: str, scenario: str, inputs: dict[str, str], start: str | None,
                  env: dict[str, str]) -> None:
    """cmx tune's own checks of the plan (`tune_target`: an app, a device, the scenario's rules, a start), in a
    child process so that the page's environment applies."""
    code = ("import json, sys\n"
            "from cmx.execute.request import Runtime, resolved\n"
            "from cmx.mlperf.tune.step import TuneRequest, tune_target\n"
            "from cmx.recipe.query import query_of\n"
            "from cmx.settings import load_settings\n"
            "q, scenario, inputs, start = json.loads(sys.argv[1])\n"
            "p = resolved(q, inputs, {}, Runtime(load_settings()))\n"
            "t = tune_target(p.root_step, query_of(q).variations, {}, "
            "TuneRequest(scenario, start_qps=float(start) if start else None))\n"
            "print(t.benchmark, t.scenario, t.start_qps)\n")
    payload = json.dumps([query, scenario, inputs, start])
    run = subprocess.run([sys.executable, "-c", code, payload], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert scenario.capitalize() in run.stdout


def print_run(query: str, valued: dict[str, list[str]], env: dict[str, str], work: Path) -> None:
    """`cmx run Q ... --docker` as `cmx docker Q --print-run`: the container's settings, worked out before any build
    (mounts, secrets)."""
    inputs = inputs_of(valued)
    for f in valued.get("--inputs-file", []):
        inputs = [f"{k}={v}" for k, v in yaml.safe_load(Path(f).read_text()).items()] + inputs
    args = ["docker", query, "--print-run",
            *plan_args({k: v for k, v in valued.items() if k in {"--input", "-i", "--inputs-file", *DOCKER_VALUED}},
                       set())]
    run = cmx(args, env, work)
    assert run.returncode == 0, run.stdout + run.stderr
    settings = json.loads(run.stdout)
    device = device_of(query)
    if device == "rocm":
        assert "/dev/kfd:/dev/kfd:rwm" in settings["devices"] and not settings["device_requests"]
    elif device == "cuda":
        assert settings["device_requests"][0]["driver"] == "nvidia" and not settings["devices"]
    assert settings["command"][:3] == ["cmx", "run", query]
    results = next((i.split("=", 1)[1] for i in inputs if i.startswith("results_dir=")), None)
    if results:  # the results folder reaches the container at its own path
        assert any(results.startswith(m["target"]) for m in settings["mounts"]), settings["mounts"]


def check_parses(paths: list[str], valued: dict[str, list[str]], env: dict[str, str], work: Path) -> None:
    """`cmx check` takes the options as written: on a tree that is not there yet it reports that (exit 1), not a
    usage error (exit 2)."""
    run = cmx(["check", *paths, *plan_args(valued, set())], env, work)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[layout.root]" in run.stdout
