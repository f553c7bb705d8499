"""Every benchmark's model and dataset recipes, end to end through the CLI in a throw-away cmx home: one sequence
per side (the recipe bases get-ml-model and get-dataset give the eight one run.py and one set of inputs), run for
each benchmark in BENCHMARKS; what is a benchmark's own stays a small test of its own at the end.

Downloads go to real HTTP servers on 127.0.0.1: tests/hf_server.py's Hugging Face Hub, which serves the benchmark's
tiny model (made by its own make_tiny) as its one repository at one commit, behind a bearer token; a Bucket that
serves an MLCommons R2 dataset the way mlc-r2-downloader.sh reads one (`/metadata/NAME.uri` holding the base URL,
`/metadata/NAME.md5` listing the files with their md5, the files under the base URL), holding the benchmark's tiny
set; and, for Qwen3-VL's product catalogue, the Hub again as a dataset repository.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
import pytest

from cmx.mlperf.benchmarks import all_benchmarks, benchmark_for
from cmx.mlperf.benchmarks.base import Benchmark
from cmx.mlperf.benchmarks.kit.model import ModelError
from cmx.recipe.load import load_recipe
from cmx.tools.mlc_r2 import R2Error, fetch_r2_file, r2_listing
from tests.conftest import CMX, REPO, Home
from tests.hf_server import COMMIT, REPO_ID, TOKEN, HubSite, serve

ROWS = 5  # of every real set served, and (ROWS - 1) of every tiny set built through the CLI


# --- the servers ---------------------------------------------------------------------------------------------

@dataclass
class Bucket:
    """Files served by path; with `token` set, a request without `Authorization: Bearer <token>` gets 403."""

    files: dict[str, bytes]
    token: str | None = TOKEN
    seen: list[str] = field(default_factory=list)
    url: str = ""


class BucketHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: Bucket

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.site.seen.append(path)
        if self.site.token and self.headers.get("Authorization") != f"Bearer {self.site.token}":
            return self._send(403, b"Forbidden")
        data = self.site.files.get(path)
        return self._send(200, data) if data is not None else self._send(404, b"Not Found")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


URI = "/metadata/dataset.uri"  # an R2 dataset of the test bucket: its md5 list is /metadata/dataset.md5
BASE = "/datasets/set"


def r2_bucket(files: dict[str, bytes], md5s: dict[str, str] | None = None, token: str | None = TOKEN,
              extra: dict[str, bytes] | None = None) -> Iterator[Bucket]:
    """A bucket serving `files` (relative path -> bytes) as one R2 dataset, listed with their md5 (or `md5s`)."""
    site = Bucket(files={}, token=token)
    served = serve(site, BucketHandler)
    next(served)
    listing = "".join(f"{(md5s or {}).get(n) or hashlib.md5(b).hexdigest()}  ./{n}\n" for n, b in files.items())
    site.files.update({URI: f"{site.url}{BASE}\n".encode(), URI.replace(".uri", ".md5"): listing.encode(),
                       **{f"{BASE}/{n}": b for n, b in files.items()}, **(extra or {})})
    yield site
    next(served, None)


# --- the eight benchmarks -------------------------------------------------------------------------------------

def folder_files(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not str(p.relative_to(folder)).startswith(skip)}


@dataclass(frozen=True)
class Made:
    """A benchmark's tiny model and real-format set of ROWS rows, made once for the module, and what the bucket or
    dataset Hub serves of the set (relative path -> bytes)."""

    model: Path
    dataset: Path
    served: dict[str, bytes]


@dataclass(frozen=True)
class Assets:
    """A benchmark's model and dataset recipes, and what is its own in the shared sequence."""

    family: str
    model: str
    dataset: str
    described: dict[str, object]  # the tiny model's outputs besides path, name, revision and is_tiny
    duplicate: str  # a weight file in a format vLLM does not need, which the default selection skips
    weights: str = "model.safetensors"  # a weight file of the model folder (an LFS file on the Hub)
    index: str = "config.json"  # the file that makes the folder a model (a diffusers pipeline's model_index.json)
    tokenizer: str = "tokenizer.json"  # a tokenizer file the folder must hold
    unchosen: str = "tokenizer"  # what a download of only config.json and *.safetensors lacks, as refused
    file: str | None = None  # the one file of an R2 dataset (None: every file listed, or a Hub repository)
    hub: bool = False  # a Hugging Face dataset repository (repo, revision, endpoint), not an R2 dataset
    not_the_set: tuple[str, bytes, str] = ("notes.pkl", b"not a pickle at all\n", "is not a pandas pickle")
    # what the bucket serves of the set made (default: the file, or every file of the folder), and the other
    # inputs of a real run (the bucket's URL, the tiny set made)
    serve: Callable[[Path], dict[str, bytes]] | None = None
    inputs: Callable[[str, Made], tuple[str, ...]] = lambda url, made: ()
    looks: tuple[Callable[[Any], object], object] | None = None  # the tiny set read back: (what, the value)
    holds: Callable[[dict[str, Any], Path], bool] = lambda outputs, path: True  # what else a real set's step gives

    @property
    def bench(self) -> Benchmark:
        return benchmark_for(self.family)


def _deepseek_served(dataset: Path) -> dict[str, bytes]:
    """The pickle as MLCommons ships it: no prompt ids yet (the chat template makes them), and LiveCodeBench's tests
    where the Hub would serve them."""
    from cmx.mlperf.benchmarks.deepseek_r1.dataset import FILENAME

    raw = dataset.parent / "raw.pkl"
    pd.read_pickle(dataset).drop(columns=["tok_input", "tok_input_len"]).to_pickle(raw, protocol=4)
    return {FILENAME: raw.read_bytes()}


