"""The code sandbox on real subprocesses: exit status, the time, memory and output limits, no network, refusals."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time

import pytest

from cmx.mlperf.scoring.sandbox import (
    LANGUAGES,
    LanguageUnavailable,
    Limits,
    Program,
    check_language,
    run_program,
    run_programs,
)

FAST = Limits(seconds=2.0, memory_mb=256, output_kb=64)


def test_a_program_that_exits_0_passes_and_its_stdin_and_stdout_are_wired():
    outcome = run_program(Program("python", "print(input()[::-1])", stdin="abc\n"), FAST)
    assert outcome.passed and outcome.status == "passed"
    assert outcome.stdout == "cba\n"


def test_a_failing_assert_fails_with_its_status_and_traceback():
    outcome = run_program(Program("python", "assert 1 + 1 == 3, 'arithmetic'"), FAST)
    assert outcome.status == "failed" and outcome.returncode == 1
    assert "AssertionError: arithmetic" in outcome.stderr


def test_a_program_past_the_wall_limit_is_killed_with_its_children():
    marker = f"cmx-sandbox-child-{os.getpid()}-{time.monotonic_ns()}"
    source = (f"import subprocess, sys\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
              f"while True: pass\n")
    start = time.monotonic()
    outcome = run_program(Program("python", source), Limits(seconds=1.0))
    assert outcome.status == "timeout" and outcome.returncode is None
    assert time.monotonic() - start < 10
    time.sleep(0.2)
    alive = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).find(marker) >= 0]
    assert alive == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def test_an_allocation_over_the_memory_limit_is_reported_as_memory():
    outcome = run_program(Program("python", "block = bytearray(1024 * 1024 * 1024)"), FAST)
    assert outcome.status == "memory"
    assert "MemoryError" in outcome.stderr


def test_output_past_the_limit_stops_the_program_and_is_cut():
    outcome = run_program(Program("python", "import sys\nfor _ in range(10**6): sys.stdout.write('x' * 1000)"), FAST)
    assert not outcome.passed
    assert len(outcome.stdout) <= FAST.output_kb * 1024


def test_the_program_cannot_reach_a_server_on_this_machines_loopback():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    thread = threading.Thread(target=lambda: _accept_one(server, accepted), daemon=True)
    thread.start()
    try:
        source = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        outcome = run_program(Program("python", source), FAST)
    finally:
        server.close()
    assert outcome.status == "failed" and "connected" not in outcome.stdout
    assert "unreachable" in outcome.stderr or "refused" in outcome.stderr
    assert accepted == []


def _accept_one(server: socket.socket, accepted: list[object]) -> None:
    with contextlib.suppress(OSError):
        accepted.append(server.accept())


def test_the_program_runs_in_a_folder_of_its_own_with_a_bare_environment(monkeypatch):
    monkeypatch.setenv("CMX_SECRET_FOR_TEST", "do-not-leak")
    source = "import os\nprint(os.getcwd() == os.environ['HOME'], 'CMX_SECRET_FOR_TEST' in os.environ)"
    outcome = run_program(Program("python", source), FAST)
    assert outcome.stdout.split() == ["True", "False"]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_a_compiled_language_is_compiled_then_run_and_a_compile_error_is_its_own_status():
    ok = run_program(Program("cpp", "#include <cstdio>\nint main() { std::puts(\"built\"); }"), FAST)
    broken = run_program(Program("cpp", "int main() { this is not cpp }"), FAST)
    assert ok.passed and ok.stdout == "built\n"
    assert broken.status == "compile-error" and "error" in broken.stderr


@pytest.mark.skipif(shutil.which("tsc") is None, reason="tsc is not installed (Debian's node-typescript)")
def test_typescript_runs_despite_type_errors_as_tsc_still_writes_the_javascript():
    source = ("const assert = require('assert');\n"
              "function add(a: number, b: number): number { return a + b; }\n"
              "assert.deepEqual(add(1, 2), {answer});\nconsole.log('checked');\n")
    ok = run_program(Program("typescript", source.replace("{answer}", "3")), Limits(seconds=20))
    wrong = run_program(Program("typescript", source.replace("{answer}", "4")), Limits(seconds=20))
    assert ok.passed and ok.stdout == "checked\n"
    assert wrong.status == "failed" and "AssertionError" in wrong.stderr


def test_a_language_without_its_toolchain_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LanguageUnavailable, match="javascript programs cannot run here: node") as caught:
        check_language("javascript")
    assert "apt-get install nodejs" in caught.value.hint
    with pytest.raises(LanguageUnavailable):
        run_programs([Program("python", "pass"), Program("javascript", "1")])


def test_an_unknown_language_is_refused_with_the_known_ones():
    with pytest.raises(LanguageUnavailable, match="'cobol'") as caught:
        check_language("cobol")
    assert all(lang in caught.value.hint for lang in LANGUAGES)


def test_many_programs_keep_their_order():
    programs = [Program("python", f"import sys\nprint({i})\nsys.exit({i % 2})") for i in range(6)]
    outcomes = run_programs(programs, FAST, workers=3)
    assert [o.stdout.strip() for o in outcomes] == [str(i) for i in range(6)]
    assert [o.passed for o in outcomes] == [i % 2 == 0 for i in range(6)]


def test_each_program_may_have_its_own_limits():
    slow = Program("python", "import time\ntime.sleep(1)")
    outcomes = run_programs([slow, slow], [Limits(seconds=0.5), Limits(seconds=5.0)], workers=2)
    assert [o.status for o in outcomes] == ["timeout", "passed"]
    with pytest.raises(ValueError, match="1 limits for 2 programs"):
        run_programs([slow, slow], [FAST])
