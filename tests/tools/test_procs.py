"""Child processes (cmx/tools/procs.py): started in a process group of their own, tagged, stopped with all they started
(SIGTERM, then SIGKILL after the grace, for one that ignores SIGTERM), the run's registry, and the parent-death
signal for a cmx killed with SIGKILL. Real processes: sleep and small Python programs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cmx.tools import procs
from cmx.tools.procs import ChildProcesses, RunStopping, family_alive, family_members, spawn, stop

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="families are read from /proc")

# a Python child that ignores SIGTERM (as vLLM does while its engine starts) and says so when it is ready
IGNORES_TERM = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
               "time.sleep(60)"
# one that starts a grandchild in another process group (as Ray's reaper makes) and one in a session of its own,
# all ignoring SIGTERM, and prints the grandchildren's pids
FAMILY = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = subprocess.Popen([sys.executable, "-c", {ignores!r}], process_group=0, stdout=subprocess.PIPE)
    session = subprocess.Popen([sys.executable, "-c", {ignores!r}], start_new_session=True, stdout=subprocess.PIPE)
    group.stdout.readline()
    session.stdout.readline()
    print(group.pid, session.pid, flush=True)
    time.sleep(60)
    """).format(ignores=IGNORES_TERM)
# one that starts a grandchild in a session of its own and exits at once: the grandchild is orphaned (reparented
# away from the family's tree) and in none of its groups, as a daemonising server would be
ORPHANING = textwrap.dedent("""
    import subprocess, sys
    grandchild = subprocess.Popen([sys.executable, "-c", {ignores!r}], start_new_session=True, stdout=subprocess.PIPE)
    grandchild.stdout.readline()
    print(grandchild.pid, flush=True)
    """).format(ignores=IGNORES_TERM)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def ready(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_a_child_leads_a_process_group_in_cmxs_session_and_is_its_commands_own_pid():
    proc = spawn(["sleep", "30"])
    try:
        deadline = time.monotonic() + 5  # the parent-death wrapper execs the command in the same process
        while Path(f"/proc/{proc.pid}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "sleep"
        # not a session of its own: on Linux that would also be a scheduling autogroup of its own
        assert os.getpgid(proc.pid) == proc.pid and os.getsid(proc.pid) == os.getsid(0)
        assert family_members(proc) == [proc.pid]
    finally:
        stop(proc)
    assert proc.returncode == -signal.SIGTERM and not family_alive(proc)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace():
    proc = spawn(python(IGNORES_TERM), stdout=subprocess.PIPE, text=True)
    assert ready(proc) == "ready"
    began = time.monotonic()
    stop(proc, grace_s=0.5)
    took = time.monotonic() - began
    assert proc.returncode == -signal.SIGKILL
    assert 0.5 <= took < 3, took


def test_stopping_a_child_stops_what_it_started_in_another_process_group_or_session():
    proc = spawn(python(FAMILY), stdout=subprocess.PIPE, text=True)
    grouped, alone = (int(pid) for pid in ready(proc).split())
    assert os.getpgid(grouped) == grouped and os.getsid(alone) == alone
    assert sorted(family_members(proc)) == sorted([proc.pid, grouped, alone])
    stop(proc, grace_s=0.3)
    deadline = time.monotonic() + 3  # reparented to init, which reaps them
    while not (gone(grouped) and gone(alone)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(grouped) and gone(alone) and not family_alive(proc)


def test_stopping_a_child_that_ended_stops_the_process_it_left_behind():
    proc = spawn(python(ORPHANING), stdout=subprocess.PIPE, text=True)
    orphan = int(ready(proc))
    proc.wait()
    assert not gone(orphan) and family_members(proc) == [orphan]  # found by its tag, no longer under proc
    stop(proc, grace_s=0.3)
    deadline = time.monotonic() + 3
    while not gone(orphan) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(orphan)


def test_a_family_whose_leader_was_killed_is_killed_after_a_short_grace_not_the_callers():
    # the leader starts a member of its group that ignores SIGTERM (an engine process), then is killed with SIGKILL
    proc = spawn(python(FAMILY), stdout=subprocess.PIPE, text=True)
    grouped, alone = (int(pid) for pid in ready(proc).split())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert family_members(proc) and not gone(grouped)
    began = time.monotonic()
    stop(proc, grace_s=30)
    took = time.monotonic() - began
    assert took < procs.ORPHAN_GRACE_S + 2, took
    deadline = time.monotonic() + 3
    while not (gone(grouped) and gone(alone)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(grouped) and gone(alone) and not family_alive(proc)


def test_a_live_child_keeps_its_grace_beside_an_orphaned_family():
    orphaned = spawn(python(FAMILY), stdout=subprocess.PIPE, text=True)
    ready(orphaned)
    os.kill(orphaned.pid, signal.SIGKILL)
    orphaned.wait()
    # exits 0.8 s after SIGTERM: within its own grace, after the orphans' short one
    lives = spawn(python("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.8), "
                         "sys.exit(3))); print('ready', flush=True); time.sleep(60)"), stdout=subprocess.PIPE,
                  text=True)
    assert ready(lives) == "ready"
    procs.stop_many([orphaned, lives], grace_s=10)
    assert lives.returncode == 3 and not family_alive(orphaned)


def test_stopping_an_ended_child_twice_is_harmless():
    proc = spawn(["true"])
    proc.wait()
    assert stop(proc) == 0 and stop(proc) == 0


def test_the_run_stops_all_its_children_at_once_within_one_grace():
    children = ChildProcesses()
    with children.owning():
        started = [spawn(python(IGNORES_TERM), stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outside = spawn(["sleep", "30"])  # no run owns it: its starter stops it
    try:
        for proc in started:
            ready(proc)
        assert {p.pid for p in children.live()} == {p.pid for p in started}
        began = time.monotonic()
        assert sorted(children.stop_all(grace_s=0.5)) == sorted(p.pid for p in started)
        assert time.monotonic() - began < 3
        assert all(p.returncode == -signal.SIGKILL for p in started)
        assert outside.poll() is None
    finally:
        stop(outside)


def test_a_stopping_run_starts_no_more_children():
    children = ChildProcesses()
    children.stop_all()
    with children.owning(), pytest.raises(RunStopping, match="the run is stopping"):
        spawn(["sleep", "30"])


def test_a_child_its_starter_stopped_or_that_ended_is_forgotten():
    children = ChildProcesses()
    with children.owning():
        stopped = spawn(["sleep", "30"])
        ended = spawn(["true"])
        stop(stopped)
    ended.wait()
    assert children.live() == []


def test_the_registry_is_the_one_of_the_thread_that_owns_it():
    children = ChildProcesses()
    seen: list[subprocess.Popen] = []

    def elsewhere() -> None:  # another thread, not in the block: its children are not the run's
        seen.append(spawn(["sleep", "30"]))

    with children.owning():
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert children.live() == []
    stop(seen[0])


def test_a_child_gets_sigterm_when_cmx_is_killed(tmp_path: Path):
    """The last resort for a cmx killed with SIGKILL: the kernel's parent-death signal."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(procs.__file__).parents[2])!r})
        from cmx.tools.procs import spawn
        child = spawn(["sleep", "60"])
        print(child.pid, flush=True)
        time.sleep(60)
        """)
    cmx = subprocess.Popen(python(script), stdout=subprocess.PIPE, text=True)
    child = int(ready(cmx))
    cmx.kill()
    cmx.wait()
    deadline = time.monotonic() + 5
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(child)


def test_a_missing_program_fails_to_start_as_with_popen(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        spawn(["cmx-no-such-program"])
    script = tmp_path / "hello"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    proc = spawn(["./hello"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert proc.communicate()[0] == "hello\n"