LCB_COMMIT = "0123456789abcdef0123456789abcdef01234567"  # a commit of the test bucket only
LCB_TESTS = f"/datasets/livecodebench/code_generation_lite/resolve/{LCB_COMMIT}/test.jsonl"


def _deepseek_tests(made: Made) -> bytes:
    from cmx.mlperf.benchmarks.deepseek_r1.tiny import TESTS_FILE

    return made.dataset.with_name(TESTS_FILE).read_bytes()


def _deepseek_inputs(url: str, made: Made) -> tuple[str, ...]:
    return ("--input", f"model_path={made.model}", "--input", f"tests_revision={LCB_COMMIT}", "--input",
            f"endpoint={url}")


BENCHMARKS = (
    Assets("llama2-70b", "get-ml-model-llama2", "get-dataset-openorca",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 2}, "pytorch_model.bin",
           file="open_orca_gpt4_tokenized_llama.sampled_24576.pkl",  # its default sha256 is the real pickle's
           inputs=lambda url, made: ("--input", f"sha256={hashlib.sha256(*made.served.values()).hexdigest()}")),
    Assets("llama3.1-8b", "get-ml-model-llama3", "get-dataset-cnndm",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 3849, "eos_token_ids": [3841, 3848, 3849]},
           "original/consolidated.00.pth", file="cnn_eval.json",
           not_the_set=("notes.json", b'{"hello": "world"}', "holds a JSON dict, not a list of samples"),
           looks=(lambda data: data.prompt_ids(0)[0], 3840)),  # the tiny tokenizer's <|begin_of_text|>
    Assets("llama3.1-405b", "get-ml-model-llama3-405b", "get-dataset-llama3-405b",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 3849, "eos_token_ids": [3841, 3848, 3849]},
           "original/consolidated.00.pth", file="mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl",
           looks=(lambda data: [data.metric(i) for i in range(3)], ["rouge", "niah_em", "qa_em"])),
    Assets("mixtral-8x7b", "get-ml-model-mixtral-8x7b", "get-dataset-mixtral-8x7b",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 2, "architecture": "MixtralForCausalLM"},
           "consolidated.00.pt", file="09292024_mixtral_15k_mintoken2_v1.pkl",
           looks=(lambda data: [data.subset(i) for i in range(3)], ["OpenOrca", "GSM8K", "MBXP"])),
    Assets("deepseek-r1", "get-ml-model-deepseek-r1", "get-dataset-deepseek-r1",
           {"dtype": "bf16", "precision": "bf16", "eos_token_id": 1, "eos_token_ids": [1],
            "architecture": "DeepseekV3ForCausalLM"}, "pytorch_model.bin",
           file="mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl", serve=_deepseek_served, inputs=_deepseek_inputs,
           looks=(lambda data: data.subset(3), "mmlu_pro")),
    Assets("gpt-oss-120b", "get-ml-model-gpt-oss-120b", "get-dataset-gpt-oss-120b",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 4079, "eos_token_ids": [4079, 4076, 4089],
            "architecture": "GptOssForCausalLM"}, "original/model.safetensors",
           not_the_set=("perf/perf_eval_ref.pkl", b"not a pickle at all\n", "not a pandas pickle"),
           serve=lambda folder: folder_files(folder, skip=("livecodebench",)),  # MLCommons' folder ships no tests
           inputs=lambda url, made: ("--input", f"lcb_path={made.dataset / 'livecodebench'}"),
           holds=lambda out, path: out["performance_rows"] == ROWS and (path / "livecodebench/test6.jsonl").is_file(),
           looks=(lambda data: [data.dataset(i) for i in range(3)], ["aime25", "gpqa_diamond", "livecodebench_v6"])),
    Assets("whisper", "get-ml-model-whisper", "get-dataset-whisper",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 1015, "eos_token_ids": [1015],
            "architecture": "WhisperForConditionalGeneration"}, "pytorch_model.bin",
           not_the_set=("dev-all-repack.json", b'{"hello": "world"}', "dev-all-repack.json")),
    Assets("qwen3-vl-235b-a22b", "get-ml-model-qwen3-vl", "get-dataset-qwen3-vl",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 4084, "eos_token_ids": [4084, 4082],
            "architecture": "Qwen3VLMoeForConditionalGeneration"}, "pytorch_model.bin", hub=True,
           not_the_set=("data/test-00000-of-00001.parquet", b"not parquet\n", "test-00000-of-00001.parquet")),
    # a diffusers pipeline folder (model_index.json, each part in its subfolder); the prompts file is fetched as the
    # R2 dataset's one .txt here (a plain URL by default: test_wan_prompts_and_latent_...), the latent beside it
    Assets("wan-2.2-t2v-a14b", "get-ml-model-wan-2.2-t2v-a14b", "get-dataset-wan-2.2-t2v-a14b",
           {"dtype": "bfloat16", "precision": "bf16", "eos_token_id": 1, "architecture": "WanPipeline"},
           "fixed_latent.pt",  # the tiny pipeline's latent, a .pt the default selection skips (the dataset's)
           weights="transformer/diffusion_pytorch_model.safetensors", index="model_index.json",
           tokenizer="tokenizer/tokenizer_config.json", unchosen="model_index.json",
           # the prompts (first: the listing's md5 test spoils the first file's) and the latent
           serve=lambda prompts: {p.name: p.read_bytes() for p in (prompts, prompts.with_name("fixed_latent.pt"))},
           inputs=lambda url, made: ("--input", "sha256=none", "--input", f"latent_url={url}{BASE}/fixed_latent.pt"),
           not_the_set=("vbench_prompts.txt", b"a cat\na cat\n", "the prompt repeats prompt 0"),
           looks=(lambda data: data.latent.is_file(), True)),
)
IDS = [b.family for b in BENCHMARKS]
each = pytest.mark.parametrize("assets", BENCHMARKS, ids=IDS)


