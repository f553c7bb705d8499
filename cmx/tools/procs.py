"""Child processes that outlive a call (a harness, a `vllm serve`): each started in a process group of its own,
tagged, with a parent-death signal, stopped with its whole family (SIGTERM, then SIGKILL after a grace), and the
registry of those a run owns, which stops them all at once when the run is interrupted.

    children = ChildProcesses()                 # the Runner owns one per run
    with children.owning():                     # a step's thread: what `spawn` registers with
        proc = spawn([python, "-m", "x"], stdout=log)
        ...
        stop(proc, grace_s=30)                  # the caller's own, orderly stop
    children.stop_all()                         # Ctrl-C, from the main thread: every one left, at once

A child's family is what it started and what those started in turn: vLLM's engine processes, a
local Ray instance, anything that made a process group or a session of its own or was orphaned.
Each child gets a tag in its environment (`CMX_FAMILY`), which every process it starts inherits, so
the family is found in /proc by that tag (and by the child's process group, for a member that
cleared its environment) and signalled process by process. The child leads a process group, not a
session: a terminal's Ctrl-C reaches cmx only, which then stops its children itself, and on Linux
a new session would also be a new scheduling autogroup, which changes how the CPUs are shared
between the child and everything else (a harness in an autogroup of its own made a two-replica Ray
Server test on 2 cores go INVALID, TTFT p99 2 to 5 s against 0.16 s). SIGKILL follows the SIGTERM
after the grace, whatever the child does with SIGTERM: vLLM ignores it while its engine starts. A family
whose leader has already died (a `vllm serve` killed with SIGKILL, its VLLM::EngineCore orphaned) has nobody to
end it in order, so its grace is short (ORPHAN_GRACE_S). A child also gets SIGTERM from the kernel when the
thread that started it dies (cmx killed with SIGKILL, or os._exit): a last resort, one signal, which the steps
above do not rely on.

Why a context variable: the processes are started deep in the layers above (the harness in
mlperf/loadgen, the server in mlperf/backends) by a step's code, from the step's worker thread,
while the interrupt arrives in the main thread, where the Runner catches it. `owning()` makes the
run's registry the one `spawn` uses in that thread, without every signature between the Runner
and Popen carrying it; the registry itself is an object the Runner owns, one per run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from cmx.errors import CmxError

FAMILY_VAR = "CMX_FAMILY"  # the environment variable that tags a child and everything it starts
STOP_GRACE_S = 3.0  # on an interrupt: what SIGTERM gets before SIGKILL
ORPHAN_GRACE_S = 0.5  # the same, for a family whose leader has died (killed, crashed): nobody shuts it down in order
KILL_WAIT_S = 5.0  # after SIGKILL: how long a process may take to be gone (its memory freed)
POLL_S = 0.05

# Run first in the child: ask the kernel for SIGTERM when the parent (thread) dies, make sure the parent did not
# die already, then become the real command. (prctl's setting survives exec; a preexec_fn would do the same in the
# forked child, which Python warns against in threaded programs.)
_EXEC_WITH_PDEATHSIG = r"""
import ctypes, os, signal, sys
os.setpgid(0, 0)  # a process group of its own, in cmx's session (Popen's process_group is Python 3.11+)
parent = int(sys.argv[1])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass  # not Linux: the owner still stops it; only a killed cmx would leave it behind
if os.getppid() != parent:
    sys.exit("cmx died before the process started")
try:
    os.execv(sys.argv[2], sys.argv[3:])
except OSError as err:
    sys.exit(f"cannot run {sys.argv[3]}: {err}")
