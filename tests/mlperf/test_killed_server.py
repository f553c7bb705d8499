"""A `vllm serve` that cmx started, killed with SIGKILL in the middle of a run, ends the run within 5 s with a one-line
error that names the dead server (as every route reports it, issue 38) and no LoadGen query id, and leaves no
process of the server's group behind (issue 37, item 9: cmx waited 30 s on the orphaned VLLM::EngineCore, "the vLLM
server did not stop in 30 s").

Real parts: one `cmx run` of the tiny Llama 2 with `_endpoint` (cmx starts vllm serve, CPU build, itself), niced,
full length (no _short: LoadGen's Offline query is 396,000 samples, so the kill lands mid-run), and SIGKILL to the
server's leader only (its API process), as a user's `kill -9 PID` would: its engine process is orphaned.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CMX, REPO, Home, needs_vllm

pytestmark = [needs_vllm, pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(1500)]

QUERY = "app mlperf inference llama2 _cpu _tiny _endpoint _offline _performance"
SERVER = "vllm.entrypoints.openai.api_server"
ENDS_WITHIN_S = 5.0
STARTS_WITHIN_S = 1200.0  # a loaded 2-core machine: the server alone starts in minutes


def group_of(pgid: int) -> list[str]:
    """The live processes (not zombies) of process group `pgid`: 'pid: command'."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                    found.append(f"{entry.name}: {(entry / 'cmdline').read_text().replace(chr(0), ' ')[:150]}")
            except (OSError, IndexError, ValueError):
                continue
    return found


def server_leader(under: int) -> int | None:
    """The pid of the vllm serve that the process `under` started (it leads its own process group)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if SERVER in (entry / "cmdline").read_text() and os.getpgid(int(entry.name)) == int(entry.name) \
                        and b"CMX_FAMILY=" in (entry / "environ").read_bytes() \
                        and descends_from(int(entry.name), under):
                    return int(entry.name)
            except (OSError, ProcessLookupError):
                continue
    return None


def descends_from(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return False


def completed(results: Path) -> int:
    import json

    for path in results.glob("*/*/Offline/performance/run_1/progress.json"):
        try:
            return int(json.loads(path.read_text()).get("completed") or 0)
        except (OSError, ValueError):
            return 0
    return 0


def test_a_server_killed_mid_run_ends_the_run_within_seconds_in_one_line_leaving_no_process(tmp_path: Path):
    home = Home(tmp_path / "home")
    home.root.mkdir()
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    results, output = tmp_path / "results", tmp_path / "cmx.out"
    with output.open("w") as out:
        proc = subprocess.Popen(["nice", "-n", "10", *CMX, "run", QUERY, "--input", f"results_dir={results}",
                                 "--input", "rows=8", "--progress", "plain"], env=home.env, cwd=home.root,
                                stdout=subprocess.DEVNULL, stderr=out)
    try:
        deadline = time.monotonic() + STARTS_WITHIN_S
        while completed(results) == 0:  # LoadGen's test runs and the server answers
            assert proc.poll() is None, output.read_text()[-3000:]
            assert time.monotonic() < deadline, "no sample was answered in time"
            time.sleep(0.2)
        leader = server_leader(proc.pid)
        assert leader is not None, "no vllm serve under cmx"
        assert len(group_of(leader)) > 1, group_of(leader)  # its engine process, which the kill orphans
        os.kill(leader, signal.SIGKILL)
        killed = time.monotonic()
        code = proc.wait(timeout=60)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    err = output.read_text()
    assert took < ENDS_WITHIN_S, f"the run ended {took:.1f} s after the kill\n{err[-3000:]}"
    assert code == 1, err[-3000:]
    assert group_of(leader) == []
    lines = err.splitlines()  # --progress plain's lines, then the error
    first = lines.index("error: step failed: app-mlperf-inference-llama2")
    # the cause, in one line: the server found dead (its listening socket went with its leader), the samples
    # counted, and no LoadGen query id (an address)
    cause = lines[first + 1]
    assert re.match(r"  Offline performance FAILED: the server at http://127\.0\.0\.1:\d+/v1 stopped answering "
                    r"\(connection (refused|reset)\); \d+ of \d+ samples completed, ", cause), cause
    assert not re.search(r"\d{9,}", cause), cause
    assert re.search(rf"the vLLM server \(pid {leader}\) was killed by SIGKILL while in use", err), err[-3000:]
