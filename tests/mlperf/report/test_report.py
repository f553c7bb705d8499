"""`cmx report`: a results folder (made by the app with recorded LoadGen logs) as one self-contained HTML page."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest

from cmx import api
from cmx.mlperf.app import run_app
from cmx.mlperf.loadgen.progress import SAMPLES_CSV, SampleClock
from cmx.mlperf.report.collect import ReportError, collect
from tests.browser import NO_BROWSER, opened
from tests.conftest import Home
from tests.mlperf.test_app_run import Recorded, app_config, fake_evaluate, fake_verify

pytest.importorskip("matplotlib")


class Ticks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def write_samples(folder: Path, streamed: bool, seed: int = 0) -> None:
    """Per-sample times as the harness writes them: 200 samples over 5 s, first tokens when streamed."""
    rng = random.Random(seed)
    ticks = Ticks()
    clock = SampleClock(ticks)
    for q in range(200):
        ticks.t = q * 0.025
        clock.issued([q])
        ticks.t += rng.uniform(0.02, 0.2)
        if streamed:
            clock.first_token(q)
        ticks.t += 15 * rng.uniform(0.01, 0.05)
        clock.completed(q, 16)
    clock.write_samples(folder / SAMPLES_CSV)


def make_results(root: Path, offline_perf: str = "offline-perf") -> Path:
    config = app_config(root, scenarios=("Offline", "Server"), modes=("performance", "accuracy"))
    runner = Recorded({("Server", "performance"): "server-perf", ("Offline", "performance"): offline_perf})
    run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    for scenario in ("Offline", "Server"):
        write_samples(config.run_dir(scenario, "performance"), streamed=scenario == "Server")
    return config.results_dir


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return make_results(tmp_path / "a")


def test_each_test_is_a_row_with_loadgens_figures_and_the_rounds_limits(results: Path):
    report = collect(results)
    rows = {(r.scenario, r.mode): r for r in report.tests}
    assert set(rows) == {("Offline", "performance"), ("Offline", "accuracy"), ("Server", "performance"),
                         ("Server", "accuracy")}
    server = rows["Server", "performance"]
    assert server.validity == "VALID" and server.ok
    assert server.ttft and server.tpot and server.ttft.p50 <= server.ttft.p90 <= server.ttft.p99
    assert (server.ttft_limit_ms, server.tpot_limit_ms) == (2000.0, 200.0)
    assert server.samples is not None and len(server.samples) == 200
    assert rows["Offline", "performance"].ttft is None
    accuracy = rows["Offline", "accuracy"]
    assert accuracy.accuracy["rouge1"] == 30.5 and accuracy.accuracy_minimums["rouge1"] == pytest.approx(44.4312 * 0.99)
    assert all(r.short and r.tiny and not r.compliant for r in report.tests)
    assert report.round == "v6.0"


def test_the_page_is_self_contained_with_a_row_per_test_and_inline_svg_plots(results: Path):
    page = api.report(results).read_text(encoding="utf-8")
    assert page.count("<tr><td>llama2-70b-99</td>") == 4
    assert "a check of the pipeline, never an MLPerf result" in page  # short and tiny
    # Server: latency CDFs and throughput; Offline: throughput only
    assert len(re.findall(r"<svg\b", page)) == 3
    assert not re.search(r"""(src|href)=["']https?://""", page), "the page must need no network"
    assert "(limit 2000)" in page and "(limit 200)" in page


def faster_copy(results: Path, dest: Path, factor: float) -> Path:
    """Folder B: A's results with Offline performance's tokens/s times `factor` in its cmx_run.json."""
    shutil.copytree(results, dest)
    facts_path = next(dest.rglob("Offline/cmx_run.json"))
    facts = json.loads(facts_path.read_text())
    for run in facts["runs"]:
        if run["mode"] == "performance":
            run["tokens_per_second"] *= factor
    facts_path.write_text(json.dumps(facts))
    return dest


def test_two_folders_compare_metric_by_metric_with_the_ratio(results: Path, tmp_path: Path):
    other = faster_copy(results, tmp_path / "b", 1.25)
    page = api.report(results, tmp_path / "compare.html", other=other).read_text(encoding="utf-8")
    ratios = dict(re.findall(r"<tr><td>llama2-70b-99 (\w+ performance)</td><td>tokens/s</td><td>[^<]*</td>"
                             r"<td>[^<]*</td><td>([^<]*)</td></tr>", page))
    assert ratios == {"Offline performance": "1.250", "Server performance": "1.000"}
    assert "B compared with A" in page and len(re.findall(r"<svg\b", page)) == 7  # 3 + 3 + the bar chart


def test_a_folder_without_results_is_refused_with_what_to_give(tmp_path: Path):
    with pytest.raises(ReportError, match="no benchmark results under") as err:
        collect(tmp_path)
    assert "results_dir" in err.value.hint


def test_the_cli_writes_the_page_and_says_where(results: Path, home: Home, tmp_path: Path):
    out = tmp_path / "page" / "r.html"
    proc = home.cmx("report", str(results), "--out", str(out), "--json", check=True)
    assert json.loads(proc.stdout) == {"report": str(out)} and out.stat().st_size > 10_000
    missing = home.cmx("report", str(tmp_path / "nothing-here"))
    assert missing.returncode != 0 and "is not a folder" in missing.stderr


@pytest.mark.e2e
@pytest.mark.skipif(NO_BROWSER is not None, reason=NO_BROWSER or "")
def test_the_page_renders_in_a_real_browser_with_every_plot_and_no_console_error(results: Path, tmp_path: Path):
    from tests.mlperf.report.tunes import write_tune

    write_tune(tmp_path / "tune", results_dir=results, system="tuned-box")  # a tune's confirm run and probes too
    with opened(api.report(results, tmp_path / "report.html")) as (page, errors):
        tune_plots = page.eval_on_selector_all("section.tune figure svg", "els => els.length")
        sizes = page.eval_on_selector_all(
            "figure svg", "els => els.map(e => [e.getBoundingClientRect().width, "
                          "e.getBoundingClientRect().height, e.querySelectorAll('path, line, text').length])")
        # each latency curve spans a visible part of its axes, whatever its distance to the limit
        spans = page.eval_on_selector_all(
            'g[id^="cdf-"]', "els => els.map(g => [g.getBoundingClientRect().width, g.ownerSVGElement.querySelector("
                             "'g[id=\"axes-' + g.id.slice(4) + '\"]').getBoundingClientRect().width])")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert spans and all(width > 0.15 * axes for width, axes in spans), spans
    assert errors == []
    assert len(sizes) == 6 and tune_plots == 1  # Server: 2, Offline: 1, the tune's confirm run: 2, its probes: 1
    assert all(w > 200 and h > 100 and shapes > 10 for w, h, shapes in sizes), sizes
    assert (tmp_path / "report.png").stat().st_size > 10_000
