"""Real processes racing and dying: the cache lock builds an entry once, and a killed build
leaves nothing that looks complete."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CMX, Home

pytestmark = pytest.mark.e2e


def _slow_recipe(home: Home, counter: Path, marker: Path, seconds: float = 1.5) -> None:
    """run.py touches `marker`, sleeps $CMX_TEST_SLEEP (default `seconds`; the environment does not
    enter the cache key), counts itself in `counter` outside the cache, and writes its output."""
    home.recipe("slow-build", """
        name: slow-build
        summary: takes a while to build
        tags: [slow-build]
        cache: true
        outputs:
          file: {type: path}
          text: {type: str}
        """, f"""\
import os, time
def run(ctx):
    open({str(marker)!r}, "w").close()
    time.sleep(float(os.environ.get("CMX_TEST_SLEEP", {seconds})))
    with open({str(counter)!r}, "a") as f:
        f.write(f"built by {{os.getpid()}}\\n")
    (ctx.workdir / "out.txt").write_text("payload")
    return {{"file": str(ctx.workdir / "out.txt"), "text": "payload"}}
""")


def _start(home: Home, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([*CMX, *args], env={**home.env, **(env or {})}, cwd=home.root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_processes_racing_for_one_entry_build_it_once(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _slow_recipe(home, counter, tmp_path / "started")
    home.cmx("find", check=True)  # warm the index, so both processes reach the lock at about the same time
    procs = [_start(home, "run", "slow-build", "--json") for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert counter.read_text().count("built by") == 1
    assert results[0]["outputs"] == results[1]["outputs"]
    assert Path(results[0]["outputs"]["file"]).read_text() == "payload"
    statuses = sorted(r["steps"]["slow-build"]["status"] for r in results)
    assert statuses == ["built", "cached"]  # the second waited on the lock, then found the entry
    assert len(home.cmx_json("cache", "ls")) == 1
    assert not list((home.settings.cache / "slow-build").glob(".tmp-*"))


def test_a_build_killed_mid_way_leaves_no_entry_and_the_next_run_rebuilds(home: Home, tmp_path: Path) -> None:
    counter, marker = tmp_path / "counter", tmp_path / "started"
    _slow_recipe(home, counter, marker)
    victim = _start(home, "run", "slow-build", "--json", env={"CMX_TEST_SLEEP": "30"})
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert victim.poll() is None, victim.communicate()
            assert time.monotonic() < deadline, "the step never started"
            time.sleep(0.02)
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=10)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    assert victim.returncode == -signal.SIGKILL
    recipe_dir = home.settings.cache / "slow-build"
    leftovers = list(recipe_dir.glob(".tmp-*"))
    assert len(leftovers) == 1  # the half-built folder is there, under its temporary name...
    assert home.cmx_json("cache", "ls") == []  # ...and does not count as an entry
    assert not list(recipe_dir.glob("*/meta.json"))
    assert not counter.exists()

    key = leftovers[0].name[len(".tmp-"):].split("-")[0]
    rebuilt = home.cmx_json("run", "slow-build")
    assert rebuilt["ok"] is True and rebuilt["steps"]["slow-build"]["status"] == "built"
    assert rebuilt["steps"]["slow-build"]["key"] == key  # the very entry the killed run was building
    assert counter.read_text().count("built by") == 1
    assert Path(rebuilt["outputs"]["file"]).read_text() == "payload"
    assert len(home.cmx_json("cache", "ls")) == 1

    assert leftovers[0].exists()
    removed = home.cmx_json("cache", "gc")
    assert str(leftovers[0]) in removed
    assert not list(recipe_dir.glob(".tmp-*"))
    assert len(home.cmx_json("cache", "ls")) == 1  # gc kept the good entry
    assert home.cmx("cache", "verify").returncode == 0
