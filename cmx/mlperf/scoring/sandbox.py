"""Runs generated programs for the code benchmarks: a subprocess each, in its own folder, with no network and
capped time, memory and output.

LiveCodeBench (deepseek-r1, gpt-oss-120b) and MBXP (mixtral-8x7b) score a sample by running the
model's program against tests. Those programs are untrusted text, so each one runs:

- in a fresh temporary folder that is deleted afterwards (its HOME and TMPDIR too);
- in a new network namespace (`unshare --net`, or with an unprivileged user namespace when not
  root), where only a downed loopback exists: no connection can leave it;
- under `prlimit`: CPU seconds, writable memory (RLIMIT_DATA, which counts what a program allocates
  but not the address space a JVM or V8 only reserves) and the size of any file it writes, its
  captured output included; no core dumps;
- with a wall-clock limit after which its whole process group is killed;
- with an environment of PATH, HOME, TMPDIR and LANG alone.

A language whose toolchain is missing is refused by name (`LanguageUnavailable`), never scored as a
failure; a machine that cannot make a network namespace is refused (`SandboxUnavailable`) rather
than running the programs unisolated. This is isolation against accidents and runaway programs,
not a security boundary against a hostile one: run benchmarks' code scoring on a machine you can
afford to lose, as the reference harnesses also advise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from cmx.errors import CmxError

Status = Literal["passed", "failed", "timeout", "memory", "compile-error"]


class SandboxUnavailable(CmxError):
    """Programs cannot be isolated on this machine, so none is run."""


class LanguageUnavailable(CmxError):
    """The toolchain a language needs is not installed."""


@dataclass(frozen=True)
class Limits:
    """What one program may use: wall seconds (CPU seconds are capped one above), writable memory, output."""

    seconds: float = 10.0
    memory_mb: int = 1024
    output_kb: int = 1024


@dataclass(frozen=True)
class Program:
    """A whole program (the model's code with the test harness appended) and what it reads on stdin."""

    language: str
    source: str
    stdin: str = ""


@dataclass(frozen=True)
class Outcome:
    """How a program ended: `passed` is an exit status of 0 within the limits."""

    status: Status
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class _Toolchain:
    """How a language's program is written, compiled and run; `{python}` stands for this interpreter."""

    file: str
    run: tuple[str, ...]
    compile: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()      # commands that must be on PATH
    package: str = ""                # Debian's package that brings them
    jvm: bool = False                # heap capped with -Xmx: the JVM sizes itself from it
    compiled: tuple[int, ...] = (0,)  # the compiler's exit statuses after which the program runs


_TOOLCHAINS: dict[str, _Toolchain] = {
    "python": _Toolchain("main.py", ("{python}", "-I", "-B", "main.py")),
    "javascript": _Toolchain("main.js", ("node", "main.js"), tools=("node",), package="nodejs"),
    # tsc exits 2 when it found type errors but wrote the JavaScript (an untyped `require` is one): the
    # program runs, as mxeval's TypeScript harness runs it; 1 means nothing was written
    "typescript": _Toolchain("main.ts", ("node", "main.js"), ("tsc", "--target", "es5", "--lib", "es2016", "main.ts"),
                             tools=("tsc", "node"), package="node-typescript", compiled=(0, 2)),
    "cpp": _Toolchain("main.cpp", ("./main",), ("g++", "-std=c++17", "-O2", "-o", "main", "main.cpp"),
                      tools=("g++",), package="g++"),
    "java": _Toolchain("Main.java", ("java", "-Xmx{heap}m", "-cp", ".", "Main"), ("javac", "Main.java"),
                       tools=("javac", "java"), package="default-jdk-headless", jvm=True),
    "go": _Toolchain("main.go", ("./main",), ("go", "build", "-o", "main", "main.go"), tools=("go",),
                     package="golang-go"),
    "ruby": _Toolchain("main.rb", ("ruby", "main.rb"), tools=("ruby",), package="ruby"),
    "php": _Toolchain("main.php", ("php", "main.php"), tools=("php",), package="php-cli"),
    "perl": _Toolchain("main.pl", ("perl", "main.pl"), tools=("perl",), package="perl"),
    "kotlin": _Toolchain("main.kt", ("java", "-Xmx{heap}m", "-jar", "main.jar"),
                         ("kotlinc", "main.kt", "-include-runtime", "-d", "main.jar"), tools=("kotlinc", "java"),
                         package="kotlin", jvm=True),
    "scala": _Toolchain("Main.scala", ("scala", "-J-Xmx{heap}m", "-cp", ".", "Main"), ("scalac", "Main.scala"),
                        tools=("scalac", "scala"), package="scala", jvm=True),
    "csharp": _Toolchain("main.cs", ("mono", "main.exe"), ("mcs", "-out:main.exe", "main.cs"),
                         tools=("mcs", "mono"), package="mono-devel"),
    "swift": _Toolchain("main.swift", ("./main",), ("swiftc", "-o", "main", "main.swift"), tools=("swiftc",)),
}
LANGUAGES: tuple[str, ...] = tuple(_TOOLCHAINS)

# a compiler gets its own, larger limits: it is trusted code, but runs in the same namespace
_COMPILE = Limits(seconds=120.0, memory_mb=4096, output_kb=256 * 1024)
# what a program's own failure to allocate prints, per runtime
_OUT_OF_MEMORY = ("MemoryError", "std::bad_alloc", "java.lang.OutOfMemoryError", "heap out of memory",
                  "Cannot allocate memory", "failed to allocate memory", "out of memory")


def check_language(language: str) -> None:
    """Raise LanguageUnavailable unless programs in `language` can be compiled and run here."""
    chain = _TOOLCHAINS.get(language)
    if chain is None:
        raise LanguageUnavailable(f"cmx cannot run {language!r} programs",
                                  hint=f"the sandbox knows {', '.join(LANGUAGES)}")
    missing = [t for t in chain.tools if shutil.which(t) is None]
    if missing:
        how = f"apt-get install {chain.package}" if chain.package else f"install {' and '.join(missing)}"
        raise LanguageUnavailable(f"{language} programs cannot run here: {', '.join(missing)} is not on PATH",
                                  hint=f"{how}, then score again; samples in {language} are not scored without it")


@cache
def _isolation() -> tuple[str, ...]:
    """The command prefix that puts a program in a new network namespace, as this machine allows."""
    tries: list[tuple[str, ...]] = [("unshare", "--net", "--")] if os.geteuid() == 0 else []
    tries.append(("unshare", "--user", "--map-root-user", "--net", "--"))
    for prefix in tries:
        if shutil.which(prefix[0]) is None:
            break
        if subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    raise SandboxUnavailable(
        "generated programs cannot be run without network access here: no network namespace can be made "
        "(unshare --net failed)",
        hint="score on a machine where you are root or unprivileged user namespaces are enabled "
             "(sysctl kernel.unprivileged_userns_clone=1); in a container, give it CAP_SYS_ADMIN")


def _limits_prefix(limits: Limits) -> tuple[str, ...]:
    cpu = int(limits.seconds) + 1
    return ("prlimit", f"--cpu={cpu}", f"--data={limits.memory_mb * 1024 * 1024}",
            f"--fsize={limits.output_kb * 1024}", "--core=0", "--")


def _command(argv: Sequence[str], limits: Limits, heap_mb: int) -> list[str]:
    expanded = [a.replace("{python}", sys.executable).replace("{heap}", str(heap_mb)) for a in argv]
    return [*_isolation(), *_limits_prefix(limits), *expanded]


def _environment(folder: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "TMPDIR": str(folder),
            "LANG": "C.UTF-8", "GOCACHE": str(folder / ".gocache"), "GOPATH": str(folder / ".go")}


def _execute(argv: list[str], folder: Path, stdin: str, limits: Limits) -> tuple[int | None, str, str, float]:
    """Run argv in folder; (returncode or None on the wall limit, stdout, stderr, seconds)."""
    out_path, err_path = folder / ".stdout", folder / ".stderr"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=folder, env=_environment(folder), stdin=subprocess.PIPE, stdout=out,
                                stderr=err, start_new_session=True)
        try:
            proc.communicate(stdin.encode(), timeout=limits.seconds)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _kill_group(proc)
    seconds = time.monotonic() - start
    cap = limits.output_kb * 1024
    return (code, out_path.read_bytes()[:cap].decode("utf-8", "replace"),
            err_path.read_bytes()[:cap].decode("utf-8", "replace"), seconds)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill what the program left behind too (children it forked), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _status(code: int | None, stderr: str) -> Status:
    if code is None or code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return "timeout"
    if code == 0:
        return "passed"
    if any(marker in stderr for marker in _OUT_OF_MEMORY):
        return "memory"
    return "failed"


