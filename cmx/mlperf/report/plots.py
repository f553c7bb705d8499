"""The report's plots, drawn with matplotlib as SVG text the page inlines (no script, no network when viewed).

Each function returns one `<svg>` element, or None when the data for it is not there (an
Offline test has no token latencies; a results folder from before the harness wrote
cmx_samples.csv has no per-sample times; a tune that ran no probe has none to draw; a Pareto
curve none of whose points has both throughputs).
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.pareto.record import CHOICE, HIGH, LOW, MARGIN, MEDIUM, ULTRA_LOW, ParetoRecord, Point
from cmx.mlperf.published.accelerators import AcceleratorName
from cmx.mlperf.published.compare import Placement
from cmx.mlperf.published.table import PublishedRow
from cmx.mlperf.report.collect import ResultRow, SampleTimes, TuneConfirm, TuneRecord
from cmx.mlperf.tune.search import Probe

if TYPE_CHECKING:  # matplotlib is an extra (cmx-bench[report]); imported when a plot is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_IN, HEIGHT_IN = 7.0, 2.8
CDF_POINTS = 2000  # the most points a distribution's curve is drawn with


class PlotsUnavailable(CmxError):
    """matplotlib, which draws the report's plots, is not installed."""


def _pyplot() -> ModuleType:
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable("cmx report draws its plots with matplotlib, which is not installed",
                               hint="pip install 'cmx-bench[report]' (or matplotlib>=3.8)") from None
    matplotlib.use("Agg")  # no display: draw to files only
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "svg.hashsalt": "cmx-report"})
    return plt


def _svg(fig: Figure) -> str:
    plt = _pyplot()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buffer.getvalue()
    return re.sub(r"^.*?(<svg)", r"\1", text, flags=re.S)  # drop the XML prolog and DOCTYPE: it is inlined


LOG_AXIS_RATIO = 10  # a limit this many times the slowest sample puts the latency axis on a log scale


def latency_distribution(row: ResultRow) -> str | None:
    """TTFT and TPOT of every sample as cumulative distributions, with the p99 and the round's limit marked."""
    s = row.samples
    if s is None or not len(s):
        return None
    ttft, tpot = s.ttft_ms(), s.tpot_ms()
    if not ttft.size:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH_IN, HEIGHT_IN))
    for ax, values, name, limit in ((axes[0], ttft, "TTFT", row.ttft_limit_ms),
                                    (axes[1], tpot, "TPOT", row.tpot_limit_ms)):
        _cdf(ax, values, name, limit)
    fig.suptitle(f"{row.label}: per-sample token latencies (harness-side)")
    return _svg(fig)


def _cdf(ax: Axes, values: np.ndarray, name: str, limit: float | None) -> None:
    if not values.size:
        ax.text(0.5, 0.5, f"no {name}", ha="center", va="center", transform=ax.transAxes)
        return
    ordered = np.sort(values)
    share = np.arange(1, ordered.size + 1) / ordered.size * 100.0
    if ordered.size > CDF_POINTS:  # a full run has tens of thousands of samples: the curve looks the same
        keep = np.unique(np.linspace(0, ordered.size - 1, CDF_POINTS).astype(int))
        ordered, share = ordered[keep], share[keep]
    (curve,) = ax.plot(ordered, share, color="#1f77b4", lw=1.5)
    curve.set_gid(f"cdf-{name.lower()}")  # the page's test measures the curve's width against its axes'
    ax.patch.set_gid(f"axes-{name.lower()}")
    p99 = float(np.percentile(values, 99))
    ax.axvline(p99, color="#ff7f0e", ls="--", lw=1, label=f"p99 {p99:.0f} ms")
    if limit:
        ax.axvline(limit, color="#d62728", lw=1.2, label=f"limit {limit:.0f} ms")
    # a limit far above the data (a tiny run's 8-19 ms against 2,000 ms) would squeeze the curve into a vertical
    # line at zero: a log axis shows both the curve's shape and how far below the limit it sits
    log = bool(limit) and ordered[0] > 0 and limit is not None and limit > LOG_AXIS_RATIO * ordered[-1]
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"{name} (ms{', log scale' if log else ''})")
    ax.set_ylabel("samples (%)")
    ax.set_ylim(0, 100.5)
    ax.legend(loc="lower right", frameon=False)


