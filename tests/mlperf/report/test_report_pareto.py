"""`cmx report` of a `cmx pareto` results folder: the label, the curve as a step function, a row per point, the gate.

The folders are ParetoRecords with made-up figures written by write_record (tests/mlperf/report/paretos.py).
"""

from __future__ import annotations

import html
import itertools
import re
from dataclasses import replace
from pathlib import Path

import pytest

from cmx import api
from cmx.mlperf.pareto.record import CMX_PARETO_JSON, LABEL, PARETO_DIR
from cmx.mlperf.report.collect import ReportError, collect
from cmx.mlperf.report.plots import pareto_steps, step_envelope
from tests.browser import NO_BROWSER, opened
from tests.mlperf.report.paretos import BENCHMARK, FAILED, STEPS, SYSTEM, curve, point, with_power, write_pareto
from tests.mlperf.report.test_report import make_results

pytest.importorskip("matplotlib")


@pytest.fixture
def pareto(tmp_path: Path) -> Path:
    return write_pareto(tmp_path / "a")


def _section(page: str, name: str) -> str:
    found = re.search(rf'<section class="{name}">.*?</section>', page, re.S)
    assert found, f"no {name} section"
    return found.group(0)


def _steps_path(svg: str, n: int = 0) -> list[tuple[float, float]]:
    """The vertices of curve n's line as the SVG draws them (its group's gid is set by pareto_steps)."""
    found = re.search(rf'<g id="pareto-steps-{n}">\s*<path d="([^"]+)"', svg)
    assert found, f"no curve {n} in the SVG"
    numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", found.group(1))]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def test_a_pareto_only_folder_is_a_page_with_the_label_a_row_per_point_and_the_curve_as_inline_svg(pareto: Path):
    page = api.report(pareto).read_text(encoding="utf-8")
    section = _section(page, "pareto")
    assert "Pareto curve (MLPerf Endpoints v1.0 methodology): my-box llama3.1-8b" in section
    assert f'<p class="label-note">{html.escape(LABEL)}</p>' in section
    points = re.search(r'<table class="pareto-points">.*?</table>', section, re.S)
    assert points
    concurrencies = re.findall(r"<tr><td>(\w+)</td>", points.group(0))
    assert concurrencies == [*(str(c) for c, *_ in STEPS), "Offline"]
    assert len(re.findall(r"<svg\b", section)) == 2  # the steps, and system tokens/s by concurrency
    assert "short: seconds per point: a smoke test, not the rules&#x27; 600/1,200 s" in section
    assert "no system_power file: no tokens/s per kW" in section
    assert "C_min 1, C_max 64: C_max found by cmx&#x27;s knee search" in section
    assert "low_concurrency 2-8" in section and "PASS at concurrency 64" in section
    assert "30 / 1200 (short)" in section and "each point ran 30 s" in section
    assert '<table class="tests">' not in page and not re.search(r"""(src|href)=["']https?://""", page)


def test_the_pareto_folder_itself_is_a_results_folder(pareto: Path):
    folder = pareto / SYSTEM / BENCHMARK / PARETO_DIR
    report = collect(folder)
    assert [c.path for c in report.pareto] == [folder / CMX_PARETO_JSON] and report.tests == ()
    assert report.command == curve().command


def test_a_folder_with_loadgen_results_and_a_curve_shows_both(tmp_path: Path):
    results = write_pareto(make_results(tmp_path / "a"))
    report = collect(results)
    assert len(report.tests) == 4 and [c.record.system for c in report.pareto] == [SYSTEM]
    page = api.report(results).read_text(encoding="utf-8")
    assert page.count("<tr><td>llama2-70b-99</td>") == 4 and '<section class="pareto">' in page
    assert report.command != curve().command  # the folder's command is its runs', the curve's is in its section


def test_a_folder_with_neither_is_refused_naming_cmx_pareto_too(tmp_path: Path):
    with pytest.raises(ReportError, match="no benchmark results under") as err:
        collect(tmp_path)
    assert CMX_PARETO_JSON in str(err.value) and "`cmx pareto`" in err.value.hint


def test_a_damaged_pareto_record_is_refused_with_its_path(pareto: Path):
    path = pareto / SYSTEM / BENCHMARK / PARETO_DIR / CMX_PARETO_JSON
    path.write_text('{"benchmark": "x"}', encoding="utf-8")
    with pytest.raises(ReportError, match="is not a Pareto record"):
        collect(pareto)


