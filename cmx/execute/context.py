"""`ctx`, what a recipe's run(ctx) receives: its typed inputs, context, deps' outputs, a workdir,
a log, and run_cmd."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cmx.errors import CommandFailed, StepCancelled
from cmx.secrets import Redactor, Secret, redacting_formatter
from cmx.tools.procs import signal_families, spawn

if TYPE_CHECKING:
    from cmx.cache.store import Store

TAIL_LINES = 20
KEPT_LINES = 10_000  # run_cmd's result keeps at most this many lines of output in memory


@dataclass(frozen=True)
class DepView:
    """What a step sees of one dep: its outputs, its cache key, and its step id."""

    outputs: Mapping[str, Any]
    key: str
    step: str


class Deps:
    """`ctx.deps.<as>.outputs` (or `ctx.deps["as"]`): the outputs of named deps only."""

    def __init__(self, views: dict[str, DepView]) -> None:
        self._views = views

    def __getattr__(self, name: str) -> DepView:
        try:
            return self._views[name]
        except KeyError:
            raise AttributeError(f"no dep named {name!r}; named deps: {', '.join(self._views) or 'none'} "
                                 "(a dep is named by `as:` in recipe.yaml)") from None

    def __getitem__(self, name: str) -> DepView:
        return self.__getattr__(name)

    def __contains__(self, name: object) -> bool:
        return name in self._views

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)


class StepLog:
    """The step's log file: a stdlib Logger (not registered globally) plus raw command output."""

    def __init__(self, path: Path, name: str, secrets: Redactor | Sequence[str]) -> None:
        """`secrets`: the step's Redactor (Redactor.of its inputs), or plain secret values."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._redactor = secrets if isinstance(secrets, Redactor) else Redactor.of([Secret(s) for s in secrets])
        self._handler = logging.FileHandler(path, encoding="utf-8")
        self._handler.setFormatter(redacting_formatter("%(asctime)s %(levelname)s %(message)s", self._redactor))
        self.logger = logging.Logger(f"cmx.step.{name}", level=logging.DEBUG)
        self.logger.addHandler(self._handler)
        self._lock = threading.Lock()

    def redact(self, text: str) -> str:
        return self._redactor.redact(text)

    def write_raw(self, line: str) -> None:
        with self._lock:
            stream = self._handler.stream
            assert stream is not None, "the log was closed"  # FileHandler opens it at once (delay=False)
            stream.write(self.redact(line))
            stream.flush()

    def tail(self, n: int = TAIL_LINES) -> list[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                return [line.rstrip("\n") for line in deque(f, maxlen=n)]
        except OSError:
            return []

    def close(self) -> None:
        self.logger.removeHandler(self._handler)
        self._handler.close()


class StepProgress:
    """Progress of one long task inside a step (a download, an extraction), shown on the step's
    line of the run display. `total` may be unknown (None)."""

    def __init__(self, report: Callable[[int, int | None, str, str], None], total: int | None, description: str,
                 stop: threading.Event | None = None) -> None:
        self._report = report
        self._stop = stop
        self.total = total
        self.description = description
        self.detail = ""
        self.completed = 0
        report(0, total, description, "")

    def update(self, completed: int, total: int | None = None, detail: str | None = None) -> None:
        """Report progress, with `detail` (rates, latencies, an ETA) shown after the description;
        raises StepCancelled when another step of the run has failed, so a long download or
        extraction stops instead of finishing for nothing."""
        if self._stop is not None and self._stop.is_set():
            raise StepCancelled(f"{self.description or 'the step'} stopped: another step of the run failed")
        self.completed = completed
        if total is not None:
            self.total = total
        if detail is not None:
            self.detail = detail
        self._report(self.completed, self.total, self.description, self.detail)

    def advance(self, amount: int) -> None:
        self.update(self.completed + amount)


class StepContext:
    """The `ctx` of `run(ctx) -> dict`."""

    def __init__(self, *, step_id: str, recipe: str, inputs: dict[str, Any], context: dict[str, Any],
                 deps: dict[str, DepView], workdir: Path, log: StepLog, variations: tuple[str, ...],
                 install_missing: bool = False,
                 on_progress: Callable[[int, int | None, str, str], None] | None = None,
                 scratch: Path | None = None, stop: threading.Event | None = None,
                 run_argv: Sequence[str] = (), run_record: Path | None = None,
                 chosen: Mapping[str, str] | None = None, params: Mapping[str, Any] | None = None,
                 store: Store | None = None) -> None:
        self.step_id = step_id
        self.recipe = recipe
        self.inputs: Mapping[str, Any] = MappingProxyType(inputs)
        # the recipe's `params:`, fixed in its recipe.yaml (and so in its digest), never given from outside
        self.params: Mapping[str, Any] = MappingProxyType(dict(params or {}))
        self.context: Mapping[str, Any] = MappingProxyType(context)
        self.deps = Deps(deps)
        self.workdir = workdir
        self._scratch = scratch
        self._stop = stop
        self.variations = variations
        self._chosen: Mapping[str, str] = MappingProxyType(dict(chosen or {}))  # group -> its chosen variation
        # whether the user allowed installing what is missing (`cmx run --install-missing`);
        # an execution choice, not part of any key: installing changes no step's output
        self.install_missing = install_missing
        self._on_progress = on_progress or (lambda completed, total, description, detail: None)
        self._log = log
        self.log = log.logger
        # the command that started this run (secrets redacted) and its run.json: what a step that
        # writes a report (a submission README) cites as "how this was made"
        self.run_argv: tuple[str, ...] = tuple(run_argv)
        self.run_record = run_record
        # the run's cache: for a step that is not cached itself but decides while it runs that it needs a cached
        # artefact (get-loadgen: a round's LoadGen the interpreter lacks), built and published as any entry is
        self.store = store

    def variation(self, group: str) -> str:
        """The variation chosen in `group` (the query's, or the group's default): `ctx.variation("scenario")`."""
        try:
            return self._chosen[group]
        except KeyError:
            raise KeyError(f"recipe {self.recipe} has no variation group {group!r} (its groups: "
                           f"{', '.join(self._chosen) or 'none'})") from None

    def flag(self, name: str) -> bool:
        """Whether the flag `_name` was given."""
        return name in self.variations and name not in self._chosen.values()

    @property
    def scratch(self) -> Path:
        """A folder that survives a failed attempt of this cached step (same key), so a big
        download resumes; removed once the step succeeds. For a step that is not cached, the
        workdir. Created on first use."""
        if self._scratch is None:
            return self.workdir
        self._scratch.mkdir(parents=True, exist_ok=True)
        return self._scratch

    def progress(self, total: int | None = None, description: str = "") -> StepProgress:
        """A progress bar on this step's line: `p = ctx.progress(size, "download")`, then
        `p.advance(n)` or `p.update(done)`."""
        return StepProgress(self._on_progress, total, description, self._stop)

    @property
    def stopping(self) -> bool:
        """True once another step of the run has failed: a long loop may end early (raise
        StepCancelled). ctx.progress() updates check it by themselves."""
        return self._stop is not None and self._stop.is_set()

    def run_cmd(self, cmd: Sequence[str | os.PathLike[str] | Secret], *, cwd: str | os.PathLike[str] | None = None,
                env: Mapping[str, str | Secret] | None = None, timeout: float | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command in `cwd` (default: the step's workdir), streaming its output (stdout
        and stderr together) into the step's log.

        Secrets in `cmd` or `env` are revealed to the process and redacted in the log. On a
        failure (check=True) raise CommandFailed naming the command, how it ended, and its
        last lines. Returns a CompletedProcess whose stdout is the output (its last 10,000
        lines when longer).
        """
        argv = [a.reveal() if isinstance(a, Secret) else os.fspath(a) for a in cmd]
        logged = " ".join(str(a) if isinstance(a, Secret) else _quote(os.fspath(a)) for a in cmd)
        shown = " ".join(str(a) if isinstance(a, Secret) else _quote(_abbreviate(os.fspath(a))) for a in cmd)
        full_env = dict(os.environ)
        for key, value in (env or {}).items():
            full_env[key] = value.reveal() if isinstance(value, Secret) else str(value)
        self.log.info("$ %s", logged)
        kept: deque[str] = deque(maxlen=KEPT_LINES)
        try:
            # a process group of its own, registered with the run: an interrupt stops it and all it started
            proc = spawn(argv, cwd=self.workdir if cwd is None else cwd, env=full_env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         text=True, errors="replace", bufsize=1)
        except OSError as exc:
            raise CommandFailed(f"cannot start `{shown}`: {exc.strerror or exc}", tail=[],
                                hint=f"is {argv[0]!r} installed and on PATH?") from None

        def kill() -> None:  # the whole family: a child holding the output pipe would keep the loop below
            signal_families([proc], signal.SIGKILL)

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                self._log.write_raw(line if line.endswith("\n") else line + "\n")
                kept.append(line.rstrip("\n"))
            code = proc.wait()
        finally:
            if timer:
                timer.cancel()
            if proc.poll() is None:
                kill()
                proc.wait()
        self.log.info("exit: %s", describe_exit(code))
        if check and code != 0:
            timed_out = f" (timed out after {timeout}s)" if timeout and code == -signal.SIGKILL else ""
            tail = [self._log.redact(line) for line in list(kept)[-TAIL_LINES:]]
            raise CommandFailed(f"`{shown}` {describe_exit(code)}{timed_out}", tail=tail)
        return subprocess.CompletedProcess(argv, code, stdout="\n".join(kept))


def describe_exit(code: int) -> str:
    """'exited with status 3' / 'was killed by SIGKILL' (never 'return code 256')."""
    if code == 0:
        return "succeeded"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _abbreviate(arg: str, limit: int = 60) -> str:
    """Long or multi-line arguments (an inline script) shortened for messages; the log has them whole."""
    first = arg.split("\n", 1)[0]
    return arg if len(arg) <= limit and first == arg else first[:limit].rstrip() + "…"


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