def throughput_over_time(row: ResultRow, bin_s: float | None = None) -> str | None:
    """Server and Interactive: output tokens completed per second of the test, in bins, with the test's mean.
    Offline: the output tokens completed so far (an engine may hand back a whole batch at once, which a rate
    per bin would show as one spike)."""
    s = row.samples
    if s is None or len(s) < 2:
        return None
    if row.scenario == "Offline":
        return _cumulative_tokens(row, s)
    start, end = float(np.min(s.issued)), float(np.max(s.completed))
    span = max(end - start, 1e-3)
    bin_s = bin_s or _bin_width(span)
    edges = np.arange(start, end + bin_s, bin_s)
    counts, _ = np.histogram(s.completed, bins=edges, weights=s.tokens)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    ax.step(edges[:-1] - start, counts / bin_s, where="post", color="#2ca02c", lw=1.5)
    mean = float(s.tokens.sum()) / span
    ax.axhline(mean, color="#7f7f7f", ls=":", lw=1, label=f"mean {mean:.0f} tok/s")
    ax.set_xlabel("seconds since the first sample was issued")
    ax.set_ylabel("output tokens/s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", frameon=False)
    ax.set_title(f"{row.label}: throughput over time ({bin_s:g} s bins)")
    return _svg(fig)


def _cumulative_tokens(row: ResultRow, s: SampleTimes) -> str:
    start = float(np.min(s.issued))
    order = np.argsort(s.completed)
    done = np.concatenate(([0.0], s.completed[order] - start))
    total = np.concatenate(([0.0], np.cumsum(s.tokens[order])))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    ax.step(done, total, where="post", color="#2ca02c", lw=1.5)
    span = max(float(done[-1]), 1e-3)
    ax.plot([0, span], [0, total[-1]], color="#7f7f7f", ls=":", lw=1, label=f"mean {total[-1] / span:.0f} tok/s")
    ax.set_xlabel("seconds since the query was issued")
    ax.set_ylabel("output tokens completed")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", frameon=False)
    ax.set_title(f"{row.label}: output tokens completed over time")
    return _svg(fig)


def _bin_width(span_s: float) -> float:
    """About 60 bins over the test, at a round width."""
    for width in (0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60):
        if span_s / width <= 60:
            return float(width)
    return 120.0


PASS, VALID_FAIL, INVALID = "#2ca02c", "#ff7f0e", "#d62728"


