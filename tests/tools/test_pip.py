"""cmx.tools.pip and the get-python-package recipe, on real venvs, real pip and wheels built here (no network)."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cmx.errors import StepError
from cmx.tools.pip import (
    BadRequirement,
    PackageMissing,
    PackageNotImportable,
    PipInstallFailed,
    ensure,
    import_memo,
    run_subprocess,
)
from tests.conftest import REPO, Home

# --- fixtures: wheels written by hand, venvs ----------------------------------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(folder: Path, dist: str, version: str, files: dict[str, str], metadata: str = "") -> Path:
    """A pure-Python wheel (a zip of the files plus METADATA, WHEEL and RECORD), as the wheel spec says."""
    stem = dist.replace("-", "_")
    info = f"{stem}-{version}.dist-info"
    contents = {**files,
                f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n{metadata}",
                f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: cmx-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},{_record_hash(text.encode())},{len(text.encode())}\n" for name, text in contents.items())
    contents[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in contents.items():
            zf.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    for version in ("1.0", "2.0"):
        write_wheel(folder, "cmxdemo", version, {"cmxdemo/__init__.py": f"VERSION = {version!r}\n"})
    write_wheel(folder, "cmx-import-demo", "1.0", {"cmx_other_name/__init__.py": ""})
    write_wheel(folder, "cmxbroken", "1.0", {"cmxbroken/__init__.py": "raise ImportError('libfoo.so: cannot open')\n"})
    write_wheel(folder, "cmxextra", "1.0", {"cmxextra/__init__.py": ""},
                'Provides-Extra: demo\nRequires-Dist: cmxdemo>=2; extra == "demo"\n')
    return folder


def _python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """A fresh venv with no pip (fast): enough wherever nothing gets installed by pip."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return _python(venv)


@pytest.fixture(scope="module")
def venv_with_pip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv


@pytest.fixture
def pip_python(venv_with_pip: Path, tmp_path: Path) -> str:
    """A venv with pip, of its own: a copy of one made per module (making one takes seconds)."""
    venv = tmp_path / "venv"
    shutil.copytree(venv_with_pip, venv, symlinks=True)
    return _python(venv)


def unpack(wheel: Path, python: str) -> None:
    """Install a pure wheel by unpacking it into site-packages, which is what installing one is."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(_site_packages(Path(python).parent.parent))


class Recorder:
    """A runner that runs for real and remembers each command."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        return run_subprocess(argv)

    @property
    def pip_calls(self) -> list[list[str]]:
        return [c for c in self.calls if c[1:3] == ["-m", "pip"]]


