"""A pinned set in a virtual environment of its own: cmx.tools.pip.read_pins and make_venv, cmx.mlperf.runtime's
cached_venv and the get-vbench-env recipe, on real venvs and real pip against a package index served on 127.0.0.1
from wheels built here (no network). The wheels carry the names and versions of VBench's pins (vbench 0.1.5,
transformers 4.33.2, numpy 1.26.4) with a few lines of code each; the real set downloads torch, and is built on a
node (docs/benchmarks/wan-2.2-t2v-a14b.md)."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cmx.cache.store import Store
from cmx.mlperf.runtime import cached_venv, venv_key
from cmx.tools.pip import BadRequirement, PipInstallFailed, installed_versions, make_venv, read_pins, run_subprocess
from tests.conftest import REPO, Home
from tests.tools.test_pip import write_wheel

# what each wheel holds; vbench's metadata pins the other two as vbench 0.1.5's does
WHEELS = {
    ("vbench", "0.1.5"): ({"vbench/__init__.py": "import numpy, transformers\nVERSION = '0.1.5'\n"},
                          "Requires-Dist: numpy<2.0.0\nRequires-Dist: transformers==4.33.2\n"),
    ("transformers", "4.33.2"): ({"transformers/__init__.py": "__version__ = '4.33.2'\n"}, ""),
    ("numpy", "1.26.4"): ({"numpy/__init__.py": "__version__ = '1.26.4'\n"}, ""),
    ("numpy", "2.0.0"): ({"numpy/__init__.py": "__version__ = '2.0.0'\n"}, ""),  # what an unpinned set would get
}
PINNED = {"vbench": "0.1.5", "transformers": "4.33.2", "numpy": "1.26.4"}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A PEP 503 simple index on 127.0.0.1 serving the wheels, and each wheel's sha256 by file name."""
    root = tmp_path_factory.mktemp("index")
    (root / "files").mkdir()
    digests: dict[str, str] = {}
    for (name, version), (files, metadata) in WHEELS.items():
        wheel = write_wheel(root / "files", name, version, files, metadata)
        digests[wheel.name] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    for name in {n for n, _ in WHEELS}:
        page = root / "simple" / name
        page.mkdir(parents=True)
        links = "".join(f'<a href="../../files/{html.escape(f)}#sha256={d}">{html.escape(f)}</a>\n'
                        for f, d in sorted(digests.items()) if f.startswith(f"{name}-"))
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n", encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", digests
    finally:
        server.shutdown()
        server.server_close()


def pip_args(url: str) -> list[str]:
    return ["--index-url", url, "--no-cache-dir"]


def write_lock(path: Path, digests: dict[str, str], *, wrong: str = "") -> Path:
    """The pinned set as pip's hash-checking mode wants it: every pin with its wheel's sha256 (`wrong`: a pin whose
    hash is another's)."""
    lines = ["# the test's pinned set", "--only-binary :all:"]
    for name, version in PINNED.items():
        digest = digests[f"{name}-{version}-py3-none-any.whl"]
        if name == wrong:
            digest = hashlib.sha256(b"not the wheel").hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}  # {name}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def bare_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


