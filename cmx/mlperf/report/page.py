"""`cmx report`: one self-contained HTML page for a results folder, or two compared side by side.

The page is templates/report/report.html.j2 with its plots inlined as SVG (cmx.mlperf.report.plots)
and its styles in the page: it opens from a file with no network.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from pathlib import Path

from cmx.mlperf.loadgen.harness_config import latency_phrase
from cmx.mlperf.pareto.record import LABEL, OFFICIAL_CLIENT_LABEL, AccuracyGate, ParetoRecord, Point
from cmx.mlperf.published.answer import Costed, Yardstick
from cmx.mlperf.published.compare import field_of, has_runs, place, read_runs
from cmx.mlperf.published.table import PublishedResultsError
from cmx.mlperf.published.text import cost_lines, standing, table_read
from cmx.mlperf.report.collect import (
    ParetoCurve,
    Percentiles,
    ResultRow,
    ResultsReport,
    TuneConfirm,
    TuneRecord,
    collect,
)
from cmx.mlperf.report.plots import (
    comparison,
    latency_distribution,
    pareto_by_concurrency,
    pareto_steps,
    published_strip,
    throughput_over_time,
    tune_probes,
)
from cmx.mlperf.report.served import ServedFraction, served_fractions
from cmx.mlperf.tune.search import Probe
from cmx.secrets import environment_redactor
from cmx.templates import render

TEMPLATE = "report/report.html.j2"


@dataclass(frozen=True)
class Figure:
    title: str
    svg: str


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, and a class that colours it (ok, bad, or none)."""

    text: str
    kind: str = ""


@dataclass(frozen=True)
class Ratio:
    """One metric of one test in two folders, and B/A."""

    test: str
    metric: str
    a: str
    b: str
    ratio: str


def write_report(results: Path, out: Path, *, other: Path | None = None, published: Yardstick | None = None,
                 published_note: str | None = None) -> Path:
    """Write the page for `results` (and, given `other`, its comparison with it) to `out`; return `out`. With
    `published`, each performance test is placed among the published results of its benchmark and scenario;
    `published_note` (which table was read, or how to add one) is shown in each folder that has such a test."""
    a = collect(results)
    b = collect(other) if other is not None else None
    page = render(TEMPLATE, esc=html.escape, header=HEADER, tune_header=TUNE_HEADER, pareto_header=PARETO_HEADER,
                  probe_header=PROBE_HEADER, published_header=PUBLISHED_HEADER, title=_title(a, b),
                  reports=[_section(r, published, published_note) for r in (a, b) if r],
                  pareto_overlay=_pareto_overlay(a, b) if b else [],
                  comparison=_comparison(a, b) if b and (a.tests or b.tests) else None)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(environment_redactor().redact(page), encoding="utf-8")  # records an older cmx wrote
    return out


def _title(a: ResultsReport, b: ResultsReport | None) -> str:
    return f"cmx report: {a.path}" + (f" vs {b.path}" if b else "")


def _section(report: ResultsReport, published: Yardstick | None = None,
             published_note: str | None = None) -> dict[str, object]:
    figures: list[Figure] = []
    placed = _published(report, published) if published else []
    if placed and published and not published_note:
        published_note = table_read(published.source)
    for row in report.tests:
        if row.mode != "performance":
            continue
        for title, svg in ((f"{row.label}: latency", latency_distribution(row)),
                           (f"{row.label}: throughput", throughput_over_time(row))):
            if svg:
                figures.append(Figure(title, svg))
    return {"path": str(report.path), "command": report.command, "cmx_version": report.cmx_version,
            "round": report.round, "software": report.software, "system": _system_lines(report.system),
            "rows": [_cells(r) for r in report.tests], "problems": [(r.label, p) for r in report.tests
                                                                    for p in r.problems],
            "not_compliant": any(r.short or r.tiny for r in report.tests), "figures": figures,
            "tunes": [_tune(t) for t in report.tunes], "pareto": [_pareto(c) for c in report.pareto],
            "published": placed,
            "published_note": published_note if published_note and (placed or has_runs(report.path)) else "",
            "served": [_served(s) for s in served_fractions(report.tests, report.pareto)],
            "published_round": published.source.round if published else ""}


