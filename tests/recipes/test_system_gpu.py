"""detect-system, detect-gpu, get-cuda and get-rocm, end to end through the CLI.

No GPU is on the test machine. Where a test needs one, it puts executables named nvidia-smi,
nvcc or amd-smi first on PATH (or in a ROCm folder): real programs, run by cmx as real
processes, that print recorded outputs of the real tools (tests/data/gpu, sources in the
.source.md beside each) and append their arguments to a calls file, so a test can tell whether
a cached detection ran anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CMX, DATA, REPO, Home

GPU_DATA = DATA / "gpu"
RECIPES = ("detect-system", "detect-gpu", "get-cuda", "get-rocm")


@pytest.fixture
def host(home: Home, tmp_path: Path) -> Host:
    for name in RECIPES:
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return Host(home, tmp_path / "fake-bin", tmp_path / "calls.txt")


class Host:
    """A cmx home whose PATH starts with a folder of fake vendor tools (empty at first)."""

    def __init__(self, home: Home, bin_dir: Path, calls: Path) -> None:
        self.home, self.bin, self.calls = home, bin_dir, calls
        bin_dir.mkdir()
        self.env = {k: v for k, v in home.env.items() if k not in ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH")}
        self.env["PATH"] = f"{bin_dir}{os.pathsep}{self.env.get('PATH', os.defpath)}"

    def tool(self, name: str, folder: Path | None = None, status: int = 0, **outputs: str) -> Path:
        """An executable `name` printing a recorded output: outputs["query"] when its arguments
        contain --query-gpu, else outputs["default"]."""
        folder = folder or self.bin
        folder.mkdir(parents=True, exist_ok=True)
        query = outputs.get("query")
        cases = f'  *--query-gpu*) cat "{GPU_DATA / query}" ;;\n' if query else ""
        script = folder / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{self.calls}"\ncase "$*" in\n{cases}'
                          f'  *) cat "{GPU_DATA / outputs["default"]}" ;;\nesac\nexit {status}\n')
        script.chmod(0o755)
        return script

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([*CMX, "run", *args], env={**self.env, **env}, cwd=self.home.root,
                              capture_output=True, text=True, timeout=120, check=False)

    def run_json(self, *args: str, **env: str) -> dict:
        done = self.run(*args, "--json", **env)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    def called(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def fake_h100_host(host: Host) -> None:
    host.tool("nvidia-smi", query="nvidia-smi-query-h100x8.csv", default="nvidia-smi-h100x8.txt")
    host.tool("nvcc", default="nvcc-13.0.txt")


def test_detect_system_on_this_machine_reports_the_host_and_no_gpu(host: Host) -> None:
    result = host.run_json("detect system")
    out = result["outputs"]
    assert result["ok"] and out["cpus"] == os.cpu_count() and out["memory_bytes"] > 0 and out["os"]
    assert out["kernel"] == os.uname().release and out["cpu_model"]
    if not any(shutil.which(t) for t in ("nvidia-smi", "amd-smi", "rocm-smi")):
        assert (out["gpu_vendor"], out["gpu_count"], out["gpus"]) == ("none", 0, [])
    assert isinstance(out["rocm_version"], str) and isinstance(out["cuda_version"], str)
    assert set(result["steps"]) == {"detect-system", "detect-gpu"}


def test_a_second_detection_is_a_cache_hit_that_runs_nothing(host: Host) -> None:
    fake_h100_host(host)
    first = host.run_json("detect system")
    calls = host.called()
    assert first["outputs"]["gpu_count"] == 8 and calls  # the fakes were run once
    second = host.run_json("detect system")
    assert second["steps"]["detect-system"]["status"] == "cached"
    assert second["outputs"] == first["outputs"]
    assert host.called() == calls  # no tool ran again


def test_an_nvidia_smi_appearing_on_path_changes_the_key_and_is_detected(host: Host) -> None:
    before = host.run_json("detect system")
    host.tool("nvidia-smi", query="nvidia-smi-query-h100x8.csv", default="nvidia-smi-h100x8.txt")
    after = host.run_json("detect system")
    assert after["steps"]["detect-gpu"]["key"] != before["steps"]["detect-gpu"]["key"]
    assert after["steps"]["detect-system"]["status"] != "cached"
    out = after["outputs"]
    assert (out["gpu_vendor"], out["gpu_count"], out["driver_version"], out["cuda_driver_version"]) == (
        "nvidia", 8, "565.57.01", "12.7")
    assert out["gpus"][0] == {"vendor": "nvidia", "index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559,
                              "driver": "565.57.01", "bus_id": "00000000:18:00.0",
                              "uuid": "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"}


def test_the_recorded_outputs_of_a_real_h100_give_what_cmx_reported_on_that_machine(host: Host) -> None:
    host.tool("nvidia-smi", query="nvidia-smi-query-h100x1.csv", default="nvidia-smi-h100x1.txt")
    host.tool("nvcc", default="nvcc-13.0.txt")
    out = host.run_json("detect gpu")["outputs"]
    on_the_h100 = json.loads((GPU_DATA / "detect-gpu-h100x1.json").read_text())
    assert {k: out[k] for k in on_the_h100} == on_the_h100


def test_a_failing_nvidia_smi_is_reported_as_no_gpu_with_its_message(host: Host) -> None:
    host.tool("nvidia-smi", status=9, default="nvidia-smi-failed.txt")
    out = host.run_json("detect gpu")["outputs"]
    assert out["gpu_count"] == 0 and "couldn't communicate with the NVIDIA driver" in out["nvidia_reason"]


def test_get_cuda_without_a_toolkit_fails_with_install_guidance(host: Host, tmp_path: Path) -> None:
    done = host.run("get cuda", "--progress", "none", CUDA_HOME=str(tmp_path))
    assert done.returncode == 1
    assert f"no CUDA toolkit found: $CUDA_HOME is {tmp_path}, which has no bin/nvcc" in done.stderr
    assert "CUDA Installation Guide for Linux" in done.stderr and "never installs" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_get_cuda_with_a_toolkit_meeting_the_bound_reports_it(host: Host) -> None:
    fake_h100_host(host)
    out = host.run_json("get cuda", "--input", "version_min=12.0")["outputs"]
    assert (out["version"], out["nvcc_version"], out["nvcc"]) == ("13.0", "13.0.88", str(host.bin / "nvcc"))
    assert (out["gpus"], out["driver_version"], out["driver_cuda_version"]) == (8, "565.57.01", "12.7")


def test_get_cuda_above_what_is_found_fails_with_found_and_wanted(host: Host) -> None:
    fake_h100_host(host)
    done = host.run("get cuda", "--input", "version_min=99.0", "--progress", "none")
    assert done.returncode == 1
    assert f"found CUDA 13.0 (nvcc {host.bin / 'nvcc'}), wanted >= 99.0" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_get_cuda_driver_checks_the_cuda_version_the_driver_supports(host: Host) -> None:
    fake_h100_host(host)
    assert host.run_json("get cuda _driver", "--input", "version_min=12.4")["outputs"]["version"] == "12.7"
    done = host.run("get cuda _driver", "--input", "version_max=12.4", "--progress", "none")
    assert done.returncode == 1 and "supporting CUDA 12.7, wanted CUDA <= 12.4" in done.stderr


def test_get_rocm_finds_the_release_and_the_gpus_of_a_rocm_folder(host: Host, tmp_path: Path) -> None:
    rocm = tmp_path / "rocm"
    (rocm / ".info").mkdir(parents=True)
    shutil.copy(GPU_DATA / "rocm-info-version.txt", rocm / ".info" / "version")
    host.tool("amd-smi", folder=rocm / "bin", default="amd-smi-static-mi300x.json")
    out = host.run_json("get rocm", "--input", "version_min=6.0", ROCM_PATH=str(rocm))["outputs"]
    assert out == {"version": "6.2.0", "home": str(rocm), "gpus": 4, "driver_version": "6.7.0", "amd_reason": ""}
    done = host.run("get rocm", "--input", "version_min=6.3", "--progress", "none", ROCM_PATH=str(rocm))
    assert done.returncode == 1 and f"found ROCm 6.2.0 ({rocm}), wanted >= 6.3" in done.stderr


def test_get_rocm_without_rocm_fails_with_install_guidance(host: Host, tmp_path: Path) -> None:
    done = host.run("get rocm", "--progress", "none", ROCM_PATH=str(tmp_path / "no-rocm"))
    assert done.returncode == 1
    assert "no ROCm found" in done.stderr and "ROCm installation for Linux" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