def test_every_model_and_dataset_recipe_is_a_row_of_this_table() -> None:
    recipes = {p.name for p in (REPO / "recipes").glob("get-*") if p.name.startswith(("get-ml-model-", "get-dataset-"))}
    assert recipes == {name for b in BENCHMARKS for name in (b.model, b.dataset)}
    assert sorted(IDS) == sorted(b.family for b in all_benchmarks())


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Assets], Made]:
    """A benchmark's tiny model and set, made on first use and kept for the module (a second or two each)."""
    done: dict[str, Made] = {}

    def make(assets: Assets) -> Made:
        if assets.family not in done:
            bench, folder = assets.bench, tmp_path_factory.mktemp(assets.family)
            precision = next((v.name for v in load_recipe(REPO / "recipes" / assets.model)[0].groups
                              .get("precision", ()) if v.default), None)
            model = bench.make_tiny(folder / "model", precision, {}).path
            name = assets.file or bench.dataset_facts().default_name or "set"
            dataset = bench.make_tiny_dataset(folder / "set" / name, model, rows=ROWS, seed=1)
            served = (assets.serve(dataset) if assets.serve is not None else
                      folder_files(dataset) if dataset.is_dir() else {name: dataset.read_bytes()})
            done[assets.family] = Made(model, dataset, served)
        return done[assets.family]
    return make


@pytest.fixture
def assets_home(home: Home) -> Home:
    for name in (p.name for p in (REPO / "recipes").iterdir() if p.name.startswith(("get-ml-model", "get-dataset"))):
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return home


def entries(home: Home, recipe: str) -> list[dict]:
    return [e for e in home.cmx_json("cache", "ls") if e["recipe"] == recipe]  # type: ignore[union-attr]  # cmx_json's JSON is a list here


def everything_written(home: Home) -> str:
    return "".join(p.read_text(errors="replace") for p in home.root.rglob("*")
                   if p.is_file() and p.suffix in (".json", ".log", ".txt", ".yaml", ""))


# --- the tiny model and set ----------------------------------------------------------------------------------

@pytest.mark.e2e  # real cmx processes
@each
def test_the_tiny_model_and_set_build_through_the_cli_and_come_from_the_cache_next_time(assets_home: Home,
                                                                                       assets: Assets) -> None:
    rows = ROWS - 1
    query = ("run", f"{assets.dataset} _tiny", "--input", f"rows={rows}", "--input", "seed=5")
    first = assets_home.cmx_json(*query)
    assert first["outputs"]["rows"] == rows and first["outputs"]["is_tiny"] is True  # type: ignore[index]
    assert {s["status"] for s in first["steps"].values()} == {"built"}  # type: ignore[index]
    data = assets.bench.load_dataset(Path(first["outputs"]["path"]))  # type: ignore[index]
    assert len(data) == rows
    if assets.looks is not None:
        what, value = assets.looks
        assert what(data) == value
    model = first["steps"][assets.model]["outputs"]  # type: ignore[index]
    assert model["is_tiny"] is True and model["revision"] == "" and model["tokenizer_path"] == model["path"]
    assert model["name"].startswith("tiny-") and model["name"].endswith("-random-seed0")
    assert {k: model[k] for k in assets.described} == assets.described
    assert (Path(model["path"]) / assets.weights).is_file()
    second = assets_home.cmx_json(*query)
    assert second["steps"][assets.dataset]["status"] == "cached"  # type: ignore[index]
    assert second["outputs"] == first["outputs"]  # type: ignore[index]
    logs = everything_written(assets_home)
    assert "RANDOM weights" in logs and "mean nothing" in logs
    what = assets.bench.dataset_facts().what or f"{assets.family}-format"
    assert f"generated {rows} {what} samples (seed 5): their references are random text" in logs


@pytest.mark.e2e
@each
def test_the_tiny_inputs_are_refused_for_the_real_model_and_set(assets_home: Home, assets: Assets,
                                                                made: Callable[[Assets], Made]) -> None:
    proc = assets_home.cmx("run", assets.model, "--input", "layers=4")
    assert proc.returncode == 1 and "layers applies to the tiny model only" in proc.stderr
    proc = assets_home.cmx("run", assets.dataset, "--input", "rows=10", *assets.inputs("http://127.0.0.1:9",
                                                                                         made(assets)))
    samples = assets.bench.dataset_facts().samples
    assert proc.returncode == 1 and f"rows applies to the tiny dataset only: the real one has its {samples}" \
        in proc.stderr, proc.stderr


# --- the real model from a Hub -------------------------------------------------------------------------------

@pytest.fixture
def hub(request: pytest.FixtureRequest, made: Callable[[Assets], Made]) -> Iterator[HubSite]:
    """The benchmark's tiny model as REPO_ID at COMMIT, with a README, a .gitattributes and a weight file in a
    format vLLM does not need, none of which a default download takes."""
    assets: Assets = request.getfixturevalue("assets")
    files = folder_files(made(assets).model)
    files.update({".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
                  "README.md": b"# a tiny stand-in\n", assets.duplicate: b"weights that must not be downloaded"})
    yield from serve(HubSite(files=files, lfs={assets.weights, assets.duplicate}))