def tune_probes(tune: TuneRecord) -> str | None:
    """Each probe at its target QPS: the QPS LoadGen completed, and (Server-like) the TTFT and TPOT p99 against
    their limits; passes, VALID probes the tune failed (a projected TTFT, failed samples) and INVALID ones
    marked apart, each numbered in the order it ran; the confirm runs as stars and the chosen QPS as a line."""
    if not tune.probes:
        return None
    plt = _pyplot()
    # each panel: its name, the value of a probe and of a confirm run (None: not measured), its limit
    panels: list[tuple[str, Callable[[Probe], float | None], Callable[[TuneConfirm], float | None], float | None]]
    panels = [("completed queries/s", lambda p: p.completed_qps, lambda c: c.samples_per_second, None)]
    if tune.ttft_limit_ms is not None or tune.tpot_limit_ms is not None:
        panels += [("TTFT p99 (ms)", lambda p: p.ttft_p99_ms, lambda c: c.ttft_p99_ms, tune.ttft_limit_ms),
                   ("TPOT p99 (ms)", lambda p: p.tpot_p99_ms, lambda c: c.tpot_p99_ms, tune.tpot_limit_ms)]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), HEIGHT_IN), squeeze=False)
    top = max(p.qps for p in tune.probes) * 1.08
    for ax, (name, probe_value, confirm_value, limit) in zip(axes[0], panels, strict=True):
        for kind, colour, marker, keep in (("pass", PASS, "o", lambda p: p.passed),
                                           ("VALID, failed", VALID_FAIL, "o",
                                            lambda p: not p.passed and p.validity == "VALID"),
                                           ("INVALID", INVALID, "x", lambda p: not p.passed and p.validity != "VALID")):
            shown = [(p.qps, probe_value(p)) for p in tune.probes if keep(p) and probe_value(p) is not None]
            if shown:
                ax.scatter(*zip(*shown, strict=True), color=colour, marker=marker, s=30, zorder=3,
                           label=f"probe: {kind}")
        for n, p in enumerate(tune.probes, start=1):
            if probe_value(p) is not None:
                ax.annotate(str(n), (p.qps, probe_value(p)), textcoords="offset points", xytext=(4, 4), fontsize=7)
        if name.startswith("TTFT"):  # the p99 the probe projected to the confirm run's length, where it grew
            grown = [(p.qps, p.ttft_projected_ms) for p in tune.probes
                     if p.ttft_projected_ms is not None and p.ttft_p99_ms is not None
                     and p.ttft_projected_ms > p.ttft_p99_ms * 1.01]
            if grown:
                ax.scatter(*zip(*grown, strict=True), facecolors="none", edgecolors="#7f7f7f", s=30,
                           label="TTFT projected")
        confirms = [(c.qps, confirm_value(c), c.ok) for c in tune.confirms if confirm_value(c) is not None]
        for ok in (True, False):
            shown = [(q, v) for q, v, good in confirms if good is ok]
            if shown:
                ax.scatter(*zip(*shown, strict=True), color="#1f77b4" if ok else INVALID, marker="*", s=90, zorder=4,
                           label="confirm run" + ("" if ok else ": failed"))
        if name.startswith("completed"):
            ax.plot([0, top], [0, top], color="#bbbbbb", ls=":", lw=1, label="completed = target")
        if limit is not None:
            ax.axhline(limit, color=INVALID, lw=1.2, label="the round's p99 limit")
        if tune.qps is not None:
            ax.axvline(tune.qps, color="#1f77b4", ls="--", lw=1, label=f"chosen {tune.qps:g}/s")
        ax.set_xlim(0, top)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("target queries/s")
        ax.set_ylabel(name)
    handles = {label: h for ax in axes[0] for h, label in zip(*ax.get_legend_handles_labels(), strict=False)}
    fig.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle(f"{tune.label}: cmx tune's probes")
    fig.tight_layout()
    return _svg(fig)


def comparison(labels: Sequence[str], a: Sequence[float | None], b: Sequence[float | None], name_a: str, name_b: str,
               what: str) -> str | None:
    """One metric of two results folders side by side, per test."""
    if not labels or all(v is None for v in (*a, *b)):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(1.6, 0.45 * len(labels) + 0.8)))
    y = np.arange(len(labels))
    ax.barh(y - 0.2, [v or 0 for v in a], height=0.4, label=name_a, color="#1f77b4")
    ax.barh(y + 0.2, [v or 0 for v in b], height=0.4, label=name_b, color="#ff7f0e")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel(what)
    ax.legend(loc="lower right", frameon=False)
    return _svg(fig)


# a Pareto point's colour and marker by its region (point.yaml's names); any other region is drawn grey
REGION_STYLE: dict[str, tuple[str, str]] = {ULTRA_LOW: ("#9467bd", "v"), LOW: ("#1f77b4", "s"),
                                            MEDIUM: ("#2ca02c", "o"), HIGH: ("#ff7f0e", "^"),
                                            MARGIN: ("#8c564b", "D"), CHOICE: ("#e377c2", "P")}
OTHER_REGION = ("#7f7f7f", "X")
CURVE_COLOURS = ("#222222", "#17becf", "#bcbd22", "#d62728")
CURVE_STYLES = ("-", "--", "-.", ":")


def step_envelope(points: Sequence[Point]) -> list[tuple[float, float]]:
    """The curve's corners, by tokens/s per user from the highest: at each, the most system tokens/s any point
    at that interactivity or higher reached, y(x) = max{system_tps_i : tps_per_user_i >= x}. Drawn as steps
    (matplotlib's where="post" on these, in this order), each value holds down to the next point's x: a point
    is a discrete step, nothing is interpolated. Points without both figures (Offline) make no step."""
    measured = sorted(((p.tps_per_user, p.system_tps) for p in points
                       if p.tps_per_user is not None and p.system_tps is not None), key=lambda xy: -xy[0])
    corners: list[tuple[float, float]] = []
    best = float("-inf")
    for x, y in measured:
        best = max(best, y)
        corners.append((x, best))
    return corners


def curve_name(record: ParetoRecord) -> str:
    return f"{record.system} {record.benchmark} ({record.client} client)"


