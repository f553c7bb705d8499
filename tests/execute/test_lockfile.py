"""Lockfiles: `cmx lock` pins a plan, `cmx run --locked` replays it or refuses at the first difference."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

import cmx
from cmx.devices import CPU, CUDA, ROCM, DeviceKind
from tests.conftest import CMX, Home

SEED = """
    name: make-seed
    tags: [make, seed]
    inputs:
      n: {type: int, default: 3}
    cache: true
    outputs:
      path: {type: path}
    """
SEED_RUN = """
    import os
    def run(ctx):
        path = ctx.workdir / "seed.txt"
        noise = os.environ.get("CMX_TEST_NOISE", "")
        path.write_text(str(ctx.inputs["n"]) * ctx.inputs["n"] + noise)
        return {"path": path}
    """
APP = """
    name: app-count
    tags: [app, count]
    inputs:
      results_dir: {type: path, default: null}
      rate: {type: float, default: 1.0}
    deps:
      - tags: make seed
        as: seed
    cache: false
    outputs:
      text: {type: str}
    """
APP_RUN = """
    def run(ctx):
        text = open(ctx.deps.seed.outputs["path"]).read()
        if ctx.inputs["results_dir"]:
            ctx.inputs["results_dir"].mkdir(parents=True, exist_ok=True)
            (ctx.inputs["results_dir"] / "out.txt").write_text(text)
        return {"text": text}
    """


@pytest.fixture
def lab(home: Home) -> Home:
    home.recipe("make-seed", SEED, SEED_RUN)
    home.recipe("app-count", APP, APP_RUN)
    return home


def lock_file(home: Home, *args: str) -> Path:
    path = home.root / "cmx.lock"
    home.cmx("lock", "app count", *args, "-o", str(path), check=True)
    return path


def test_a_lock_pins_every_step_with_its_cached_files_and_the_packages(lab: Home):
    lab.cmx("run", "app count", check=True)
    data = yaml.safe_load(lock_file(lab, "--input", "rate=2").read_text())
    assert data["query"] == "app count" and data["inputs"] == {"rate": "2"}
    steps = {s["recipe"]: s for s in data["steps"]}
    assert set(steps) == {"make-seed", "app-count"}
    assert list(steps["make-seed"]["files"]) == ["seed.txt"] and steps["app-count"]["files"] is None
    assert steps["app-count"]["inputs"]["rate"] == 2.0 and len(steps["make-seed"]["digest"]) == 64
    assert data["packages"]["cmx-bench"] == cmx.__version__


def test_a_lock_takes_an_inputs_file_under_its_explicit_inputs(lab: Home, tmp_path: Path):
    inputs = tmp_path / "node.yaml"
    inputs.write_text("rate: 3\nresults_dir: /data/r\n", encoding="utf-8")
    data = yaml.safe_load(lock_file(lab, "--inputs-file", str(inputs), "--input", "rate=4").read_text())
    assert data["inputs"] == {"rate": "4", "results_dir": "/data/r"}


def test_a_locked_run_replays_and_may_move_its_results(lab: Home, tmp_path: Path):
    lab.cmx("run", "app count", check=True)
    lock = lock_file(lab)
    proc = lab.cmx("run", "--locked", str(lock), "--input", f"results_dir={tmp_path / 'R'}", "--json", check=True)
    result = json.loads(proc.stdout)
    assert result["outputs"]["text"] == "333" and (tmp_path / "R" / "out.txt").read_text() == "333"
    assert result["steps"]["make-seed"]["status"] == "cached"


def test_a_locked_run_refuses_after_a_recipe_file_is_edited(lab: Home):
    lock = lock_file(lab)
    run_py = lab.recipes / "make-seed" / "run.py"
    run_py.write_text(run_py.read_text() + "\n# a change\n")
    proc = lab.cmx("run", "--locked", str(lock))
    assert proc.returncode != 0
    assert "recipe make-seed changed since the lock" in proc.stderr
    assert str(lab.recipes / "make-seed" / "recipe.yaml") in proc.stderr
    assert not list((lab.root / "cache").glob("make-seed/*/meta.json")), "nothing may run after a refusal"


def test_a_locked_run_refuses_an_input_that_would_change_what_runs(lab: Home):
    lock = lock_file(lab)
    proc = lab.cmx("run", "--locked", str(lock), "--input", "rate=5")
    assert proc.returncode != 0
    assert "--input rate would change what the locked run does" in proc.stderr
    assert "results_dir" in proc.stderr  # what a replay may move


def test_a_locked_run_refuses_another_package_version(lab: Home):
    lock = lock_file(lab)
    data = yaml.safe_load(lock.read_text())
    data["packages"]["cmx-bench"] = "0.0.9"
    lock.write_text(yaml.safe_dump(data))
    proc = lab.cmx("run", "--locked", str(lock))
    assert proc.returncode != 0 and f"cmx-bench is {cmx.__version__} here, the lock has 0.0.9" in proc.stderr
    assert "cmx-bench==0.0.9" in proc.stderr


def test_a_cached_entry_with_other_files_than_the_lock_is_refused(lab: Home):
    lab.cmx("run", "app count", check=True)
    lock = lock_file(lab)
    data = yaml.safe_load(lock.read_text())
    seed = next(s for s in data["steps"] if s["recipe"] == "make-seed")
    seed["files"]["seed.txt"] = "0" * 64
    lock.write_text(yaml.safe_dump(data))
    proc = lab.cmx("run", "--locked", str(lock))
    assert proc.returncode != 0
    assert "holds other files than the lock: seed.txt has sha256" in proc.stderr


def test_a_step_that_builds_other_files_than_the_lock_fails_the_replay(lab: Home):
    lab.cmx("run", "app count", check=True)
    lock = lock_file(lab)
    lab.cmx("cache", "rm", "make seed", check=True)
    env = {**lab.env, "CMX_TEST_NOISE": "!"}  # the step now writes one more byte
    proc = subprocess.run([*CMX, "run", "--locked", str(lock)], env=env, cwd=lab.root, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "make-seed built other files than the lock records: seed.txt has sha256" in proc.stderr


def test_a_run_whose_root_step_runs_leaves_its_lock_beside_run_json(lab: Home):
    proc = lab.cmx("run", "app count", "--json", check=True)
    record = Path(json.loads(proc.stdout)["run_dir"])
    data = yaml.safe_load((record / "cmx.lock").read_text())
    seed = next(s for s in data["steps"] if s["recipe"] == "make-seed")
    assert seed["files"] and data["query"] == "app count"  # the dep was built before the root step ran


def image_packages(kind: DeviceKind, torch_local: str = "") -> dict[str, str]:
    """The vLLM and torch versions a kind's pinned image (or the CPU extra) holds, as pip lists them there."""
    build = kind.container.vllm
    return {build.distribution: build.version, "torch": build.torch + torch_local}


