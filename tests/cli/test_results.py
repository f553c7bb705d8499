"""`cmx results` as a user runs it: a real process, the real recipe, a summary served on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.published_tables import raw_path, raw_server, write_summary
from tests.submission_trees import cmx_results


@pytest.fixture
def served(home, tmp_path: Path):
    """The home with the real get-mlperf-results, and the generated v6.1 table served at its pinned commit."""
    shutil.copytree(REPO / "recipes" / "get-mlperf-results", home.recipes / "get-mlperf-results")
    table = write_summary(tmp_path / "summary.json")
    with raw_server({raw_path(): table.read_bytes()}) as site:
        yield home, site.url


def test_the_mi355x_offline_rows_are_listed_with_their_per_accelerator_figures(served) -> None:
    home, url = served
    proc = home.cmx("results", "--round", "v6.1", "--benchmark", "llama2-70b-99.9", "--scenario", "Offline",
                    "--accelerator", "MI355X", "--mirror", url, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("MLPerf Inference v6.1 published results (summary.json at e777c7be4514")
    body = [line for line in lines if line.startswith("llama2-70b-99.9")]
    # best per accelerator first: 106,517 / 8, 900,000 / 72, 50,000 / 4, 98,000 / 8
    assert [line.split()[-1] for line in body] == ["13,315", "12,500", "12,500", "12,250"]
    assert "8x AMD Instinct MI355X 288GB HBM3e" in body[0] and "106,517 Tokens/s" in body[0]
    assert "72x AMD Instinct MI355X" in body[1] and "mxfp4" in body[1]
    assert not any("H200" in line or "Server" in line for line in body)
    assert "was not checked against a pinned one" in proc.stderr


def test_inferred_rows_are_marked(served) -> None:
    home, url = served
    out = home.cmx("results", "--benchmark", "llama2-70b-99.9", "--scenario", "Interactive", "--mirror", url,
                   check=True).stdout
    (row,) = [line for line in out.splitlines() if line.startswith("llama2-70b-99.9")]
    assert "73,192 Tokens/s*" in row
    assert "* inferred from another scenario's run" in out


def test_json_gives_every_row_with_its_per_accelerator_figure_and_cost(served) -> None:
    home, url = served
    found = home.cmx_json("results", "--benchmark", "llama2-70b-99.9", "--scenario", "Offline", "--accelerator",
                          "H200", "--mirror", url, "--price-per-accelerator-hour", "3.6")
    assert [(r["organization"], r["accelerator"], r["per_device"]) for r in found["rows"]] == \
        [("Krai", "NVIDIA H200-SXM-141GB", 4250.0), ("Lambda", "H200", 4000.0)]
    assert found["rows"][1]["cost"] == {"amount": pytest.approx(0.25), "per": 1_000_000, "unit": "tokens"}
    assert found["source"]["commit"] == "e777c7be4514bc1e28f657ad7c30167167fb7c41"
    assert found["price_per_accelerator_hour"] == 3.6


def test_compare_ranks_a_results_folder_among_the_same_accelerator(served, tmp_path: Path) -> None:
    home, url = served
    results = cmx_results(tmp_path / "results", scenarios=("Offline",), benchmark="llama2-70b-99.9")
    out = home.cmx("results", "--compare", str(results), "--mirror", url, "--price-per-accelerator-hour", "2",
                   check=True).stdout
    assert "llama2-70b-99.9 Offline on 8x AMD Instinct MI300X: 125 Tokens/s per accelerator, VALID" in out
    assert "rank 2 of 2 among the published AMD Instinct MI300X rows of llama2-70b-99.9 Offline" in out
    assert "the run: 4.44 per million tokens" in out  # 2 / (125 x 3600) x 1e6


def test_compare_says_when_no_published_row_is_of_the_runs_kind(served, tmp_path: Path) -> None:
    home, url = served
    results = cmx_results(tmp_path / "results", scenarios=("Server",), benchmark="llama2-70b-99.9")
    out = home.cmx("results", "--compare", str(results), "--mirror", url, check=True).stdout
    assert "no published AMD Instinct MI300X rows of llama2-70b-99.9 Server in v6.1 to rank it among" in out


def test_a_local_summary_needs_no_server_and_users_without_a_price_are_refused(home, tmp_path: Path) -> None:
    shutil.copytree(REPO / "recipes" / "get-mlperf-results", home.recipes / "get-mlperf-results")
    table = write_summary(tmp_path / "summary.csv")
    found = home.cmx_json("results", "--summary", str(table), "--accelerator", "cpu")
    assert {r["organization"] for r in found["rows"]} == {"Intel"}
    assert json.dumps(found)
    proc = home.cmx("results", "--summary", str(table), "--users", "10")
    assert proc.returncode == 1
    assert "--users and --tokens-per-user are priced at --price-per-accelerator-hour" in proc.stderr
    assert "hint: add --price-per-accelerator-hour P" in proc.stderr