def _served(s: ServedFraction) -> dict[str, object]:
    """A Server test against a served curve of its benchmark on its system: the fraction, and the star on the curve."""
    limits = ", ".join(f"{name} {_num(v)} ms" for name, v in (("TTFT", s.ttft_limit_ms), ("TPOT", s.tpot_limit_ms))
                       if v is not None) or "none recorded"
    if s.served is None:
        verdict = Cell(f"no point of the curve is within the Server test's limits ({limits}, at p90)", "bad")
    else:
        verdict = Cell(f"the served curve keeps {_num(s.served_tps)} tokens/s within the same limits ({limits}, at "
                       f"p90; concurrency {s.served.concurrency}): {s.fraction:.0%} of the MLPerf Server figure, "
                       f"{_num(s.mlperf_tps)} tokens/s")
    svg = pareto_steps([s.record], mlperf=s.mlperf_point)
    name = f"{s.record.system} {s.record.benchmark}"
    return {"label": f"{s.test.benchmark} Server against the served curve of {name}", "verdict": verdict,
            "figure": Figure(f"{name}: the MLPerf Server test (star) on the served curve", svg) if svg else None}


PUBLISHED_HEADER = ("", "organization", "system", "nodes", "accelerators", "framework", "precision",
                    "per accelerator", "what differs")
PUBLISHED_PEERS_SHOWN = 10  # the best peers listed under the chart (the chart shows them all)


def _published(report: ResultsReport, y: Yardstick) -> list[dict[str, object]]:
    """Each performance test placed among the published rows of its benchmark and scenario: the chart, the rank and
    ratios among the same accelerator, what differs, and with a price the cost line."""
    try:
        runs = read_runs(report.path)
    except PublishedResultsError:  # a folder of tunes or curves only
        return []
    out: list[dict[str, object]] = []
    for run in runs:
        p = place(run, y.rows)
        svg = published_strip(p, field_of(p, y.rows))
        mine = Costed.of(p.run_per_device, p.units, y.cost)
        peers = [[Cell(""), Cell(peer.row.organization), Cell(peer.row.system), Cell(str(peer.row.nodes)),
                  Cell(f"{peer.row.devices}x {peer.row.device}"), Cell(peer.row.framework), Cell(peer.row.precision),
                  Cell(_num(peer.per_device) + ("*" if peer.row.inferred else "")), Cell("; ".join(peer.differs))]
                 for peer in p.peers[:PUBLISHED_PEERS_SHOWN]]
        if p.run_per_device is not None:
            at = sum(peer.per_device > p.run_per_device for peer in p.peers[:PUBLISHED_PEERS_SHOWN])
            peers.insert(at, [Cell("this run", "ok"), Cell(""), Cell(run.system), Cell(str(run.nodes)),
                              Cell(run.device_label), Cell(run.framework), Cell(run.precision),
                              Cell(_num(p.run_per_device), "ok"), Cell("")])
        out.append({"label": f"{run.benchmark} {run.scenario}",
                    "figure": Figure(f"{run.benchmark} {run.scenario} among the published results", svg) if svg
                    else None,
                    "run": f"{_num(p.run_per_device)} {p.units} per {'socket' if run.on_cpu else 'accelerator'} "
                           f"on {run.device_label}" + (" (a short or tiny run: not a result)"
                                                       if run.short or run.tiny else ""),
                    "standing": standing(p, y.source.round), "costs": cost_lines("this run", mine),
                    "peers": peers if p.peers else []})
    return out


PARETO_HEADER = ("concurrency", "region", "role", "system tokens/s", "tokens/s per user", "TTFT p90 (ms)",
                 "TPOT p90 (ms)", "tokens/s per kW", "issued / completed / failed", "window (s) / the rules' minimum",
                 "accuracy gate")
PROBE_HEADER = ("concurrency", "system tokens/s", "TPOT p90 (ms)", "seconds")
C_MAX_SOURCES = {"probes": "found by cmx's knee search (the probes below: where throughput stops growing)",
                 "declared": "declared with --max-concurrency"}
CLIENTS = {"cmx": "cmx's endpoint client", "inference-endpoint": "MLCommons' client (inference-endpoint)"}


def _pareto(curve: ParetoCurve) -> dict[str, object]:
    """A Pareto curve's section: its label, how it was laid out and run, its plots, and one row per point."""
    r = curve.record
    name = f"{r.system} {r.benchmark}"
    figures = [Figure(f"{name}: {title}", svg) for title, svg in
               (("system tokens/s against tokens/s per user, a step per point", pareto_steps([r])),
                ("system tokens/s by concurrency", pareto_by_concurrency([r]))) if svg]
    return {"name": name, "path": str(curve.path), "label": _label(r),
            "summary": _pareto_summary(r), "problems": list(r.problems), "command": r.command, "figures": figures,
            "probes": [[f"{p.concurrency}", _num(p.system_tps, 1), _ms(p.tpot_p90_ms), f"{p.seconds:.1f}"]
                       for p in r.probes],
            "rows": [_point_row(p) for p in (*r.steps, *([r.offline_point] if r.offline_point else []))]}


