"""Which MLPerf benchmark an app runs where its family has several accuracy targets (llama2-70b: 99 and 99.9): the
target the query names (`_99`, `_99.9`), which the round must keep, or the round's own when the query names none.

The app's `target` variation group has no default, because the right one depends on the round: v6.1 keeps only
llama2-70b-99.9 (its round file's header), while v5.1 and v6.0 keep both, and there cmx runs 99 unless told, as
it always did. The plan-time check decides this (a `_99` under v6.1 fails at `cmx plan`, before any download),
and it may not read a round file within `cmx plan`'s budget (cmx.mlperf.app_plan), so the table below is data
beside the rounds' files; tests/mlperf/test_app_targets.py holds it equal to them.
"""

from __future__ import annotations

from typing import Protocol

from cmx.errors import StepError

# family -> round -> the targets the round keeps, the one cmx runs when the query names none first
TARGETS: dict[str, dict[str, tuple[str, ...]]] = {
    "llama2-70b": {"v5.1": ("99", "99.9"), "v6.0": ("99", "99.9"), "v6.1": ("99.9",)},
}


class TargetError(StepError):
    """The query names an accuracy target its round does not keep (llama2-70b-99 under v6.1)."""


class Named(Protocol):
    def variation(self, group: str) -> str: ...


def named_target(step: Named) -> str | None:
    """The `target` variation the query names (`99`, `99.9`); None when it names none (the group has no default)."""
    try:
        return step.variation("target")
    except KeyError:
        return None


def targeted_benchmark(family: str, round_name: str, named: str | None) -> str | None:
    """`family-target` for a family with several targets (llama2-70b-99.9); None for a family with one name."""
    by_round = TARGETS.get(family)
    if by_round is None:
        return None
    kept = by_round.get(round_name)
    if kept is None:
        raise TargetError(f"cmx does not know which {family} targets round {round_name} keeps",
                          hint=f"add {round_name} to TARGETS in {__name__} (its round file lists them)")
    if named is None:
        return f"{family}-{kept[0]}"
    if named not in kept:
        older = [r for r, targets in by_round.items() if named in targets]
        fix = f"_{kept[0]}" + (f", or --input round={older[-1]}" if older else "")
        raise TargetError(f"{family}-{named} is not a {round_name} benchmark ({round_name} keeps "
                          f"{' and '.join(f'{family}-{t}' for t in kept)}): use {fix}")
    return f"{family}-{named}"


__all__ = ["TARGETS", "TargetError", "named_target", "targeted_benchmark"]
