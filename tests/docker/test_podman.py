"""`--container podman` on a real podman (Debian's), rootful and rootless: build, run, lock, save, load, replay.

.ci/podman-setup.sh installs podman, loads the base image the Docker tests build on and makes a user for rootless
podman (CMX_PODMAN_ROOTLESS_USER, `cmx-rootless`) with that image in its own storage. The tests skip when podman or
the base image is missing, unless CMX_REQUIRE_PODMAN=1 (CI sets it): then they fail. Each builds the tiny llama2's
image once in its own storage (a few minutes, mostly pip on one core) and holds the one lock of the timed sections
while its benchmark runs (tests/conftest.py, timed_cpu_section), as the Docker tests do.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, Home, timed_cpu_section
from tests.docker.engine_tests import BASE, TINY, TRAPS_SIGTERM, build_args, ctrl_c_when_ready, engine_marks

ROOTLESS_USER = os.environ.get("CMX_PODMAN_ROOTLESS_USER", "cmx-rootless")
SCENARIO = Path("box") / "llama2-70b-99.9" / "Offline"  # the default round's (v6.1)


def _podman_ready() -> str | None:
    """Why podman or its base image is missing (None when both are there)."""
    if shutil.which("podman") is None:
        return "podman is not installed (run .ci/podman-setup.sh)"
    if subprocess.run(["podman", "image", "exists", BASE], capture_output=True).returncode != 0:
        return f"podman has no base image {BASE} (run .ci/podman-setup.sh)"
    return None


pytestmark = engine_marks(_podman_ready(), pytest.mark.podman, "CMX_REQUIRE_PODMAN")


def podman_args() -> list[str]:
    return build_args("--container", "podman")


def run_facts(results: Path) -> dict:
    return json.loads((results / SCENARIO / "cmx_run.json").read_text())


def owners(folder: Path) -> set[int]:
    return {p.stat().st_uid for p in folder.rglob("*")}


@pytest.mark.skipif(os.geteuid() != 0, reason="rootful podman is root's")
def test_a_rootful_lock_pins_the_podman_built_image_which_replays_from_its_archive(builtin: Home, tmp_path: Path):
    """`cmx lock --container podman --save-image` builds the image, pins it and saves it; with the image gone from
    podman, `cmx run --locked --load-image` loads it again and replays the tiny benchmark in it: VALID, the results
    the calling user's."""
    lock, archive, results = tmp_path / "cmx.lock", tmp_path / "image.tar", tmp_path / "results"
    proc = builtin.cmx("lock", TINY, "--input", "system_name=box", "-o", str(lock), "--save-image", str(archive),
                       *podman_args(), timeout=2400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    image = yaml.safe_load(lock.read_text())["docker"]
    assert image["engine"] == "podman" and image["base_image"] == BASE
    inspected = json.loads(subprocess.run(["podman", "image", "inspect", "--format", "json", image["tag"]],
                                          capture_output=True, text=True, check=True).stdout)[0]
    assert image["image_id"] == "sha256:" + inspected["Id"]
    assert archive.stat().st_size > 100_000_000  # the image's layers: Python, vLLM's CPU build, torch

    subprocess.run(["podman", "rmi", "--force", image["tag"]], capture_output=True, check=True)
    try:
        with timed_cpu_section():
            proc = builtin.cmx("run", "--locked", str(lock), "--load-image", str(archive), "--input",
                               f"results_dir={results}", timeout=1800)
    finally:
        archive.unlink()  # 4.5 GB: CI's disk holds both engines' images too
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert f"loading {archive} into podman" in proc.stdout
    assert f"replaying {lock} in {image['tag']} ({image['image_id'][:19]}, podman)" in proc.stdout
    facts = run_facts(results)
    assert facts["validity"]["performance"] == "VALID"
    assert facts["origin"]["container"]["engine"] == "podman"
    assert facts["origin"]["container"]["image_id"] == image["image_id"]
    assert owners(results) == {os.getuid()}


@pytest.fixture(scope="module")
def rootless() -> Iterator[tuple[str, Path]]:
    """The rootless user, and a folder of theirs holding a venv with this checkout's cmx installed from its wheel
    (as a user installs it; the image then installs the same wheel)."""
    if os.geteuid() != 0:
        pytest.skip("the rootless test starts cmx as another user, which takes root")
    try:
        user = pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        why = f"no user {ROOTLESS_USER} for rootless podman (.ci/podman-setup.sh makes one where it can)"
        if os.environ.get("CMX_REQUIRE_PODMAN") == "1" and os.environ.get("CMX_PODMAN_ROOTLESS") != "0":
            raise RuntimeError(why) from None
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="cmx-rootless-", dir="/tmp"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(folder / "dist"),
                    str(REPO)], check=True, capture_output=True)
    os.chmod(folder, 0o755)
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(folder)], check=True)
    wheel = next((folder / "dist").glob("*.whl"))
    as_user(user.pw_name, ["/usr/bin/python3", "-m", "venv", str(folder / "venv")], check=True)
    as_user(user.pw_name, [str(folder / "venv/bin/pip"), "install", "--quiet", str(wheel)], check=True, timeout=600)
    try:
        yield user.pw_name, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_user(name: str, argv: list[str], *, check: bool = False, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` as the user `name`, with their home, and pip's and TLS's settings of this environment."""
    home = pwd.getpwnam(name).pw_dir
    passed = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "SSL_", "REQUESTS_", "HTTP", "NO_PROXY"))
              or k in ("PATH", "LANG")}
    full = {**passed, "HOME": home, **(env or {})}
    proc = subprocess.run(["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in full.items()), *argv],
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} as {name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


def test_a_rootless_user_builds_runs_and_owns_the_results(rootless: tuple[str, Path]):
    """A user other than root runs the tiny benchmark with rootless podman, in an image their podman builds: VALID,
    and every file the run left in the results, the cache and the run records is theirs (`--userns=keep-id`)."""
    name, folder = rootless
    uid = pwd.getpwnam(name).pw_uid
    results, home = folder / "results", folder / "home"
    wheel = next((folder / "dist").glob("*.whl"))
    with timed_cpu_section():
        proc = as_user(name, [str(folder / "venv/bin/cmx"), "run", TINY, "--input", f"results_dir={results}",
                              "--input", "system_name=box", "--cmx-wheel", str(wheel), *podman_args()],
                       env={"CMX_HOME": str(home)}, timeout=2400)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "(podman)" in proc.stdout and "rootless podman" not in proc.stderr  # the CPU kind has no groups, limits
    facts = run_facts(results)
    assert facts["validity"]["performance"] == "VALID"
    assert facts["origin"]["container"]["engine"] == "podman"
    for written in (results, home / "cache", home / "runs"):
        assert owners(written) == {uid}, written
    listed = as_user(name, ["podman", "images", "--format", "{{.Repository}}"], check=True).stdout
    assert "cmx-app-mlperf-inference-llama2" in listed  # in the user's own storage, built by their podman


def test_a_failed_podman_build_names_the_instruction_and_its_last_lines(tmp_path: Path):
    from cmx.tools import podman
    from cmx.tools.container_images import ContainerEngineError

    (tmp_path / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo the last words && exit 3\n")
    lines: list[str] = []
    with pytest.raises(ContainerEngineError) as err:
        podman.build(tmp_path, "cmx-test/fails:1", buildargs={"HTTP_PROXY": "http://u:pw-7@proxy:3128"},
                     emit=lines.append, keep_hint="keep it")
    assert "the image build failed at STEP 2/2: RUN echo the last words && exit 3: it exited with status 3" in \
        err.value.message
    assert "  | the last words" in err.value.message and err.value.hint == "keep it"
    argv = podman.build_argv(tmp_path, "t:1", {"HTTP_PROXY": "http://u:pw-7@proxy:3128"}, tmp_path / "iid", False)
    assert "--build-arg=HTTP_PROXY" in argv and not any("pw-7" in a for a in argv)  # the value: podman's environment


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_stops_the_podman_container_with_sigterm_and_removes_it_unless_kept(keep: bool):
    """The run inside (PID 1) gets SIGTERM from `podman stop`; here a shell that exits on it. The container is
    removed, or with --keep kept, stopped; no podman process is left behind."""
    from cmx.docker.engines.podman import container_name
    from cmx.tools import podman

    name = container_name()
    with ctrl_c_when_ready() as emit, pytest.raises(KeyboardInterrupt):
        podman.run(["podman", "run", "--name", name, "--pull=never", BASE, "sh", "-c", TRAPS_SIGTERM], name=name,
                   env=dict(os.environ), emit=emit, keep=keep)
    state = subprocess.run(["podman", "ps", "--all", "--filter", f"name={name}", "--format", "{{.Status}}"],
                           capture_output=True, text=True, check=True).stdout.strip()
    try:
        assert state.startswith("Exited (143)") if keep else state == ""
        left = subprocess.run(["pgrep", "-f", f"podman run --name {name}"], capture_output=True, text=True).stdout
        assert left == ""
    finally:
        subprocess.run(["podman", "rm", "--force", "--ignore", name], capture_output=True)