class Recorder:
    """A runner that runs for real and remembers each command."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append([str(a) for a in argv])
        return run_subprocess(argv)

    @property
    def installs(self) -> list[list[str]]:
        return [c for c in self.calls if c[1:4] == ["-m", "pip", "install"]]


# --- the pinned set ---------------------------------------------------------------------------------------------


def test_read_pins_takes_each_exact_pin_and_sets_comments_options_and_hashes_aside(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("# a set\n--extra-index-url https://download.pytorch.org/whl/cpu\n\nvbench==0.1.5  # the scorer\n"
                    "torch==2.5.1 \\\n    --hash=sha256:" + "0" * 64 + " \\\n    --hash=sha256:" + "1" * 64 + "\n"
                    "fvcore==0.1.5.post20221221\n", encoding="utf-8")
    assert read_pins(lock) == {"vbench": "0.1.5", "torch": "2.5.1", "fvcore": "0.1.5.post20221221"}


@pytest.mark.parametrize(("line", "says"), [
    ("numpy<2.0.0", "is not pinned to one version"),
    ("numpy==1.*", "is not pinned to one version"),
    ("numpy>=1.26,==1.26.4", "is not pinned to one version"),
    ("vbench @ https://example.com/vbench-0.1.5-py3-none-any.whl", "direct reference"),
    ("numpy==1.26.4; python_version < '3.13'", "environment marker"),
])
def test_a_set_that_is_not_all_exact_pins_is_refused(tmp_path: Path, line: str, says: str) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"vbench==0.1.5\n{line}\n", encoding="utf-8")
    with pytest.raises(BadRequirement, match=says):
        read_pins(lock)


def test_the_recipes_own_set_is_vbench_0_1_5_with_its_pins() -> None:
    pins = read_pins(REPO / "recipes" / "get-vbench-env" / "pins.txt")
    # vbench 0.1.5's METADATA: Requires-Dist transformers==4.33.2 and numpy<2.0.0, timm>=0.9,<=1.0.12
    assert (pins["vbench"], pins["transformers"], pins["numpy"], pins["timm"]) == ("0.1.5", "4.33.2", "1.26.4",
                                                                                   "1.0.12")
    assert (pins["torch"], pins["torchvision"]) == ("2.5.1", "0.20.1")  # the reference image's


def test_the_cuda_set_resolves_every_pin_and_hashes_every_file() -> None:
    folder = REPO / "recipes" / "get-vbench-env"
    pins, resolved = read_pins(folder / "pins.txt"), read_pins(folder / "cuda-cp311.txt")

    def canonical(name: str) -> str:
        return name.lower().replace("_", "-").replace(".", "-")

    assert {canonical(n): v for n, v in pins.items()}.items() <= {canonical(n): v for n, v in resolved.items()}.items()
    text = (folder / "cuda-cp311.txt").read_text(encoding="utf-8")
    assert text.count("--hash=sha256:") == len(resolved) == 104
    # vbench 0.1.5's wheel on PyPI, as `pip download vbench==0.1.5 --no-deps` fetched it
    wheel = "13266ed4715d91a7669ab58484b9e010bc91bb96e129d414fb512d4937890023"
    assert f"vbench==0.1.5 \\\n    --hash=sha256:{wheel}" in text


# --- the environment, made by pip from the index --------------------------------------------------------------


def test_make_venv_installs_the_pinned_set_hash_checked_and_leaves_the_interpreter_alone(
        tmp_path: Path, index: tuple[str, dict[str, str]]) -> None:
    url, digests = index
    runner = Recorder()
    found = make_venv(tmp_path / "venv", write_lock(tmp_path / "requirements.txt", digests), python=sys.executable,
                      run=runner, extra_args=pip_args(url))
    assert found == PINNED  # numpy 1.26.4, not the index's newer 2.0.0
    env_python = str(tmp_path / "venv" / "bin" / "python")
    done = subprocess.run([env_python, "-c", "import vbench, numpy; print(vbench.VERSION, numpy.__version__)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0.1.5", "1.26.4"]
    assert runner.installs == [[env_python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                                *pip_args(url), "-r", str(tmp_path / "requirements.txt")]]
    assert installed_versions(["vbench"], python=sys.executable) == {"vbench": None}


def test_a_venv_sees_the_folders_after_its_own_packages_only_once_pip_is_done(
        tmp_path: Path, index: tuple[str, dict[str, str]]) -> None:
    url, digests = index
    host = tmp_path / "host"  # what get-vbench-env _host-torch borrows: a torch, and a numpy the venv must shadow
    (host / "borrowed").mkdir(parents=True)
    (host / "borrowed" / "__init__.py").write_text("NAME = 'borrowed'\n", encoding="utf-8")
    (host / "numpy").mkdir()
    (host / "numpy" / "__init__.py").write_text("__version__ = '2.3.5'\n", encoding="utf-8")
    found = make_venv(tmp_path / "venv", write_lock(tmp_path / "requirements.txt", digests), python=sys.executable,
                      extra_args=pip_args(url), site_after=(host,))
    assert found == PINNED
    done = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c",
                           "import borrowed, numpy; print(borrowed.NAME, numpy.__version__)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["borrowed", "1.26.4"]  # the venv's own numpy first, the host's torch found


def test_a_wheel_that_fails_its_hash_is_refused_with_pips_lines(tmp_path: Path,
                                                                index: tuple[str, dict[str, str]]) -> None:
    url, digests = index
    lock = write_lock(tmp_path / "requirements.txt", digests, wrong="transformers")
    with pytest.raises(PipInstallFailed, match="pip could not install the pinned set") as err:
        make_venv(tmp_path / "venv", lock, python=sys.executable, extra_args=pip_args(url))
    assert any("HASH" in line.upper() for line in err.value.tail)


# --- the environment as a cache entry --------------------------------------------------------------------------


def test_the_environment_is_one_cache_entry_per_set_and_interpreter_and_runs_where_it_was_published(
        tmp_path: Path, index: tuple[str, dict[str, str]]) -> None:
    url, digests = index
    store = Store(tmp_path / "cache")
    lock = write_lock(tmp_path / "requirements.txt", digests)
    runner = Recorder()
    first = cached_venv("get-vbench-env", lock, python=sys.executable, store=store, run=runner,
                        extra_args=pip_args(url))
    assert first.built_now and first.packages == PINNED
    entry = store.entry_dir("get-vbench-env", first.key)
    assert first.python == entry / "venv" / "bin" / "python"
    assert (entry / "requirements.txt").read_bytes() == lock.read_bytes()
    # built beside its place and renamed into it: the venv's interpreter finds its packages there
    done = subprocess.run([str(first.python), "-c", "import sys, vbench; print(sys.prefix)"],
                          capture_output=True, text=True, check=True)
    assert Path(done.stdout.strip()) == entry / "venv"

    again = cached_venv("get-vbench-env", lock, python=sys.executable, store=store, run=runner,
                        extra_args=pip_args(url))
    assert (again.built_now, again.key, again.python) == (False, first.key, first.python)
    assert len(runner.installs) == 1  # found in the cache: no venv, no pip

    meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    assert meta["inputs"]["implementation"] == sys.implementation.cache_tag
    assert meta["inputs"]["base"]  # the interpreter the venv links to


def test_another_set_index_or_interpreter_is_another_key(tmp_path: Path, bare_venv: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("vbench==0.1.5\n", encoding="utf-8")
    first = venv_key(lock, python=sys.executable, extra_args=["--index-url", "http://127.0.0.1:1/simple/"])
    assert venv_key(lock, python=sys.executable, extra_args=["--index-url", "http://127.0.0.1:1/simple/"]) == first
    # the venv the tests run in and a venv made from its base link to one interpreter: the same key
    assert venv_key(lock, python=str(bare_venv / "bin" / "python"),
                    extra_args=["--index-url", "http://127.0.0.1:1/simple/"]) == first
    assert venv_key(lock, python=sys.executable, extra_args=["--index-url", "http://127.0.0.1:2/simple/"]) != first
    lock.write_text("vbench==0.1.5\n# another set: the text is the set\n", encoding="utf-8")
    assert venv_key(lock, python=sys.executable, extra_args=["--index-url", "http://127.0.0.1:1/simple/"]) != first


# --- the recipe, through the CLI --------------------------------------------------------------------------------


@pytest.mark.e2e
def test_get_vbench_env_makes_the_environment_once_and_finds_it_again(home: Home,
                                                                       index: tuple[str, dict[str, str]]) -> None:
    url, digests = index
    for name in ("get-vbench-env", "detect-python"):
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    lock = write_lock(home.root / "lock.txt", digests)
    given = ["--input", f"requirements={lock}", "--input", f"pip_args={shlex.join(pip_args(url))}", "--json"]
    first = home.cmx_json("run", "get vbench-env _cpu", *given)
    assert isinstance(first, dict)
    assert first["outputs"]["built_now"] is True and first["outputs"]["packages"] == PINNED
    python = Path(first["outputs"]["python"])
    assert python == home.root / "cache" / "get-vbench-env" / first["outputs"]["key"] / "venv" / "bin" / "python"
    again = home.cmx_json("run", "get vbench-env _cpu", *given)
    assert isinstance(again, dict)
    assert again["outputs"]["built_now"] is False and again["outputs"]["python"] == str(python)
