"""Shared fixtures: a throw-away cmx home (registry, recipes, cache, runs) per test."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from cmx.settings import Settings

REPO = Path(__file__).resolve().parent.parent
# recorded outputs of real tools and runs, shared by tests in every folder (tests/data/*/README.md)
DATA = Path(__file__).resolve().parent / "data"
# the end-to-end benchmark tests need vLLM's CPU build (the cpu extra) and LoadGen
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None or
                                importlib.util.find_spec("mlperf_loadgen") is None,
                                reason="vLLM (the cpu extra) and mlperf_loadgen are needed")
CMX = [sys.executable, "-m", "cmx"]


def loadgen_env(round_name: str) -> dict[str, str]:
    """The environment a script that imports mlperf_loadgen runs the round's pinned LoadGen in: this interpreter's
    own when it is that release, else get-loadgen's cached folder first on PYTHONPATH (built once, in a cache
    shared by the test processes, as a run builds it)."""
    from cmx.cache.store import Store
    from cmx.mlperf.runtime import ensure_loadgen

    found = ensure_loadgen(round_name, python=sys.executable,
                           store=Store(Path(tempfile.gettempdir()) / "cmx-tests-loadgen-cache"))
    env = dict(os.environ)
    if found.path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(found.path), env.get("PYTHONPATH", "")) if p)
    return env


def worker_cpu() -> dict[str, str]:
    """Under pytest-xdist (`make test` runs the e2e tests not marked serial on two workers), the core this
    worker's vLLM engines compute on: vLLM's CPU build would bind every engine's threads to the same first
    core, so two workers' engines would share one core while the other idles. Empty outside xdist, or
    where the user chose a binding."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    cpus = sorted(os.sched_getaffinity(0))
    if not worker.startswith("gw") or len(cpus) < 2 or "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return {}
    return {"VLLM_CPU_OMP_THREADS_BIND": str(cpus[int(worker[2:]) % len(cpus)])}


# `make test` runs the serial e2e tests beside the Docker ones (make -j2): the CPU-bound parts of the two must not
# overlap. A Server test beside the container's vLLM run measured a TTFT p99 of 2.6 s (0.11 s alone) and failed.
TIMED_LOCK = Path(tempfile.gettempdir()) / "cmx-tests-timed-cpu.lock"


@contextlib.contextmanager
def timed_cpu_section() -> Iterator[None]:
    """Hold the one lock of the test processes' timed or CPU-bound sections (a serial module, a container's
    benchmark run) while the block runs; another process's section waits for it."""
    with FileLock(str(TIMED_LOCK)):
        yield


@pytest.fixture(scope="module", autouse=True)
def serial_module_holds_the_cpu(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module with a selected test marked `serial` runs under timed_cpu_section, its module fixtures (engines,
    servers) included: serial tests time latencies that a neighbour's engine would skew."""
    path = request.node.path
    if not any(item.path == path and item.get_closest_marker("serial") for item in request.session.items):
        yield
        return
    with timed_cpu_section():
        yield


def interruptible() -> None:
    """preexec_fn for a child that a test will Ctrl-C: a shell that started the tests in the
    background ignores SIGINT and children inherit that, so Python would install no handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Home:
    """A cmx home in tmp_path: registry.yaml with one local source `recipes/`, cache/, runs/."""

    root: Path

    @property
    def recipes(self) -> Path:
        return self.root / "recipes"

    @property
    def settings(self) -> Settings:
        return Settings(registry=self.root / "registry.yaml", cache=self.root / "cache", runs=self.root / "runs")

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMX_")}
        env.update(CMX_HOME=str(self.root), PYTHONPATH=str(REPO), **worker_cpu())
        return env

    def recipe(self, name: str, yaml_text: str, run_py: str | None = None, **files: str) -> Path:
        """Write recipes/<name>/recipe.yaml (dedented), and run.py and other files when given."""
        folder = self.recipes / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(textwrap.dedent(yaml_text).lstrip(), encoding="utf-8")
        if run_py is not None:
            (folder / "run.py").write_text(textwrap.dedent(run_py).lstrip(), encoding="utf-8")
        for rel, text in files.items():
            (folder / rel).write_text(textwrap.dedent(text), encoding="utf-8")
        return folder

    def cmx(self, *args: str, check: bool = False, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """Run `python -m cmx ARGS` as a real process in this home."""
        proc = subprocess.run([*CMX, *args], env=self.env, cwd=self.root, capture_output=True, text=True,
                              timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"cmx {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def cmx_json(self, *args: str) -> object:
        proc = self.cmx(*args, "--json", check=True)
        return json.loads(proc.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    root = tmp_path / "home"
    (root / "recipes").mkdir(parents=True)
    (root / "registry.yaml").write_text("sources:\n  - name: local\n    path: recipes\n", encoding="utf-8")
    return Home(root)


@pytest.fixture
def builtin(home: Home) -> Home:
    """The home with this checkout's own recipes/ as its one source: the real recipes, as a user has them."""
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    return home