"""

_PROC = Path("/proc")


class RunStopping(CmxError):
    """The run is being stopped (Ctrl-C): no new process is started."""


class ChildProcesses:
    """The processes one run started and may still be running. Thread-safe: steps start children from their
    worker threads while the main thread may be stopping them all; once `stop_all` has begun, starting one
    more raises RunStopping."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, Child] = {}
        self._closed = False

    @contextlib.contextmanager
    def owning(self) -> Iterator[ChildProcesses]:
        """`spawn` in this thread (and context) registers its processes here until the block ends."""
        token = _OWNER.set(self)
        try:
            yield self
        finally:
            _OWNER.reset(token)

    def start(self, argv: Sequence[str], **popen: Any) -> Child:
        """`start_child(argv, **popen)`, registered; under the lock, so that `stop_all` sees it or it never starts."""
        with self._lock:
            if self._closed:
                raise RunStopping(f"the run is stopping: {argv[0]} was not started",
                                  hint="nothing to do: cmx exits as soon as its children are stopped")
            self._prune()
            proc = start_child(argv, **popen)
            self._live[proc.pid] = proc
            return proc

    def forget(self, proc: subprocess.Popen[Any]) -> None:
        """The owner of `proc` has stopped it (or it ended): stop_all need not."""
        with self._lock:
            self._live.pop(proc.pid, None)

    def live(self) -> list[Child]:
        with self._lock:
            self._prune()
            return list(self._live.values())

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> list[int]:
        """Refuse new children, then stop every one still running, all at once (SIGTERM to each one's family,
        SIGKILL after `grace_s`); the pids of those that were stopped."""
        with self._lock:
            self._closed = True
            procs = list(self._live.values())
            self._live.clear()
        stop_many(procs, grace_s)
        return [p.pid for p in procs]

    def _prune(self) -> None:
        # an entry whose process has ended and whose family is gone is only a pid that may be reused
        for pid, proc in list(self._live.items()):
            if proc.poll() is not None and not family_alive(proc):
                del self._live[pid]


# the registry `spawn` uses in this context: set by ChildProcesses.owning (see the module docstring)
_OWNER: ContextVar[ChildProcesses | None] = ContextVar("cmx_child_processes", default=None)


class Child(subprocess.Popen[Any]):
    """A process `spawn` started: it leads its process group, and `family` is the tag that it and every
    process it starts carry in their environment."""

    family: str = ""


def spawn(argv: Sequence[str], **popen: Any) -> Child:
    """Start `argv` as a child that leads its own process group, tagged, and gets SIGTERM when this thread
    dies, registered with the run that owns this thread (if any). Keyword arguments go to Popen (not
    start_new_session or process_group)."""
    owner = _OWNER.get()
    return owner.start(argv, **popen) if owner is not None else start_child(argv, **popen)


def start_child(argv: Sequence[str], **popen: Any) -> Child:
    """Popen of `argv` in a new process group with a new family tag, through the parent-death wrapper where the
    platform has one. The child's pid is argv's own (the wrapper execs it), and its process group's id."""
    argv = [os.fspath(a) for a in argv]
    if sys.platform.startswith("linux"):
        # found here, as Popen would: a missing program is a FileNotFoundError for the caller, not the wrapper's
        argv = [sys.executable, "-c", _EXEC_WITH_PDEATHSIG, str(os.getpid()), _program(argv[0], popen), *argv]
    family = uuid.uuid4().hex
    env = dict(os.environ if popen.get("env") is None else popen["env"])
    env[FAMILY_VAR] = family
    # elsewhere (no wrapper, no autogroups), a session of its own is the way to a process group of its own
    proc = Child(argv, start_new_session=not sys.platform.startswith("linux"), **{**popen, "env": env})
    proc.family = family
    return proc


def _program(name: str, popen: dict[str, Any]) -> str:
    """The file Popen would run for `name`: looked up on the child's PATH, relative to the child's cwd."""
    env, cwd = popen.get("env"), popen.get("cwd")
    where = os.fspath(cwd) if cwd is not None else os.getcwd()
    program: str | None
    if os.sep in name:
        path = os.path.join(where, name)
        program = path if os.access(path, os.X_OK) else None
    else:
        program = shutil.which(name, path=(os.environ if env is None else env).get("PATH", os.defpath))
    if program is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    return os.path.join(where, program)