def pareto_steps(records: Sequence[ParetoRecord], names: Sequence[str] = (),
                 mlperf: tuple[float, float] | None = None) -> str | None:
    """Each record's curve as a step function of system tokens/s against tokens/s per user, its points marked by
    region (hollow where the accuracy gate failed) and numbered with their concurrency, its Offline point a
    dashed ceiling; `names` prefix each curve's legend entry (A, B). The title carries a cmx client's label.
    `mlperf`: a Server test's (tokens/s per user, tokens/s), drawn as a star on the curve's axes."""
    drawn = [(r, step_envelope(r.steps)) for r in records]
    if not any(corners for _, corners in drawn):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN * 1.5))
    regions: dict[str, tuple[str, str]] = {}
    for n, (record, corners) in enumerate(drawn):
        colour, style = CURVE_COLOURS[n % len(CURVE_COLOURS)], CURVE_STYLES[n % len(CURVE_STYLES)]
        name = (f"{names[n]}: " if n < len(names) else "") + curve_name(record)
        if corners:
            (line,) = ax.step(*zip(*corners, strict=True), where="post", color=colour, ls=style, lw=1.5,
                              label=name, zorder=2)
            line.set_gid(f"pareto-steps-{n}")  # the tests read the curve back from the SVG by this id
        regions |= _pareto_points(ax, record)
        offline = record.offline_point
        if offline is not None and offline.system_tps is not None:
            ax.axhline(offline.system_tps, color=colour, ls=(0, (5, 3)), lw=1, alpha=0.7, gid=f"pareto-offline-{n}")
            ax.text(0.01, offline.system_tps, "Offline", transform=ax.get_yaxis_transform(), va="bottom",
                    fontsize=7, color=colour)
    if mlperf is not None:
        ax.scatter([mlperf[0]], [mlperf[1]], s=160, marker="*", color=RUN_COLOUR, zorder=4, gid="mlperf-server",
                   label="MLPerf Server (LoadGen)")
    _region_legend(ax, regions, any(_gate_failed(p) for r in records for p in r.steps))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("tokens/s per user (1000 / TPOT p90 ms)")
    ax.set_ylabel("system output tokens/s")
    fig.suptitle("Pareto curve: system tokens/s against tokens/s per user")
    label = next((r.label for r in records if r.client == "cmx" and r.label), "")
    if label:
        ax.set_title("\n".join(textwrap.wrap(label, 110)), fontsize=7, color="#a50e0e")
    return _svg(fig)


