"""Ctrl-C at each stage of an `_endpoint` run whose `vllm serve` cmx starts itself (the server starting, its
engine warming up, LoadGen running, the accuracy being scored), and of a full-length in-process Offline run
(vLLM in the harness process, LoadGen running) and of the same run on two Ray replicas on a Ray the harness
starts itself: cmx exits 130 within seconds, says "interrupted" and records it, and 10 s after the Ctrl-C no
process cmx started is left and nothing listens on the server's port (docs/failures.md, "Ctrl-C"). The
full-length run (no _short: LoadGen issues its query of 1.1 x 600/s x 600 s samples at once) also shows that an
Offline run counts completed samples from its first seconds (issue 21, item 6): its progress.json says some are
done within 30 s of LoadGen's start in-process, and within 120 s on the replicas (each has one core of two; the
query would take them over an hour, so samples counted only at a shard's end would show none for that long).

Real parts throughout: six `cmx run` processes of the tiny Llama 2 on vLLM's CPU build, one per stage, started
together by one module fixture (one cache; a results and a runs folder each), so that the module costs about
one run up to its accuracy test rather than six in a row. The module's watcher thread sends a run its SIGINT the
moment the run's own logs or progress file show its stage (a run left going would load the CPUs the other runs
share), and notes what it saw then and 10 s later; each test checks its run's notes: every process that was
seen under cmx (by pid and start time), and the server's port.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import CMX, REPO, Home, interruptible, needs_vllm

# not serial: its six runs load the machine more than any neighbour in make test's e2e pass does, and its
# deadlines (cmx's 3 s grace, then 10 s) have room for that
pytestmark = [needs_vllm, pytest.mark.e2e, pytest.mark.timeout(1800)]

QUERY = "app mlperf inference llama2 _cpu _tiny _short _endpoint _offline"
IN_PROCESS_FULL = "app mlperf inference llama2 _cpu _tiny _offline _performance"  # vLLM in the harness, not short
STEP = "app-mlperf-inference-llama2"
# since LoadGen's first issue. The replicas ship their shards (about 6 MB pickled each) and run one core each:
# 21 s on a quiet machine, 32.5 s in CI's e2e pass beside another worker.
FIRST_SAMPLES_WITHIN_S = {"in-process-offline": 30.0, "ray-replicas-offline": 120.0}
STAGE_TIMEOUT_S = 1200.0  # a loaded 2-core machine: six runs share it, the vLLM server alone starts in minutes
GONE_WITHIN_S = 10.0
EXIT_WITHIN_S = 10.0  # cmx's grace before SIGKILL (3 s) and the kill


@dataclass
class Watched:
    """One cmx run and every process seen under it: (pid, start time) -> command line."""

    stage: str
    proc: subprocess.Popen
    runs: Path
    results: Path
    output: Path  # cmx's stdout and stderr
    seen: dict[tuple[int, str], str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # the module's watcher thread adds to `seen`
    # what the watcher saw when the run reached its stage (then it sent the SIGINT), and when the run exited
    reached: threading.Event = field(default_factory=threading.Event)  # set at the stage, or when the run ended
    interrupted_at: float | None = None
    port_at_stage: int | None = None
    commands_at_stage: list[str] = field(default_factory=list)
    progress_at_stage: dict = field(default_factory=dict)
    exited_at: float | None = None
    # GONE_WITHIN_S after the SIGINT: the processes still running, and whether the server's port listened
    left_after: list[str] | None = None
    listening_after: bool = False

    def log(self, name: str) -> str:
        found = sorted(self.runs.glob(f"*/{name}"))
        return found[0].read_text(encoding="utf-8", errors="replace") if found else ""

    def step_log(self) -> str:
        return self.log(f"logs/{STEP}.log")

    def server_log(self) -> str:
        return self.log(f"work/{STEP}/vllm-server.log")

    def progress(self, mode: str) -> dict | None:
        for path in self.results.glob(f"*/*/Offline/{mode}/progress.json"):
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                return None
        return None

    def progress_state(self, mode: str) -> str | None:
        return (self.progress(mode) or {}).get("state")

    def harness_ended(self) -> bool:
        with self.lock:
            harnesses = [key for key, cmd in self.seen.items() if "cmx.mlperf.loadgen.harness" in cmd]
        return bool(harnesses) and all(start_time(pid) != start for pid, start in harnesses)

    def port(self) -> int | None:
        found = re.search(r"vLLM server: .* --port (\d+)", self.step_log())
        return int(found.group(1)) if found else None

    def sample(self) -> None:
        """Each live descendant's command, read again at every sample: one first seen between its fork and its
        exec (its parent's command, or an empty one) has its own the next time."""
        for pid in descendants(self.proc.pid):
            start = start_time(pid)
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
                if start is not None and command:
                    with self.lock:
                        self.seen[(pid, start)] = command

    def commands(self) -> list[str]:
        with self.lock:
            return list(self.seen.values())

    def left(self) -> list[str]:
        with self.lock:
            seen = list(self.seen.items())
        return [f"{pid}: {cmd[:200]}" for (pid, start), cmd in seen if start_time(pid) == start]


def samples_completed(w: Watched) -> bool:
    return ((w.progress("performance/run_1") or {}).get("completed") or 0) > 0


# what each stage looks like in the run's files (the step's log, the server's log, the harness's progress)
REACHED: dict[str, Callable[[Watched], bool]] = {
    # the API server runs (its first lines), its engine not yet
    "server-starting": lambda w: "APIServer pid=" in w.server_log(),
    # the engine loads and warms up the model: vLLM ignores SIGTERM now
    "engine-warming": lambda w: "Starting to load model" in w.server_log(),
    "loadgen-running": lambda w: w.progress_state("performance/run_1") == "running",
    # the accuracy test's harness is done: cmx scores its log, the server still up
    "accuracy-scoring": lambda w: any(w.results.glob("*/*/Offline/accuracy/result.json")) and w.harness_ended(),
    # the full-length in-process run has completed samples (its engine answers each as it finishes)
    "in-process-offline": samples_completed,
    # the same on two Ray replicas, on a Ray that the harness starts itself (no ray_address): cmx's own process
    # must not become a Ray driver, whose signal handlers would end it before it stops its children
    "ray-replicas-offline": samples_completed,
}
QUERIES = {stage: f"{QUERY} {'_accuracy' if stage == 'accuracy-scoring' else '_performance'}" for stage in REACHED}
QUERIES["in-process-offline"] = QUERIES["ray-replicas-offline"] = IN_PROCESS_FULL
INPUTS = {"ray-replicas-offline": ["--input", "replicas=2"]}
IN_PROCESS = ("in-process-offline", "ray-replicas-offline")


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(
                    int(entry.name))
            except (OSError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def start_time(pid: int) -> str | None:
    """The process's start time (field 22 of its stat), None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Watched]]:
    """The six runs, started at once, and a thread that watches the process tree under each until it ends."""
    root = tmp_path_factory.mktemp("interrupt")
    home = Home(root / "home")
    home.root.mkdir()
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    watched: dict[str, Watched] = {}
    for stage in REACHED:
        results, records, output = root / stage / "results", root / stage / "runs", root / stage / "cmx.out"
        output.parent.mkdir()
        with output.open("w") as out:
            proc = subprocess.Popen([*CMX, "run", QUERIES[stage], "--input", f"results_dir={results}",
                                     "--input", "rows=8", *INPUTS.get(stage, []), "--progress", "plain"],
                                    env={**home.env, "CMX_RUNS": str(records)}, cwd=home.root, stdout=out,
                                    stderr=subprocess.STDOUT, preexec_fn=interruptible)
        watched[stage] = Watched(stage, proc, records, results, output)
    done = threading.Event()

    def watch() -> None:
        tick = 0
        while not done.is_set():
            for w in watched.values():
                with contextlib.suppress(OSError):  # a log or progress file replaced while it was read
                    step(w, scan=tick % 4 == 0)
            tick += 1
            time.sleep(0.05)

    def step(w: Watched, scan: bool) -> None:
        """Interrupt the run the moment it reaches its stage: a run left going after it loads the CPUs the other
        runs share, and a stage such as the accuracy scoring lasts only a moment."""
        now = time.monotonic()
        if w.interrupted_at is None and w.proc.poll() is None:
            if scan:
                w.sample()
            if REACHED[w.stage](w):
                w.sample()
                w.port_at_stage, w.commands_at_stage = w.port(), w.commands()
                w.progress_at_stage = w.progress("performance/run_1") or {}
                w.interrupted_at = time.monotonic()
                w.proc.send_signal(signal.SIGINT)
                w.reached.set()
        elif w.interrupted_at is None:  # it ended before its stage
            w.reached.set()
        if w.interrupted_at is not None and w.exited_at is None and w.proc.poll() is not None:
            w.exited_at = now
        if w.interrupted_at is not None and w.left_after is None and now - w.interrupted_at >= GONE_WITHIN_S:
            w.left_after = w.left()
            w.listening_after = bool(w.port_at_stage and listening(w.port_at_stage))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    yield watched
    done.set()
    thread.join()
    for w in watched.values():  # a failed test must not leave its run behind for the next module
        if w.proc.poll() is None:
            w.proc.kill()
        w.proc.wait()
        for line in w.left():
            with contextlib.suppress(OSError):
                os.kill(int(line.split(":")[0]), signal.SIGKILL)


@pytest.mark.parametrize("stage", list(REACHED))
def test_ctrl_c_leaves_no_process_and_no_port_behind(runs: dict[str, Watched], stage: str):
    run = runs[stage]
    run.reached.wait(STAGE_TIMEOUT_S)
    assert run.interrupted_at is not None, f"the run did not reach {stage}:\n{run.output.read_text()[-3000:]}"
    port, commands = run.port_at_stage, run.commands_at_stage
    if stage in IN_PROCESS:  # no server: the engines are the harness's (or its replicas'); samples came early
        assert port is None and any("cmx.mlperf.loadgen.harness" in c for c in commands)
        progress = run.progress_at_stage
        assert progress["expected"] > 100_000 and 0 < progress["completed"] < progress["expected"], progress
        assert progress["elapsed_s"] <= FIRST_SAMPLES_WITHIN_S[stage], progress
        if stage == "ray-replicas-offline":
            # the Ray that the harness started, and its workers (seen first under their script's name)
            assert any("raylet" in c for c in commands)
            assert any("default_worker.py" in c or "ray::" in c for c in commands)
    else:
        assert port is not None and any("vllm.entrypoints.openai.api_server" in c for c in commands)
    if stage == "loadgen-running":
        assert any("cmx.mlperf.loadgen.harness" in c for c in commands)

    run.proc.wait(timeout=60)
    while run.left_after is None and time.monotonic() - run.interrupted_at < GONE_WITHIN_S + 30:
        time.sleep(0.2)  # the watcher looks GONE_WITHIN_S after the SIGINT
    out = run.output.read_text()
    assert run.proc.returncode == 130 and out.rstrip().endswith("interrupted"), out[-3000:]
    assert run.exited_at is not None and run.exited_at - run.interrupted_at < EXIT_WITHIN_S, run.exited_at
    assert run.left_after == [] and not run.listening_after, (run.left_after, run.listening_after)
    (record,) = run.runs.glob("*/run.json")
    assert json.loads(record.read_text())["status"] == "interrupted"
    if stage == "accuracy-scoring":  # the Ctrl-C came before the score was written: the stage was hit
        assert not any(run.results.glob("*/*/Offline/accuracy/accuracy.txt"))
