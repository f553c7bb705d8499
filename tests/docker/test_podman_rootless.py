"""Rootless podman on a real podman (Debian's): a user other than root builds the tiny llama2's image in their own
storage, runs it, and owns every file the run left (`--userns=keep-id`).

.ci/podman-setup.sh makes the user (CMX_PODMAN_ROOTLESS_USER, `cmx-rootless`) with subordinate IDs, overlay storage
and the base image in that storage. Where there is no such user the test skips, unless CI requires podman
(CMX_REQUIRE_PODMAN=1; CMX_PODMAN_ROOTLESS=0 where the machine allows no rootless podman, said in the run). A module
of its own: `make test` runs it after the Docker tests, beside test_podman.py's rootful ones after the serial tests,
so that the two image builds of podman share the two lanes' time.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, timed_cpu_section
from tests.docker.engine_tests import TINY
from tests.docker.podman_tests import owners, podman_args, podman_images_removed, podman_marks, run_facts

ROOTLESS_USER = os.environ.get("CMX_PODMAN_ROOTLESS_USER", "cmx-rootless")

pytestmark = podman_marks()


@pytest.fixture(scope="module")
def rootless() -> Iterator[tuple[str, Path]]:
    """The rootless user, and a folder of theirs holding a venv with this checkout's cmx installed from its wheel
    (as a user installs it; the image then installs the same wheel). The images their podman makes are removed
    after the module, as the folder is."""
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
        with podman_images_removed(lambda args: as_user(user.pw_name, ["podman", *args], check=True).stdout):
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
