"""get-ml-model-llama3 and get-dataset-cnndm, end to end through the CLI in a throw-away cmx home (e2e), and
cmx.tools.mlc_r2.

Downloads go to real HTTP servers on 127.0.0.1: tests/hf_server.py's Hugging Face Hub (serving
a tiny Llama 3 made by cmx.mlperf.benchmarks.llama3_1_8b.tiny as its one repository), and an
MLCommons R2 bucket that serves a dataset the way mlc-r2-downloader.sh reads one
(`/metadata/NAME.uri` holding the base URL, `/metadata/NAME.md5` listing the files with their
md5, the files under the base URL).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from cmx.mlperf.benchmarks.llama3_1_8b.dataset import load_cnndm
from cmx.mlperf.benchmarks.llama3_1_8b.generation import MODEL_REPO, MODEL_REVISION
from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_cnndm, make_tiny_llama3
from cmx.tools.mlc_r2 import R2Error, fetch_r2_file, r2_listing
from tests.conftest import CMX, REPO, Home
from tests.hf_server import COMMIT, REPO_ID, TOKEN, HubSite, serve

RECIPES = ("get-ml-model", "get-dataset", "get-ml-model-llama3", "get-dataset-cnndm")
URI = "/metadata/llama3-1-8b-cnn-eval.uri"
BASE = "/llama3.1_8b/datasets"

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama3(tmp_path_factory.mktemp("served") / "model", seed=0).path


@pytest.fixture(scope="module")
def tiny_dataset(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_tiny_cnndm(tmp_path_factory.mktemp("data") / "cnn_eval.json", tiny_model, rows=16, seed=1).path \
        .read_bytes()


@pytest.fixture
def llama_home(home: Home) -> Home:
    for name in RECIPES:
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return home


def entries(home: Home, recipe: str) -> list[dict]:
    return [e for e in home.cmx_json("cache", "ls") if e["recipe"] == recipe]  # type: ignore[union-attr]  # cmx_json's JSON is a list here


def everything_written(home: Home) -> str:
    return "".join(p.read_text(errors="replace") for p in home.root.rglob("*")
                   if p.is_file() and p.suffix in (".json", ".log", ".txt", ".yaml", ""))


def recipe_default(recipe: str, name: str) -> object:
    return yaml.safe_load((REPO / "recipes" / recipe / "recipe.yaml").read_text())["inputs"][name]["default"]


def test_the_defaults_are_the_references_model_commit_and_dataset() -> None:
    # language/llama3.1-8b/README.md: the commit to check out, and the R2 metadata of the datacenter eval set
    assert (recipe_default("get-ml-model-llama3", "repo"), recipe_default("get-ml-model-llama3", "revision")) == \
        (MODEL_REPO, MODEL_REVISION) == ("meta-llama/Llama-3.1-8B-Instruct", "be673f326cab4cd22ccfef76109faf68e41aa5f1")
    assert recipe_default("get-dataset-cnndm", "url") == \
        "https://inference.mlcommons-storage.org/metadata/llama3-1-8b-cnn-eval.uri"
    assert recipe_default("get-dataset-cnndm", "sha256") is None  # MLCommons publishes none: none is invented


# --- the tiny model and dataset ----------------------------------------------------------------------

@pytest.mark.e2e  # real cmx processes
def test_tiny_model_and_dataset_build_through_the_cli_and_come_from_the_cache_next_time(llama_home: Home) -> None:
    first = llama_home.cmx_json("run", "get dataset cnndm _tiny", "--input", "rows=64", "--input", "seed=5")
    assert first["outputs"]["rows"] == 64 and first["outputs"]["is_tiny"] is True
    assert {s["status"] for s in first["steps"].values()} == {"built"}
    data = load_cnndm(first["outputs"]["path"])
    assert len(data) == 64 and Path(first["outputs"]["path"]).name == "cnn_eval.json"
    model = first["steps"]["get-ml-model-llama3"]["outputs"]
    assert (model["name"], model["dtype"], model["precision"], model["is_tiny"]) == \
        ("tiny-llama3-random-seed0", "bfloat16", "bf16", True)
    assert model["eos_token_id"] == 3849 and model["eos_token_ids"] == [3841, 3848, 3849]
    assert all(data.prompt_ids(i)[0] == 3840 for i in range(len(data)))  # the tiny model's <|begin_of_text|>
    second = llama_home.cmx_json("run", "get dataset cnndm _tiny", "--input", "rows=64", "--input", "seed=5")
    assert second["steps"]["get-dataset-cnndm"]["status"] == "cached" and second["outputs"] == first["outputs"]
    logs = everything_written(llama_home)
    assert "RANDOM weights" in logs
    assert "CNN/DailyMail-format samples (seed 5): their references are random text" in logs


@pytest.mark.e2e  # real cmx processes
def test_tiny_only_inputs_are_refused_for_the_real_model_and_dataset(llama_home: Home) -> None:
    proc = llama_home.cmx("run", "get ml-model llama3", "--input", "layers=4")
    assert proc.returncode == 1 and "layers applies to the tiny model only" in proc.stderr
    proc = llama_home.cmx("run", "get dataset cnndm", "--input", "rows=10")
    assert proc.returncode == 1 and "rows applies to the tiny dataset only: the real one has its 13368" in proc.stderr


# --- the real model from a Hub ----------------------------------------------------------------------

@pytest.fixture
def hub(tiny_model: Path) -> Iterator[HubSite]:
    files = {p.name: p.read_bytes() for p in sorted(tiny_model.iterdir())}
    files.update({".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
                  "README.md": b"# a tiny stand-in for Llama 3.1 8B Instruct\n",
                  "original/consolidated.00.pth": b"Meta's own checkpoint, which must not be downloaded"})
    yield from serve(HubSite(files=files, lfs={"model.safetensors", "original/consolidated.00.pth"}))


def run_hub(home: Home, hub: HubSite, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    env = {**home.env, "HF_ENDPOINT": hub.url}
    env.pop("HF_TOKEN", None)
    if token:
        env["HF_TOKEN"] = token
    # the test Hub serves one repository at one commit; the recipe's defaults are checked above
    return subprocess.run([*CMX, "run", "get ml-model llama3", "--input", f"repo={REPO_ID}", "--input",
                           f"revision={COMMIT}", *args], env=env, cwd=home.root, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.e2e  # real cmx processes
def test_the_model_is_downloaded_at_the_commit_with_the_token_and_described(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert folder.is_relative_to(llama_home.root / "cache" / "get-ml-model-llama3")
    assert (out["name"], out["revision"], out["dtype"], out["precision"], out["is_tiny"]) == \
        (REPO_ID, COMMIT, "bfloat16", "bf16", False)
    assert out["eos_token_id"] == 3849 and out["eos_token_ids"] == [3841, 3848, 3849]  # <|eot_id|>; all three ends
    wanted = {n for n in hub.files if n not in (".gitattributes", "original/consolidated.00.pth")}
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == wanted
    assert all((folder / name).read_bytes() == hub.files[name] for name in wanted)
    assert all(s.authorization == f"Bearer {TOKEN}" for s in hub.seen)
    assert TOKEN not in proc.stdout + proc.stderr + everything_written(llama_home)
    asked = len(hub.seen)
    again = run_hub(llama_home, hub, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["outputs"] == out and len(hub.seen) == asked


@pytest.mark.e2e  # real cmx processes
def test_fp16_runs_the_same_checkpoint_in_float16(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--json", "--input", "include=*.json *.safetensors")
    fp16 = subprocess.run([*CMX, "run", "get ml-model llama3 _fp16", "--input", f"repo={REPO_ID}", "--input",
                           f"revision={COMMIT}", "--input", "include=*.json *.safetensors", "--json"],
                          env={**llama_home.env, "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN}, cwd=llama_home.root,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and fp16.returncode == 0, proc.stderr + fp16.stderr
    bf16, half = json.loads(proc.stdout)["outputs"], json.loads(fp16.stdout)["outputs"]
    assert (half["dtype"], half["precision"]) == ("float16", "fp16") and bf16["dtype"] == "bfloat16"
    assert "README.md" not in {p.name for p in Path(half["path"]).iterdir()}


@pytest.mark.e2e  # real cmx processes
def test_a_repository_without_tokenizer_json_is_refused_before_any_download(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--input", "include=config.json *.safetensors")
    assert proc.returncode == 1
    assert f"{REPO_ID} at {COMMIT} has no tokenizer.json among the files chosen" in proc.stderr
    assert hub.requests_for(f"/{REPO_ID}/resolve/") == [] and entries(llama_home, "get-ml-model-llama3") == []


@pytest.mark.e2e  # real cmx processes
def test_a_gated_model_without_a_token_says_how_to_give_one(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, token=None)
    assert proc.returncode == 1 and "set HF_TOKEN" in proc.stderr


@pytest.mark.e2e  # real cmx processes
def test_your_own_folder_is_used_in_place_and_one_without_tokenizer_json_is_refused(llama_home: Home,
                                                                                   tiny_model: Path,
                                                                                   tmp_path: Path) -> None:
    mine = tmp_path / "my-llama3"
    shutil.copytree(tiny_model, mine)
    out = llama_home.cmx_json("run", "get ml-model llama3", "--input", f"model_path={mine}")["outputs"]
    assert (out["path"], out["name"], out["revision"], out["is_tiny"]) == (str(mine), "my-llama3", "", False)
    [entry] = entries(llama_home, "get-ml-model-llama3")
    assert [p.name for p in (llama_home.root / "cache" / "get-ml-model-llama3" / entry["key"]).iterdir()] == \
        ["meta.json"]  # nothing was copied
    (mine / "tokenizer.json").unlink()
    proc = llama_home.cmx("run", "get ml-model llama3", "--input", f"model_path={mine}")
    assert proc.returncode == 1 and f"{mine} has no tokenizer.json" in proc.stderr


# --- the real dataset from an R2 bucket ----------------------------------------------------------------

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


@pytest.fixture
def bucket(tiny_dataset: bytes) -> Iterator[Bucket]:
    site = Bucket(files={})
    served = serve(site, BucketHandler)
    next(served)  # site.url is known from here
    md5 = hashlib.md5(tiny_dataset).hexdigest()
    site.files.update({
        URI: f"{site.url}{BASE}\n".encode(),
        URI.replace(".uri", ".md5"): f"{md5}  ./cnn_eval.json\n{'0' * 32}  sample/cnn_eval_5000.json\n".encode(),
        f"{BASE}/cnn_eval.json": tiny_dataset,
    })
    yield site
    next(served, None)


@pytest.mark.e2e  # real cmx processes
def test_the_dataset_is_found_through_its_r2_metadata_and_checked_against_the_listed_md5(llama_home: Home,
                                                                                          bucket: Bucket) -> None:
    proc = llama_home.cmx("run", "get dataset cnndm", "--input", f"url={bucket.url}{URI}", "--input",
                          f"token={TOKEN}", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    assert out["rows"] == 16 and out["is_tiny"] is False
    path = Path(out["path"])
    assert path.name == "cnn_eval.json" and path.read_bytes() == bucket.files[f"{BASE}/cnn_eval.json"]
    assert [p.name for p in path.parent.iterdir() if p.name != "meta.json"] == ["cnn_eval.json"]
    assert bucket.seen == [URI, URI.replace(".uri", ".md5"), f"{BASE}/cnn_eval.json"]
    logs = everything_written(llama_home)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert "verified against the dataset's list" in logs and f"pin it with --input sha256={sha}" in logs
    assert TOKEN not in logs + proc.stdout + proc.stderr
    pinned = llama_home.cmx_json("run", "get dataset cnndm", "--input", f"url={bucket.url}{URI}", "--input",
                                 f"token={TOKEN}", "--input", f"sha256={sha}")
    assert pinned["outputs"]["rows"] == 16 and f"sha256 {sha} verified" in everything_written(llama_home)


@pytest.mark.e2e  # real cmx processes
def test_a_file_that_fails_the_listed_md5_or_the_given_sha256_leaves_no_entry(llama_home: Home,
                                                                            bucket: Bucket) -> None:
    wrong_sha = "0" * 64
    proc = llama_home.cmx("run", "get dataset cnndm", "--input", f"url={bucket.url}{URI}", "--input",
                          f"token={TOKEN}", "--input", f"sha256={wrong_sha}")
    assert proc.returncode == 1 and f"expected {wrong_sha}, got" in proc.stderr
    bucket.files[f"{BASE}/cnn_eval.json"] = bucket.files[f"{BASE}/cnn_eval.json"].replace(b"Summarize", b"Summarise")
    proc = llama_home.cmx("run", "get dataset cnndm", "--input", f"url={bucket.url}{URI}", "--input", f"token={TOKEN}")
    assert proc.returncode == 1 and "md5 mismatch for" in proc.stderr and "Traceback" not in proc.stderr
    assert entries(llama_home, "get-dataset-cnndm") == []


@pytest.mark.e2e  # real cmx processes
def test_a_direct_url_to_a_file_that_is_not_the_dataset_fails_its_format_check(llama_home: Home,
                                                                             bucket: Bucket) -> None:
    bucket.files["/notes.json"] = b'{"hello": "world"}'
    proc = llama_home.cmx("run", "get dataset cnndm", "--input", f"url={bucket.url}/notes.json", "--input",
                          f"token={TOKEN}")
    assert proc.returncode == 1 and "holds a JSON dict, not a list of samples" in proc.stderr
    assert entries(llama_home, "get-dataset-cnndm") == []


def test_r2_listing_reads_the_base_url_and_the_md5_list(bucket: Bucket, tmp_path: Path) -> None:
    files = r2_listing(f"{bucket.url}{URI}", tmp_path, token=TOKEN)
    assert [(f.path, f.url) for f in files] == [
        ("cnn_eval.json", f"{bucket.url}{BASE}/cnn_eval.json"),
        ("sample/cnn_eval_5000.json", f"{bucket.url}{BASE}/sample/cnn_eval_5000.json")]
    assert files[0].md5 == hashlib.md5(bucket.files[f"{BASE}/cnn_eval.json"]).hexdigest()


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