def _pareto_points(ax: Axes, record: ParetoRecord) -> dict[str, tuple[str, str]]:
    """Mark each step point by its region, hollow where its gate failed, annotated with its concurrency; return the
    regions drawn and their style."""
    shown: dict[str, tuple[str, str]] = {}
    for p in record.steps:
        if p.tps_per_user is None or p.system_tps is None:
            continue
        colour, marker = shown[p.region] = REGION_STYLE.get(p.region, OTHER_REGION)
        ax.scatter([p.tps_per_user], [p.system_tps], marker=marker, s=36, zorder=3, linewidths=1.2,
                   edgecolors=colour, facecolors="none" if _gate_failed(p) else colour)
        ax.annotate(str(p.concurrency), (p.tps_per_user, p.system_tps), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    return shown


def _gate_failed(p: Point) -> bool:
    return p.accuracy is not None and not p.accuracy.passed


def _region_legend(ax: Axes, regions: dict[str, tuple[str, str]], gate_failed: bool) -> None:
    """The curves' legend, then one entry per region drawn and, where one is drawn, for a failed gate's hollow
    point, right of the axes."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    for region, (colour, marker) in regions.items():
        handles.append(Line2D([], [], ls="", marker=marker, color=colour))
        labels.append(region)
    if gate_failed:
        handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="none", markeredgecolor="#555555"))
        labels.append("accuracy gate failed")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=7)


def pareto_by_concurrency(records: Sequence[ParetoRecord], names: Sequence[str] = ()) -> str | None:
    """Each curve's points as system tokens/s against concurrency (log scale), with its Offline point dashed."""
    series = [(r, [(p.concurrency, p.system_tps) for p in r.steps if p.system_tps is not None]) for r in records]
    if not any(xy for _, xy in series):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    for n, (record, xy) in enumerate(series):
        colour, style = CURVE_COLOURS[n % len(CURVE_COLOURS)], CURVE_STYLES[n % len(CURVE_STYLES)]
        if xy:
            ax.plot(*zip(*xy, strict=True), color=colour, ls=style, marker="o", ms=4, lw=1.2,
                    label=(f"{names[n]}: " if n < len(names) else "") + curve_name(record))
        offline = record.offline_point
        if offline is not None and offline.system_tps is not None:
            ax.axhline(offline.system_tps, color=colour, ls=(0, (5, 3)), lw=1, alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("system output tokens/s")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=7)
    ax.set_title("system tokens/s by concurrency (Offline dashed)")
    return _svg(fig)


# the published strip chart: the run's accelerator highlighted among every published system of its benchmark
PEER_COLOUR, OTHER_COLOUR, RUN_COLOUR = "#1f77b4", "#b0b0b0", "#d62728"


def published_strip(p: Placement, field: Sequence[PublishedRow]) -> str | None:
    """Each published result of the run's benchmark and scenario, per accelerator (per socket for a CPU-only
    system), a strip per accelerator model (best median first); the run's model's rows highlighted (hollow: an
    inferred result), the run a star on its model's strip."""
    if not field and p.run_per_device is None:
        return None
    groups: dict[str, list[PublishedRow]] = {}
    for row in field:
        groups.setdefault(_model_of(row), []).append(row)
    mine = "CPU-only (per socket)" if p.run.on_cpu else AcceleratorName.parse(p.run.device).model
    groups.setdefault(mine, [])
    order = sorted(groups, key=lambda g: -float(np.median([r.per_device or 0.0 for r in groups[g]] or [0.0])))
    names = {g: _group_label(g, groups[g], p) for g in order}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(1.8, 0.32 * len(order) + 1.0)))
    for y, g in enumerate(order):
        rows = groups[g]
        colour = PEER_COLOUR if g == mine else OTHER_COLOUR
        xs = [r.per_device or 0.0 for r in rows]
        ys = [y + 0.18 * ((n % 3) - 1) for n in range(len(rows))]  # spread a strip's points a little, the same way
        filled = [not r.inferred for r in rows]
        ax.scatter([x for x, f in zip(xs, filled, strict=True) if f], [v for v, f in zip(ys, filled, strict=True) if f],
                   s=22, color=colour, zorder=2)
        ax.scatter([x for x, f in zip(xs, filled, strict=True) if not f],
                   [v for v, f in zip(ys, filled, strict=True) if not f], s=22, facecolors="none", edgecolors=colour,
                   zorder=2)
    # the legend's entries, drawn empty
    ax.scatter([], [], s=22, color=PEER_COLOUR, label=f"published, {names[mine].rsplit(' (', 1)[0]}")
    ax.scatter([], [], s=22, color=OTHER_COLOUR, label="published, other accelerators")
    ax.scatter([], [], s=22, facecolors="none", edgecolors=OTHER_COLOUR, label="inferred from another scenario")
    if p.run_per_device is not None:
        ax.scatter([p.run_per_device], [order.index(mine)], s=140, marker="*", color=RUN_COLOUR, zorder=3,
                   label="this run")
    ax.legend(loc="lower right", frameon=False, fontsize=7)
    ax.set_yticks(range(len(order)), [names[g] for g in order])
    ax.invert_yaxis()
    values = [r.per_device or 0.0 for r in field] + ([p.run_per_device] if p.run_per_device else [])
    if values and min(values) > 0 and max(values) / min(values) > LOG_AXIS_RATIO:
        ax.set_xscale("log")
    ax.set_xlabel(f"{p.units} per accelerator (per socket on a CPU-only system)")
    ax.set_title(f"{p.run.benchmark} {p.run.scenario}: published results, {names[mine]} highlighted", fontsize=9)
    return _svg(fig)


def _model_of(row: PublishedRow) -> str:
    return "CPU-only (per socket)" if row.on_cpu else AcceleratorName.parse(row.device).model or row.device


def _group_label(group: str, rows: Sequence[PublishedRow], p: Placement) -> str:
    """A strip's name: its shortest published name (or the run's own), with how many rows it holds."""
    names = sorted({r.device for r in rows}, key=len) or [p.run.device]
    return f"{textwrap.shorten(names[0], 34, placeholder='...') if not rows or not rows[0].on_cpu else group} " \
           f"({len(rows)})"
