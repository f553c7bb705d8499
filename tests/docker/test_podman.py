"""`--container podman` on a real podman (Debian's), rootful: build, run, lock, save, load, replay; a failed build;
Ctrl-C. test_podman_rootless.py runs the tiny benchmark as another user, with rootless podman.

.ci/podman-setup.sh installs podman and loads the base image the Docker tests build on. The tests skip when podman
or the base image is missing, unless CMX_REQUIRE_PODMAN=1 (CI sets it): then they fail. The lock test builds the
tiny llama2's image (a few minutes, mostly pip on one core) and holds the one lock of the timed sections while its
benchmark runs (tests/conftest.py, timed_cpu_section), as the Docker tests do.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import Home, timed_cpu_section
from tests.docker.engine_tests import BASE, TINY, TRAPS_SIGTERM, ctrl_c_when_ready
from tests.docker.podman_tests import owners, podman_args, podman_images_removed, podman_marks, run_facts

pytestmark = podman_marks()


@pytest.fixture(scope="module", autouse=True)
def _images_removed() -> Iterator[None]:
    """The images the module's tests build or load are removed after its last one (GBs each)."""
    with podman_images_removed():
        yield


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
        archive.unlink()  # the whole image: CI's disk holds the other engines' images too
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert f"loading {archive} into podman" in proc.stdout
    assert f"replaying {lock} in {image['tag']} ({image['image_id'][:19]}, podman)" in proc.stdout
    facts = run_facts(results)
    assert facts["validity"]["performance"] == "VALID"
    assert facts["origin"]["container"]["engine"] == "podman"
    assert facts["origin"]["container"]["image_id"] == image["image_id"]
    assert owners(results) == {os.getuid()}


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