def _label(r: ParetoRecord) -> str:
    """The record's own label; one from before the label was written gets the one its client calls for."""
    return r.label or (LABEL if r.client == "cmx" else OFFICIAL_CLIENT_LABEL)


def _pareto_summary(r: ParetoRecord) -> list[tuple[str, Cell]]:
    regions = ", ".join(f"{region} {lo}" + (f"-{hi}" if hi != lo else "") for region, (lo, hi) in r.regions.items())
    return [("concurrency", Cell(f"C_min {r.c_min}, C_max {r.c_max}: C_max "
                                 + C_MAX_SOURCES.get(r.c_max_source, r.c_max_source))),
            ("regions", Cell(regions or "-")),
            ("client", Cell(f"{r.client} ({CLIENTS[r.client]})" if r.client in CLIENTS else r.client)),
            ("length", Cell("short: seconds per point: a smoke test, not the rules' 600/1,200 s", "warn") if r.short
             else Cell("the rules' durations (600 s low_latency, 1,200 s the others)")),
            ("power", Cell(_power(r))),
            ("accuracy gate", _gate_verdict(r)),
            ("took", Cell(f"{r.seconds:.0f} s" if r.seconds else "-"))]


def _power(r: ParetoRecord) -> str:
    if r.provisioned_kw is None:
        return "no system_power file: no tokens/s per kW"
    source = ", ".join(x for x in (r.power_file, r.power_method) if x)
    return f"provisioned {r.provisioned_kw:g} kW" + (f" ({source})" if source else "")


def _gate_verdict(r: ParetoRecord) -> Cell:
    gated = [p.concurrency for p in r.points if p.accuracy is not None]
    at = "at concurrency " + ", ".join(str(c) for c in gated)
    if r.accuracy_passed is None:
        return Cell("none ran", "warn")
    if r.accuracy_passed:
        return Cell(f"PASS {at}", "ok")
    failed = [str(p.concurrency) for p in r.points if p.accuracy is not None and not p.accuracy.passed]
    return Cell(f"FAIL {at} (failed at {', '.join(failed)})", "bad")


def _point_row(p: Point) -> list[Cell]:
    window = f"{p.window_s:.0f} / {p.min_duration_s:.0f}" + ("" if p.duration_met else " (short)")
    return [Cell(str(p.concurrency) if not p.offline else "Offline"), Cell(p.region), Cell(p.role),
            Cell(_num(p.system_tps, 1)), Cell(_num(p.tps_per_user, 1)), Cell(_ms(p.ttft_p90_ms)),
            Cell(_ms(p.tpot_p90_ms)), Cell(_num(p.system_tps_per_kw, 1)),
            Cell(f"{p.issued:,} / {p.completed:,} / {p.failed:,}", _ok(p.failed == 0)),
            Cell(window, "" if p.duration_met else "warn"), _gate(p.accuracy)]


def _gate(gate: AccuracyGate | None) -> Cell:
    if gate is None:
        return Cell("-")
    metrics = ", ".join(f"{metric} {value:.4g}" for metric, value in gate.metrics.items())
    if gate.passed:
        return Cell(f"{metrics}: PASS", "ok")
    return Cell(f"{metrics}: FAIL: " + "; ".join(why.rstrip(".") for why in gate.shortfalls), "bad")


def _pareto_overlay(a: ResultsReport, b: ResultsReport) -> list[Figure]:
    """With OTHER: both folders' curves on one chart (each named A or B by its folder), when both hold one."""
    if not a.pareto or not b.pareto:
        return []
    curves = [(f"{side} ({report.path})", c.record) for side, report in (("A", a), ("B", b)) for c in report.pareto]
    names, records = [n for n, _ in curves], [r for _, r in curves]
    return [Figure(f"Pareto curves of A and B: {title}", svg) for title, svg in
            (("system tokens/s against tokens/s per user", pareto_steps(records, names)),
             ("system tokens/s by concurrency", pareto_by_concurrency(records, names))) if svg]


