"""get-ml-model-llama2 and get-dataset-openorca, end to end through the CLI in a throw-away cmx home.

Downloads go to a real HTTP server on 127.0.0.1 that imitates the Hugging Face Hub
(tests/hf_server.py): the revision API (`/api/models/{repo}/revision/{rev}?blobs=true`, listing
`siblings` with their size and LFS sha256 or git blob id) and `/{repo}/resolve/{commit}/{path}`,
both behind a bearer token. The files it serves are a tiny model made by cmx.mlperf.benchmarks.llama2_70b.tiny.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.llama2_70b.dataset import load_openorca
from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama, make_tiny_openorca
from tests.conftest import REPO, Home
from tests.hf_server import COMMIT, REPO_ID, TOKEN, HubSite, serve

RECIPES = ("get-ml-model", "get-dataset", "get-ml-model-llama2", "get-dataset-openorca")

pytestmark = pytest.mark.e2e  # real cmx processes, a real server


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("served") / "model", seed=0).path


@pytest.fixture
def hub(tiny_model: Path) -> Iterator[HubSite]:
    files = {p.name: p.read_bytes() for p in sorted(tiny_model.iterdir())}
    files.update({".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
                  "README.md": b"# a tiny stand-in for Llama 2\n",
                  "pytorch_model.bin": b"duplicate weights that must not be downloaded"})
    yield from serve(HubSite(files=files, lfs={"model.safetensors", "pytorch_model.bin"}))


@pytest.fixture
def llama_home(home: Home) -> Home:
    for name in RECIPES:
        shutil.copytree(REPO / "recipes" / name, home.recipes / name)
    return home


def entries(home: Home, recipe: str) -> list[dict]:
    listed = home.cmx_json("cache", "ls")
    return [e for e in listed if e["recipe"] == recipe]  # type: ignore[union-attr]  # cmx_json's JSON is a list here


def everything_written(home: Home) -> str:
    return "".join(p.read_text(errors="replace") for p in home.root.rglob("*")
                   if p.is_file() and p.suffix in (".json", ".log", ".txt", ".yaml", ""))


# --- the tiny model and dataset ----------------------------------------------------------------------

def test_tiny_model_and_dataset_build_through_the_cli_and_come_from_the_cache_next_time(llama_home: Home) -> None:
    first = llama_home.cmx_json("run", "get dataset openorca _tiny", "--input", "rows=64", "--input", "seed=5")
    assert first["outputs"]["rows"] == 64 and first["outputs"]["is_tiny"] is True
    assert {s["status"] for s in first["steps"].values()} == {"built"}
    data = load_openorca(first["outputs"]["path"])
    assert len(data) == 64
    model = first["steps"]["get-ml-model-llama2"]["outputs"]
    assert model["is_tiny"] is True and model["eos_token_id"] == 2 and model["dtype"] == "bfloat16"
    assert model["name"] == "tiny-llama2-random-seed0" and model["precision"] == "bf16"
    assert (Path(model["path"]) / "model.safetensors").is_file() and model["tokenizer_path"] == model["path"]
    second = llama_home.cmx_json("run", "get dataset openorca _tiny", "--input", "rows=64", "--input", "seed=5")
    assert second["steps"]["get-dataset-openorca"]["status"] == "cached"
    assert second["outputs"] == first["outputs"]
    logs = everything_written(llama_home)
    assert "RANDOM weights" in logs and "mean nothing" in logs


def test_the_tiny_model_has_no_fp8_variant(llama_home: Home) -> None:
    proc = llama_home.cmx("run", "get ml-model llama2 _tiny _fp8")
    assert proc.returncode == 1 and "the tiny model has no FP8 checkpoint" in proc.stderr
    assert "use _tiny with _bf16" in proc.stderr and entries(llama_home, "get-ml-model-llama2") == []


def test_tiny_only_inputs_are_refused_for_the_real_model(llama_home: Home) -> None:
    proc = llama_home.cmx("run", "get ml-model llama2", "--input", "layers=4")
    assert proc.returncode == 1 and "layers applies to the tiny model only" in proc.stderr


# --- the real model from a Hub ----------------------------------------------------------------------

def run_hub(home: Home, hub: HubSite, *args: str, token: str | None = TOKEN, query: str = "get ml-model llama2"):
    env = {**home.env, "HF_ENDPOINT": hub.url}
    env.pop("HF_TOKEN", None)
    if token:
        env["HF_TOKEN"] = token
    import subprocess

    from tests.conftest import CMX
    return subprocess.run([*CMX, "run", query, *args], env=env, cwd=home.root, capture_output=True, text=True,
                          timeout=120)


def test_the_model_is_downloaded_at_the_commit_with_the_token_and_checked(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--input", f"endpoint={hub.url}", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert folder.is_relative_to(llama_home.root / "cache" / "get-ml-model-llama2")
    assert (out["name"], out["revision"], out["dtype"], out["precision"]) == (REPO_ID, COMMIT, "bfloat16", "bf16")
    assert out["eos_token_id"] == 2 and out["is_tiny"] is False and out["tokenizer_path"] == out["path"]
    wanted = {name for name in hub.files if name not in (".gitattributes", "pytorch_model.bin")}
    assert {p.name for p in folder.iterdir()} == wanted
    assert all((folder / name).read_bytes() == hub.files[name] for name in wanted)
    api = hub.requests_for("/api/")
    assert api == [f"/api/models/{REPO_ID}/revision/{COMMIT}"] and hub.seen[0].query == {"blobs": ["true"]}
    assert not any(p.endswith("pytorch_model.bin") for p in hub.requests_for(f"/{REPO_ID}/resolve/"))
    assert all(s.authorization == f"Bearer {TOKEN}" for s in hub.seen)
    assert TOKEN not in proc.stdout + proc.stderr + everything_written(llama_home)
    logs = everything_written(llama_home)
    assert "model.safetensors: " in logs and "sha256 verified" in logs and "git blob id verified" in logs
    requests_before = len(hub.seen)
    again = run_hub(llama_home, hub, "--json")  # HF_ENDPOINT alone gives the endpoint too
    assert again.returncode == 0 and json.loads(again.stdout)["outputs"] == out
    assert len(hub.seen) == requests_before  # from the cache: nothing asked


def test_a_branch_is_refused_with_the_commit_it_points_at(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--input", "revision=main")
    assert proc.returncode == 1
    assert "revision 'main' is not a full commit sha: a branch or tag moves" in proc.stderr
    assert f"pin it with --input revision={COMMIT}" in proc.stderr
    assert hub.requests_for(f"/{REPO_ID}/resolve/") == [] and entries(llama_home, "get-ml-model-llama2") == []


def test_fp8_without_a_pinned_commit_names_the_commit_to_pin(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--input", f"fp8_repo={REPO_ID}", query="get ml-model llama2 _fp8")
    assert proc.returncode == 1 and f"no fp8_revision is pinned for {REPO_ID}" in proc.stderr
    assert f"--input fp8_revision={COMMIT}" in proc.stderr


def test_fp8_downloads_the_fp8_repository_and_reports_its_dtype(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--input", f"fp8_repo={REPO_ID}", "--input", f"fp8_revision={COMMIT}",
                   "--input", "include=*.json *.safetensors", "--json", query="get ml-model llama2 _fp8")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    assert (out["precision"], out["dtype"], out["name"]) == ("fp8", "float16", REPO_ID)  # config's torch_dtype
    assert "README.md" not in {p.name for p in Path(out["path"]).iterdir()}


def test_a_repository_without_a_tokenizer_is_refused_before_any_download(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, "--input", "include=config.json *.safetensors")
    assert proc.returncode == 1
    assert f"{REPO_ID} at {COMMIT} has no tokenizer (tokenizer.json or tokenizer.model) among the files chosen" \
        in proc.stderr
    assert hub.requests_for(f"/{REPO_ID}/resolve/") == []


def test_a_gated_model_without_a_token_says_how_to_give_one(llama_home: Home, hub: HubSite) -> None:
    proc = run_hub(llama_home, hub, token=None)
    assert proc.returncode == 1 and f"{REPO_ID} needs a token, or does not exist (HTTP 401" in proc.stderr
    assert "set HF_TOKEN" in proc.stderr


def test_a_weight_file_that_fails_its_sha256_leaves_no_cache_entry(llama_home: Home, hub: HubSite) -> None:
    hub.corrupt.add("model.safetensors")
    proc = run_hub(llama_home, hub)
    assert proc.returncode == 1 and "sha256 mismatch for" in proc.stderr and "model.safetensors" in proc.stderr
    assert "Traceback" not in proc.stderr and TOKEN not in proc.stdout + proc.stderr
    assert entries(llama_home, "get-ml-model-llama2") == []


def test_a_small_file_that_fails_its_git_blob_id_leaves_no_cache_entry(llama_home: Home, hub: HubSite) -> None:
    hub.corrupt.add("config.json")
    proc = run_hub(llama_home, hub)
    assert proc.returncode == 1 and "config.json of meta-llama/Llama-2-70b-chat-hf does not match its git blob id" \
        in proc.stderr
    assert entries(llama_home, "get-ml-model-llama2") == []


# --- your own weights --------------------------------------------------------------------------------

def test_your_own_folder_is_used_in_place_and_its_key_follows_its_files(llama_home: Home, tiny_model: Path,
                                                                       tmp_path: Path) -> None:
    mine = tmp_path / "my-llama"
    shutil.copytree(tiny_model, mine)
    plan = llama_home.cmx_json("plan", "get ml-model llama2", "--input", f"model_path={mine}")
    key = plan["steps"][0]["key"]  # type: ignore[index]  # the plan's JSON is a dict
    out = llama_home.cmx_json("run", "get ml-model llama2", "--input", f"model_path={mine}")["outputs"]
    assert out["path"] == str(mine) and out["tokenizer_path"] == str(mine) and out["name"] == "my-llama"
    assert (out["revision"], out["dtype"], out["is_tiny"], out["eos_token_id"]) == ("", "bfloat16", False, 2)
    [entry] = entries(llama_home, "get-ml-model-llama2")
    entry_dir = llama_home.root / "cache" / "get-ml-model-llama2" / entry["key"]
    assert [p.name for p in entry_dir.iterdir()] == ["meta.json"]  # nothing was copied
    config = mine / "config.json"
    config.write_text(config.read_text().replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": 1e-06'))
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))
    replanned = llama_home.cmx_json("plan", "get ml-model llama2", "--input", f"model_path={mine}")
    assert replanned["steps"][0]["key"] != key and replanned["steps"][0]["cached"] is False  # type: ignore[index]  # the plan's JSON is a dict


def test_your_own_folder_without_config_json_is_refused(llama_home: Home, tmp_path: Path) -> None:
    (tmp_path / "weights").mkdir()
    proc = llama_home.cmx("run", "get ml-model llama2", "--input", f"model_path={tmp_path / 'weights'}")
    assert proc.returncode == 1
    assert f"{tmp_path / 'weights'} has no config.json: it is not a Hugging Face model folder" in proc.stderr
    assert entries(llama_home, "get-ml-model-llama2") == []


# --- the real dataset from a server ----------------------------------------------------------------

@pytest.fixture
def orca_site(tiny_model: Path, tmp_path: Path) -> Iterator[HubSite]:
    made = make_tiny_openorca(tmp_path / "orca.pkl", tiny_model, rows=16, seed=1)
    pickled = made.path.read_bytes()
    site = HubSite(files={"orca.pkl": pickled}, lfs=set())
    site.files["orca.pkl.gz"] = gzip.compress(pickled, mtime=0)
    yield from serve(site)


def dataset_url(site: HubSite, name: str) -> str:
    return f"{site.url}/{REPO_ID}/resolve/{COMMIT}/{name}"


def test_the_dataset_is_decompressed_and_checked_against_the_pickle_sha256(llama_home: Home,
                                                                          orca_site: HubSite) -> None:
    sha = hashlib.sha256(orca_site.files["orca.pkl"]).hexdigest()
    out = llama_home.cmx_json("run", "get dataset openorca", "--input", f"url={dataset_url(orca_site, 'orca.pkl.gz')}",
                              "--input", f"sha256={sha}", "--input", f"token={TOKEN}")["outputs"]
    assert out["rows"] == 16 and out["is_tiny"] is False
    path = Path(out["path"])
    assert path.name == "open_orca_gpt4_tokenized_llama.sampled_24576.pkl"
    assert path.read_bytes() == orca_site.files["orca.pkl"]
    assert [p.name for p in path.parent.iterdir() if p.name != "meta.json"] == [path.name]  # no .gz kept
    assert orca_site.seen[-1].authorization == f"Bearer {TOKEN}"
    assert TOKEN not in everything_written(llama_home)


def test_a_dataset_with_the_wrong_sha256_fails_clearly_and_leaves_no_entry(llama_home: Home,
                                                                         orca_site: HubSite) -> None:
    # the default sha256 is the real dataset's: the tiny file served here cannot match it
    gz = llama_home.cmx("run", "get dataset openorca", "--input", f"url={dataset_url(orca_site, 'orca.pkl.gz')}",
                        "--input", f"token={TOKEN}")
    actual = hashlib.sha256(orca_site.files["orca.pkl"]).hexdigest()
    assert gz.returncode == 1
    assert ("sha256 mismatch for the pickle from " in gz.stderr
            and f"expected b64e66e54b6267f79eb4f9ccec52d466bab3ac94747ed258c3b0f337ed166fab, got {actual}" in gz.stderr)
    plain = llama_home.cmx("run", "get dataset openorca", "--input", f"url={dataset_url(orca_site, 'orca.pkl')}",
                           "--input", f"token={TOKEN}")
    assert plain.returncode == 1 and f"got {actual}; the downloaded file was removed" in plain.stderr
    assert "Traceback" not in gz.stderr + plain.stderr
    assert entries(llama_home, "get-dataset-openorca") == []


def test_a_file_that_is_not_the_dataset_fails_its_format_check(llama_home: Home, orca_site: HubSite) -> None:
    orca_site.files["notes.pkl"] = b"not a pickle at all\n"
    proc = llama_home.cmx("run", "get dataset openorca", "--input", f"url={dataset_url(orca_site, 'notes.pkl')}",
                          "--input", "sha256=none", "--input", f"token={TOKEN}")
    assert proc.returncode == 1 and "is not a pandas pickle" in proc.stderr
    assert entries(llama_home, "get-dataset-openorca") == []
