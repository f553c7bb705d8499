"""Execution: Plan -> results. Cache look-ups, locks, running steps in dependency order, logs."""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.cache.store import Entry, EntryMeta, Store, now_iso
from cmx.errors import CmxError, CommandFailed, StepCancelled, StepError, StepFailed
from cmx.execute.plan_check import chosen_variations
from cmx.execute.progress import NullReporter, Reporter
from cmx.execute.record import RunRecord
from cmx.execute.result import RunResult, StepResult
from cmx.recipe.model import Recipe
from cmx.recipe.types import TypeMismatch, coerce, to_json
from cmx.resolve.plan import Plan, Step
from cmx.secrets import Redactor, Secret, public_value

if TYPE_CHECKING:  # logging and subprocess are imported only when a step really runs
    from cmx.execute.context import StepContext, StepLog
    from cmx.tools.procs import ChildProcesses


class Runner:
    """Runs the steps of one plan. `rerun_prefix` is how the user invoked cmx (for the
    're-run just this step' line of a failure); `root_rerun`, given the root step's query, --input and
    --context words, makes the root's line instead (`cmx tune` replaces the root step, so its line is
    the tune's command, not `cmx run`)."""

    def __init__(self, store: Store, runs_dir: Path, *, jobs: int = 1, reporter: Reporter | None = None,
                 rerun_prefix: str = "cmx run", install_missing: bool = False,
                 before_root: Callable[[Path], None] | None = None,
                 root_run: Callable[[StepContext], dict[str, Any]] | None = None,
                 root_rerun: Callable[[str], str] | None = None) -> None:
        self.store = store
        self.root_rerun = root_rerun
        # runs in place of the root recipe's run.py, on the same ctx (inputs, context, deps' outputs): how
        # `cmx tune` measures an app's engine with the app's own choices. Its outputs are returned as they are,
        # and never cached: they are not the recipe's declared outputs
        self.root_run = root_run
        # called with the run record's folder when the root step is about to run (its deps are done): where a
        # run records what it ran on (its lockfile) before a benchmark step packages its results
        self.before_root = before_root
        self.runs_dir = runs_dir
        self.jobs = max(1, jobs)
        self.reporter = reporter or NullReporter()
        self.rerun_prefix = rerun_prefix
        self.install_missing = install_missing
        self._modules: dict[str, Callable[[StepContext], Any]] = {}
        self._record: RunRecord | None = None  # the run in progress
        self._stop = threading.Event()  # set at the first failure: running steps stop at their next progress report
        # the processes the run's steps started and have not stopped (a harness, a vllm serve): an interrupt
        # stops them all, since the steps' own threads cannot be stopped and would never do it
        self._children: ChildProcesses | None = None
        self._interrupted = threading.Event()  # set before the children are stopped: their steps fail quietly

    def run(self, plan: Plan, argv: list[str] | None = None) -> RunResult:
        started = time.monotonic()
        record = self._record = RunRecord.create(self.runs_dir, plan, argv or [])
        self._stop = threading.Event()
        self._children = None
        self._interrupted = threading.Event()
        try:
            results, needed = self._prune(plan)
            waiting = {sid: {e.step for e in plan.steps[sid].deps if e.step in needed} for sid in needed}
            dependents: dict[str, list[str]] = {}
            for sid in needed:
                for e in plan.steps[sid].deps:
                    dependents.setdefault(e.step, []).append(sid)
            ready = [s.id for s in plan if s.id in needed and not waiting[s.id]]
            error: StepFailed | None = None
            if needed:
                from cmx.tools.procs import ChildProcesses

                self._children = ChildProcesses()
                self.reporter.start(plan, len(needed))
                try:
                    error = self._schedule(plan, ready, waiting, dependents, results)
                finally:
                    self.reporter.finish()
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as the CLI turns it into one
            try:
                record.interrupted(time.monotonic() - started)
            finally:
                self._interrupted.set()
                if self._children is not None:
                    self._children.stop_all()
            raise
        for step in plan:
            # needed but never started (a failure stopped the run), or below a cached step
            results.setdefault(step.id, StepResult(step.id, step.name, step.key,
                                                   "skipped" if step.id in needed else "not-needed"))
        result = RunResult(plan, record.path, results, time.monotonic() - started, error)
        record.finish(result)
        return result

    def _prune(self, plan: Plan) -> tuple[dict[str, StepResult], set[str]]:
        """The steps to execute, and results for the cache hits that end the walk down.

        Cache hits need no thread, lock or display, so a fully cached run stays cheap.
        """
        results: dict[str, StepResult] = {}

        def is_cached(step: Step) -> bool:
            entry = self.store.lookup(step.name, step.key)
            if entry is not None:
                results[step.id] = _cached(step, entry)
                self.reporter.step_cached(step)
            return entry is not None

        statuses = plan.statuses(is_cached)
        return results, {sid for sid, s in statuses.items() if s in ("build", "run")}

    def _release(self, done: str, waiting: dict[str, set[str]], dependents: dict[str, list[str]],
                 ready: list[str]) -> None:
        for parent in dependents.get(done, []):
            waiting[parent].discard(done)
            if not waiting[parent]:
                ready.append(parent)

    def _schedule(self, plan: Plan, ready: list[str], waiting: dict[str, set[str]],
                  dependents: dict[str, list[str]], results: dict[str, StepResult]) -> StepFailed | None:
        from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

        error: StepFailed | None = None
        running: dict[Future[StepResult | StepFailed], str] = {}
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="cmx-step")
        finished = False
        try:
            while ready or running:
                # cheap checks first: a step that downloads starts after those that do not, so a
                # missing driver or package fails the run before hours of transfer begin
                ready.sort(key=lambda sid: bool(plan.steps[sid].fetches()))
                while ready and len(running) < self.jobs and error is None:
                    step_id = ready.pop(0)
                    running[pool.submit(self._run_owned, plan, plan.steps[step_id], results)] = step_id
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    step_id = running.pop(future)
                    outcome = future.result()  # _run_step never raises; it returns a StepResult or a StepFailed
                    if isinstance(outcome, StepFailed):
                        error = error or outcome
                        self._stop.set()
                        cancelled = isinstance(outcome.cause, StepCancelled)
                        results[step_id] = StepResult(step_id, plan.steps[step_id].name, plan.steps[step_id].key,
                                                      "cancelled" if cancelled else "failed", log=outcome.log_path)
                        continue
                    results[step_id] = outcome
                    self._release(step_id, waiting, dependents, ready)
                if error is not None:
                    ready.clear()  # let running steps finish; start nothing new
            finished = True
        finally:
            # on Ctrl-C do not wait for steps still running: their threads cannot be stopped, and
            # a half-built cache entry stays invisible until `cmx cache gc` removes it
            self._stop.set()  # on Ctrl-C too: steps still running stop at their next progress report
            pool.shutdown(wait=finished, cancel_futures=True)
        return error

    def _run_owned(self, plan: Plan, step: Step, results: dict[str, StepResult]) -> StepResult | StepFailed:
        """_run_step, with the processes the step starts (cmx.tools.procs.spawn) registered as the run's."""
        assert self._children is not None
        with self._children.owning():
            return self._run_step(plan, step, results)

    def _run_step(self, plan: Plan, step: Step, results: dict[str, StepResult]) -> StepResult | StepFailed:
        import traceback

        from cmx.execute.context import StepLog

        assert self._record is not None
        log_path = self._record.log_path(step.id)
        # its secrets, the credentials of its URL inputs and the tokens in the environment, out of every line
        log = StepLog(log_path, step.id, Redactor.of(step.inputs.values()))
        started = time.monotonic()
        self.reporter.step_started(step)
        build_dir: Path | None = None
        scratch: Path | None = None
        try:
            if step.id == plan.root and self.before_root is not None:
                self.before_root(self._record.path)
            override = self.root_run if step.id == plan.root else None
            if not step.cacheable or override is not None:
                workdir = self._record.workdir(step.id)
                outputs = self._invoke(step, workdir, log, results, run=override)
                result = StepResult(step.id, step.name, step.key, "ran", outputs, time.monotonic() - started,
                                    str(log_path))
            else:
                with self.store.lock(step.name, step.key):
                    entry = self.store.lookup(step.name, step.key)  # another process may have built it meanwhile
                    if entry is not None:
                        log.logger.info("built meanwhile by another process: %s", entry.path)
                        result = _cached(step, entry)
                    else:
                        build_dir = self.store.new_build_dir(step.name, step.key)
                        scratch = self.store.scratch_dir(step.name, step.key)
                        outputs = self._invoke(step, build_dir, log, results, scratch)
                        meta = EntryMeta(
                            recipe=step.name, key=step.key, variations=step.variations,
                            inputs=step.public_inputs(), context=to_json(step.context), outputs=to_json(outputs),
                            deps={e.as_ or e.step: plan.steps[e.step].key for e in step.deps}, created=now_iso(),
                            duration=round(time.monotonic() - started, 3), recipe_digest=step.recipe.digest)
                        entry = self.store.publish(build_dir, meta)
                        build_dir = None
                        result = StepResult(step.id, step.name, step.key, "built", entry.outputs,
                                            time.monotonic() - started, str(log_path), str(entry.path))
            self.reporter.step_done(step, result.seconds)
            return result
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a StepFailed with context
            if build_dir is not None:
                self.store.discard(build_dir)
            if scratch is not None and scratch.is_dir() and not any(scratch.iterdir()):
                scratch.rmdir()  # kept only when the step left something to resume from
            exc = _missing_extra(exc, step)
            message = _message(exc) + ("" if isinstance(exc, CmxError)
                                       else _raised_at(exc, step.recipe.run_path.parent))
            message = log.redact(message)  # an error may quote a revealed secret; it goes to stderr and run.json
            hint = log.redact(exc.hint) if isinstance(exc, CmxError) and exc.hint else None
            log.logger.error("step failed: %s%s", message, f" (hint: {hint})" if hint else "")
            tail = [log.redact(line) for line in
                    (exc.tail if isinstance(exc, CommandFailed) and exc.tail else log.tail())]
            if not isinstance(exc, (StepError, CmxError)):  # the traceback goes to the log, not into the tail shown
                log.write_raw("".join(traceback.format_exception(exc)))
            if not self._interrupted.is_set():  # else its processes were stopped: the run says "interrupted", once
                self.reporter.step_failed(step, time.monotonic() - started)
            return StepFailed(message, chain=plan.chain_to(step.id), log_path=str(log_path), tail=tail,
                              rerun=self.rerun_command(step, plan), cause=exc, hint=hint)
        finally:
            log.close()

    def _invoke(self, step: Step, workdir: Path, log: StepLog, results: dict[str, StepResult],
                scratch: Path | None = None, run: Callable[[StepContext], Any] | None = None) -> dict[str, Any]:
        from cmx.execute.context import DepView, StepContext

        workdir.mkdir(parents=True, exist_ok=True)
        views = {e.as_: DepView(results[e.step].outputs, results[e.step].key, e.step) for e in step.deps if e.as_}
        log.logger.info("step %s (recipe %s, key %s)", step.id, step.name, step.key)
        if not step.recipe.has_run and run is None:
            return {}
        fn = run or self._load(step.recipe)
        ctx = StepContext(step_id=step.id, recipe=step.name, inputs=dict(step.inputs), context=dict(step.context),
                          deps=views, workdir=workdir, log=log, variations=step.variations,
                          install_missing=self.install_missing,
                          on_progress=lambda done, total, what, detail: self.reporter.step_progress(step, done, total,
                                                                                                what, detail),
                          scratch=scratch, stop=self._stop,
                          run_argv=self._record.argv if self._record else (),
                          run_record=self._record.path / "run.json" if self._record else None,
                          chosen=chosen_variations(step), params=step.recipe.params, store=self.store)
        returned = fn(ctx)
        return dict(returned) if run is not None else check_outputs(step.recipe, returned, workdir)

    def _load(self, recipe: Recipe) -> Callable[[StepContext], Any]:
        fn = self._modules.get(recipe.digest)
        if fn is None:
            from cmx.execute.plan_check import recipe_module

            path = recipe.run_path  # its own, or the run.py of the base it extends
            fn = getattr(recipe_module(recipe), "run", None)
            if not callable(fn):
                raise StepError(f"{path} defines no `run(ctx)` function",
                                hint="add `def run(ctx) -> dict:` returning the declared outputs")
            self._modules[recipe.digest] = fn
        return fn

    def rerun_command(self, step: Step, plan: Plan) -> str:
        """The command that runs `step` again on its own, planned as it was: its own inputs the user or its
        parent gave, and the user's inputs aimed at any step below it (`--input RECIPE.NAME=...`: without them
        the line would plan other dependencies, a real dataset's download in place of a local file)."""
        words = [step.name, *(f"_{v}" for v in step.variations)]
        parts = [shlex.quote(" ".join(words))]
        for name, value in step.inputs.items():
            if step.origins.get(name) in ("user", "with") and value is not None:
                parts.append(_input_words(step, name, value))
        seen: set[str] = set()
        for dep in _below(plan, step.id):
            for name, value in dep.inputs.items():
                qualified = f"{dep.name}.{name}"
                if dep.origins.get(name) == "user" and value is not None and qualified not in seen:
                    seen.add(qualified)
                    parts.append(_input_words(dep, name, value, label=qualified))
        for key, value in sorted(step.full_context.items()):
            parts.append(f"--context {shlex.quote(f'{key}={value}')}")
        if step.id == plan.root and self.root_rerun is not None:
            return self.root_rerun(" ".join(parts))
        return " ".join([self.rerun_prefix, *parts])


