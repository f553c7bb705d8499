"""The one exception hierarchy of cmx: every error says what failed, where, and what to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CmxError(Exception):
    """An error a user can act on.

    `message` says what failed, `where` points at the place (a recipe's file:line, a path),
    and `hint` says what to do about it. The CLI prints these and nothing else (no
    traceback unless --debug).
    """

    exit_code = 1

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __reduce__(self) -> tuple[Callable[[type[CmxError], dict[str, Any]], CmxError],
                                  tuple[type[CmxError], dict[str, Any]]]:
        # keep `where` and `hint` across pickling (errors come back from index worker processes)
        state = dict(self.__dict__)
        return (_rebuild, (type(self), state))

    def render(self) -> str:
        head = f"{self.where}: {self.message}" if self.where else self.message
        return f"{head}\n  hint: {self.hint}" if self.hint else head

    def __str__(self) -> str:
        return self.render()


def _rebuild(cls: type[CmxError], state: dict[str, Any]) -> CmxError:
    err = cls.__new__(cls)
    Exception.__init__(err, state.get("message", ""))
    err.__dict__.update(state)
    return err


class RecipeError(CmxError):
    """A recipe.yaml or run.py is malformed: unknown key, wrong type, bad expression..."""


class RegistryError(CmxError):
    """registry.yaml is malformed or a recipe source cannot be fetched."""


class QueryError(CmxError):
    """A query matches no recipe, several recipes, or names an unknown variation."""


class InputError(CmxError):
    """An input is unknown, of the wrong type, missing, or given two conflicting values."""


class PlanError(CmxError):
    """The dependency graph cannot be built (a cycle, a dep that matches nothing...)."""


class CacheError(CmxError):
    """The cache store is unusable or an entry is corrupted."""


class StepError(CmxError):
    """Raised inside a step (by ctx.run_cmd or a tool) to fail it with a clear message."""


class StepCancelled(StepError):
    """A step stopped because another step of the run failed (raised at its next progress report)."""


class CommandFailed(StepError):
    """A subprocess a step ran exited with a failure."""

    def __init__(self, message: str, *, tail: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.tail = tail


class StepFailed(CmxError):
    """A step of a run failed; carries the chain that led to it and how to re-run it."""

    def __init__(
        self,
        message: str,
        *,
        chain: list[str],
        log_path: str | None,
        tail: list[str],
        rerun: str,
        cause: BaseException | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.chain = chain
        self.log_path = log_path
        self.tail = tail
        self.rerun = rerun
        self.cause = cause

    def render(self) -> str:
        lines = [f"step failed: {' ← '.join(self.chain)}", f"  {self.message}"]
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        if self.log_path:
            lines.append(f"  log: {self.log_path}")
        if self.tail:
            lines.append(f"  last {len(self.tail)} lines of the log:")
            lines.extend(f"    | {line}" for line in self.tail)
        lines.append(f"  re-run just this step: {self.rerun}")
        return "\n".join(lines)


ECHO_LIMIT = 200  # characters of a value read from a file that a message, finding or table cell repeats


def cut_repr(value: object, limit: int) -> str:
    """`value` as a refusal quotes a name or value it was given: repr (a newline shows as \\n, so the message stays
    one line), cut to `limit` characters ending in '...'."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def clip(value: object, limit: int = ECHO_LIMIT) -> str:
    """`value` as a message echoes it: at most `limit` characters, and how many more there were. A hostile or broken
    file's 200 MB field is said in one short line, never printed whole (the one truncation helper: use it)."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"