def local(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


# --- the tool -------------------------------------------------------------------------------


def test_missing_package_without_install_fails_with_the_exact_pip_command(bare_python: str, wheels: Path) -> None:
    runner = Recorder()
    with pytest.raises(PackageMissing) as err:
        ensure("cmxdemo>=2", python=bare_python, install=False, run=runner, extra_args=local(wheels))
    assert err.value.message == "cmxdemo is not installed"
    command = shlex.join([bare_python, "-m", "pip", "install", *local(wheels), "cmxdemo>=2"])
    assert err.value.hint == f"run `{command}`, or re-run with --install-missing"
    assert runner.pip_calls == []


def test_the_check_runs_in_the_target_interpreter_not_in_cmx(bare_python: str) -> None:
    importlib.metadata.version("click")  # cmx's own interpreter has click ...
    with pytest.raises(PackageMissing, match="click is not installed"):  # ... the target does not
        ensure("click", python=bare_python, install=False)


@pytest.mark.e2e
def test_missing_package_is_installed_by_pip_when_allowed(pip_python: str, wheels: Path) -> None:
    runner = Recorder()
    found = ensure("cmxdemo", python=pip_python, install=True, run=runner, extra_args=local(wheels))
    assert (found.name, found.version, found.installed_now) == ("cmxdemo", "2.0", True)
    assert found.location == _site_packages(Path(pip_python).parent.parent)
    assert runner.pip_calls == [[pip_python, "-m", "pip", "install", "--no-input", *local(wheels), "cmxdemo"]]
    again = ensure("cmxdemo", python=pip_python, install=True, run=runner, extra_args=local(wheels))
    assert again.installed_now is False and len(runner.pip_calls) == 1


def test_wrong_version_says_what_is_found_and_what_is_wanted(bare_python: str, wheels: Path) -> None:
    unpack(wheels / "cmxdemo-1.0-py3-none-any.whl", bare_python)
    with pytest.raises(PackageMissing) as err:
        ensure("cmxdemo >= 2", python=bare_python, install=False)
    assert err.value.message == "cmxdemo 1.0 is installed but cmxdemo>=2 is wanted"
    assert f"`{bare_python} -m pip install 'cmxdemo >= 2'`" in err.value.hint


@pytest.mark.e2e
def test_wrong_version_is_upgraded_when_allowed(pip_python: str, wheels: Path) -> None:
    unpack(wheels / "cmxdemo-1.0-py3-none-any.whl", pip_python)
    found = ensure("cmxdemo>=2", python=pip_python, install=True, extra_args=local(wheels))
    assert (found.version, found.installed_now) == ("2.0", True)


def test_satisfied_requirement_runs_no_pip(bare_python: str, wheels: Path) -> None:
    unpack(wheels / "cmxdemo-2.0-py3-none-any.whl", bare_python)
    runner = Recorder()
    found = ensure("cmxdemo>=2,<3", python=bare_python, install=True, run=runner, import_name="cmxdemo")
    assert (found.name, found.version, found.installed_now) == ("cmxdemo", "2.0", False)
    assert runner.calls and runner.pip_calls == []  # it looked, and installed nothing


def test_import_name_may_differ_from_the_distribution_name(bare_python: str, wheels: Path) -> None:
    unpack(wheels / "cmx_import_demo-1.0-py3-none-any.whl", bare_python)
    found = ensure("cmx-import-demo", python=bare_python, install=False, import_name="cmx_other_name")
    assert (found.name, found.version) == ("cmx-import-demo", "1.0")
    with pytest.raises(PackageNotImportable, match="`import cmx_import_demo` fails: ModuleNotFoundError"):
        ensure("cmx-import-demo", python=bare_python, install=False, import_name="cmx_import_demo")


def test_a_package_that_does_not_import_is_reported_and_not_reinstalled(bare_python: str, wheels: Path) -> None:
    unpack(wheels / "cmxbroken-1.0-py3-none-any.whl", bare_python)
    runner = Recorder()
    with pytest.raises(PackageNotImportable) as err:
        ensure("cmxbroken", python=bare_python, install=True, run=runner, import_name="cmxbroken")
    assert err.value.message == ("cmxbroken 1.0 is installed, but `import cmxbroken` fails: "
                                 "ImportError: libfoo.so: cannot open")
    assert "--force-reinstall cmxbroken" in err.value.hint
    assert runner.pip_calls == []


def test_a_remembered_import_runs_again_only_after_the_environment_changes(
        bare_python: str, wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    imports = tmp_path / "imports.txt"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CMX_TEST_IMPORTS", str(imports))
    write_wheel(tmp_path, "cmxslow", "1.0", {"cmxslow/__init__.py": (
        "import os\nwith open(os.environ['CMX_TEST_IMPORTS'], 'a') as f:\n    f.write('imported\\n')\n")})
    unpack(tmp_path / "cmxslow-1.0-py3-none-any.whl", bare_python)

    def check() -> int:
        ensure("cmxslow", python=bare_python, install=False, import_name="cmxslow", remember_import=True)
        return len(imports.read_text().splitlines())

    assert check() == 1 and check() == 1  # the second check trusted the memo
    assert import_memo(bare_python, "cmxslow").parent == tmp_path / "xdg" / "cmx" / "imports"
    unpack(wheels / "cmxdemo-2.0-py3-none-any.whl", bare_python)  # an install beside it
    assert check() == 2 and check() == 2
    ensure("cmxslow", python=bare_python, install=False, import_name="cmxslow")  # not asked to remember
    assert len(imports.read_text().splitlines()) == 3


def test_a_failed_import_is_never_remembered(bare_python: str, wheels: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    unpack(wheels / "cmxbroken-1.0-py3-none-any.whl", bare_python)
    for _ in range(2):
        with pytest.raises(PackageNotImportable, match=r"ImportError: libfoo\.so"):
            ensure("cmxbroken", python=bare_python, install=False, import_name="cmxbroken", remember_import=True)
    assert not import_memo(bare_python, "cmxbroken").exists()


def test_extras_are_checked_one_level_down(bare_python: str, wheels: Path) -> None:
    unpack(wheels / "cmxextra-1.0-py3-none-any.whl", bare_python)
    unpack(wheels / "cmxdemo-1.0-py3-none-any.whl", bare_python)
    assert ensure("cmxextra", python=bare_python, install=False).version == "1.0"  # no extra: no demand on cmxdemo
    with pytest.raises(PackageMissing) as err:
        ensure("cmxextra[demo]", python=bare_python, install=False)
    assert err.value.message == ("cmxextra 1.0 is installed, but its extras [demo] need more: "
                                 "cmxdemo 1.0 is installed but cmxdemo>=2 is wanted")
    assert f"`{bare_python} -m pip install 'cmxextra[demo]'`" in err.value.hint


@pytest.mark.parametrize("text, says", [
    ("numpy>>2", "is not a valid requirement"),
    ("", "is not a valid requirement"),
    ("-e .", "is not a valid requirement"),
    ("numpy; python_version < '3.12'", "has an environment marker"),
    ("cmxdemo @ https://example.com/cmxdemo-2.0-py3-none-any.whl", "is a direct reference"),
])
def test_a_bad_requirement_is_refused_before_anything_runs(text: str, says: str) -> None:
    runner = Recorder()
    with pytest.raises(BadRequirement, match=says) as err:
        ensure(text, install=True, run=runner)
    assert err.value.hint and runner.calls == []


@pytest.mark.e2e
def test_a_failing_pip_install_keeps_pips_last_lines(pip_python: str, wheels: Path) -> None:
    with pytest.raises(PipInstallFailed) as err:
        ensure("cmx-not-a-real-package", python=pip_python, install=True, extra_args=local(wheels))
    assert err.value.message.startswith(f"pip could not install 'cmx-not-a-real-package' into {pip_python}: ")
    assert any("No matching distribution found for cmx-not-a-real-package" in line for line in err.value.tail)


def test_an_interpreter_without_pip_is_told_to_get_pip_first(bare_python: str) -> None:
    with pytest.raises(PipInstallFailed) as err:
        ensure("cmxdemo", python=bare_python, install=True)
    assert err.value.message == f"cannot install 'cmxdemo': {bare_python} has no pip"
    assert f"{bare_python} -m ensurepip --upgrade" in err.value.hint


def test_an_interpreter_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "python")
    runner = Recorder()
    with pytest.raises(StepError) as err:
        ensure("cmxdemo", python=missing, install=False, run=runner)
    assert err.value.message == f"no Python interpreter at {missing!r}" and runner.calls == []


# --- the recipe, through the CLI ------------------------------------------------------------


@pytest.fixture
def pkg_home(home: Home) -> Home:
    for name in ("get-python-package", "detect-python"):
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return home


def _run_json(home: Home, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "cmx", "run", "get python-package", *args, "--json"],
                          env={**home.env, **(env or {})}, cwd=home.root, capture_output=True, text=True, timeout=120,
                          check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_cli_missing_package_fails_with_the_pip_command_and_no_traceback(pkg_home: Home) -> None:
    proc = pkg_home.cmx("run", "get python-package", "--input", "package=cmx-not-a-real-package", "--progress", "none")
    assert proc.returncode == 1
    assert "cmx-not-a-real-package is not installed" in proc.stderr
    assert f"run `{sys.executable} -m pip install cmx-not-a-real-package`, or re-run with --install-missing" \
        in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_cli_bad_requirement_fails_with_a_clear_message(pkg_home: Home) -> None:
    proc = pkg_home.cmx("run", "get python-package", "--input", "package=numpy>>2", "--progress", "none")
    assert proc.returncode == 1
    assert "'numpy>>2' is not a valid requirement" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_reports_an_installed_package_of_the_interpreter_running_cmx(pkg_home: Home) -> None:
    code, out = _run_json(pkg_home, "--input", "package=click>=8", "--input", "import_name=click")
    assert code == 0, out
    assert out["outputs"]["name"] == "click"
    assert out["outputs"]["version"] == importlib.metadata.version("click")
    assert out["outputs"]["installed_now"] is False
    assert out["steps"]["get-python-package"]["status"] == "ran"  # never cached: the environment may change


@pytest.mark.e2e
def test_cli_install_missing_installs_into_the_chosen_interpreter(pkg_home: Home, pip_python: str,
                                                                  wheels: Path) -> None:
    given = ["--input", f"python={pip_python}", "--input", f"pip_args={shlex.join(local(wheels))}"]
    code, out = _run_json(pkg_home, "--input", "package=cmxdemo>=2", *given)
    assert code == 1 and "cmxdemo is not installed" in out["error"]
    code, out = _run_json(pkg_home, "--input", "package=cmxdemo>=2", *given, "--install-missing")
    assert code == 0, out
    assert (out["outputs"]["version"], out["outputs"]["installed_now"]) == ("2.0", True)
    assert out["outputs"]["location"] == str(_site_packages(Path(pip_python).parent.parent))
    code, out = _run_json(pkg_home, "--input", "package=cmxdemo>=2", *given)
    assert code == 0 and out["outputs"]["installed_now"] is False
    code, out = _run_json(pkg_home, "--input", "package=cmx-import-demo", "--input", "import_name=cmx_other_name",
                          *given, env={"CMX_INSTALL_MISSING": "1"})
    assert code == 0 and out["outputs"]["installed_now"] is True


@pytest.mark.e2e
def test_two_steps_installing_one_package_at_once_run_pip_once(pip_python: str, wheels: Path) -> None:
    runner = Recorder()
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(lambda _: ensure("cmxdemo", python=pip_python, install=True, run=runner,
                                               extra_args=local(wheels)), range(2)))
    assert len(runner.pip_calls) == 1
    assert sorted(f.installed_now for f in found) == [False, True] and {f.version for f in found} == {"2.0"}
