"""get-dataset-mixtral-8x7b and get-ml-model-mixtral-8x7b: the reference's defaults, the dataset pickle fetched
through its
MLCommons R2 metadata from a bucket on 127.0.0.1, the model from a Hub on 127.0.0.1, your own folder, and _tiny."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import load_mixtral
from tests.conftest import CMX, REPO, Home
from tests.hf_server import COMMIT, REPO_ID, TOKEN, HubSite, serve
from tests.recipes.test_llama3_assets import Bucket, BucketHandler

RECIPES = ("get-ml-model", "get-dataset", "get-ml-model-mixtral-8x7b", "get-dataset-mixtral-8x7b",
           "get-ml-model-llama2")
URI = "/metadata/mixtral-8x7b-validation-dataset.uri"
BASE = "/mixtral_8x7b"
PKL = "09292024_mixtral_15k_mintoken2_v1.pkl"


def default(recipe: str, name: str) -> object:
    return yaml.safe_load((REPO / "recipes" / recipe / "recipe.yaml").read_text())["inputs"][name]["default"]


def test_the_defaults_are_the_references_model_commit_and_dataset() -> None:
    # language/mixtral-8x7b/README.md at b66003e: the commit the model must match, and the R2 metadata of the eval set
    assert default("get-ml-model-mixtral-8x7b", "repo") == "mistralai/Mixtral-8x7B-Instruct-v0.1"
    assert default("get-ml-model-mixtral-8x7b", "revision") == "a60832cb6c88d5cb6e507680d0e9996fbad77050"
    assert default("get-dataset-mixtral-8x7b", "url") == \
        "https://inference.mlcommons-storage.org/metadata/mixtral-8x7b-validation-dataset.uri"
    assert default("get-dataset-mixtral-8x7b", "sha256") is None  # MLCommons publishes an md5 list only


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    bench = benchmark_for("mixtral-8x7b")
    folder = tmp_path_factory.mktemp("served")
    model = bench.make_tiny_model(folder / "model", seed=0)
    return model, bench.make_tiny_dataset(folder / "d.pkl", model, rows=9, seed=1).read_bytes()


@pytest.fixture
def mixtral_home(home: Home) -> Home:
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
def test_the_pickle_the_r2_list_holds_is_fetched_checked_and_loaded(mixtral_home: Home, tiny) -> None:
    _, pickle = tiny
    md5 = hashlib.md5(pickle).hexdigest()
    for bucket in _bucket({f"{BASE}/{PKL}": pickle}, f"{md5}  ./{PKL}\n"):
        proc = mixtral_home.cmx("run", "get dataset mixtral-8x7b", "--input", f"url={bucket.url}{URI}",
                                "--input", f"token={TOKEN}", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)["outputs"]
        assert out["rows"] == 9 and out["is_tiny"] is False
        path = Path(out["path"])
        assert path.name == PKL and path.read_bytes() == pickle
        assert load_mixtral(path).subset(2) == "MBXP"
        assert TOKEN not in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_a_pickle_that_fails_the_listed_md5_leaves_no_entry(mixtral_home: Home, tiny) -> None:
    _, pickle = tiny
    for bucket in _bucket({f"{BASE}/{PKL}": pickle}, f"{'0' * 32}  ./{PKL}\n"):
        proc = mixtral_home.cmx("run", "get dataset mixtral-8x7b", "--input", f"url={bucket.url}{URI}",
                                "--input", f"token={TOKEN}")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "md5 mismatch for" in proc.stderr, proc.stderr
        assert not list((mixtral_home.root / "cache").glob("get-dataset-mixtral-8x7b/*/meta.json"))


@pytest.fixture
def hub(tiny) -> Iterator[HubSite]:
    model, _ = tiny
    files = {p.name: p.read_bytes() for p in sorted(model.iterdir()) if p.is_file()}
    files.update({".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
                  "consolidated.00.pt": b"Mistral's own checkpoint, which must not be downloaded"})
    yield from serve(HubSite(files=files, lfs={"model.safetensors", "consolidated.00.pt"}))


def run_hub(home: Home, hub: HubSite, *args: str) -> subprocess.CompletedProcess:
    env = {**home.env, "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN}
    # the test Hub serves one repository at one commit; the recipe's defaults are checked above
    return subprocess.run([*CMX, "run", "get ml-model mixtral-8x7b", "--input", f"repo={REPO_ID}", "--input",
                           f"revision={COMMIT}", *args], env=env, cwd=home.root, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.e2e  # real cmx processes
def test_the_model_is_downloaded_at_the_commit_and_described(mixtral_home: Home, hub: HubSite) -> None:
    proc = run_hub(mixtral_home, hub, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert (out["name"], out["revision"], out["dtype"], out["eos_token_id"], out["architecture"], out["is_tiny"]) == \
        (REPO_ID, COMMIT, "bfloat16", 2, "MixtralForCausalLM", False)
    assert not (folder / "consolidated.00.pt").exists() and (folder / "model.safetensors").is_file()
    assert all(s.authorization == f"Bearer {TOKEN}" for s in hub.seen) and TOKEN not in proc.stdout + proc.stderr
    refused = run_hub(mixtral_home, hub, "--input", "include=config.json *.safetensors")
    assert refused.returncode == 1 and "has no tokenizer" in refused.stderr


@pytest.mark.e2e
def test_your_own_folder_is_used_in_place_and_tiny_builds_through_the_cli(mixtral_home: Home, tiny,
                                                                         tmp_path: Path) -> None:
    mine = tmp_path / "my-mixtral"
    shutil.copytree(tiny[0], mine)
    out = mixtral_home.cmx_json("run", "get ml-model mixtral-8x7b", "--input", f"model_path={mine}")["outputs"]
    assert (out["path"], out["name"], out["revision"]) == (str(mine), "my-mixtral", "")
    built = mixtral_home.cmx_json("run", "get dataset mixtral-8x7b _tiny", "--input", "rows=6")["outputs"]
    data = load_mixtral(built["path"])
    assert built["is_tiny"] is True and [data.subset(i) for i in range(3)] == ["OpenOrca", "GSM8K", "MBXP"]
    proc = mixtral_home.cmx("run", "get ml-model mixtral-8x7b", "--input", "layers=3")
    assert proc.returncode == 1 and "layers applies to the tiny model only" in proc.stderr