def test_the_envelope_holds_the_best_throughput_at_or_above_each_interactivity():
    points = [point(64, "high_concurrency", 2400.0, 38.0), point(1, "low_latency", 95.0, 96.0),
              point(16, "med_concurrency", 650.0, 40.0), point(8, "low_concurrency", 690.0, 87.0),
              point(2048, "offline", 3100.0, None), point(32, "med_concurrency", None, 39.0)]
    # from the most interactive down; 16 is dominated by 8 (fewer tokens/s, less interactive): 8's value holds
    assert step_envelope(points) == [(96.0, 95.0), (87.0, 690.0), (40.0, 690.0), (38.0, 2400.0)]
    assert step_envelope([]) == []


def test_the_curve_is_drawn_as_steps_through_the_envelope_with_no_slope():
    record = curve()
    vertices = _steps_path(pareto_steps([record]) or "")
    segments = list(itertools.pairwise(vertices))
    assert all(a[0] == b[0] or a[1] == b[1] for a, b in segments), vertices  # horizontal or vertical, never sloped
    assert any(a[0] == b[0] for a, b in segments) and any(a[1] == b[1] for a, b in segments)
    levels = {y for _, y in step_envelope(record.steps)}
    assert len({y for _, y in vertices}) == len(levels) == 4  # one level per envelope value, none interpolated


def test_a_curve_with_no_measured_point_draws_nothing():
    record = curve()
    empty = replace(record, points=tuple(replace(p, system_tps=None) for p in record.points))
    assert pareto_steps([empty]) is None


def test_a_failed_accuracy_gate_shows_fail_with_its_shortfall_and_a_hollow_point(tmp_path: Path):
    results = write_pareto(tmp_path / "a", curve(gate=FAILED))
    section = _section(api.report(results).read_text(encoding="utf-8"), "pareto")
    assert '<td class="bad">FAIL at concurrency 64 (failed at 64)</td>' in section
    assert '<td class="bad">rouge1 20.3, rougeL 11: FAIL: rouge1 20.3 is under the target 38.39</td>' in section
    assert "accuracy gate failed" in section  # the legend's entry for the hollow marker, drawn only for one
    assert "accuracy gate failed" not in api.report(write_pareto(tmp_path / "b"), tmp_path / "b.html").read_text()


def test_power_gives_tokens_per_kw_and_where_the_figure_came_from(tmp_path: Path):
    results = write_pareto(tmp_path / "a", with_power(curve(), 4.0))
    section = _section(api.report(results).read_text(encoding="utf-8"), "pareto")
    assert "provisioned 4 kW (system_power.yaml, nameplate)" in section
    assert "<td>600.0</td>" in section  # concurrency 64: 2,400 tokens/s over 4 kW


def test_two_folders_with_curves_share_one_overlay_chart_above_their_sections(pareto: Path, tmp_path: Path):
    other = write_pareto(tmp_path / "b", curve(scale=1.3))
    page = api.report(pareto, tmp_path / "compare.html", other=other).read_text(encoding="utf-8")
    overlay = _section(page, "pareto-overlay")
    steps = overlay.split("</figure>")[0]
    assert _steps_path(steps, 0) and _steps_path(steps, 1)
    assert f"A ({pareto}): my-box llama3.1-8b (cmx client)" in steps
    assert f"B ({other}): my-box llama3.1-8b (cmx client)" in steps
    assert page.index('<section class="pareto-overlay">') < page.index('<section class="results">')
    assert page.count('<section class="pareto">') == 2 and "B compared with A" not in page  # no tests to compare


@pytest.mark.e2e
@pytest.mark.skipif(NO_BROWSER is not None, reason=NO_BROWSER or "")
def test_the_pareto_page_renders_in_a_real_browser_with_its_label_and_curve_and_no_console_error(
        pareto: Path, tmp_path: Path):
    with opened(api.report(pareto, tmp_path / "report.html")) as (page, errors):
        label_shown = page.locator("section.pareto .label-note").is_visible()
        sizes = page.eval_on_selector_all(
            "section.pareto figure svg",
            "els => els.map(e => [e.getBoundingClientRect().width, e.getBoundingClientRect().height, "
            "e.querySelectorAll('path, text').length])")
        steps_box = page.locator("#pareto-steps-0").bounding_box()
        page.screenshot(path=str(tmp_path / "pareto.png"), full_page=True)
    assert errors == [] and label_shown
    assert len(sizes) == 2 and all(w > 200 and h > 100 and shapes > 10 for w, h, shapes in sizes), sizes
    assert steps_box and steps_box["width"] > 100 and steps_box["height"] > 50  # the curve itself is laid out
    assert (tmp_path / "pareto.png").stat().st_size > 10_000
