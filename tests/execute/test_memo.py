"""A fully cached `cmx run` answered from its memo: the same output and record as resolving gives, and
never once anything the answer depended on has changed."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from cmx import api
from cmx.execute.memo import answer
from cmx.resolve.fingerprint import which
from tests.conftest import CMX, Home

QUERY = "memo app"


@pytest.fixture
def memo_home(home: Home, tmp_path: Path) -> Home:
    """app -> dep; dep reads MEMO_GREETING (an env input) and keys on a program found on PATH; app extends a base
    that declares its input."""
    tools = tmp_path / "tools"
    tools.mkdir()
    _program(tools / "memo-tool")
    home.recipe("memo-dep", """
        name: memo-dep
        summary: a dep keyed on a program and an environment variable
        tags: [memo, dep]
        inputs:
          greeting: {type: str, default: hello, env: MEMO_GREETING}
        cache:
          fingerprint: {programs: [memo-tool]}
        outputs:
          text: {type: str}
        """, """
        def run(ctx):
            return {"text": ctx.inputs["greeting"]}
        """)
    home.recipe("memo-app-base", """
        name: memo-app-base
        summary: what the root extends
        abstract: true
        inputs:
          times: {type: int, default: 1}
        """)
    home.recipe("memo-app", """
        name: memo-app
        summary: the root
        tags: [memo, app]
        extends: memo-app-base
        deps:
          - tags: memo dep
            as: dep
        cache: true
        outputs:
          text: {type: str}
          lines: {type: list}
        """, """
        def run(ctx):
            text = " ".join([ctx.deps["dep"].outputs["text"]] * int(ctx.inputs["times"]))
            return {"text": text, "lines": [text, "and\\nmore"]}
        """)
    home.env_extra = {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}  # type: ignore[attr-defined]  # set on this home only
    return home


def _program(path: Path, body: str = "true") -> None:
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _env(home: Home, **extra: str) -> dict[str, str]:
    return {**home.env, **getattr(home, "env_extra", {}), **extra}


def _cmx(home: Home, *args: str, env: dict[str, str] | None = None, importtime: bool = False
         ) -> subprocess.CompletedProcess:
    python = [CMX[0], "-X", "importtime", *CMX[1:]] if importtime else CMX
    proc = subprocess.run([*python, *args], env=env or _env(home), cwd=home.root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _remembered(home: Home, monkeypatch: pytest.MonkeyPatch, inputs: dict[str, str] | None = None,
                env: dict[str, str] | None = None) -> None:
    """Build, then run again from the cache, which leaves the memo (in this process: faster than two cmx)."""
    monkeypatch.chdir(home.root)
    for _ in range(2):
        api.run(QUERY, inputs=inputs or {}, settings=home.settings, environ=env or _env(home), memo=True)
    assert _answer(home, inputs, env) is not None, "a fully cached run left no memo"


def _answer(home: Home, inputs: dict[str, str] | None = None, env: dict[str, str] | None = None):
    return answer(QUERY, inputs or {}, ["cmx", "run", QUERY], environ=env or _env(home))


def _steady(text: str) -> str:
    """Output with what differs from run to run (the seconds, the record's folder) blanked."""
    out = []
    for line in text.splitlines():
        if line.startswith("ok: "):
            head, _, _ = line.partition(" in ")
            counts = line[line.index("("):line.index(")") + 1]
            line = f"{head} in Ns {counts}; record: R"
        out.append(line)
    return "\n".join(out)


def test_a_cached_run_is_answered_from_its_memo_with_what_resolving_prints_and_records(memo_home: Home) -> None:
    _cmx(memo_home, "run", QUERY)
    slow = _cmx(memo_home, "run", QUERY)  # from the cache, resolved: it leaves the memo
    fast = _cmx(memo_home, "run", QUERY, importtime=True)
    imported = {line.split("|")[-1].strip() for line in fast.stderr.splitlines() if line.startswith("import time:")}
    assert "click" not in imported and "cmx.resolve.resolver" not in imported, "the memo did not answer"
    assert _steady(fast.stdout) == _steady(slow.stdout)
    assert "ok: memo-app in" in fast.stdout and "(1 cached, 1 not-needed)" in fast.stdout
    assert [line for line in fast.stderr.splitlines() if not line.startswith("import time:")] == \
        slow.stderr.splitlines() == ["  cached memo-app"]

    records = sorted((memo_home.root / "runs").iterdir())
    assert len(records) == 3
    resolved, replayed = (json.loads((r / "run.json").read_text()) for r in records[1:])
    for record in (resolved, replayed):
        record.pop("started"), record.pop("seconds")
    assert replayed == resolved

    slow_json = json.loads(_cmx(memo_home, "run", QUERY, "--json", "--progress", "plain").stdout)
    fast_json = json.loads(_cmx(memo_home, "run", QUERY, "--json").stdout)
    for doc in (slow_json, fast_json):
        doc.pop("run_dir"), doc.pop("seconds")
    assert fast_json == slow_json
    assert fast_json["outputs"]["lines"] == ["hello", "and\nmore"]


def test_the_run_json_template_is_what_the_record_writer_writes(memo_home: Home, monkeypatch) -> None:
    """Byte for byte, apart from the time: an indent or key order of its own would be found here."""
    _remembered(memo_home, monkeypatch)
    api.run(QUERY, settings=memo_home.settings, environ=_env(memo_home), argv=["cmx", "run", QUERY])
    resolved = sorted((memo_home.root / "runs").iterdir())[-1] / "run.json"
    replayed = Path(_answer(memo_home).run_dir) / "run.json"

    def steady(path: Path) -> list[str]:
        return [line for line in path.read_text().splitlines() if not line.startswith(('  "started"', '  "seconds"'))]

    assert steady(replayed) == steady(resolved)


CHANGES = {
    "the root's run.py": lambda h: (h.recipes / "memo-app" / "run.py").write_text(
        (h.recipes / "memo-app" / "run.py").read_text() + "\n# edited\n"),
    "the root's base recipe.yaml": lambda h: (h.recipes / "memo-app-base" / "recipe.yaml").write_text(
        (h.recipes / "memo-app-base" / "recipe.yaml").read_text() + "# edited\n"),
    "a run.py the root's base gains": lambda h: (h.recipes / "memo-app-base" / "run.py").write_text(
        "def run(ctx):\n    return {}\n"),
    "a dep's recipe.yaml": lambda h: (h.recipes / "memo-dep" / "recipe.yaml").write_text(
        (h.recipes / "memo-dep" / "recipe.yaml").read_text().replace("default: hello", "default: howdy")),
    "another recipe now carrying the query's tags": lambda h: h.recipe("memo-other", """
        name: memo-other
        summary: another
        tags: [memo, app, other]
        """),
    "the registry file": lambda h: (h.root / "registry.yaml").write_text(
        (h.root / "registry.yaml").read_text() + "# edited\n"),
    "the root's cache entry, removed": lambda h: shutil.rmtree(next((h.root / "cache" / "memo-app").glob("[0-9a-f]*"))),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_memo_is_not_trusted_after_a_change_to(memo_home: Home, monkeypatch, change: str) -> None:
    _remembered(memo_home, monkeypatch)
    CHANGES[change](memo_home)
    assert _answer(memo_home) is None


def test_another_value_of_a_read_environment_variable_is_another_answer(memo_home: Home, monkeypatch) -> None:
    _remembered(memo_home, monkeypatch)
    assert _answer(memo_home, env=_env(memo_home, MEMO_GREETING="bonjour")) is None
    result = api.run(QUERY, settings=memo_home.settings, environ=_env(memo_home, MEMO_GREETING="bonjour"), memo=True)
    assert result.outputs["text"] == "bonjour"


def test_another_program_on_path_is_another_answer(memo_home: Home, monkeypatch, tmp_path: Path) -> None:
    _remembered(memo_home, monkeypatch)
    first = tmp_path / "first"
    first.mkdir()
    _program(first / "memo-tool", "echo newer")
    env = _env(memo_home)
    assert _answer(memo_home, env={**env, "PATH": f"{first}{os.pathsep}{env['PATH']}"}) is None


def test_other_inputs_or_another_working_folder_are_other_requests(memo_home: Home, monkeypatch, tmp_path) -> None:
    _remembered(memo_home, monkeypatch)
    assert _answer(memo_home, inputs={"times": "2"}) is None
    monkeypatch.chdir(tmp_path)
    assert _answer(memo_home) is None


def test_a_plan_holding_a_secret_leaves_no_memo(home: Home, monkeypatch) -> None:
    home.recipe("memo-secret", """
        name: memo-secret
        summary: reads a token
        tags: [memo, app]
        inputs:
          token: {type: secret, env: MEMO_TOKEN}
        cache: true
        outputs:
          ok: {type: bool}
        """, """
        def run(ctx):
            return {"ok": True}
        """)
    monkeypatch.chdir(home.root)
    env = {**home.env, "MEMO_TOKEN": "s3cret"}
    for _ in range(2):
        api.run(QUERY, settings=home.settings, environ=env, memo=True)
    assert answer(QUERY, {}, ["cmx", "run", QUERY], environ=env) is None
    assert not list((home.root / "cache" / ".index").glob("memo/*"))


def test_which_finds_what_shutil_which_finds(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "tool").mkdir()  # a folder of that name is not a program
    (a / "plain").write_text("not executable")
    _program(b / "tool")
    _program(b / "plain")
    for search in (f"{a}:{b}", f"{b}:{a}", f"{a}:{a}:{b}", "", f"{a}", ":"):
        for name in ("tool", "plain", "missing", str(b / "tool"), str(a / "plain")):
            assert which(name, search) == shutil.which(name, path=search), (name, search)


def test_a_changed_path_input_is_another_answer(home: Home, monkeypatch, tmp_path: Path) -> None:
    """A path input keys its step by its stamp, and a folder's by its entries: so does the memo."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"1")
    home.recipe("memo-path", """
        name: memo-path
        summary: uses a folder in place
        tags: [memo, app]
        inputs:
          model: {type: path}
        cache: true
        outputs:
          files: {type: int}
        """, """
        import os

        def run(ctx):
            return {"files": len(os.listdir(ctx.inputs["model"]))}
        """)
    monkeypatch.chdir(home.root)
    given = {"model": str(model)}
    for _ in range(2):
        api.run(QUERY, inputs=given, settings=home.settings, environ=home.env, memo=True)
    assert answer(QUERY, given, ["cmx"], environ=home.env) is not None
    (model / "tokenizer.json").write_text("{}")  # one level down: the step's key changes
    assert answer(QUERY, given, ["cmx"], environ=home.env) is None
    assert api.run(QUERY, inputs=given, settings=home.settings, environ=home.env).outputs["files"] == 2