def stop(proc: subprocess.Popen[Any], grace_s: float = STOP_GRACE_S) -> int | None:
    """Stop `proc` and its family: SIGTERM, SIGKILL after `grace_s`; returns once none is left (its exit
    status). Safe on a process that has ended, and twice."""
    stop_many([proc], grace_s)
    owner = _OWNER.get()
    if owner is not None:
        owner.forget(proc)
    return proc.returncode


def stop_many(procs: Sequence[subprocess.Popen[Any]], grace_s: float) -> None:
    """`stop` for several at once: one grace for all, so that N children take no longer than one. A family whose
    leader has already died gets ORPHAN_GRACE_S at most."""
    # a leader not yet reaped holds its pid, so its process group's id cannot name anyone else's processes; once
    # reaped, the group's id stays reserved while any member of the group lives
    live = [p for p in procs if p.poll() is None or family_alive(p)]
    if not live:
        _reap(procs)
        return
    began = time.monotonic()
    # the leader is what shuts its family down in order (vLLM's API server ends its engine processes); without it
    # nobody will, and an orphaned VLLM::EngineCore computes on for nobody, loading the CPUs the run still needs
    deadline = {id(p): began + (min(grace_s, ORPHAN_GRACE_S) if p.returncode is not None else grace_s) for p in live}
    signal_families(live, signal.SIGTERM)
    waiting, killed = live, []
    for due in sorted(set(deadline.values())):
        _wait_gone(waiting, due)
        ended = [p for p in waiting if deadline[id(p)] <= due]
        waiting = [p for p in waiting if deadline[id(p)] > due]
        left = [p for p in ended if family_alive(p)]
        if left:
            signal_families(left, signal.SIGKILL)
            killed += left
    if killed:
        _wait_gone(killed, time.monotonic() + KILL_WAIT_S)
    _reap(procs)


def _reap(procs: Sequence[subprocess.Popen[Any]]) -> None:
    """Wait for each (already signalled) child's exit status, so that no zombie is left behind."""
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_WAIT_S)


def _wait_gone(procs: Sequence[subprocess.Popen[Any]], deadline: float) -> None:
    while time.monotonic() < deadline:
        for proc in procs:
            proc.poll()  # reap our own child, so that it no longer counts
        if not _members(procs):  # one scan of /proc for all of them
            return
        time.sleep(POLL_S)


def signal_families(procs: Iterable[subprocess.Popen[Any]], sig: int) -> None:
    """`sig` to every process of each one's family: its process group at once, then each member by its pid."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            os.killpg(proc.pid, sig)
    for pid in _members(procs):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def family_members(proc: subprocess.Popen[Any]) -> list[int]:
    """The live processes (not zombies) of `proc`'s family, itself included while it runs."""
    return _members([proc])


def family_alive(proc: subprocess.Popen[Any]) -> bool:
    """Whether any process (not a zombie waiting for its parent) of `proc`'s family is left."""
    return bool(_members([proc]))


def _members(procs: Sequence[subprocess.Popen[Any]]) -> list[int]:
    """The live processes that carry one of these children's tags, or are in one of their process groups.
    Without /proc (not Linux), a family is its child's process group, while that exists."""
    groups = {p.pid for p in procs}
    tags = {f"{FAMILY_VAR}={p.family}".encode() for p in procs if isinstance(p, Child) and p.family}
    if not _PROC.joinpath("self").exists():
        return [g for g in groups if _group_exists(g)]
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # after the command's closing parenthesis: state, ppid, pgrp, ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] in ("Z", "X"):
                continue
            if int(fields[2]) in groups or (tags and not tags.isdisjoint(_environ(entry))):
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile, or not ours to read
    return found


def _environ(entry: Path) -> list[bytes]:
    """A process's environment as it was started (NAME=value entries); OSError when it is not ours to read."""
    return (entry / "environ").read_bytes().split(b"\0")


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
