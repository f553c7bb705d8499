"""`cmx report` places each performance test among the published results of its benchmark and scenario: the strip
chart with the run's accelerator highlighted and the run marked, rank and ratios, what differs, the cost line."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from cmx.mlperf.published.answer import CostAsk, Source, Yardstick
from cmx.mlperf.report.page import write_report
from cmx.mlperf.report.plots import PEER_COLOUR, RUN_COLOUR
from tests.browser import NO_BROWSER, opened
from tests.conftest import REPO
from tests.published_tables import COMMIT, raw_path, raw_server, row, rows, sha256, write_summary
from tests.submission_trees import cmx_results


def mi300x_results(tmp_path: Path, scenario: str = "Offline") -> Path:
    """A llama2-70b-99.9 run on 8 MI300X at 16,000 tokens/s (2,000 per GPU), bf16, vLLM 0.9.2."""
    root = cmx_results(tmp_path / "results", scenarios=(scenario,), benchmark="llama2-70b-99.9")
    record = root / "box" / "llama2-70b-99" / scenario / "cmx_run.json"
    facts = json.loads(record.read_text())
    for run in facts["runs"]:
        run["tokens_per_second"] = 16000.0
    record.write_text(json.dumps(facts))
    return root


def table(tmp_path: Path) -> Path:
    """rows() (Dell's MI300X: 3,000 per GPU) and two more MI300X rows (2,500 and 2,000 per GPU)."""
    return write_summary(tmp_path / "summary.json", [
        *rows(),
        row("Supermicro", "AS-8125GS", "llama2-70b-99.9", "Offline", 20000.0, "MI300X", 8, precision="bf16",
            framework="vLLM 0.9.2, ROCm 6.4"),
        row("Quanta", "2-node MI300X", "llama2-70b-99.9", "Offline", 32000.0, "AMD Instinct MI300X", 8, nodes=2,
            precision="fp8"),
    ])


def published_section(page: str) -> str:
    match = re.search(r'<section class="published">.*?</section>', page, re.S)
    assert match, "the page has no published section"
    return match.group()


def test_the_run_is_placed_among_the_published_results_with_its_rank_chart_and_cost(tmp_path: Path) -> None:
    yardstick = Yardstick.read(Source(path=table(tmp_path), round="v6.1"), CostAsk(2.0, 100, 50.0))
    page = write_report(mi300x_results(tmp_path), tmp_path / "report.html", published=yardstick).read_text()
    section = published_section(page)
    assert "Among the published results (v6.1)" in section
    assert "llama2-70b-99.9 Offline: 2,000 Tokens/s per accelerator on 8x AMD Instinct MI300X" in section
    assert ("rank 3 of 4 among the published AMD Instinct MI300X rows of llama2-70b-99.9 Offline; 67% of the best "
            "(3,000), 80% of the median (2,500)") in section
    assert "this run: 0.278 per million tokens" in section  # 2 / (2,000 x 3600) x 1e6
    assert "this run: 100 users at 50 tokens/s each need 3 accelerator(s): 6.00 an hour" in section
    assert "precision fp8 (the run: bf16)" in section and "2 nodes (the run: 1)" in section
    chart = re.search(r'<figure class="published-chart">(<svg.*?</svg>)', section, re.S)
    assert chart, "no chart"
    svg = chart.group(1)
    assert RUN_COLOUR in svg and PEER_COLOUR in svg  # the run's star, its accelerator's rows highlighted
    # the rows around the run: Dell and Supermicro above it, Quanta (as fast per GPU) below
    order = re.findall(r"<td[^>]*>(Dell|Supermicro|this run|Quanta)</td>", section)
    assert order == ["Dell", "Supermicro", "this run", "Quanta"]


def test_without_a_price_there_is_no_cost_line_and_without_peers_the_page_says_so(tmp_path: Path) -> None:
    no_mi300x = [r for r in rows() if "MI300X" not in str(r["accelerator_model_name"])]
    yardstick = Yardstick.read(Source(path=write_summary(tmp_path / "summary.json", no_mi300x), round="v6.1"))
    section = published_section(write_report(mi300x_results(tmp_path), tmp_path / "report.html",
                                             published=yardstick).read_text())
    assert "no published AMD Instinct MI300X rows of llama2-70b-99.9 Offline in v6.1 to rank it among" in section
    assert "per million tokens" not in section
    assert '<figure class="published-chart"><svg' in section  # the others' results, and the run alone on its strip


def test_a_report_not_asked_for_published_results_has_no_such_section(tmp_path: Path) -> None:
    page = write_report(mi300x_results(tmp_path), tmp_path / "report.html").read_text()
    assert 'class="published"' not in page


def test_cmx_report_with_a_price_shows_the_published_chart_and_the_cost_line(home, tmp_path: Path) -> None:
    shutil.copytree(REPO / "recipes" / "get-mlperf-results", home.recipes / "get-mlperf-results")
    results = mi300x_results(tmp_path)
    proc = home.cmx("report", str(results), "--summary", str(table(tmp_path)), "--price-per-accelerator-hour", "2",
                    check=True)
    page = Path(proc.stdout.split("report: ", 1)[1].strip()).read_text()
    section = published_section(page)
    assert "this run: 0.278 per million tokens" in section and '<figure class="published-chart"><svg' in section


@pytest.mark.skipif(NO_BROWSER is not None, reason=NO_BROWSER or "")
def test_the_published_chart_renders_in_a_real_browser_with_the_run_highlighted(tmp_path: Path) -> None:
    yardstick = Yardstick.read(Source(path=table(tmp_path), round="v6.1"), CostAsk(2.0))
    page = write_report(mi300x_results(tmp_path), tmp_path / "report.html", published=yardstick)
    with opened(page) as (browser_page, errors):
        chart = browser_page.locator("figure.published-chart svg")
        assert chart.count() == 1
        box = chart.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        assert browser_page.locator("figure.published-chart svg path").count() > 10  # points drawn, not an empty frame
        assert browser_page.locator("td.ok", has_text="this run").count() == 1
        browser_page.locator("section.published").screenshot(path=str(tmp_path / "published.png"))
    assert errors == []


@pytest.fixture
def cached(home, tmp_path: Path):
    """The home with the real get-mlperf-results and the generated v6.1 table fetched once into its cache (as
    `cmx results --round v6.1` leaves it), and a mirror that serves nothing and records what it was asked: every
    report below is told to fetch from it, so a request would show."""
    shutil.copytree(REPO / "recipes" / "get-mlperf-results", home.recipes / "get-mlperf-results")
    with raw_server({raw_path(): table(tmp_path).read_bytes()}) as site:
        home.cmx("results", "--round", "v6.1", "--mirror", site.url, check=True)
    with raw_server({}) as empty:
        yield home, empty


def test_a_cached_table_is_every_reports_yardstick_and_nothing_is_fetched(cached, tmp_path: Path) -> None:
    home, mirror = cached
    proc = home.cmx("report", str(mi300x_results(tmp_path)), "--mirror", mirror.url, check=True)
    section = published_section(Path(proc.stdout.split("report: ", 1)[1].strip()).read_text())
    said = (f"published results: MLPerf Inference v6.1's table (summary.json at commit {COMMIT[:12]}, sha256 "
            f"{sha256(table(tmp_path))[:12]}, not verified)")
    assert html.escape(said) in section and said in proc.stderr
    assert "rank 3 of 4 among the published AMD Instinct MI300X rows" in section
    assert "per million tokens" not in section  # no price given
    assert mirror.seen == []


def test_an_uncached_table_is_not_fetched_and_the_report_says_how_to_add_it(home, tmp_path: Path) -> None:
    shutil.copytree(REPO / "recipes" / "get-mlperf-results", home.recipes / "get-mlperf-results")
    results = mi300x_results(tmp_path)
    with raw_server({raw_path(): table(tmp_path).read_bytes()}) as mirror:
        proc = home.cmx("report", str(results), "--mirror", mirror.url, check=True)
    page = Path(proc.stdout.split("report: ", 1)[1].strip()).read_text()
    hint = (f"published results: MLPerf Inference v6.1's table is not in the cmx cache, so none is shown; add it "
            f"with `cmx results --round v6.1` once, or `cmx report {results} --published`")
    assert hint in proc.stderr and html.escape(hint) in page
    assert 'class="published"' not in page
    assert mirror.seen == []
    assert not list((home.root / "cache").glob("get-mlperf-results*"))


def test_no_published_leaves_a_cached_table_out(cached, tmp_path: Path) -> None:
    home, mirror = cached
    proc = home.cmx("report", str(mi300x_results(tmp_path)), "--no-published", check=True)
    page = Path(proc.stdout.split("report: ", 1)[1].strip()).read_text()
    assert "published results" not in page and "published results" not in proc.stderr
    assert mirror.seen == []
    refused = home.cmx("report", str(mi300x_results(tmp_path)), "--no-published", "--price-per-accelerator-hour", "2")
    assert refused.returncode == 1 and "which --no-published leaves out" in refused.stderr


@pytest.mark.skipif(NO_BROWSER is not None, reason=NO_BROWSER or "")
@pytest.mark.parametrize("price", [None, 2.0])
def test_the_cached_tables_page_has_no_console_error_with_a_price_or_without(price: float | None,
                                                                             tmp_path: Path) -> None:
    summary = table(tmp_path)
    source = Source(path=summary, round="v6.1", commit=COMMIT, sha256=sha256(summary))
    page = write_report(mi300x_results(tmp_path), tmp_path / "report.html",
                        published=Yardstick.read(source, CostAsk(price) if price else None))
    with opened(page) as (browser_page, errors):
        assert browser_page.locator("p.published-source").count() == 1
        assert browser_page.locator("figure.published-chart svg").count() == 1
        assert browser_page.locator("p.cost").count() == (1 if price else 0)
    assert errors == []
