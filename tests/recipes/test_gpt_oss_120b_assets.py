"""get-dataset-gpt-oss-120b and get-ml-model-gpt-oss-120b: the reference's defaults, every file of the R2 dataset
fetched
from a bucket on 127.0.0.1 and md5-checked, the weights from a Hub on 127.0.0.1, and the tiny ones through the CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import load_set
from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import make_tiny_gpt_oss, make_tiny_sets
from tests.conftest import REPO, Home
from tests.hf_server import COMMIT, REPO_ID, TOKEN, HubSite, serve
from tests.recipes.test_llama3_assets import Bucket, BucketHandler

RECIPES = ("get-ml-model", "get-dataset", "get-ml-model-gpt-oss-120b", "get-dataset-gpt-oss-120b")
URI = "/metadata/gpt-oss-data.uri"
BASE = "/gpt-oss/data"  # a layout for the test bucket only
SETS = ("perf/perf_eval_ref.pkl", "acc/acc_eval_ref.pkl", "acc/acc_eval_compliance_gpqa.pkl")


def default(recipe: str, name: str) -> object:
    return yaml.safe_load((REPO / "recipes" / recipe / "recipe.yaml").read_text())["inputs"][name]["default"]


def test_the_defaults_are_the_references_model_commit_and_dataset() -> None:
    # language/gpt-oss-120b/README.md at b66003e; mlperf-automations' get-dataset-mlperf-inference-gpt-oss
    assert default("get-ml-model-gpt-oss-120b", "repo") == "openai/gpt-oss-120b"
    assert default("get-ml-model-gpt-oss-120b", "revision") == "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"
    assert default("get-dataset-gpt-oss-120b", "url") == "https://inference.mlcommons-storage.org/metadata/gpt-oss-data.uri"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("served")
    model = make_tiny_gpt_oss(folder / "model", seed=0)
    return model.path, make_tiny_sets(folder / "data", model.path, rows=5, seed=1)


@pytest.fixture
def oss_home(home: Home) -> Home:
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
def test_every_listed_file_is_fetched_md5_checked_and_each_set_loads(oss_home: Home, made: tuple[Path, Path]) -> None:
    _, data = made
    blobs = {name: (data / name).read_bytes() for name in SETS}
    listing = "".join(f"{hashlib.md5(b).hexdigest()}  ./{name}\n" for name, b in blobs.items())
    for bucket in _bucket({f"{BASE}/{n}": b for n, b in blobs.items()}, listing):
        proc = oss_home.cmx("run", "get dataset gpt-oss-120b", "--input", f"url={bucket.url}{URI}",
                            "--input", f"token={TOKEN}", "--input", f"lcb_path={data / 'livecodebench'}", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)["outputs"]
        assert (out["rows"], out["performance_rows"], out["is_tiny"]) == (5, 5, False)
        folder = Path(out["path"])
        assert all((folder / name).read_bytes() == blobs[name] for name in SETS)
        assert load_set(folder, "test07").dataset(0) == "gpqa_diamond"
        assert (folder / "livecodebench" / "test6.jsonl").is_file()
        assert all(f"{BASE}/{n}" in bucket.seen for n in SETS) and TOKEN not in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_a_file_that_fails_its_md5_is_refused(oss_home: Home, made: tuple[Path, Path]) -> None:
    _, data = made
    blobs = {name: (data / name).read_bytes() for name in SETS}
    listing = "".join(f"{'0' * 32}  ./{name}\n" for name in SETS)
    for bucket in _bucket({f"{BASE}/{n}": b for n, b in blobs.items()}, listing):
        proc = oss_home.cmx("run", "get dataset gpt-oss-120b", "--input", f"url={bucket.url}{URI}",
                            "--input", f"token={TOKEN}")
        assert proc.returncode == 1 and "md5 mismatch" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture
def hub(made: tuple[Path, Path]) -> Iterator[HubSite]:
    model, _ = made
    files = {p.name: p.read_bytes() for p in model.iterdir()}
    files[".gitattributes"] = b"*.safetensors filter=lfs\n"
    yield from serve(HubSite(files=files, lfs={"model.safetensors"}))


@pytest.mark.e2e
def test_the_weights_are_downloaded_at_a_commit_with_the_token(oss_home: Home, hub: HubSite) -> None:
    import subprocess

    from tests.conftest import CMX

    env = {**oss_home.env, "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN}
    # the test Hub serves one repository at one commit: ask for that one
    proc = subprocess.run([*CMX, "run", "get ml-model gpt-oss-120b", "--input", f"repo={REPO_ID}",
                           "--input", f"revision={COMMIT}", "--json"], env=env, cwd=oss_home.root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    assert (out["revision"], out["precision"], out["is_tiny"], out["architecture"]) == (
        COMMIT, "bf16", False, "GptOssForCausalLM")
    assert out["eos_token_ids"] == [4096 - 21 + 4, 4096 - 21 + 1, 4096 - 21 + 14]  # <|return|>, <|endoftext|>, <|call|>
    assert all(s.authorization == f"Bearer {TOKEN}" for s in hub.seen) and TOKEN not in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_the_tiny_model_and_sets_build_through_the_cli(oss_home: Home) -> None:
    out = oss_home.cmx_json("run", "get dataset gpt-oss-120b _tiny", "--input", "rows=4")["outputs"]
    assert (out["rows"], out["performance_rows"], out["is_tiny"]) == (4, 4, True)
    sets = load_set(Path(out["path"]), "accuracy")
    assert [sets.dataset(i) for i in range(3)] == ["aime25", "gpqa_diamond", "livecodebench_v6"]
    refused = oss_home.cmx("run", "get ml-model gpt-oss-120b", "--input", "experts=8")
    assert refused.returncode == 1 and "tiny model only" in refused.stderr
