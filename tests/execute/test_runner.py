"""The runner, through the CLI (`cmx run`, `cmx plan`) and the Python API (cmx.api.run)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

import cmx
from cmx import api
from cmx.errors import StepFailed
from tests.conftest import CMX, Home, interruptible

SECRET = "hunter2-Zq81xPw-not-for-logs"


def cli(home: Home, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`cmx ARGS` in this home with extra environment variables (home.cmx cannot add any)."""
    return subprocess.run([*CMX, *args], env={**home.env, **(env or {})}, cwd=home.root, capture_output=True,
                          text=True, timeout=120)


def counting(counter: Path, body: str = "    return {}") -> str:
    """A run.py that appends a line to `counter` (outside the cache), then runs `body`."""
    return f"def run(ctx):\n    with open({str(counter)!r}, 'a') as f:\n        f.write('ran\\n')\n{body}\n"


def runs(counter: Path) -> int:
    return counter.read_text().count("ran") if counter.exists() else 0


def run_json(result_or_dir: dict | str | Path) -> dict:
    run_dir = result_or_dir["run_dir"] if isinstance(result_or_dir, dict) else result_or_dir
    return json.loads((Path(run_dir) / "run.json").read_text())


def _count_recipe(home: Home, counter: Path, name: str = "count") -> None:
    home.recipe(name, f"""
        name: {name}
        summary: counts its runs
        tags: [{name}]
        inputs:
          n: {{type: int, default: 1}}
        cache: true
        outputs:
          doubled: {{type: int}}
        """, counting(counter, "    return {'doubled': 2 * ctx.inputs['n']}"))


# --- caching -----------------------------------------------------------------------------------

