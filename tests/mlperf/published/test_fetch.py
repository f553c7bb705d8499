"""get-mlperf-results fetches a round's table at a pinned commit from a server on 127.0.0.1 serving GitHub's raw
layout (a mirror), checks it, caches it, and takes a local copy instead."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cmx.mlperf.published.fetch import summary_url
from cmx.mlperf.published.table import PublishedResultsError
from tests.conftest import REPO
from tests.published_tables import COMMIT, raw_path, raw_server, rows, sha256, write_summary


@pytest.fixture
def recipe_home(home):
    """The home with the real get-mlperf-results as its one recipe (others' recipes play no part)."""
    shutil.copytree(REPO / "recipes" / "get-mlperf-results", home.recipes / "get-mlperf-results")
    return home


def test_the_url_is_githubs_raw_file_at_the_commit() -> None:
    assert summary_url("https://raw.githubusercontent.com/", "v6.1", COMMIT, "summary.json") == \
        f"https://raw.githubusercontent.com/mlcommons/inference_results_v6.1/{COMMIT}/summary.json"


def test_no_commit_or_a_branch_is_refused_with_what_to_give() -> None:
    with pytest.raises(PublishedResultsError, match=r"no commit of mlcommons/inference_results_v6\.0 is pinned") as err:
        summary_url("https://raw.githubusercontent.com", "v6.0", None, "summary.json")
    assert "--input commit=SHA" in (err.value.hint or "")
    with pytest.raises(PublishedResultsError, match="'main' is not a full commit"):
        summary_url("https://raw.githubusercontent.com", "v6.1", "main", "summary.json")


def test_the_table_is_fetched_at_the_pinned_commit_verified_and_then_cached(recipe_home, tmp_path: Path) -> None:
    table = write_summary(tmp_path / "summary.json")
    with raw_server({raw_path(): table.read_bytes()}) as site:
        args = ("run", "get mlperf-results", "--input", f"base_url={site.url}", "--input", f"sha256={sha256(table)}")
        first = recipe_home.cmx_json(*args)
        again = recipe_home.cmx_json(*args)
    out = first["outputs"]
    assert site.seen == [raw_path()]  # once: the second run is answered from the cache
    assert (out["round"], out["commit"], out["rows"], out["verified"]) == ("v6.1", COMMIT, len(rows()), True)
    assert out["url"] == f"{site.url}{raw_path()}"
    assert Path(out["path"]).read_bytes() == table.read_bytes()
    assert again["outputs"]["path"] == out["path"]


def test_a_table_that_is_not_the_pinned_one_is_refused(recipe_home, tmp_path: Path) -> None:
    table = write_summary(tmp_path / "summary.json")
    with raw_server({raw_path(): table.read_bytes()}) as site:
        proc = recipe_home.cmx("run", "get mlperf-results", "--input", f"base_url={site.url}",
                               "--input", f"sha256={'0' * 64}")
    assert proc.returncode != 0
    assert sha256(table) in proc.stderr and "0" * 64 in proc.stderr


def test_without_a_sha256_the_table_is_fetched_and_says_it_is_not_verified(recipe_home, tmp_path: Path) -> None:
    table = write_summary(tmp_path / "summary.json")
    with raw_server({raw_path(): table.read_bytes()}) as site:
        result = recipe_home.cmx_json("run", "get mlperf-results", "--input", f"base_url={site.url}")
    assert (result["outputs"]["verified"], result["outputs"]["sha256"]) == (False, sha256(table))
    (log,) = [s["log"] for s in result["steps"].values()]
    assert f"not verified (no sha256 given); pin it with --input sha256={sha256(table)}" in Path(log).read_text()


def test_a_round_without_a_pinned_commit_says_to_give_one(recipe_home) -> None:
    proc = recipe_home.cmx("run", "get mlperf-results _v6.0")
    assert proc.returncode != 0
    assert "no commit of mlcommons/inference_results_v6.0 is pinned for round v6.0" in proc.stderr
    assert "--input commit=SHA" in proc.stderr


def test_a_missing_file_on_the_mirror_fails_naming_the_url(recipe_home) -> None:
    with raw_server({}) as site:
        proc = recipe_home.cmx("run", "get mlperf-results", "--input", f"base_url={site.url}")
    assert proc.returncode != 0 and "404" in proc.stderr and raw_path() in proc.stderr


def test_a_local_copy_is_used_without_any_request(recipe_home, tmp_path: Path) -> None:
    table = write_summary(tmp_path / "copy" / "summary.csv")
    with raw_server({}) as site:
        result = recipe_home.cmx_json("run", "get mlperf-results", "--input", f"base_url={site.url}",
                                      "--input", f"summary={table}", "--input", f"sha256={sha256(table)}")
    assert site.seen == []
    out = result["outputs"]
    assert (out["commit"], out["rows"], out["verified"], Path(out["path"]).name) == ("", len(rows()), True,
                                                                                    "summary.csv")
    assert json.dumps(out)