TUNE_HEADER = ("run", "target qps", "LoadGen", "early stop", "TTFT p99 (ms)", "TTFT projected (ms)", "TPOT p99 (ms)",
               "completed/s", "seconds", "verdict")


def _tune(t: TuneRecord) -> dict[str, object]:
    """A tune's section: what it chose and why, its plot, and one table row per probe and per confirm run."""
    if t.qps is not None:
        answer = f"{t.input} = {t.qps:g}" + (", confirmed by the last confirm run" if t.confirmed
                                              else ", NOT confirmed (tuned with --no-confirm)")
    elif t.found_qps is not None:
        answer = f"no {t.input}: the probes passed up to {t.found_qps:g}/s, but no confirm run did" + (
            f" ({t.confirm_why})" if t.confirm_why else "")
    else:
        answer = f"no {t.input}: no probe passed"
    limits = (f"TTFT p99 under {t.ttft_limit_ms:g} ms, TPOT p99 under {t.tpot_limit_ms:g} ms"
              if t.ttft_limit_ms is not None and t.tpot_limit_ms is not None else
              "no latency limits: the target is the measured throughput")
    took = (f"{len(t.probes)} probe(s) and {len(t.confirms)} confirm run(s) on one engine"
            + (f" in {t.seconds:.0f} s (the engine's start {t.engine_start_s:.0f} s)"
               if t.seconds is not None and t.engine_start_s is not None else "")
            + (f"; confirms at {', '.join(f'{c.qps:g}' for c in t.confirms)}/s: {t.confirm_why}"
               if len(t.confirms) > 1 and t.confirm_why and t.qps is not None else ""))
    rows = [_probe_row(t, n, p) for n, p in enumerate(t.probes, start=1)]
    rows += [_confirm_row(t, n, c) for n, c in enumerate(t.confirms, start=1)]
    svg = tune_probes(t)
    return {"label": t.label, "answer": answer, "limits": limits, "took": took, "command": t.command,
            "short": t.short, "figure": Figure(f"{t.label}: cmx tune's probes", svg) if svg else None, "rows": rows}


def _probe_row(t: TuneRecord, n: int, p: Probe) -> list[Cell]:
    chosen = not t.confirms and p.qps == t.qps  # --no-confirm: the search's answer is the choice
    mark = " (chosen)" if chosen else " (the search's answer)" if p.qps == t.found_qps and p.passed else ""
    verdict = ("pass" if p.passed else f"FAIL: {p.reason}" if p.reason else "FAIL") + mark
    kind = "chosen" if chosen else ""
    return [Cell(f"probe {n}", kind), Cell(f"{p.qps:g}", kind), Cell(p.validity or "-", _ok(p.validity == "VALID")),
            Cell(_yes(p.early_stopping_met)), _limited(p.ttft_p99_ms, t.ttft_limit_ms),
            _limited(p.ttft_projected_ms, t.ttft_limit_ms), _limited(p.tpot_p99_ms, t.tpot_limit_ms),
            Cell(_num(p.completed_qps, 2)), Cell(f"{p.seconds:.1f}"), Cell(verdict, _ok(p.passed))]


def _confirm_row(t: TuneRecord, n: int, c: TuneConfirm) -> list[Cell]:
    chosen = c.qps == t.qps and n == len(t.confirms)  # the last confirm run's QPS is the one written
    verdict = "pass" if c.ok else "FAIL: " + "; ".join(why.rstrip(".") for why in c.problems)
    kind = "chosen" if chosen else ""
    return [Cell(f"confirm {n}", kind), Cell(f"{c.qps:g}", kind), Cell(c.loadgen_validity or "-",
                                                                 _ok(c.loadgen_validity == "VALID")),
            Cell("-"), _limited(c.ttft_p99_ms, t.ttft_limit_ms), Cell("-"), _limited(c.tpot_p99_ms, t.tpot_limit_ms),
            Cell(_num(c.samples_per_second, 2)), Cell("-" if c.seconds is None else f"{c.seconds:.1f}"),
            Cell(verdict + (" (chosen)" if chosen else ""), _ok(c.ok))]


def _ok(good: bool) -> str:
    return "ok" if good else "bad"


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO"


def _limited(value: float | None, limit: float | None) -> Cell:
    if value is None:
        return Cell("-")
    return Cell(_ms(value), "" if limit is None else _ok(value < limit))


def _system_lines(system: dict[str, object]) -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in system.items() if v not in (None, "", [], {})]