def _below(plan: Plan, step_id: str) -> list[Step]:
    """Every step `step_id` depends on, directly or not, in plan order."""
    found: set[str] = set()
    todo = [e.step for e in plan.steps[step_id].deps]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += [e.step for e in plan.steps[current].deps]
    return [s for sid, s in plan.steps.items() if sid in found]


def _input_words(step: Step, name: str, value: Any, *, label: str | None = None) -> str:
    """`--input LABEL=VALUE` (LABEL: the input's name, or RECIPE.NAME) for the re-run line. A secret never enters
    it: its environment variable does, for the shell to fill in when the line runs as printed (`...` where the
    recipe names no variable)."""
    label = label or name
    if not isinstance(value, Secret):  # a URL's password masked (user:***@): the shell cannot fill it in
        return f"--input {shlex.quote(f'{label}={public_value(to_json(value))}')}"
    spec = step.recipe.inputs.get(name)
    if spec is not None and spec.env:
        return f'--input "{label}=${spec.env}"'
    return f"--input {shlex.quote(f'{label}=...')}"


def check_outputs(recipe: Recipe, returned: object, workdir: Path) -> dict[str, Any]:
    """Check run()'s return value against the declared outputs; raise StepError when off."""
    if returned is None:
        returned = {}
    if not isinstance(returned, dict):
        raise StepError(f"run() of {recipe.name} returned {type(returned).__name__}, not a dict of outputs")
    declared = recipe.outputs
    extra = [k for k in returned if k not in declared]
    if extra:
        raise StepError(f"run() of {recipe.name} returned undeclared output(s) {', '.join(map(repr, extra))}",
                        hint=f"declare them under `outputs:` in {recipe.yaml_path}")
    out: dict[str, Any] = {}
    for name, spec in declared.items():
        if name not in returned:
            raise StepError(f"run() of {recipe.name} did not return declared output {name!r}",
                            hint=f"return it from run(), or remove it from `outputs:` in {recipe.yaml_path}")
        try:
            value = coerce(returned[name], spec.type)
        except TypeMismatch as exc:
            raise StepError(f"output {name!r} of {recipe.name}: {exc}") from None
        if spec.type == "path" and not Path(returned[name]).is_absolute():
            value = workdir / returned[name]  # a relative path is relative to the step's workdir
        if spec.type == "path" and not Path(value).exists():
            raise StepError(f"output {name!r} of {recipe.name} is a path that does not exist: {value}")
        out[name] = str(value) if spec.type == "path" else value
    return out