def run_hub(home: Home, hub: HubSite, query: str, *args: str, token: str | None = TOKEN,
            pinned: bool = True) -> subprocess.CompletedProcess:
    """`cmx run QUERY` with the Hub as HF_ENDPOINT and the token in HF_TOKEN; `pinned`: at the one repository and
    commit the Hub serves (the recipes' defaults are the references', checked below)."""
    env = {**home.env, "HF_ENDPOINT": hub.url}
    env.pop("HF_TOKEN", None)
    if token:
        env["HF_TOKEN"] = token
    at = ("--input", f"repo={REPO_ID}", "--input", f"revision={COMMIT}") if pinned else ()
    return subprocess.run([*CMX, "run", query, *at, *args], env=env, cwd=home.root, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.e2e
@each
def test_the_model_is_downloaded_at_the_commit_with_the_token_checked_and_cached(assets_home: Home, assets: Assets,
                                                                                 hub: HubSite) -> None:
    proc = run_hub(assets_home, hub, assets.model, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert folder.is_relative_to(assets_home.root / "cache" / assets.model) and out["tokenizer_path"] == out["path"]
    assert (out["name"], out["revision"], out["is_tiny"]) == (REPO_ID, COMMIT, False)
    assert {k: out[k] for k in assets.described} == assets.described
    wanted = {name for name in hub.files if name not in (".gitattributes", assets.duplicate)}
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == wanted
    assert all((folder / name).read_bytes() == hub.files[name] for name in wanted)
    assert hub.requests_for("/api/") == [f"/api/models/{REPO_ID}/revision/{COMMIT}"]
    assert hub.seen[0].query == {"blobs": ["true"]}
    assert not any(p.endswith(assets.duplicate) for p in hub.requests_for(f"/{REPO_ID}/resolve/"))
    assert all(s.authorization == f"Bearer {TOKEN}" for s in hub.seen)
    logs = everything_written(assets_home)
    assert TOKEN not in proc.stdout + proc.stderr + logs
    assert f"{assets.weights}: " in logs and "sha256 verified" in logs and "git blob id verified" in logs
    asked = len(hub.seen)
    again = run_hub(assets_home, hub, assets.model, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["outputs"] == out
    assert len(hub.seen) == asked  # from the cache: nothing asked


@pytest.mark.e2e
@each
def test_a_branch_a_choice_without_a_tokenizer_and_no_token_are_refused_before_any_download(
        assets_home: Home, assets: Assets, hub: HubSite) -> None:
    branch = run_hub(assets_home, hub, assets.model, "--input", f"repo={REPO_ID}", "--input", "revision=main",
                     pinned=False)
    assert branch.returncode == 1
    assert "revision 'main' is not a full commit sha: a branch or tag moves" in branch.stderr
    assert f"pin it with --input revision={COMMIT}" in branch.stderr
    chosen = run_hub(assets_home, hub, assets.model, "--input", "include=config.json *.safetensors")
    with pytest.raises(ModelError) as refused:  # what the benchmark's model side says of that choice
        assets.bench.require_model_files(["config.json", "model.safetensors"], REPO_ID, COMMIT)
    assert chosen.returncode == 1 and f"{REPO_ID} at {COMMIT} has no {assets.unchosen}" in str(refused.value)
    assert str(refused.value) in chosen.stderr
    gated = run_hub(assets_home, hub, assets.model, token=None)
    assert gated.returncode == 1 and f"{REPO_ID} needs a token, or does not exist (HTTP 401" in gated.stderr
    assert "set HF_TOKEN" in gated.stderr
    assert hub.requests_for(f"/{REPO_ID}/resolve/") == [] and entries(assets_home, assets.model) == []


@pytest.mark.e2e
@each
@pytest.mark.parametrize("lfs", [True, False], ids=["lfs", "blob"])
def test_a_file_that_fails_its_check_leaves_no_cache_entry(assets_home: Home, assets: Assets, hub: HubSite,
                                                           lfs: bool) -> None:
    # an LFS file (the weights) by its sha256; a small file (config.json) by its git blob id
    corrupt = assets.weights if lfs else assets.index
    message = "sha256 mismatch for" if lfs else f"{corrupt} of {REPO_ID} does not match its git blob id"
    hub.corrupt.add(corrupt)  # (one per home: the files checked before the failure are kept for the next attempt)
    proc = run_hub(assets_home, hub, assets.model)
    assert proc.returncode == 1 and message in proc.stderr and corrupt in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and TOKEN not in proc.stdout + proc.stderr
    assert entries(assets_home, assets.model) == []


@pytest.mark.e2e
@each
def test_a_precision_the_checkpoint_is_run_in_and_a_file_selection(assets_home: Home, assets: Assets,
                                                                    hub: HubSite) -> None:
    groups = load_recipe(REPO / "recipes" / assets.model)[0].groups
    other = next((v.name for v in groups.get("precision", ()) if v.name == "fp16"), None)
    proc = run_hub(assets_home, hub, f"{assets.model} {'_' + other if other else ''}".strip(), "--json",
                   "--input", "include=*.json *.safetensors")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == \
        {n for n in hub.files if fnmatch.fnmatchcase(n, "*.json") or fnmatch.fnmatchcase(n, "*.safetensors")}
    if other:  # the same checkpoint, run in float16
        assert (out["dtype"], out["precision"]) == ("float16", "fp16")
    else:  # the checkpoint's own format, or its one precision
        assert (out["dtype"], out["precision"]) == (assets.described["dtype"], assets.described["precision"])


# --- your own weights ----------------------------------------------------------------------------------------

@pytest.mark.e2e
@each
def test_your_own_folder_is_used_in_place_and_its_key_follows_its_files(assets_home: Home, assets: Assets,
                                                                       made: Callable[[Assets], Made],
                                                                       tmp_path: Path) -> None:
    mine = tmp_path / "my-model"
    shutil.copytree(made(assets).model, mine)
    key = assets_home.cmx_json("plan", assets.model, "--input", f"model_path={mine}")["steps"][0]["key"]  # type: ignore[index]
    out = assets_home.cmx_json("run", assets.model, "--input", f"model_path={mine}")["outputs"]  # type: ignore[index]
    assert (out["path"], out["tokenizer_path"], out["name"], out["revision"], out["is_tiny"]) == \
        (str(mine), str(mine), "my-model", "", False)
    [entry] = entries(assets_home, assets.model)
    assert [p.name for p in (assets_home.root / "cache" / assets.model / entry["key"]).iterdir()] == ["meta.json"]
    config = mine / assets.index
    config.write_text(config.read_text().replace("{", '{"cmx_test": 1, ', 1))
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))
    replanned = assets_home.cmx_json("plan", assets.model, "--input", f"model_path={mine}")["steps"][0]  # type: ignore[index]
    assert replanned["key"] != key and replanned["cached"] is False
    (mine / assets.tokenizer).unlink()
    proc = assets_home.cmx("run", assets.model, "--input", f"model_path={mine}")
    assert proc.returncode == 1 and f"{mine} has no tokenizer" in proc.stderr
    config.unlink()
    proc = assets_home.cmx("run", assets.model, "--input", f"model_path={mine}")
    assert proc.returncode == 1 and f"{mine} has no config.json: it is not a Hugging Face model folder" in proc.stderr


# --- the real set from a bucket, or a dataset Hub ------------------------------------------------------------

@pytest.fixture
def site(request: pytest.FixtureRequest, made: Callable[[Assets], Made]) -> Iterator[Bucket | HubSite]:
    """The benchmark's tiny set of ROWS rows where its recipe fetches the real one: an R2 bucket (with
    LiveCodeBench's tests beside it for deepseek-r1), or a Hub dataset repository."""
    assets: Assets = request.getfixturevalue("assets")
    served = made(assets).served
    if assets.hub:
        yield from serve(HubSite(files=dict(served), lfs={n for n in served if n.endswith(".parquet")},
                                 repo="datasets/Shopify/product-catalogue"))
    else:
        # deepseek-r1's tests come from the Hub (with HF_TOKEN, not the dataset's token): its bucket asks for none
        lcb = assets.family == "deepseek-r1"
        yield from r2_bucket(served, extra={LCB_TESTS: _deepseek_tests(made(assets))} if lcb else None,
                             token=None if lcb else TOKEN)


def run_site(home: Home, assets: Assets, site: Bucket | HubSite, made: Made, *args: str) -> \
        subprocess.CompletedProcess:
    where = (("--input", f"revision={COMMIT}", "--input", f"endpoint={site.url}") if assets.hub else
             ("--input", f"url={site.url}{URI}", *assets.inputs(site.url, made)))
    return home.cmx("run", assets.dataset, "--input", f"token={TOKEN}", *where, *args)


@pytest.mark.e2e
@each
def test_the_real_set_is_fetched_checked_and_read(assets_home: Home, assets: Assets, site: Bucket | HubSite,
                                                  made: Callable[[Assets], Made]) -> None:
    served = made(assets).served
    proc = run_site(assets_home, assets, site, made(assets), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    assert out["rows"] == ROWS and out["is_tiny"] is False
    path = Path(out["path"])
    assert len(assets.bench.load_dataset(path)) == ROWS and assets.holds(out, path)
    if assets.file is not None:  # one file, under its own name
        assert path.name == assets.file
        if assets.serve is None:  # as served (deepseek-r1's gets the prompt ids its chat template makes)
            assert path.read_bytes() == served[assets.file]
            assert [p.name for p in path.parent.iterdir() if p.name != "meta.json"] == [assets.file]
    else:  # every file listed, as listed
        assert all((path / name).read_bytes() == data for name, data in served.items())
    if isinstance(site, Bucket):
        assert site.seen[:2] == [URI, URI.replace(".uri", ".md5")]
        assert all(f"{BASE}/{name}" in site.seen for name in served)  # each asked with the token, or refused
    else:
        assert all(s.authorization == f"Bearer {TOKEN}" for s in site.seen)
    logs = everything_written(assets_home)
    assert TOKEN not in proc.stdout + proc.stderr + logs
    assert ("sha256 verified" if assets.hub else "verified against the dataset's list") in logs


@pytest.mark.e2e
@each
def test_a_file_that_fails_its_checksum_leaves_no_entry(assets_home: Home, assets: Assets, site: Bucket | HubSite,
                                                        made: Callable[[Assets], Made]) -> None:
    first = next(iter(made(assets).served))
    if isinstance(site, HubSite):
        site.corrupt.add(first)
    else:  # the md5 list says otherwise
        listing = site.files[URI.replace(".uri", ".md5")].decode()
        site.files[URI.replace(".uri", ".md5")] = listing.replace(listing[:32], "0" * 32, 1).encode()
    proc = run_site(assets_home, assets, site, made(assets))
    assert proc.returncode == 1 and "mismatch for" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert entries(assets_home, assets.dataset) == []


@pytest.mark.e2e
@each
def test_a_file_that_is_not_the_set_fails_its_format_check(assets_home: Home, assets: Assets,
                                                           site: Bucket | HubSite,
                                                           made: Callable[[Assets], Made]) -> None:
    name, data, message = assets.not_the_set
    if isinstance(site, HubSite):
        site.files[name] = data
        proc = run_site(assets_home, assets, site, made(assets))
    elif assets.file is None:  # a folder of files: one of them is not what it should be
        served = {**made(assets).served, name: data}
        for bucket in r2_bucket(served):
            proc = run_site(assets_home, assets, bucket, made(assets))
    else:  # a direct URL to it, the file checked by no checksum
        site.files[f"/{name}"] = data
        proc = assets_home.cmx("run", assets.dataset, "--input", f"url={site.url}/{name}", "--input", f"token={TOKEN}",
                               *assets.inputs(site.url, made(assets)), "--input", f"filename={assets.file}",
                               *(("--input", "sha256=none") if "sha256" in recipe_inputs(assets.dataset) else ()))
    assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert entries(assets_home, assets.dataset) == []


# --- what is a benchmark's own -------------------------------------------------------------------------------

def recipe_inputs(recipe: str) -> dict[str, Any]:
    return load_recipe(REPO / "recipes" / recipe)[0].inputs


def default(recipe: str, name: str) -> object:
    return recipe_inputs(recipe)[name].default


WAN_DATA = ("https://raw.githubusercontent.com/mlcommons/inference/1e04ea4609df1931a0298d62a1ccea8c2c6ca58e/"
            "text_to_video/wan-2.2-t2v-a14b/data")


@pytest.mark.parametrize(("recipe", "name", "value"), [
    # the references at mlcommons/inference b66003e: the model's commit, the dataset's R2 metadata (no sha256 is
    # published for them, and none is invented)
    ("get-ml-model-llama2", "revision", "e4b287212771ce25f782ed8636cbea2d7c5ac7e2"),
    ("get-dataset-openorca", "sha256", "b64e66e54b6267f79eb4f9ccec52d466bab3ac94747ed258c3b0f337ed166fab"),
    ("get-ml-model-llama3", "repo", "meta-llama/Llama-3.1-8B-Instruct"),
    ("get-ml-model-llama3", "revision", "be673f326cab4cd22ccfef76109faf68e41aa5f1"),
    ("get-dataset-cnndm", "url", "https://inference.mlcommons-storage.org/metadata/llama3-1-8b-cnn-eval.uri"),
    ("get-dataset-cnndm", "sha256", None),
    ("get-ml-model-llama3-405b", "repo", "meta-llama/Llama-3.1-405B-Instruct"),
    ("get-ml-model-llama3-405b", "revision", "be673f326cab4cd22ccfef76109faf68e41aa5f1"),
    ("get-dataset-llama3-405b", "url", "https://inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.uri"),
    ("get-dataset-llama3-405b", "sha256", None),
    ("get-ml-model-mixtral-8x7b", "repo", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
    ("get-ml-model-mixtral-8x7b", "revision", "a60832cb6c88d5cb6e507680d0e9996fbad77050"),
    ("get-dataset-mixtral-8x7b", "url",
     "https://inference.mlcommons-storage.org/metadata/mixtral-8x7b-validation-dataset.uri"),
    ("get-dataset-mixtral-8x7b", "sha256", None),
    ("get-ml-model-deepseek-r1", "repo", "deepseek-ai/DeepSeek-R1"),
    ("get-ml-model-deepseek-r1", "revision", "56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad"),
    ("get-dataset-deepseek-r1", "url", "https://inference.mlcommons-storage.org/metadata/deepseek-r1-datasets-fp8-eval.uri"),
    ("get-dataset-deepseek-r1", "filename", "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"),
    ("get-dataset-deepseek-r1", "tests_repo", "livecodebench/code_generation_lite"),
    ("get-dataset-deepseek-r1", "tests_files", "test.jsonl"),  # release_v1
    ("get-dataset-deepseek-r1", "sha256", None),
    ("get-dataset-deepseek-r1", "tests_revision", None),  # the reference loads main
    ("get-ml-model-gpt-oss-120b", "repo", "openai/gpt-oss-120b"),
    ("get-ml-model-gpt-oss-120b", "revision", "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"),
    ("get-dataset-gpt-oss-120b", "url", "https://inference.mlcommons-storage.org/metadata/gpt-oss-data.uri"),
    # text_to_video/wan-2.2-t2v-a14b: README.md's commit of the model; data/ at 1e04ea4, the commit that last changed
    # the prompts (the latent's blob is the same there and at b66003e; its sha256 is not known, and none is invented)
    ("get-ml-model-wan-2.2-t2v-a14b", "repo", "Wan-AI/Wan2.2-T2V-A14B-Diffusers"),
    ("get-ml-model-wan-2.2-t2v-a14b", "revision", "5be7df9619b54f4e2667b2755bc6a756675b5cd7"),
    ("get-dataset-wan-2.2-t2v-a14b", "url", f"{WAN_DATA}/vbench_prompts.txt"),
    ("get-dataset-wan-2.2-t2v-a14b", "sha256", "f45433f7d3f6ac055613bb36ea21f38120e3cb5873d91f7e621477761b7284e8"),
    ("get-dataset-wan-2.2-t2v-a14b", "latent_url", f"{WAN_DATA}/fixed_latent.pt"),
    ("get-dataset-wan-2.2-t2v-a14b", "latent_sha256", None),
])
def test_the_defaults_are_the_references(recipe: str, name: str, value: object) -> None:
    assert default(recipe, name) == value


def test_llama3_takes_the_commit_its_generation_module_names() -> None:
    from cmx.mlperf.benchmarks.llama3_1_8b.generation import MODEL_REPO, MODEL_REVISION

    assert (default("get-ml-model-llama3", "repo"), default("get-ml-model-llama3", "revision")) == \
        (MODEL_REPO, MODEL_REVISION)


def test_wan_takes_the_commit_its_model_module_names() -> None:
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.model import MODEL_REPO, REVISION

    recipe = "get-ml-model-wan-2.2-t2v-a14b"
    assert (default(recipe, "repo"), default(recipe, "revision")) == (MODEL_REPO, REVISION)


WAN = next(b for b in BENCHMARKS if b.family == "wan-2.2-t2v-a14b")


@pytest.mark.e2e
def test_wan_prompts_and_latent_come_from_their_plain_urls_each_checked_by_its_sha256(
        assets_home: Home, made: Callable[[Assets], Made]) -> None:
    served = made(WAN).served
    digest = {name: hashlib.sha256(data).hexdigest() for name, data in served.items()}
    bucket = r2_bucket({}, extra={f"/data/{name}": data for name, data in served.items()})
    base = next(bucket).url
    try:
        def run(*args: str) -> subprocess.CompletedProcess:
            return assets_home.cmx("run", WAN.dataset, "--input", f"token={TOKEN}", "--input",
                                   f"url={base}/data/vbench_prompts.txt", "--input",
                                   f"latent_url={base}/data/fixed_latent.pt", *args)

        wrong = run("--input", f"sha256={digest['vbench_prompts.txt']}", "--input", "latent_sha256=" + "0" * 64)
        assert wrong.returncode == 1 and "mismatch for" in wrong.stderr, wrong.stderr
        assert entries(assets_home, WAN.dataset) == []
        proc = run("--input", f"sha256={digest['vbench_prompts.txt']}", "--json")
    finally:
        next(bucket, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "meta.json"} == served
    assert out["rows"] == ROWS and WAN.bench.load_dataset(folder).latent == folder / "fixed_latent.pt"
    logs = everything_written(assets_home)
    assert f"vbench_prompts.txt: sha256 {digest['vbench_prompts.txt']} verified" in logs
    assert f"pin it with --input latent_sha256={digest['fixed_latent.pt']}" in logs  # none given: said, not faked
    assert TOKEN not in logs + proc.stdout + proc.stderr


LLAMA2 = BENCHMARKS[0]


@pytest.mark.e2e
@pytest.mark.parametrize("assets", [LLAMA2], ids=["llama2-70b"])
def test_llama2_fp8_is_its_own_repository_pinned_by_its_own_commit(assets_home: Home, assets: Assets,
                                                                    hub: HubSite) -> None:
    tiny = assets_home.cmx("run", "get ml-model llama2 _tiny _fp8")
    assert tiny.returncode == 1 and "the tiny model has no FP8 checkpoint" in tiny.stderr
    assert "use _tiny with _bf16" in tiny.stderr and entries(assets_home, assets.model) == []
    unpinned = run_hub(assets_home, hub, "get ml-model llama2 _fp8", "--input", f"fp8_repo={REPO_ID}", pinned=False)
    assert unpinned.returncode == 1 and f"no fp8_revision is pinned for {REPO_ID}" in unpinned.stderr
    assert f"--input fp8_revision={COMMIT}" in unpinned.stderr
    proc = run_hub(assets_home, hub, "get ml-model llama2 _fp8", "--input", f"fp8_repo={REPO_ID}", "--input",
                   f"fp8_revision={COMMIT}", "--input", "include=*.json *.safetensors", "--json", pinned=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    assert (out["precision"], out["dtype"], out["name"]) == ("fp8", "float16", REPO_ID)  # config's torch_dtype
    assert "README.md" not in {p.name for p in Path(out["path"]).iterdir()}


@pytest.mark.e2e
def test_openorca_gzip_is_decompressed_and_checked_against_the_pickles_published_sha256(
        assets_home: Home, made: Callable[[Assets], Made]) -> None:
    pickle = made(LLAMA2).served[LLAMA2.file]  # type: ignore[index]
    actual = hashlib.sha256(pickle).hexdigest()
    for bucket in r2_bucket({}, extra={"/orca.pkl.gz": gzip.compress(pickle, mtime=0), "/orca.pkl": pickle}):
        out = assets_home.cmx_json("run", "get dataset openorca", "--input", f"url={bucket.url}/orca.pkl.gz",
                                   "--input", f"sha256={actual}", "--input", f"token={TOKEN}")["outputs"]  # type: ignore[index]
        path = Path(out["path"])
        assert path.read_bytes() == pickle and [p.name for p in path.parent.iterdir() if p.name != "meta.json"] == \
            [path.name]  # no .gz kept
        # the default sha256 is the real dataset's: the tiny pickle cannot match it
        gz = assets_home.cmx("run", "get dataset openorca", "--input", f"url={bucket.url}/orca.pkl.gz",
                             "--input", f"token={TOKEN}")
        assert gz.returncode == 1 and "sha256 mismatch for the pickle from " in gz.stderr
        assert f"expected {default('get-dataset-openorca', 'sha256')}, got {actual}" in gz.stderr
        plain = assets_home.cmx("run", "get dataset openorca", "--input", f"url={bucket.url}/orca.pkl",
                                "--input", f"token={TOKEN}")
        assert plain.returncode == 1 and f"got {actual}; the downloaded file was removed" in plain.stderr
        assert len(entries(assets_home, "get-dataset-openorca")) == 1 and "Traceback" not in gz.stderr + plain.stderr
        assert TOKEN not in everything_written(assets_home)


@pytest.mark.e2e
def test_a_given_sha256_is_checked_and_one_not_given_is_logged_to_pin(assets_home: Home,
                                                                     made: Callable[[Assets], Made]) -> None:
    cnndm = BENCHMARKS[1]
    data = made(cnndm).served["cnn_eval.json"]
    sha = hashlib.sha256(data).hexdigest()
    for bucket in r2_bucket({"cnn_eval.json": data}):
        asked = ("run", "get dataset cnndm", "--input", f"url={bucket.url}{URI}", "--input", f"token={TOKEN}")
        assert assets_home.cmx_json(*asked)["outputs"]["rows"] == ROWS  # type: ignore[index]
        assert f"pin it with --input sha256={sha}" in everything_written(assets_home)
        wrong = assets_home.cmx(*asked, "--input", f"sha256={'0' * 64}")
        assert wrong.returncode == 1 and f"expected {'0' * 64}, got {sha}" in wrong.stderr
        assert assets_home.cmx_json(*asked, "--input", f"sha256={sha}")["outputs"]["rows"] == ROWS  # type: ignore[index]
        assert f"sha256 {sha} verified" in everything_written(assets_home)


@pytest.mark.e2e
def test_llama3_405b_two_listed_pickles_are_refused_until_one_is_named(assets_home: Home,
                                                                       made: Callable[[Assets], Made]) -> None:
    pickle = next(iter(made(BENCHMARKS[2]).served.values()))
    for bucket in r2_bucket({"one.pkl": pickle, "other.pkl": pickle}):
        asked = ("run", "get dataset llama3.1-405b", "--input", f"url={bucket.url}{URI}", "--input", f"token={TOKEN}")
        proc = assets_home.cmx(*asked)
        assert proc.returncode == 1 and "lists 2 .pkl files" in proc.stderr and "Traceback" not in proc.stderr
        assert assets_home.cmx_json(*asked, "--input", "filename=other.pkl")["outputs"]["rows"] == ROWS  # type: ignore[index]


@pytest.mark.e2e
def test_deepseek_r1_prompts_are_made_by_the_chat_template_and_code_rows_need_a_pinned_test_commit(
        assets_home: Home, made: Callable[[Assets], Made]) -> None:
    from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import load_tests
    from cmx.mlperf.benchmarks.deepseek_r1.prompts import chat_tokenizer

    deepseek = BENCHMARKS[4]
    got = made(deepseek)
    tests = _deepseek_tests(got)
    for bucket in r2_bucket(got.served, token=None, extra={LCB_TESTS: tests}):
        url = ("--input", f"url={bucket.url}{URI}", "--input", f"model_path={got.model}", "--input",
               f"endpoint={bucket.url}")
        unpinned = assets_home.cmx("run", "get dataset deepseek-r1", *url)
        assert unpinned.returncode == 1 and "pins none" in unpinned.stderr
        assert "tests_revision=COMMIT" in unpinned.stderr and LCB_TESTS not in bucket.seen
        out = assets_home.cmx_json("run", "get dataset deepseek-r1", *url, "--input",
                                   f"tests_revision={LCB_COMMIT}")["outputs"]  # type: ignore[index]
        raw = pd.read_pickle(out["source"])
        assert Path(out["source"]).read_bytes() == got.served[deepseek.file] and "tok_input" not in raw.columns
        data = deepseek.bench.load_dataset(Path(out["path"]))
        assert data.prompt_ids(2) == chat_tokenizer(got.model).encode([raw["text_input"][2]])[0]
        assert Path(out["tests"]).read_bytes() == tests and load_tests(Path(out["tests"]))
        assert LCB_TESTS in bucket.seen


# --- cmx.tools.mlc_r2, which the dataset recipes read R2 datasets with -----------------------------------------

@pytest.fixture
def bucket() -> Iterator[Bucket]:
    yield from r2_bucket({"cnn_eval.json": b"[]", "sample/cnn_eval_5000.json": b"[]"}, md5s={
        "sample/cnn_eval_5000.json": "0" * 32})


def test_r2_listing_reads_the_base_url_and_the_md5_list(bucket: Bucket, tmp_path: Path) -> None:
    files = r2_listing(f"{bucket.url}{URI}", tmp_path, token=TOKEN)
    assert [(f.path, f.url) for f in files] == [
        ("cnn_eval.json", f"{bucket.url}{BASE}/cnn_eval.json"),
        ("sample/cnn_eval_5000.json", f"{bucket.url}{BASE}/sample/cnn_eval_5000.json")]
    assert files[0].md5 == hashlib.md5(b"[]").hexdigest() and files[1].md5 == "0" * 32


@pytest.mark.parametrize(("uri", "md5_list", "message"), [
    (b"<html>Sign in with Cloudflare Access</html>", b"", "does not hold a dataset's base URL"),
    (None, b"d41d8cd98f00b204e9800998ecf8427e  ../../etc/passwd\n", "names an unsafe path '../../etc/passwd'"),
    (None, b"not-an-md5  cnn_eval.json\n", "line 1 is not `<md5>  <path>`"),
    (None, b"\n\n", "lists no files"),
])
def test_bad_r2_metadata_is_refused_with_what_is_wrong(bucket: Bucket, tmp_path: Path, uri: bytes | None,
                                                       md5_list: bytes, message: str) -> None:
    if uri is not None:
        bucket.files[URI] = uri
    bucket.files[URI.replace(".uri", ".md5")] = md5_list
    with pytest.raises(R2Error) as info:
        r2_listing(f"{bucket.url}{URI}", tmp_path, token=TOKEN)
    assert message in str(info.value)


def test_a_name_the_list_does_not_hold_is_refused_with_the_names_it_holds(bucket: Bucket, tmp_path: Path) -> None:
    with pytest.raises(R2Error, match=r"lists no file named 'cnn_eval_1000.json'") as info:
        fetch_r2_file(f"{bucket.url}{URI}", "cnn_eval_1000.json", tmp_path / "x.json", tmp_path, token=TOKEN)
    assert "cnn_eval.json, sample/cnn_eval_5000.json" in (info.value.hint or "")
    assert not (tmp_path / "x.json").exists()
