"""What the e2e tests of each container engine share: the base image and wheelhouse CI makes, the query they run,
and the marks that skip them where the engine is missing, or fail them where CI requires it."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BASE = os.environ.get("CMX_TEST_BASE_IMAGE", "cmx-test/bookworm-minbase:1")
WHEELHOUSE = Path(os.environ.get("CMX_TEST_WHEELHOUSE", "/opt/wheels"))
TINY = "app mlperf inference llama2 _cpu _tiny _short"


def engine_marks(why_not: str | None, marker: pytest.MarkDecorator, required_by: str) -> list[pytest.MarkDecorator]:
    """A module's marks: e2e, the engine's marker, skipped for `why_not` (None: ready) unless the variable
    `required_by` is 1 (CI), which makes a missing engine an error. A first build installs vLLM's CPU build into
    the image: minutes, past the suite's 600 s default. The module's tests run in order, in one process (make test
    runs the engines' tests in a pass of their own): the first builds the image the later ones find up to date."""
    if why_not and os.environ.get(required_by) == "1":
        raise RuntimeError(f"{required_by}=1 but {why_not}")
    return [pytest.mark.e2e, marker, pytest.mark.skipif(why_not is not None, reason=why_not or ""),
            pytest.mark.timeout(2400)]


def build_args(*engine: str) -> list[str]:
    """The options that select the engine (`engine`), the base image and, where there is one, the wheelhouse."""
    args = [*engine, "--base-image", BASE]
    return args + (["--wheelhouse", str(WHEELHOUSE)] if WHEELHOUSE.is_dir() else [])


# a container's PID 1 that exits with 143 on SIGTERM, after saying it is ready
TRAPS_SIGTERM = "trap 'exit 143' TERM; echo ready; while true; do sleep 0.1; done"


@contextmanager
def ctrl_c_when_ready() -> Iterator[Callable[[str], None]]:
    """An `emit` that presses Ctrl-C (KeyboardInterrupt in the main thread, as the host's cmx gets it) when the
    container prints `ready`; SIGINT's default handler is in place meanwhile (interrupt_main does nothing where
    SIGINT is ignored: tests started in the background by a shell)."""
    import _thread
    import signal

    def emit(line: str) -> None:
        if line == "ready":
            _thread.interrupt_main()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield emit
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def images_removed_after(listing: Callable[[], set[str]], remove: Callable[[Collection[str]], None]) -> Iterator[None]:
    """Remove, when the block ends, every image made in it: the IDs `listing` gives then and not before (tags and
    build steps alike), with `remove`, a few passes, since an image with children stays until they go. The tiny
    llama2's image is GBs, and CI's disk, of no set size, filled once with three engines' images and builds."""
    before = listing()
    try:
        yield
    finally:
        for _ in range(3):
            made = listing() - before
            if not made:
                break
            remove(made)