def test_cached_step_is_built_once_and_reused(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _count_recipe(home, counter)
    first = home.cmx_json("run", "count")
    second = home.cmx_json("run", "count")
    assert first["steps"]["count"]["status"] == "built"
    assert second["steps"]["count"]["status"] == "cached"
    assert first["outputs"] == second["outputs"] == {"doubled": 2}
    assert runs(counter) == 1


def test_cached_step_is_reused_through_the_api_too(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _count_recipe(home, counter)
    home.cmx("run", "count", check=True)
    result = api.run("count", settings=home.settings)
    assert result.steps["count"].status == "cached" and result.outputs == {"doubled": 2}
    assert runs(counter) == 1


def test_changing_an_input_rebuilds_and_going_back_reuses(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _count_recipe(home, counter)
    one = home.cmx_json("run", "count")
    three = home.cmx_json("run", "count", "--input", "n=3")
    assert three["outputs"] == {"doubled": 6} and three["steps"]["count"]["status"] == "built"
    assert three["steps"]["count"]["key"] != one["steps"]["count"]["key"]
    back = home.cmx_json("run", "count", "--input", "n=1")  # the default, given explicitly: same key
    assert back["steps"]["count"]["status"] == "cached"
    assert back["steps"]["count"]["key"] == one["steps"]["count"]["key"]
    assert runs(counter) == 2


def test_editing_run_py_rebuilds(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _count_recipe(home, counter)
    home.cmx("run", "count", check=True)
    (home.recipes / "count" / "run.py").write_text(counting(counter, "    return {'doubled': 99}"))
    assert home.cmx_json("run", "count")["outputs"] == {"doubled": 99}
    assert runs(counter) == 2


def test_a_cached_parent_makes_its_deps_unnecessary(home: Home, tmp_path: Path) -> None:
    child_counter, parent_counter = tmp_path / "child", tmp_path / "parent"
    home.recipe("child", """
        name: child
        summary: never cached, so it would run every time it is needed
        tags: [child]
        cache: false
        outputs:
          v: {type: int}
        """, counting(child_counter, "    return {'v': 5}"))
    home.recipe("parent", """
        name: parent
        summary: cached
        tags: [parent]
        deps:
          - tags: child
            as: child
        cache: true
        outputs:
          v: {type: int}
        """, counting(parent_counter, "    return {'v': ctx.deps.child.outputs['v'] + 1}"))
    first = home.cmx_json("run", "parent")
    assert first["outputs"] == {"v": 6} and first["steps"]["child"]["status"] == "ran"
    second = home.cmx_json("run", "parent")
    assert second["steps"]["parent"]["status"] == "cached"
    assert second["steps"]["child"]["status"] == "not-needed"
    assert runs(child_counter) == 1 and runs(parent_counter) == 1
    tree = home.cmx("plan", "parent", check=True).stdout
    assert "not needed (below a cached step)" in tree


# --- what a step sees ------------------------------------------------------------------------

def test_dep_outputs_reach_the_parent_through_ctx_deps(home: Home) -> None:
    home.recipe("get-base", """
        name: get-base
        summary: a dep with outputs
        tags: [get, base]
        inputs:
          word: {type: str, default: alpha}
        cache: true
        outputs:
          word: {type: str}
          file: {type: path}
        """, """
        def run(ctx):
            (ctx.workdir / "w.txt").write_text(ctx.inputs["word"] * 2)
            return {"word": ctx.inputs["word"], "file": str(ctx.workdir / "w.txt")}
        """)
    home.recipe("app", """
        name: app
        summary: reads its dep
        tags: [app]
        deps:
          - tags: get base
            with: {word: beta}
            as: base
        outputs:
          seen: {type: str}
          content: {type: str}
          dep_key: {type: str}
          named: {type: list}
        """, """
        from pathlib import Path
        def run(ctx):
            base = ctx.deps.base
            return {"seen": base.outputs["word"], "content": Path(base.outputs["file"]).read_text(),
                    "dep_key": base.key, "named": list(ctx.deps)}
        """)
    result = api.run("app", settings=home.settings)
    assert result.outputs["seen"] == "beta"
    assert result.outputs["content"] == "betabeta"
    assert result.outputs["dep_key"] == result.steps["get-base"].key
    assert result.outputs["named"] == ["base"]


def test_ctx_inputs_are_typed(home: Home, tmp_path: Path) -> None:
    given = tmp_path / "given.txt"
    given.write_text("x")
    home.recipe("typed", """
        name: typed
        summary: reports the Python types of its inputs
        tags: [typed]
        inputs:
          count: {type: int, default: 1}
          ratio: {type: float, default: 0.5}
          flag: {type: bool, default: false}
          name: {type: str, default: x}
          where: {type: path, default: null}
          mode: {type: choice, choices: [fast, slow], default: fast}
        outputs:
          types: {type: dict}
          values: {type: dict}
        """, """
        def run(ctx):
            names = ["count", "ratio", "flag", "name", "where", "mode"]
            return {"types": {n: type(ctx.inputs[n]).__name__ for n in names},
                    "values": {n: str(ctx.inputs[n]) for n in names}}
        """)
    out = home.cmx_json("run", "typed", "--input", "count=42", "--input", "ratio=2", "--input", "flag=yes",
                        "--input", "name=007", "--input", f"where={given}", "--input", "mode=slow")["outputs"]
    assert out["types"] == {"count": "int", "ratio": "float", "flag": "bool", "name": "str",
                            "where": "PosixPath", "mode": "str"}
    assert out["values"] == {"count": "42", "ratio": "2.0", "flag": "True", "name": "007", "where": str(given),
                             "mode": "slow"}
    bad = home.cmx("run", "typed", "--input", "count=many")
    assert bad.returncode != 0 and "integer" in bad.stderr
    bad_choice = home.cmx("run", "typed", "--input", "mode=medium")
    assert bad_choice.returncode != 0 and "fast" in bad_choice.stderr


def test_a_user_path_input_is_used_in_place_and_its_key_follows_size_and_mtime(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    model = tmp_path / "models" / "weights.bin"
    model.parent.mkdir()
    model.write_bytes(b"w" * 10)
    home.recipe("use-model", """
        name: use-model
        summary: reads a model the user already has
        tags: [use-model]
        inputs:
          model: {type: path}
        cache: true
        outputs:
          model: {type: path}
          size: {type: int}
        """, counting(counter, "    m = ctx.inputs['model']\n    return {'model': str(m), 'size': m.stat().st_size}"))
    first = home.cmx_json("run", "use-model", "--input", f"model={model}")
    assert first["outputs"] == {"model": str(model), "size": 10}  # the user's file itself, not a copy
    entry = Path(first["steps"]["use-model"]["entry"])
    assert not list(entry.rglob("weights.bin"))
    assert json.loads((entry / "meta.json").read_text())["outputs"]["model"] == str(model)

    def key() -> str:
        plan = home.cmx_json("plan", "use-model", "--input", f"model={model}")
        return plan["steps"][0]["key"]

    k1 = key()
    assert k1 == first["steps"]["use-model"]["key"]
    model.write_bytes(b"w" * 11)  # size changes
    k2 = key()
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # only the mtime changes
    k3 = key()
    assert len({k1, k2, k3}) == 3
    again = home.cmx_json("run", "use-model", "--input", f"model={model}")
    assert again["steps"]["use-model"]["status"] == "built" and again["outputs"]["size"] == 11
    assert runs(counter) == 2


# --- secrets ---------------------------------------------------------------------------------

SECRET_RECIPE = """
    name: secret-user
    summary: needs a token
    tags: [secret-user]
    inputs:
      token: {type: secret, env: CMX_TEST_TOKEN}
      label: {type: str, default: plain}
    cache: true
    outputs:
      length: {type: int}
      matches: {type: bool}
      printed: {type: str}
    """

SECRET_DIGEST = hashlib.sha256(SECRET.encode()).hexdigest()
SECRET_RUN = f"""
import hashlib, sys
EXPECTED = {hashlib.sha256(SECRET.encode()).hexdigest()!r}  # the token's digest: run.py must not hold the token
PRINT = "import sys, os; print('arg', sys.argv[1]); print('env', os.environ['TK'])"
def run(ctx):
    token = ctx.inputs["token"]
    ctx.log.info("token object: %s", token)
    ctx.log.info("revealed by mistake: %s", token.reveal())
    done = ctx.run_cmd([sys.executable, "-c", PRINT, token], env={{"TK": token}})
    seen = token.reveal()
    return {{"length": len(seen), "matches": hashlib.sha256(seen.encode()).hexdigest() == EXPECTED,
            "printed": done.stdout.replace(seen, "<the token>")}}
"""


def test_a_secret_reaches_run_py_but_no_log_record_meta_or_key(home: Home) -> None:
    home.recipe("secret-user", SECRET_RECIPE, SECRET_RUN)
    proc = cli(home, "run", "secret-user", "--json", env={"CMX_TEST_TOKEN": SECRET})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outputs"]["matches"] is True and result["outputs"]["length"] == len(SECRET)
    # the command really got the secret, as an argument and in its environment, and printed it...
    assert result["outputs"]["printed"] == "arg <the token>\nenv <the token>"
    # ...yet the step's log has it redacted
    log = Path(result["steps"]["secret-user"]["log"]).read_text()
    assert "arg ********" in log and "env ********" in log
    assert "token object: ********" in log and "revealed by mistake: ********" in log
    assert SECRET not in log
    # no file cmx wrote anywhere in the home (cache entry, meta.json, run.json, logs, index) holds it
    leaks = [p for p in home.root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []
    assert SECRET not in proc.stdout + proc.stderr
    meta = json.loads((Path(result["steps"]["secret-user"]["entry"]) / "meta.json").read_text())
    assert meta["inputs"] == {"label": "plain"}
    assert "token" not in run_json(result)["plan"]["steps"][0]["inputs"]
    # the key does not depend on the secret: another token reuses the entry
    other = cli(home, "run", "secret-user", "--json", env={"CMX_TEST_TOKEN": "a-different-token"})
    assert json.loads(other.stdout)["steps"]["secret-user"]["status"] == "cached"
    assert json.loads(other.stdout)["steps"]["secret-user"]["key"] == result["steps"]["secret-user"]["key"]


def test_a_missing_secret_is_an_error_that_names_the_variable(home: Home) -> None:
    home.recipe("secret-user", SECRET_RECIPE, SECRET_RUN)
    proc = cli(home, "run", "secret-user")
    assert proc.returncode != 0
    assert "CMX_TEST_TOKEN" in proc.stderr


def test_a_secret_printed_by_a_failing_command_is_redacted_in_the_error(home: Home) -> None:
    home.recipe("leaky", """
        name: leaky
        summary: a command that prints the token and fails
        tags: [leaky]
        inputs:
          token: {type: secret, env: CMX_TEST_TOKEN}
        """, """
        import sys
        def run(ctx):
            script = "import sys; print('oops', sys.argv[1]); sys.exit(2)"
            ctx.run_cmd([sys.executable, "-c", script, ctx.inputs["token"]])
        """)
    proc = cli(home, "run", "leaky", env={"CMX_TEST_TOKEN": SECRET})
    assert proc.returncode == 1
    assert "oops ********" in proc.stderr and "exited with status 2" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    leaks = [p for p in home.root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []


def test_a_secret_given_on_the_command_line_reruns_through_its_variable_never_its_value(home: Home) -> None:
    home.recipe("twice", """
        name: twice
        summary: fails on its first try; checks the token on the next
        tags: [twice]
        inputs:
          token: {type: secret, env: CMX_TEST_TOKEN}
          label: {type: str, default: plain}
        """, f"""
        import hashlib
        from pathlib import Path
        def run(ctx):
            tried = Path({str(home.root / "tried")!r})
            if not tried.exists():
                tried.write_text("once")
                raise ValueError("the first try fails")
            assert hashlib.sha256(ctx.inputs["token"].reveal().encode()).hexdigest() == {SECRET_DIGEST!r}
            return {{}}
        """)
    first = cli(home, "run", "twice", "--input", f"token={SECRET}", "--input", "label=a b")
    assert first.returncode == 1 and SECRET not in first.stderr
    line = next(x for x in first.stderr.splitlines() if "re-run just this step: " in x).split(": ", 1)[1]
    assert line == """cmx run twice --input "token=$CMX_TEST_TOKEN" --input 'label=a b'"""
    shell = f"{shlex.join(CMX)} {line.removeprefix('cmx ')}"
    again = subprocess.run(["bash", "-c", shell], env={**home.env, "CMX_TEST_TOKEN": SECRET}, cwd=home.root,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr


def test_a_secret_given_on_the_command_line_is_not_recorded(home: Home) -> None:
    home.recipe("secret-user", SECRET_RECIPE, SECRET_RUN)
    proc = cli(home, "run", "secret-user", "--json", "--input", f"token={SECRET}")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outputs"]["matches"] is True
    assert "token=********" in run_json(result)["argv"]
    leaks = [p for p in home.root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []


def test_a_secret_quoted_in_an_error_message_is_redacted(home: Home) -> None:
    home.recipe("quotes", """
        name: quotes
        summary: fails with messages that contain the revealed token
        tags: [quotes]
        inputs:
          token: {type: secret, env: CMX_TEST_TOKEN}
          how: {type: choice, choices: [raise, cmd], default: raise}
        """, """
        import sys
        def run(ctx):
            token = ctx.inputs["token"].reveal()
            if ctx.inputs["how"] == "raise":
                raise RuntimeError("login failed for token " + token)
            ctx.run_cmd([sys.executable, "-c", "import sys; sys.exit(4)", "--token=" + token])
        """)
    for how, expected in (("raise", "login failed for token ********"),
                          ("cmd", "--token=******** exited with status 4")):
        proc = cli(home, "run", "quotes", "--input", f"how={how}", env={"CMX_TEST_TOKEN": SECRET})
        assert proc.returncode == 1
        assert expected in proc.stderr.replace("`", "")
        assert SECRET not in proc.stdout + proc.stderr
    leaks = [p for p in home.root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []


# --- failures --------------------------------------------------------------------------------

def _cmd_recipe(home: Home, name: str, script: str) -> None:
    home.recipe(name, f"""
        name: {name}
        summary: runs a command that fails
        tags: [{name}]
        """, f"""
        import sys
        def run(ctx):
            ctx.run_cmd([sys.executable, "-c", {script!r}])
        """)


def test_run_cmd_failure_names_the_exit_status_and_shows_the_last_lines(home: Home) -> None:
    _cmd_recipe(home, "exits", "import sys\nfor i in range(40): print('line', i)\nsys.exit(1)")
    proc = home.cmx("run", "exits")
    assert proc.returncode == 1
    err = proc.stderr
    message = next(line for line in err.splitlines() if "exited with status" in line)
    assert message.rstrip().endswith("exited with status 1")  # not a raw wait status (256)
    assert "256" not in message and "return code" not in err
    assert "line 39" in err and "line 38" in err  # the end of the output
    assert "line 0\n" not in err  # ...not all of it
    assert "log:" in err and "re-run just this step: cmx run exits" in err
    result = json.loads(home.cmx("run", "exits", "--json").stdout)
    assert result["ok"] is False and "exited with status 1" in result["error"]


def test_run_cmd_killed_by_a_signal_says_which(home: Home) -> None:
    _cmd_recipe(home, "dies",
                "import os, signal\nprint('about to die', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)")
    proc = home.cmx("run", "dies")
    assert proc.returncode == 1
    message = next(line for line in proc.stderr.splitlines() if "was killed by" in line)
    assert message.rstrip().endswith("was killed by SIGKILL")
    assert "-9" not in message and "137" not in message and "status" not in message
    assert "about to die" in proc.stderr


def test_run_cmd_failure_through_the_api_raises_step_failed(home: Home) -> None:
    _cmd_recipe(home, "exits", "import sys\nprint('bye')\nsys.exit(7)")
    with pytest.raises(StepFailed) as caught:
        api.run("exits", settings=home.settings)
    assert "exited with status 7" in caught.value.message
    assert caught.value.tail[-1].endswith("bye") or any("bye" in line for line in caught.value.tail)
    assert caught.value.chain == ["exits"]


@pytest.mark.parametrize(("outputs_yaml", "returned", "expected"), [
    ("{}", "{'surprise': 1}", "undeclared output"),
    ("{count: {type: int}}", "{}", "did not return declared output 'count'"),
    ("{count: {type: int}}", "{'count': 'many'}", "output 'count'"),
    ("{file: {type: path}}", "{'file': '/nonexistent/cmx-test/file.bin'}", "path that does not exist"),
    ("{count: {type: int}}", "['count', 1]", "not a dict"),
], ids=["undeclared", "missing", "wrong-type", "nonexistent-path", "not-a-dict"])
def test_bad_outputs_fail_the_step_and_publish_nothing(home: Home, outputs_yaml: str, returned: str,
                                                       expected: str) -> None:
    home.recipe("bad-out", f"""
        name: bad-out
        summary: returns the wrong outputs
        tags: [bad-out]
        cache: true
        outputs: {outputs_yaml}
        """, f"def run(ctx):\n    return {returned}\n")
    proc = home.cmx("run", "bad-out", "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["ok"] is False and expected in result["error"]
    assert result["steps"]["bad-out"]["status"] == "failed"
    assert home.cmx_json("cache", "ls") == []
    assert not list((home.settings.cache / "bad-out").glob(".tmp-*"))  # the build folder was discarded


def test_an_output_of_the_declared_type_given_as_text_is_coerced(home: Home) -> None:
    home.recipe("coerce", """
        name: coerce
        summary: returns an int as text
        tags: [coerce]
        outputs:
          count: {type: int}
        """, "def run(ctx):\n    return {'count': '12'}\n")
    assert home.cmx_json("run", "coerce")["outputs"] == {"count": 12}


def _timed_recipe(home: Home, name: str, stamps: Path, seconds: float, fail: bool = False) -> None:
    body = (f"    import time\n    t0 = time.time()\n    time.sleep({seconds})\n"
            f"    with open({str(stamps)!r}, 'a') as f:\n        f.write(f'{name} {{t0}} {{time.time()}}\\n')\n")
    if fail:
        body = f"    raise RuntimeError('{name} broke')\n"
    home.recipe(name, f"""
        name: {name}
        summary: sleeps
        tags: [{name}]
        """, f"def run(ctx):\n{body}    return {{}}\n")


def _intervals(stamps: Path) -> dict[str, tuple[float, float]]:
    out = {}
    for line in stamps.read_text().splitlines():
        name, start, end = line.split()
        out[name] = (float(start), float(end))
    return out


def test_jobs_2_runs_independent_steps_in_parallel_and_jobs_1_does_not(home: Home, tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    _timed_recipe(home, "sleep-a", stamps, 0.6)
    _timed_recipe(home, "sleep-b", stamps, 0.6)
    home.recipe("both", """
        name: both
        summary: needs two independent steps
        tags: [both]
        deps:
          - tags: sleep-a
          - tags: sleep-b
        """)
    home.cmx("run", "both", "--jobs", "2", check=True)
    (a0, a1), (b0, b1) = _intervals(stamps)["sleep-a"], _intervals(stamps)["sleep-b"]
    assert a0 < b1 and b0 < a1, "with --jobs 2 the two sleeps overlap"
    stamps.unlink()
    home.cmx("run", "both", "--jobs", "1", check=True)
    (a0, a1), (b0, b1) = _intervals(stamps)["sleep-a"], _intervals(stamps)["sleep-b"]
    assert a1 <= b0 or b1 <= a0, "with --jobs 1 they run one after the other"


def test_a_failing_step_stops_new_steps_from_starting(home: Home, tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    _timed_recipe(home, "broken", stamps, 0, fail=True)
    _timed_recipe(home, "slow", stamps, 1.0)
    _timed_recipe(home, "later", stamps, 0)
    home.recipe("top", """
        name: top
        summary: three deps; the first fails
        tags: [top]
        deps:
          - tags: broken
          - tags: slow
          - tags: later
        """)
    proc = home.cmx("run", "top", "--jobs", "2", "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert "broken broke" in result["error"] and "top ← broken" in result["error"]
    ran = _intervals(stamps)
    assert "slow" in ran  # a step already running is let finish
    assert "later" not in ran  # a slot was free, but nothing new started after the failure
    record = run_json(result)
    assert record["status"] == "failed"
    assert {sid: r["status"] for sid, r in record["results"].items()} == {
        "broken": "failed", "slow": "ran", "later": "skipped", "top": "skipped"}
    assert "broken broke" in record["error"]
    assert "RuntimeError" in Path(record["results"]["broken"]["log"]).read_text()


# --- the run record --------------------------------------------------------------------------

def test_run_json_records_plan_keys_versions_timings_outputs_and_logs(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _count_recipe(home, counter, "get-thing")
    home.recipe("use-thing", """
        name: use-thing
        summary: top
        tags: [use-thing]
        deps:
          - tags: get-thing
            as: thing
        outputs:
          got: {type: int}
        """, "def run(ctx):\n    ctx.log.info('using %s', ctx.deps.thing.outputs['doubled'])\n"
             "    return {'got': ctx.deps.thing.outputs['doubled']}\n")
    result = home.cmx_json("run", "use-thing")
    run_dir = Path(result["run_dir"])
    assert run_dir.parent == home.settings.runs and run_dir.name.endswith("-use-thing")
    record = run_json(result)
    assert record["status"] == "ok" and record["error"] is None
    assert record["cmx"] == cmx.__version__
    assert record["python"] == sys.version.split()[0]
    assert record["argv"][:3] == ["cmx", "run", "use-thing"]
    assert record["started"] and isinstance(record["seconds"], float)
    plan = record["plan"]
    assert plan["root"] == "use-thing" and [s["id"] for s in plan["steps"]] == ["get-thing", "use-thing"]
    assert {s["id"]: s["key"] for s in plan["steps"]} == {sid: s["key"] for sid, s in result["steps"].items()}
    res = record["results"]
    assert res["get-thing"]["status"] == "built" and res["use-thing"]["status"] == "ran"
    assert res["use-thing"]["outputs"] == {"got": 2} and res["get-thing"]["outputs"] == {"doubled": 2}
    assert res["get-thing"]["entry"] == str(home.settings.cache / "get-thing" / result["steps"]["get-thing"]["key"])
    for r in res.values():
        assert r["seconds"] >= 0
        assert Path(r["log"]).is_file() and Path(r["log"]).parent == run_dir / "logs"
    assert "using 2" in Path(res["use-thing"]["log"]).read_text()
    # a second run writes a new record in which the cached step has no log
    again = run_json(home.cmx_json("run", "use-thing"))
    assert again["results"]["get-thing"]["status"] == "cached" and again["results"]["get-thing"]["log"] is None
    assert len(list(home.settings.runs.iterdir())) == 2


def test_dry_run_runs_nothing(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _count_recipe(home, counter)
    proc = home.cmx("run", "count", "--dry-run", check=True)
    assert "count" in proc.stdout and "to build" in proc.stdout
    planned = home.cmx_json("run", "count", "--dry-run")
    assert planned["steps"][0]["recipe"] == "count" and planned["steps"][0]["cached"] is False
    assert runs(counter) == 0
    assert home.cmx_json("cache", "ls") == []
    assert not home.settings.runs.exists() or not any(home.settings.runs.iterdir())


# --- cmx plan --json -------------------------------------------------------------------------

def test_plan_json_has_the_documented_shape_and_cached_flips_after_a_run(home: Home, tmp_path: Path) -> None:
    _count_recipe(home, tmp_path / "counter", "get-thing")
    home.recipe("use-thing", """
        name: use-thing
        summary: top
        tags: [use, thing]
        inputs:
          size: {type: int, default: 4}
        variations:
          mode:
            fast: {default: true}
            slow: {}
        deps:
          - tags: get-thing
            with: {n: 3}
            as: thing
        cache: true
        outputs:
          got: {type: int}
        """, "def run(ctx):\n    return {'got': ctx.deps.thing.outputs['doubled']}\n")
    plan = home.cmx_json("plan", "use", "thing", "_slow")
    assert {"query", "steps", "root"} <= set(plan)
    assert plan["query"] == "use thing _slow" and plan["root"] == "use-thing"
    for step in plan["steps"]:
        assert {"id", "recipe", "variations", "inputs", "key", "cached", "deps"} <= set(step)
        assert step["cached"] is False and len(step["key"]) == 64
    by_id = {s["id"]: s for s in plan["steps"]}
    assert by_id["use-thing"] == {**by_id["use-thing"], "recipe": "use-thing", "variations": ["slow"],
                                  "inputs": {"size": 4}, "deps": ["get-thing"]}
    assert by_id["get-thing"]["inputs"] == {"n": 3} and by_id["get-thing"]["deps"] == []
    home.cmx("run", "use", "thing", "_slow", check=True)
    after = home.cmx_json("plan", "use", "thing", "_slow")
    assert all(s["cached"] is True for s in after["steps"])
    assert [s["key"] for s in after["steps"]] == [s["key"] for s in plan["steps"]]
    fast = home.cmx_json("plan", "use", "thing")
    assert {s["id"]: s["cached"] for s in fast["steps"]} == {"get-thing": True, "use-thing": False}


def test_a_relative_path_output_is_relative_to_the_steps_workdir(home: Home) -> None:
    home.recipe("rel-out", """
        name: rel-out
        tags: [rel-out]
        cache: true
        outputs:
          table: {type: path}
        """, """
        def run(ctx):
            (ctx.workdir / "table.csv").write_text("a,b\\n")
            return {"table": "table.csv"}
        """)
    result = home.cmx_json("run", "rel-out")
    table = Path(result["outputs"]["table"])
    assert table.is_absolute() and table.read_text() == "a,b\n"
    assert table.parent == Path(result["steps"]["rel-out"]["entry"])


def test_an_unwritable_runs_folder_is_a_clear_error_not_a_crash(home: Home, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    home.recipe("noop", "name: noop\ntags: [noop]\n")
    proc = subprocess.run([*CMX, "run", "noop"], env={**home.env, "CMX_RUNS": str(blocker / "runs")},
                          capture_output=True, text=True, cwd=home.root)
    assert proc.returncode == 1
    assert "cannot write the run record" in proc.stderr and "CMX_RUNS" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_an_interrupted_run_says_so_in_its_record(home: Home) -> None:
    import signal
    import time

    marker = home.root / "started"
    home.recipe("slow", """
        name: slow
        tags: [slow]
        """, f"""
        import time
        def run(ctx):
            open({str(marker)!r}, "w").close()
            time.sleep(30)
        """)
    proc = subprocess.Popen([*CMX, "run", "slow", "--progress", "plain"], env=home.env, cwd=home.root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    (record,) = (home.root / "runs").glob("*/run.json")
    assert json.loads(record.read_text())["status"] == "interrupted"


SERVES = """
import subprocess, sys, time
from cmx.tools.procs import spawn
def run(ctx):
    stubborn = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); "
                "time.sleep(60)")
    children = [spawn(["sleep", "60"])]
    if ctx.inputs["stubborn"]:
        children.append(spawn([sys.executable, "-c", stubborn], stdout=subprocess.PIPE))
        children[1].stdout.readline()  # it ignores SIGTERM now
    with open(ctx.inputs["pids"], "w") as f:
        f.write(" ".join(str(c.pid) for c in children))
    children[0].wait()
    raise RuntimeError("my server is gone")  # as a harness's caller fails when its process is stopped
"""


@pytest.mark.parametrize(("sig", "stubborn", "code", "said", "seconds"),
                         [(2, True, 130, "interrupted", (3, 8)), (15, False, 143, "interrupted (SIGTERM)", (0, 8))])
def test_an_interrupt_stops_every_process_the_steps_started(home: Home, sig: int, stubborn: bool, code: int,
                                                            said: str, seconds: tuple[float, float]) -> None:
    """Ctrl-C or SIGTERM to cmx: the children of a running step are stopped, one that ignores SIGTERM (as
    vLLM does while its engine starts) by SIGKILL after the grace (procs.STOP_GRACE_S, 3 s), a second signal does
    not cut that short, and cmx says so and exits."""
    import signal

    pids = home.root / "pids"
    home.recipe("serve", """
        name: serve
        tags: [serve]
        inputs:
          stubborn: {type: bool, default: false}
          pids: {type: str}
        """, SERVES)
    proc = subprocess.Popen([*CMX, "run", "serve", "--input", f"stubborn={stubborn}", "--input", f"pids={pids}",
                             "--progress", "plain"], env=home.env, cwd=home.root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 20
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [int(p) for p in pids.read_text().split()]
    began = time.monotonic()
    proc.send_signal(signal.Signals(sig))
    time.sleep(0.5)
    proc.send_signal(signal.Signals(sig))  # a second one, impatient: ignored while cmx stops its children
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code and said in err, err
    assert "FAILED" not in err  # the step whose processes were stopped: the run was interrupted, not failed
    assert seconds[0] <= time.monotonic() - began < seconds[1]
    assert all(not Path(f"/proc/{pid}").exists() for pid in children)
    (record,) = (home.root / "runs").glob("*/run.json")
    assert json.loads(record.read_text())["status"] == "interrupted"


def test_step_progress_is_reported_on_the_steps_line(home: Home) -> None:
    home.recipe("counts", "name: counts\ntags: [counts]\n", """
        def run(ctx):
            p = ctx.progress(4, "items")
            for _ in range(4):
                p.advance(1)
        """)
    proc = home.cmx("run", "counts", "--progress", "plain", check=True)
    assert "counts  items 50% (2/4)" in proc.stderr and "counts  items 100% (4/4)" in proc.stderr


def test_plain_progress_with_a_detail_prints_a_line_at_least_every_ten_seconds() -> None:
    """A benchmark step reports once a second with rates in its detail: a plain log gets a line per 10 s of it
    (and one per tenth of the total), not one per report."""
    import io

    from cmx.execute.progress import PlainReporter
    from cmx.resolve.plan import Step

    now = [0.0]
    out = io.StringIO()
    reporter = PlainReporter(out, clock=lambda: now[0])
    step = SimpleNamespace(id="app", variations=("tiny",))
    for second in range(36):
        now[0] = float(second)
        reporter.step_progress(cast(Step, step), second, 1000, "Server performance", f"{second * 10} tok/s")
    lines = out.getvalue().splitlines()
    assert lines == [f"         app _tiny  Server performance 0% ({s}/1000): {s * 10} tok/s" for s in (0, 10, 20, 30)]


def test_a_failure_stops_a_long_step_at_its_next_progress_report(home: Home) -> None:
    home.recipe("long", "name: long\ntags: [long]\n", """
        import time
        def run(ctx):
            p = ctx.progress(600, "transfer")
            for _ in range(600):  # 60 s unless stopped
                time.sleep(0.1)
                p.advance(1)
        """)
    home.recipe("broken", "name: broken\ntags: [broken]\n", """
        import time
        def run(ctx):
            time.sleep(0.5)
            raise RuntimeError("no driver")
        """)
    home.recipe("both", "name: both\ntags: [both]\ndeps:\n  - {tags: long}\n  - {tags: broken}\n")
    started = time.monotonic()
    proc = home.cmx("run", "both", "--jobs", "2", "--json")
    assert time.monotonic() - started < 30, "the long step stopped instead of running its 60 s"
    result = json.loads(proc.stdout)
    assert proc.returncode == 1 and "no driver" in result["error"]
    assert result["steps"]["long"]["status"] == "cancelled" and result["steps"]["broken"]["status"] == "failed"


def test_steps_that_fetch_start_after_the_checks_that_do_not(home: Home) -> None:
    order = home.root / "order.txt"
    body = f"def run(ctx):\n    open({str(order)!r}, 'a').write(ctx.recipe + '\\n')\n"
    home.recipe("fetcher", "name: fetcher\ntags: [fetcher]\ninputs:\n  url: {type: url, default: 'https://example.com/w'}\n",
                body)
    home.recipe("checker", "name: checker\ntags: [checker]\n", body)
    home.recipe("app", "name: app\ntags: [app]\ndeps:\n  - {tags: fetcher}\n  - {tags: checker}\n")
    home.cmx("run", "app", "--jobs", "1", check=True)
    assert order.read_text().split() == ["checker", "fetcher"]


def test_run_prints_a_multiline_output_as_a_block_and_shortens_long_lists() -> None:
    from cmx.cli.run_output import output_lines

    lines = output_lines({"table": "a  b\n1  2", "n": 3, "rows": list(range(100)), "few": [1, 2]})
    assert lines[:3] == ["  table:", "    a  b", "    1  2"]
    assert lines[3] == "  n = 3" and lines[5] == "  few = [1, 2]"
    assert lines[4].endswith("(whole: --json)") and len(lines[4]) < 120


def test_a_run_py_reads_its_chosen_variations_and_flags_from_the_context(home: Home) -> None:
    home.recipe("pick", """
        name: pick
        summary: reports what was chosen
        tags: [pick]
        cache: false
        variations:
          size:
            full: {default: true}
            tiny: {}
          device:
            cpu: {default: true}
            cuda: {}
        flags:
          short: {summary: a flag}
        outputs:
          size: {type: str}
          device: {type: str}
          short: {type: bool}
          missing: {type: str}
        """, """
        def run(ctx):
            try:
                ctx.variation("scenario")
            except KeyError as exc:
                missing = str(exc)
            return {"size": ctx.variation("size"), "device": ctx.variation("device"), "short": ctx.flag("short"),
                    "missing": missing}
        """)
    default = home.cmx_json("run", "pick")["outputs"]
    assert (default["size"], default["device"], default["short"]) == ("full", "cpu", False)
    assert "has no variation group 'scenario' (its groups: size, device)" in default["missing"]
    chosen = home.cmx_json("run", "pick _tiny _cuda _short")["outputs"]
    assert (chosen["size"], chosen["device"], chosen["short"]) == ("tiny", "cuda", True)


# --- a function in place of the root step (what `cmx tune` runs) -------------------------------------

def test_root_run_replaces_the_root_step_on_its_own_ctx_and_is_never_cached(home: Home, tmp_path: Path) -> None:
    from cmx.cache.store import Store
    from cmx.execute.runner import Runner

    counter = tmp_path / "count.txt"
    _count_recipe(home, counter)
    home.recipe("top", """
        name: top
        summary: a cached root with a dep
        tags: [top]
        inputs:
          k: {type: int, default: 5}
        deps:
          - tags: count
            with: {n: 21}
            as: count
        cache: true
        outputs:
          total: {type: int}
        """, "def run(ctx):\n    raise AssertionError('the recipe run.py must not run')\n")
    seen = {}

    def instead(ctx) -> dict:
        seen.update(k=ctx.inputs["k"], doubled=ctx.deps.count.outputs["doubled"], workdir=ctx.workdir)
        return {"anything": [1, 2]}

    s = home.settings
    plan = api.plan("top", settings=s).plan
    result = Runner(Store(s.cache), s.runs, root_run=instead).run(plan)
    assert result.error is None and result.outputs == {"anything": [1, 2]}
    assert seen["k"] == 5 and seen["doubled"] == 42 and runs(counter) == 1
    assert result.steps["top"].status == "ran" and result.steps["count"].status == "built"
    assert not any(e.recipe == "top" for e in Store(s.cache).entries())  # its outputs are not the recipe's


def test_the_rerun_line_keeps_the_inputs_aimed_at_the_steps_below(home: Home) -> None:
    home.recipe("source", """
        name: source
        tags: [source]
        inputs:
          url: {type: str, default: "https://example.org/real"}
          key: {type: secret, env: CMX_TEST_KEY, default: null}
        outputs:
          url: {type: str}
        """, "def run(ctx):\n    return {'url': ctx.inputs['url']}\n")
    home.recipe("user", """
        name: user
        tags: [user]
        deps:
          - tags: source
        """, "def run(ctx):\n    raise ValueError('fails after its deps ran')\n")
    first = cli(home, "run", "user", "--input", "source.url=file:///local", "--input", "source.key=abc")
    assert first.returncode == 1
    line = next(x for x in first.stderr.splitlines() if "re-run just this step: " in x).split(": ", 1)[1]
    assert line == """cmx run user --input source.url=file:///local --input "source.key=$CMX_TEST_KEY\""""


# --- a module of a missing extra ----------------------------------------------------------------------

_EXTRA_RECIPE = """
    name: needs-module
    summary: imports a module an extra of cmx brings
    tags: [needs-module]
    context: [device]
    variations:
      device:
        cuda: {default: true, context: {device: cuda}}
        cpu: {context: {device: cpu}}
    cache: false
    """
_EXTRA_RUN = "def run(ctx):\n    import cmx_test_no_such_module.sub  # noqa: F401\n    return {}\n"


@pytest.mark.parametrize(("variation", "extra"), [("_cpu", "cpu"), ("_cuda", "mlperf")])
def test_a_module_of_a_missing_extra_fails_the_step_naming_the_extra_to_install(
        home: Home, monkeypatch: pytest.MonkeyPatch, variation: str, extra: str) -> None:
    from cmx import extras

    for name in ("cpu", "mlperf"):  # both bring it: a CPU run is told the cpu extra, a GPU run never is
        monkeypatch.setitem(extras.EXTRAS, name, (*extras.EXTRAS[name], "cmx_test_no_such_module"))
    home.recipe("needs-module", _EXTRA_RECIPE, _EXTRA_RUN)
    result = api.run(f"needs-module {variation}", settings=home.settings, check=False)
    assert isinstance(result.error, StepFailed)
    assert result.error.message == (f"needs-module needs cmx_test_no_such_module, which the {extra} extra of cmx "
                                    f"brings: pip install 'cmx-bench[{extra}]'")
    assert result.error.chain == ["needs-module"]


def test_a_missing_module_no_extra_brings_stays_as_python_said_it(home: Home) -> None:
    home.recipe("needs-module", _EXTRA_RECIPE, _EXTRA_RUN)
    result = api.run("needs-module", settings=home.settings, check=False)
    assert result.error is not None
    assert result.error.message.startswith("ModuleNotFoundError: No module named 'cmx_test_no_such_module' (at ")
    assert "pip install" not in result.error.render()
