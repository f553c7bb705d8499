"""One row per LoadGen test of an app run, and the table of them: summary.txt, and the step's output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cmx.mlperf.loadgen.harness_config import latency_phrase, recorded_validity


@dataclass(frozen=True)
class RunSummary:
    """One test of the app run, as the summary table shows it. `validity` is cmx's verdict (FAILED when the test
    has a problem other than LoadGen's INVALID); `loadgen_validity` LoadGen's own (harness_config.verdict_of)."""

    scenario: str
    mode: str
    folder: str
    validity: str | None
    tokens_per_second: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    rouge: dict[str, float] | None
    problems: list[str]
    details: dict[str, Any] = field(default_factory=dict)  # the harness's: backend, engines, server
    loadgen_validity: str | None = None
    latency_p99_ms: float | None = None  # a Server test judged on whole answers (Qwen3-VL): LoadGen's p99
    samples_per_second: float | None = None
    # a SingleStream test's result, in its unit (HarnessResult.latency)
    latency: float | None = None
    latency_unit: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


HEADER = ("scenario", "mode", "result", "tokens/s", "TTFT p99 ms", "TPOT p99 ms", "accuracy", "tok/sample")
# a benchmark judged on whole answers (no token latencies: Qwen3-VL) has no token rates to show
WHOLE_ANSWERS_HEADER = ("scenario", "mode", "result", "samples/s", "latency p99 ms", "accuracy")
# the metrics of the accuracy column: every one the round has a target for, but tokens per sample (its own column)
_OWN_COLUMN = ("tokens_per_sample",)


def format_row(r: RunSummary, *, whole_answers: bool = False) -> str:
    return "  ".join(_cells(r, whole_answers))


def _cells(r: RunSummary, whole_answers: bool = False) -> tuple[str, ...]:
    rouge = r.rouge or {}  # the accuracy metrics with a target (ROUGE, exact match, ...), as accuracy.txt gave them
    rouges = " ".join(f"{k} {v:.2f}" for k, v in rouge.items() if k not in _OWN_COLUMN) or "-"
    shown = r.validity if r.ok else recorded_validity(r.validity, True)
    verdict = (shown or "-") if r.ok else f"{shown} ({len(r.problems)} problem(s))"
    if not r.ok and "VALID" in (r.validity, r.loadgen_validity):  # failed samples were answered empty: LoadGen saw
        verdict = f"FAILED ({len(r.problems)} problem(s); LoadGen said VALID)"  # every sample answered
    if r.mode != "performance":  # LoadGen's VALID/INVALID speaks of performance only
        verdict = "OK" if r.ok else f"FAILED ({len(r.problems)} problem(s))"
    perf = r.mode == "performance"
    if whole_answers:
        return (r.scenario, r.mode, verdict, _num(r.samples_per_second if perf else None, 2),
                _num(r.latency_p99_ms if perf else None), rouges)
    return (r.scenario, r.mode, verdict, _num(r.tokens_per_second if perf else None),
            _num(r.ttft_p99_ms if perf else None), _num(r.tpot_p99_ms if perf else None), rouges,
            _num(rouge.get("tokens_per_sample")))


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(runs: Sequence[RunSummary], *, short: bool = False, notes: Sequence[str] = (),
                 whole_answers: bool = False) -> str:
    """The rows under their header, then a NOT COMPLIANT line for a short run and each of `notes`. A benchmark
    judged on `whole_answers` (its round has no token latencies for it) shows samples/s and the end-to-end p99
    instead of tokens/s, TTFT and TPOT."""
    header = WHOLE_ANSWERS_HEADER if whole_answers else HEADER
    rows = [header, *(_cells(r, whole_answers) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if short:
        lines.append("NOT COMPLIANT: a short and/or tiny run (see cmx_run.json of each scenario)")
    return "\n".join([*lines, *latency_notes(runs), *notes])


def latency_notes(runs: Sequence[RunSummary]) -> tuple[str, ...]:
    """A line per SingleStream performance test: its result is a latency, which the table's throughput columns do
    not hold ("SingleStream performance: 90th percentile latency 12.5 s (early stopping)")."""
    return tuple(f"{r.scenario} {r.mode}: {latency_phrase(r.latency, r.latency_unit)}" for r in runs
                 if r.latency is not None)
