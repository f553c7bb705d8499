"""get-dataset-deepseek-r1 and get-ml-model-deepseek-r1: the reference's defaults, and the real code path against a
bucket on 127.0.0.1: the pickle through its MLCommons R2 metadata (md5-checked), LiveCodeBench's tests from a
Hugging Face dataset URL at a commit, the prompts made by the model folder's chat template."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cmx.mlperf.benchmarks.deepseek_r1.dataset import FILENAME, load_deepseek
from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import load_tests
from cmx.mlperf.benchmarks.deepseek_r1.prompts import chat_tokenizer
from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_dataset, make_tiny_deepseek
from tests.conftest import REPO, Home
from tests.hf_server import serve
from tests.recipes.test_llama3_assets import Bucket, BucketHandler

RECIPES = ("get-ml-model", "get-dataset", "get-ml-model-deepseek-r1", "get-dataset-deepseek-r1")
URI = "/metadata/deepseek-r1-datasets-fp8-eval.uri"
BASE = "/deepseek_r1/datasets"
LCB_COMMIT = "0123456789abcdef0123456789abcdef01234567"  # a commit of the test hub only
TESTS = f"/datasets/livecodebench/code_generation_lite/resolve/{LCB_COMMIT}/test.jsonl"


def default(recipe: str, name: str) -> object:
    return yaml.safe_load((REPO / "recipes" / recipe / "recipe.yaml").read_text())["inputs"][name]["default"]


def test_the_defaults_are_the_references_model_commit_dataset_and_test_release() -> None:
    # language/deepseek-r1/README.md and eval_accuracy.py at mlcommons/inference b66003e
    assert default("get-ml-model-deepseek-r1", "repo") == "deepseek-ai/DeepSeek-R1"
    assert default("get-ml-model-deepseek-r1", "revision") == "56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad"
    assert default("get-dataset-deepseek-r1", "url") == \
        "https://inference.mlcommons-storage.org/metadata/deepseek-r1-datasets-fp8-eval.uri"
    assert default("get-dataset-deepseek-r1", "filename") == "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"
    assert default("get-dataset-deepseek-r1", "tests_repo") == "livecodebench/code_generation_lite"
    assert default("get-dataset-deepseek-r1", "tests_files") == "test.jsonl"  # release_v1
    # none published or pinned by the reference: none invented
    assert default("get-dataset-deepseek-r1", "sha256") is None
    assert default("get-dataset-deepseek-r1", "tests_revision") is None


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, bytes]:
    """A tiny model folder, and a pickle with the real columns (no prompt ids) and its tests file."""
    folder = tmp_path_factory.mktemp("served")
    model = make_tiny_deepseek(folder / "model", seed=0)
    made = make_tiny_dataset(folder / "d" / "full.pkl", model.path, rows=10, seed=3)
    frame = pd.read_pickle(made.path).drop(columns=["tok_input", "tok_input_len"])
    raw = folder / "raw.pkl"
    frame.to_pickle(raw, protocol=4)
    return model.path, raw.read_bytes(), made.tests_path.read_bytes()


@pytest.fixture
def ds_home(home: Home) -> Home:
    for name in RECIPES:
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return home


@pytest.fixture
def bucket(served: tuple[Path, bytes, bytes]) -> Iterator[Bucket]:
    _, pickle_bytes, tests = served
    site = Bucket(files={}, token=None)
    server = serve(site, BucketHandler)
    next(server)
    md5 = hashlib.md5(pickle_bytes).hexdigest()
    site.files.update({URI: f"{site.url}{BASE}\n".encode(),
                       URI.replace(".uri", ".md5"): f"{md5}  ./{FILENAME}\n{'0' * 32}  ./calibration.pkl\n".encode(),
                       f"{BASE}/{FILENAME}": pickle_bytes, TESTS: tests})
    yield site
    next(server, None)


@pytest.mark.e2e  # real cmx processes
def test_the_pickle_and_the_code_tests_are_fetched_and_the_prompts_made_by_the_chat_template(
        ds_home: Home, served: tuple[Path, bytes, bytes], bucket: Bucket) -> None:
    model, _, _ = served
    out = ds_home.cmx_json("run", "get dataset deepseek-r1", "--input", f"url={bucket.url}{URI}",
                           "--input", f"model_path={model}", "--input", f"tests_revision={LCB_COMMIT}",
                           "--input", f"endpoint={bucket.url}")["outputs"]
    assert out["rows"] == 10 and out["is_tiny"] is False
    data = load_deepseek(out["path"])
    raw = pd.read_pickle(out["source"])
    assert Path(out["source"]).read_bytes() == served[1] and "tok_input" not in raw.columns
    assert data.prompt_ids(2) == chat_tokenizer(model).encode([raw["text_input"][2]])[0]
    assert sorted(load_tests(Path(out["tests"]))) == ["tiny0004", "tiny0009"]
    assert f"{BASE}/{FILENAME}" in bucket.seen and TESTS in bucket.seen


@pytest.mark.e2e
def test_code_rows_need_a_pinned_test_commit_since_the_reference_pins_none(
        ds_home: Home, served: tuple[Path, bytes, bytes], bucket: Bucket) -> None:
    model, _, _ = served
    proc = ds_home.cmx("run", "get dataset deepseek-r1", "--input", f"url={bucket.url}{URI}",
                       "--input", f"model_path={model}", "--input", f"endpoint={bucket.url}")
    assert proc.returncode == 1 and "pins none" in proc.stderr and "tests_revision=COMMIT" in proc.stderr
    assert "Traceback" not in proc.stderr and TESTS not in bucket.seen


@pytest.mark.e2e
def test_the_tiny_model_and_dataset_build_through_the_cli(ds_home: Home) -> None:
    out = ds_home.cmx_json("run", "get dataset deepseek-r1 _tiny", "--input", "rows=6")["outputs"]
    data = load_deepseek(out["path"])
    assert out["is_tiny"] is True and len(data) == 6 and data.subset(4) == "livecodebench"
    outputs = ds_home.cmx_json("run", "get ml-model deepseek-r1 _tiny")["outputs"]
    assert outputs["architecture"] == "DeepseekV3ForCausalLM" and outputs["eos_token_id"] == 1
    assert outputs["name"] == "tiny-DeepseekV3ForCausalLM-random-seed0" and outputs["dtype"] == "bf16"
