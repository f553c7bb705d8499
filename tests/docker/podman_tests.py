"""What the podman e2e modules share (test_podman.py: rootful; test_podman_rootless.py: another user's): the marks
that skip them where podman or its base image is missing, the options that select podman, and what they read back
from a run's results."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.docker.engine_tests import BASE, build_args, engine_marks, images_removed_after

SCENARIO = Path("box") / "llama2-70b-99.9" / "Offline"  # the default round's (v6.1)


def podman_missing() -> str | None:
    """Why podman or its base image is missing (None when both are there)."""
    if shutil.which("podman") is None:
        return "podman is not installed (run .ci/podman-setup.sh)"
    if subprocess.run(["podman", "image", "exists", BASE], capture_output=True).returncode != 0:
        return f"podman has no base image {BASE} (run .ci/podman-setup.sh)"
    return None


def podman_marks() -> list[pytest.MarkDecorator]:
    return engine_marks(podman_missing(), pytest.mark.podman, "CMX_REQUIRE_PODMAN")


def podman_args() -> list[str]:
    return build_args("--container", "podman")


def run_facts(results: Path) -> dict:
    return json.loads((results / SCENARIO / "cmx_run.json").read_text())


def owners(folder: Path) -> set[int]:
    return {p.stat().st_uid for p in folder.rglob("*")}


@contextmanager
def podman_images_removed(podman: Callable[[Sequence[str]], str] | None = None) -> Iterator[None]:
    """The images made in the block removed after it (engine_tests.images_removed_after), in the storage of the
    user `podman` runs as: given `podman(args) -> stdout`, another user's (rootless); by default root's."""
    def run(args: Sequence[str]) -> str:
        return subprocess.run(["podman", *args], capture_output=True, text=True, check=True).stdout

    call = podman or run
    with images_removed_after(lambda: set(call(["images", "--all", "--quiet", "--no-trunc"]).split()),
                              lambda ids: call(["rmi", "--force", "--ignore", *ids])):
        yield
