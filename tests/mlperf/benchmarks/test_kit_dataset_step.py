"""cmx.mlperf.benchmarks.kit.dataset_step: what every get-dataset recipe's step does, on a real StepContext, with
llama3.1-405b's and llama3.1-8b's formats and files served as file:// URLs."""

from __future__ import annotations

import gzip
import hashlib
import logging
from pathlib import Path

import pytest

from cmx.errors import CmxError, StepError
from cmx.execute.context import DepView, StepContext, StepLog
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step

FAMILY = "llama3.1-405b"  # 8313 samples, a pickle, default_name llama3.1-405b-dataset.pkl


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return benchmark_for("llama3.1-8b").make_tiny_model(tmp_path_factory.mktemp("model") / "m", 0)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tokenizer: Path) -> Path:
    """A 5-row llama3.1-405b pickle, as a server would hold it."""
    return benchmark_for(FAMILY).make_tiny_dataset(tmp_path_factory.mktemp("site") / "eval.pkl", tokenizer, 5, 1)


def step(tmp_path: Path, tokenizer: Path, size: str, **inputs: object) -> StepContext:
    given: dict[str, object] = {"url": None, "sha256": None, "filename": None, "token": None, "retries": 1,
                                "rows": None, "seed": None, **inputs}
    (tmp_path / "work").mkdir(parents=True, exist_ok=True)
    return StepContext(step_id="get-dataset", recipe="get-dataset-test", inputs=given, context={},
                       deps={"model": DepView({"tokenizer_path": str(tokenizer)}, "key", "model")},
                       workdir=tmp_path / "work", log=StepLog(tmp_path / "step.log", "get-dataset", []),
                       variations=(size,), scratch=tmp_path / "scratch", chosen={"size": size})


def logged(tmp_path: Path) -> str:
    return (tmp_path / "step.log").read_text(encoding="utf-8")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_tiny_set_is_the_benchmarks_own_under_the_default_name_and_says_its_scores_mean_nothing(
        tmp_path: Path, tokenizer: Path, served: Path) -> None:
    out = dataset_step(step(tmp_path, tokenizer, "tiny", rows=5, seed=1), FAMILY)
    assert out == {"path": tmp_path / "work" / "llama3.1-405b-dataset.pkl", "rows": 5, "is_tiny": True}
    assert sha256(out["path"]) == sha256(served)  # type: ignore[arg-type]  # the step's outputs are objects
    assert "generated 5 llama3.1-405b-format samples (seed 1)" in logged(tmp_path)
    assert "mean nothing" in logged(tmp_path)


def test_a_download_is_checked_against_its_sha256_and_its_count(tmp_path: Path, tokenizer: Path,
                                                                served: Path) -> None:
    ctx = step(tmp_path, tokenizer, "full", url=served.as_uri(), sha256=sha256(served), filename="eval.pkl")
    out = dataset_step(ctx, FAMILY)
    assert out == {"path": tmp_path / "work" / "eval.pkl", "rows": 5, "is_tiny": False}
    assert f"eval.pkl: sha256 {sha256(served)} verified" in logged(tmp_path)
    assert "eval.pkl has 5 samples, not the 8313 of the official dataset" in logged(tmp_path)


def test_a_gzip_is_decompressed_and_the_sha256_is_the_decompressed_files(tmp_path: Path, tokenizer: Path,
                                                                         served: Path) -> None:
    gz = tmp_path / "eval.pkl.gz"
    gz.write_bytes(gzip.compress(served.read_bytes()))
    out = dataset_step(step(tmp_path, tokenizer, "full", url=gz.as_uri(), sha256="none"), FAMILY)
    assert out["path"] == tmp_path / "work" / "llama3.1-405b-dataset.pkl" and out["rows"] == 5
    assert sha256(out["path"]) == sha256(served)  # type: ignore[arg-type]  # the step's outputs are objects
    assert f"not verified (none given; MLCommons publishes none for most datasets); pin it with --input " \
           f"sha256={sha256(served)}" in logged(tmp_path)
    assert not list((tmp_path / "scratch").glob("*.gz"))
    with pytest.raises(CmxError, match="sha256"):
        dataset_step(step(tmp_path / "again", tokenizer, "full", url=gz.as_uri(), sha256="0" * 64), FAMILY)


def test_tiny_inputs_and_path_like_names_are_refused_before_any_download(tmp_path: Path, tokenizer: Path) -> None:
    with pytest.raises(StepError, match="rows, seed apply to the tiny dataset only: the real one has its 8313"):
        dataset_step(step(tmp_path, tokenizer, "full", url="file:///nowhere.pkl", rows=3, seed=1), FAMILY)
    for name in ("../up.pkl", "a/b.pkl", "", ".."):
        with pytest.raises(StepError, match="is not a plain file name"):
            dataset_step(step(tmp_path, tokenizer, "tiny", filename=name), FAMILY)


def test_a_url_with_no_name_to_save_it_under_is_refused(tmp_path: Path, tokenizer: Path, served: Path) -> None:
    with pytest.raises(StepError, match="no file name to save"):  # llama3.1-8b's file has no default name
        dataset_step(step(tmp_path, tokenizer, "full", url=served.as_uri()), "llama3.1-8b")


def test_a_download_that_is_not_the_dataset_fails_the_benchmarks_own_check(tmp_path: Path, tokenizer: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("not a pickle")
    with pytest.raises(DatasetError, match="is not a pandas pickle"):
        dataset_step(step(tmp_path, tokenizer, "full", url=other.as_uri(), filename="eval.pkl"), FAMILY)


def test_every_benchmark_states_its_dataset_facts() -> None:
    from cmx.mlperf.benchmarks import all_benchmarks

    for bench in all_benchmarks():
        facts = bench.dataset_facts()
        assert facts.samples > 0 and (facts.default_name is None or "/" not in facts.default_name), bench.family
    logging.getLogger(__name__).debug("checked %d benchmarks", len(all_benchmarks()))


def test_a_hub_dataset_is_downloaded_at_its_commit_each_file_checked_then_read(tmp_path: Path) -> None:
    from cmx.mlperf.benchmarks.qwen3_vl.tiny import make_tiny_catalogue
    from cmx.secrets import Secret
    from tests.hf_server import COMMIT, TOKEN, HubSite, serve

    made = make_tiny_catalogue(tmp_path / "made", rows=6)
    files = {str(p.relative_to(made.path)): p.read_bytes() for p in sorted(made.path.rglob("*.parquet"))}
    files["README.md"] = b"# a catalogue\n"
    site_files = serve(HubSite(files=files, lfs=set(files) - {"README.md"}, repo="datasets/Shopify/product-catalogue"))
    site = next(site_files)
    try:
        ctx = step(tmp_path / "full", tmp_path, "full", repo="datasets/Shopify/product-catalogue", revision=COMMIT,
                   endpoint=site.url, token=Secret(TOKEN), include=None)
        out = dataset_step(ctx, "qwen3-vl-235b-a22b")
    finally:
        site_files.close()
    folder = tmp_path / "full" / "work" / "product-catalogue"
    assert out == {"path": folder, "rows": 6, "is_tiny": False}
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == set(files)
    assert all(path.startswith("/api/datasets/") or "/resolve/" in path
               for path in site.requests_for("/")), site.requests_for("/")
    assert "has 6 samples, not the 48289 of the official dataset" in logged(tmp_path / "full")