def run_program(program: Program, limits: Limits = Limits()) -> Outcome:
    """Compile (where the language needs it) and run one program in the sandbox; how it ended."""
    check_language(program.language)
    chain = _TOOLCHAINS[program.language]
    heap = max(64, limits.memory_mb // 2)
    # a JVM's heap is capped by -Xmx; its writable mappings beyond the heap need head room
    run_limits = Limits(limits.seconds, limits.memory_mb * 3, limits.output_kb) if chain.jvm else limits
    with tempfile.TemporaryDirectory(prefix="cmx-sandbox-") as tmp:
        folder = Path(tmp)
        (folder / chain.file).write_text(program.source, encoding="utf-8")
        if chain.compile:
            code, out, err, seconds = _execute(_command(chain.compile, _COMPILE, heap), folder, "", _COMPILE)
            if code not in chain.compiled:
                return Outcome("compile-error", code, out, err, seconds)
        code, out, err, seconds = _execute(_command(chain.run, run_limits, heap), folder, program.stdin, run_limits)
    return Outcome(_status(code, err), code, out, err, seconds)


def run_programs(programs: Sequence[Program], limits: Limits | Sequence[Limits] = Limits(), *,
                 workers: int = 2) -> list[Outcome]:
    """Run each program in its own sandbox, `workers` at a time, under `limits` (one for all, or one per
    program); the outcomes in the programs' order."""
    each = [limits] * len(programs) if isinstance(limits, Limits) else list(limits)
    if len(each) != len(programs):
        raise ValueError(f"{len(each)} limits for {len(programs)} programs")
    for language in sorted({p.language for p in programs}):
        check_language(language)
    _isolation()  # refuse before the first program, not in a worker
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(run_program, programs, each))