HEADER = ("benchmark", "scenario", "mode", "validity", "tokens/s", "samples/s", "TTFT p50 / p90 / p99 (ms)",
          "TPOT p50 / p90 / p99 (ms)", "latency p50 / p90 / p99 (ms)", "accuracy", "run")


def _cells(r: ResultRow) -> list[Cell]:
    validity = r.validity or ("scored" if r.mode == "accuracy" and r.accuracy else "-")
    return [Cell(r.benchmark), Cell(r.scenario), Cell(r.mode),
            Cell(validity, "ok" if r.ok else "bad"),
            Cell(_num(r.tokens_per_second)), Cell(_num(r.samples_per_second, 2)),
            _latency(r.ttft, r.ttft_limit_ms), _latency(r.tpot, r.tpot_limit_ms),
            _with_result(_latency(r.latency, r.latency_limit_ms), r),
            _accuracy(r), Cell(_flags(r), "" if r.compliant else "warn")]


def _latency(p: Percentiles | None, limit: float | None) -> Cell:
    if p is None:
        return Cell("-")
    text = " / ".join(_ms(v) for v in (p.p50, p.p90, p.p99)) + (f" (limit {limit:.0f})" if limit else "")
    return Cell(text, "" if not limit or p.p99 is None else "ok" if p.p99 < limit else "bad")


def _with_result(cell: Cell, r: ResultRow) -> Cell:
    """A SingleStream test's latency cell, with its result in the unit the round reports it in."""
    if r.result_latency is None:
        return cell
    return replace(cell, text=f"{cell.text}; result: {latency_phrase(r.result_latency, r.result_unit)}")


def _accuracy(r: ResultRow) -> Cell:
    if not r.accuracy:
        return Cell("-")
    parts, missed = [], False
    for metric, value in r.accuracy.items():
        low, high = r.accuracy_minimums.get(metric), r.accuracy_maximums.get(metric)
        bound = (f" (≥ {low:.4g})" if low is not None else "") + (f" (≤ {high:.4g})" if high is not None else "")
        missed |= (low is not None and value < low) or (high is not None and value > high)
        parts.append(f"{metric} {value:.4g}{bound}")
    # a tiny model's scores say nothing, so a miss is shown, not judged
    return Cell(", ".join(parts), "" if r.tiny else "bad" if missed else "ok")


def _flags(r: ResultRow) -> str:
    flags = [name for name, on in (("short", r.short), ("tiny", r.tiny)) if on]
    return ", ".join([*flags, "compliant" if r.compliant else "not compliant"])


def _ms(value: float | None) -> str:
    """Milliseconds with the digits that matter: 0.43, 7.1, 143."""
    return "-" if value is None else f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


METRICS = (("tokens/s", lambda r: r.tokens_per_second),
           ("TTFT p99 (ms)", lambda r: r.ttft.p99 if r.ttft else None),
           ("TPOT p99 (ms)", lambda r: r.tpot.p99 if r.tpot else None),
           ("latency p99 (ms)", lambda r: r.latency.p99 if r.latency else None))


def _comparison(a: ResultsReport, b: ResultsReport) -> dict[str, object]:
    rows_b = {r.key: r for r in b.tests}
    pairs = [(ra, rows_b[ra.key]) for ra in a.tests if ra.key in rows_b]
    ratios: list[Ratio] = []
    for ra, rb in pairs:
        measures = [(name, get(ra), get(rb)) for name, get in METRICS]
        measures += [(metric, ra.accuracy.get(metric), rb.accuracy.get(metric)) for metric in ra.accuracy]
        ratios += [Ratio(ra.label, name, _num(va, 2), _num(vb, 2), f"{vb / va:.3f}" if va and vb is not None else "-")
                   for name, va, vb in measures if va is not None or vb is not None]
    only = [r.label + " (only in A)" for r in a.tests if r.key not in rows_b]
    only += [r.label + " (only in B)" for r in b.tests if r.key not in {ra.key for ra in a.tests}]
    perf = [(ra, rb) for ra, rb in pairs if ra.mode == "performance"]
    chart = comparison([ra.label for ra, _ in perf], [ra.tokens_per_second for ra, _ in perf],
                       [rb.tokens_per_second for _, rb in perf], "A", "B", "output tokens/s")
    return {"a": str(a.path), "b": str(b.path), "ratios": ratios, "unmatched": only,
            "figures": [Figure("tokens/s, A and B", chart)] if chart else []}


__all__ = ["write_report"]