@pytest.mark.parametrize("packages, device", [(image_packages(CPU), "cpu"),
                                              (image_packages(ROCM, "+rocm7.0"), "rocm"),
                                              (image_packages(CUDA, "+cu130"), "cuda"),
                                              ({"torch": "2.9.0"}, None)])
def test_the_packages_say_which_device_they_are_built_for(packages: dict[str, str], device: str | None) -> None:
    from cmx.execute.lockfile import packages_device

    assert packages_device(packages) == device


def test_a_native_lock_of_a_gpu_plan_on_cpu_packages_is_refused(builtin: Home) -> None:
    from cmx.execute.lockfile import LockError, refuse_other_device
    from cmx.execute.request import Runtime, resolved

    plan = resolved("app mlperf inference llama2 _rocm _tiny", {}, {}, Runtime(builtin.settings))
    with pytest.raises(LockError, match=r"built for cpu .* a lock of a _rocm plan") as err:
        refuse_other_device(plan, image_packages(CPU))
    assert "--docker" in (err.value.hint or "")
    refuse_other_device(plan, image_packages(ROCM, "+rocm7.0"))
    proc = builtin.cmx("lock", "app mlperf inference llama2 _rocm _tiny", "-o", str(builtin.root / "x.lock"))
    assert proc.returncode == 1 and "a lock of a _rocm plan" in proc.stderr


def test_a_replay_asks_for_a_locked_urls_credentials_again_and_takes_only_those(home: Home, tmp_path: Path):
    """A lock holds a URL as `user:***@`: replayed as it is, the step would get a URL that is not the one locked.
    The replay is refused until the credentials are given again (--input-env, or --input), for that URL only."""
    from tests.execute.test_input_env import ECHO, ECHO_PY, URL

    home.recipe("echo-url", ECHO, ECHO_PY)
    lock = tmp_path / "cmx.lock"
    home.cmx("lock", "echo url", "--input", f"url={URL}", "-o", str(lock), check=True)
    assert "pw-Q7x" not in lock.read_text() and "alice:***@mirror.example" in lock.read_text()

    def replay(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CMX, "run", "--locked", str(lock), *args, "--json"], env={**home.env, **env},
                              cwd=home.root, capture_output=True, text=True, timeout=120)

    bare = replay()
    assert bare.returncode == 1
    assert "the lock's input url is 'https://alice:***@mirror.example/v1': a lock keeps no credentials" in bare.stdout
    assert "--input-env url=VARIABLE" in bare.stdout
    other = replay("--input", "url=https://bob:pw-2@mirror.example/v1")
    assert other.returncode == 1 and "a replay gives a locked URL its credentials again" in other.stdout
    assert "pw-2" not in other.stdout + other.stderr
    whole = replay("--input-env", "url=MIRROR", MIRROR=URL)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert json.loads(whole.stdout)["outputs"] == {"whole": True, "word": "hi"}
