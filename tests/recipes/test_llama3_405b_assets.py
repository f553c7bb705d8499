"""get-dataset-llama3-405b and get-ml-model-llama3-405b: the reference's defaults, and the dataset pickle fetched
through its MLCommons R2 metadata from a bucket on 127.0.0.1 (the one .pkl it lists, checked against its md5)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.llama3_1_405b.dataset import load_llama405b
from tests.conftest import REPO, Home
from tests.hf_server import TOKEN, serve
from tests.recipes.test_llama3_assets import Bucket, BucketHandler

RECIPES = ("get-ml-model", "get-dataset", "get-ml-model-llama3-405b", "get-dataset-llama3-405b", "get-ml-model-llama3")
URI = "/metadata/llama3-1-405b-dataset-8313.uri"
BASE = "/llama3.1_405b/datasets"
PKL = "mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl"  # a name for the test bucket only


def default(recipe: str, name: str) -> object:
    return yaml.safe_load((REPO / "recipes" / recipe / "recipe.yaml").read_text())["inputs"][name]["default"]


def test_the_defaults_are_the_references_model_commit_and_dataset() -> None:
    # language/llama3.1-405b/README.md at b66003e: the commit to check out, and the R2 metadata of the eval set
    assert default("get-ml-model-llama3-405b", "repo") == "meta-llama/Llama-3.1-405B-Instruct"
    assert default("get-ml-model-llama3-405b", "revision") == "be673f326cab4cd22ccfef76109faf68e41aa5f1"
    assert default("get-dataset-llama3-405b", "url") == \
        "https://inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.uri"
    assert default("get-dataset-llama3-405b", "sha256") is None  # MLCommons publishes an md5 list only


@pytest.fixture(scope="module")
def tiny_pickle(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    bench = benchmark_for("llama3.1-405b")
    folder = tmp_path_factory.mktemp("served")
    model = bench.make_tiny_model(folder / "model", seed=0)
    return bench.make_tiny_dataset(folder / "d.pkl", model, rows=9, seed=1).read_bytes()


@pytest.fixture
def llama_home(home: Home) -> Home:
    for name in RECIPES:
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return home


def _bucket(files: dict[str, bytes], listing: str) -> Iterator[Bucket]:
    site = Bucket(files={})
    served = serve(site, BucketHandler)
    next(served)
    site.files.update({URI: f"{site.url}{BASE}\n".encode(), URI.replace(".uri", ".md5"): listing.encode(), **files})
    yield site
    next(served, None)


@pytest.mark.e2e  # real cmx processes
def test_the_one_pickle_the_r2_list_holds_is_fetched_checked_and_loaded(llama_home: Home, tiny_pickle: bytes) -> None:
    md5 = hashlib.md5(tiny_pickle).hexdigest()
    for bucket in _bucket({f"{BASE}/{PKL}": tiny_pickle}, f"{md5}  ./{PKL}\n{'0' * 32}  README.md\n"):
        proc = llama_home.cmx("run", "get dataset llama3.1-405b", "--input", f"url={bucket.url}{URI}",
                              "--input", f"token={TOKEN}", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)["outputs"]
        assert out["rows"] == 9 and out["is_tiny"] is False
        path = Path(out["path"])
        assert path.name == PKL and path.read_bytes() == tiny_pickle
        assert load_llama405b(path).metric(1) == "niah_em"
        assert f"{BASE}/{PKL}" in bucket.seen and TOKEN not in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_two_listed_pickles_are_refused_until_one_is_named(llama_home: Home, tiny_pickle: bytes) -> None:
    md5 = hashlib.md5(tiny_pickle).hexdigest()
    listing = f"{md5}  ./{PKL}\n{md5}  ./other.pkl\n"
    for bucket in _bucket({f"{BASE}/{PKL}": tiny_pickle, f"{BASE}/other.pkl": tiny_pickle}, listing):
        proc = llama_home.cmx("run", "get dataset llama3.1-405b", "--input", f"url={bucket.url}{URI}",
                              "--input", f"token={TOKEN}")
        assert proc.returncode == 1 and "lists 2 .pkl files" in proc.stderr and "Traceback" not in proc.stderr
        named = llama_home.cmx_json("run", "get dataset llama3.1-405b", "--input", f"url={bucket.url}{URI}",
                                    "--input", f"token={TOKEN}", "--input", "filename=other.pkl")
        assert named["outputs"]["rows"] == 9


@pytest.mark.e2e
def test_the_tiny_model_and_dataset_build_through_the_cli(llama_home: Home) -> None:
    out = llama_home.cmx_json("run", "get dataset llama3.1-405b _tiny", "--input", "rows=6")["outputs"]
    data = load_llama405b(out["path"])
    assert out["is_tiny"] is True and len(data) == 6
    assert [data.metric(i) for i in range(3)] == ["rouge", "niah_em", "qa_em"]
