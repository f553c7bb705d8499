"""The report's plots, drawn with matplotlib as SVG text the page inlines (no script, no network when viewed).

Each function returns one `<svg>` element, or None when the data for it is not there (an
Offline test has no token latencies; a results folder from before the harness wrote
cmx_samples.csv has no per-sample times).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.report.collect import ResultRow

WIDTH_IN, HEIGHT_IN = 7.0, 2.8
CDF_POINTS = 2000  # the most points a distribution's curve is drawn with


class PlotsUnavailable(CmxError):
    """matplotlib, which draws the report's plots, is not installed."""


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable("cmx report draws its plots with matplotlib, which is not installed",
                               hint="pip install 'cmx[report]' (or matplotlib>=3.8)") from None
    matplotlib.use("Agg")  # no display: draw to files only
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "svg.hashsalt": "cmx-report"})
    return plt


def _svg(fig) -> str:  # type: ignore[no-untyped-def]
    plt = _pyplot()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buffer.getvalue()
    return re.sub(r"^.*?(<svg)", r"\1", text, flags=re.S)  # drop the XML prolog and DOCTYPE: it is inlined


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


def _cdf(ax, values: np.ndarray, name: str, limit: float | None) -> None:  # type: ignore[no-untyped-def]
    if not values.size:
        ax.text(0.5, 0.5, f"no {name}", ha="center", va="center", transform=ax.transAxes)
        return
    ordered = np.sort(values)
    share = np.arange(1, ordered.size + 1) / ordered.size * 100.0
    if ordered.size > CDF_POINTS:  # a full run has tens of thousands of samples: the curve looks the same
        keep = np.unique(np.linspace(0, ordered.size - 1, CDF_POINTS).astype(int))
        ordered, share = ordered[keep], share[keep]
    ax.plot(ordered, share, color="#1f77b4", lw=1.5)
    p99 = float(np.percentile(values, 99))
    ax.axvline(p99, color="#ff7f0e", ls="--", lw=1, label=f"p99 {p99:.0f} ms")
    if limit:
        ax.axvline(limit, color="#d62728", lw=1.2, label=f"limit {limit:.0f} ms")
    ax.set_xlabel(f"{name} (ms)")
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


def _cumulative_tokens(row: ResultRow, s) -> str:  # type: ignore[no-untyped-def]
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