def _cached(step: Step, entry: Entry) -> StepResult:
    return StepResult(step.id, step.name, step.key, "cached", entry.outputs, 0.0, None, str(entry.path))


def _raised_at(exc: BaseException, recipe_dir: Path) -> str:
    """' (at run.py:LINE, in FUNC)': the innermost frame in the recipe's folder, else the innermost one."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    own = [f for f in frames if Path(f.filename).resolve().is_relative_to(recipe_dir.resolve())]
    frame = (own or frames)[-1]
    return f" (at {frame.filename}:{frame.lineno}, in {frame.name})"


def _missing_extra(exc: BaseException, step: Step) -> BaseException:
    """A module an extra of cmx brings, missing here, as the one line that names the extra to install; `exc` else."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return exc
    from cmx.extras import MissingExtra, extra_bringing, install_command

    module = exc.name.partition(".")[0]
    device = step.full_context.get("device")
    extra = extra_bringing(module, device if isinstance(device, str) else None)
    if extra is None:
        return exc
    missing = MissingExtra(f"{step.name} needs {module}, which the {extra} extra of cmx brings: "
                           f"{install_command(extra)}")
    missing.__cause__ = exc
    return missing


def _message(exc: BaseException) -> str:
    if isinstance(exc, CmxError):
        return exc.message
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"{type(exc).__name__}: {exc}"
