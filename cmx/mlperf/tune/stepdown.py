"""Where `cmx tune`'s next confirm run goes when one fails: a step down toward the rate the failed run completed.

Pure, like search.py: it reads the confirm runs done so far and returns the next target QPS, or why
to stop. The probes measured the engine before the confirm; a machine that slows down meanwhile
(other work started on it) fails the confirm at the probes' answer and at any rate just under it.
The failed confirm itself re-measures capacity: LoadGen's completed samples/s over the confirm
run's whole length. So each step goes to the lower of

- one step of twice the tolerance below the failed rate (a run at the edge that failed by noise:
  the failed run completed about what was scheduled), and
- one tolerance below what the failed run completed (a machine slower than the probes saw),

never below the floor, a quarter of the probes' answer (FLOOR_FRACTION): the rate is tried once at
the floor, and below it a tune stops, saying so, since an engine that cannot hold a quarter of what it
held minutes earlier is not being measured. The count of confirm runs is bounded too (`max_tries`),
so a tune's confirms take at most max_tries x the confirm run's length at the floor rate, LoadGen's
max(min_duration, min_queries / floor), plus each run's drain.
A confirm whose samples failed in the backend ends the steps at once: a lower rate does not bring
back an engine that errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FLOOR_FRACTION = 0.25  # the lowest confirm rate, as a fraction of the probes' answer
CONFIRM_TRIES = 4      # confirm runs in all, the first included (--confirm-tries)

# why the confirm runs stopped, as the tune's record keeps it ("confirm_stop")
PASSED, FAILED_SAMPLES, FLOOR, TRIES = "passed", "failed-samples", "floor", "tries"


@dataclass(frozen=True)
class ConfirmTry:
    """One confirm run as the step down reads it."""

    qps: float
    ok: bool
    completed_qps: float | None   # LoadGen's completed samples/s (Offline: samples/s)
    failed_samples: int


@dataclass(frozen=True)
class StepDown:
    """The next confirm run's QPS (None: stop), and when stopping, why: a code and a sentence."""

    qps: float | None
    stop: str = ""
    why: str = ""


def floor_qps(found: float, min_qps: float) -> float:
    """The lowest rate a confirm runs at: FLOOR_FRACTION of the probes' answer, three significant figures."""
    return max(_rounded(found * FLOOR_FRACTION), min_qps)


def step_down(tries: Sequence[ConfirmTry], found: float, tolerance: float, max_tries: int,
              min_qps: float = 0.05) -> StepDown:
    """After the confirm runs `tries` (the first at `found`, the probes' answer): where the next one goes, or why
    none does."""
    last, n = tries[-1], len(tries)
    if last.ok:
        return StepDown(None, PASSED, f"confirm {n} of {n} passed at {last.qps:g}/s" if n > 1 else
                        f"the first confirm run passed at {last.qps:g}/s")
    if last.failed_samples:
        return StepDown(None, FAILED_SAMPLES,
                        f"confirm {n} at {last.qps:g}/s lost {last.failed_samples} samples in the backend, which a "
                        f"lower rate does not mend; the lowest rate tried {lowest(tries):g}/s")
    floor = floor_qps(found, min_qps)
    if n >= max_tries:
        return StepDown(None, TRIES, f"{n} confirm run(s) failed, the most --confirm-tries allows; the lowest rate "
                                     f"tried {lowest(tries):g}/s (the floor: {floor:g}/s)")
    if last.qps <= floor:
        return StepDown(None, FLOOR, f"{n} confirm runs failed down to the floor, {floor:g}/s ({FLOOR_FRACTION:g} of "
                                     f"the probes' {found:g}/s), the lowest rate tried")
    step = last.qps * (1 - 2 * tolerance)
    if last.completed_qps:  # what the slowed machine held over the whole run
        step = min(step, last.completed_qps * (1 - tolerance))
    return StepDown(max(_rounded(step), floor))


def lowest(tries: Sequence[ConfirmTry]) -> float:
    return min(t.qps for t in tries)


def _rounded(qps: float) -> float:
    """Three significant figures, as the search's targets are."""
    return float(f"{qps:.3g}")
