"""cmx.tools.huggingface against a real HTTP server on 127.0.0.1 that imitates the Hub (tests/hf_server.py)."""

from __future__ import annotations

import hashlib
import logging
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx.secrets import Secret
from cmx.tools import huggingface as hf
from cmx.tools.download import DownloadError, partial_path
from tests.hf_server import COMMIT, OTHER_TOKEN, REPO_ID, TOKEN, HubSite, serve

MIB = 1 << 20
WEIGHTS = random.Random(3).randbytes(3 * MIB)  # three of download()'s 1 MiB chunks
FILES = {
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    "config.json": b'{"model_type": "llama", "torch_dtype": "float16"}\n',
    "tokenizer.json": b'{"version": "1.0"}\n',
    "model.safetensors": WEIGHTS,
    "pytorch_model.bin": b"duplicate weights that must not be downloaded",
    "original/params.json": b"{}\n",
}
LFS = {"model.safetensors", "pytorch_model.bin"}
CHOSEN = {"config.json", "tokenizer.json", "model.safetensors"}  # the default selection
OTHER_COMMIT = "0" * 40


@pytest.fixture
def hub() -> Iterator[HubSite]:
    yield from serve(HubSite(files=dict(FILES), lfs=set(LFS)))


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> logging.Logger:
    caplog.set_level(logging.INFO, logger="test-hf")
    return logging.getLogger("test-hf")


def fetch(hub: HubSite, dest: Path, **kw: Any) -> Path:
    """download_repo() of the test repository at COMMIT, with the token and no backoff."""
    kw.setdefault("token", Secret(TOKEN))
    kw.setdefault("backoff", 0)
    return hf.download_repo(hub.url, REPO_ID, COMMIT, dest, **kw)


def resolved(hub: HubSite) -> list[str]:
    return [p.rpartition("/")[2] for p in hub.requests_for(f"/{REPO_ID}/resolve/")]


# --- listing -------------------------------------------------------------------------------------------

def test_list_files_gives_each_file_with_its_lfs_sha256_or_git_blob_id(hub: HubSite) -> None:
    files = {f.path: f for f in hf.list_files(hub.url + "/", REPO_ID, COMMIT, token=Secret(TOKEN))}
    assert set(files) == set(FILES)
    weights, config = files["model.safetensors"], files["config.json"]
    assert (weights.size, weights.sha256, weights.blob_id) == (len(WEIGHTS), hashlib.sha256(WEIGHTS).hexdigest(), None)
    assert config.sha256 is None and config.blob_id == hashlib.sha1(
        b"blob %d\0" % len(FILES["config.json"]) + FILES["config.json"]).hexdigest()
    [seen] = hub.seen
    assert seen.path == f"/api/models/{REPO_ID}/revision/{COMMIT}" and seen.query == {"blobs": ["true"]}
    assert seen.authorization == f"Bearer {TOKEN}"


def test_a_plain_string_token_is_sent_too(hub: HubSite) -> None:
    assert len(hf.list_files(hub.url, REPO_ID, COMMIT, token=TOKEN)) == len(FILES)


def test_a_mirror_that_lists_another_commit_than_asked_is_refused(hub: HubSite) -> None:
    hub.listed_sha = OTHER_COMMIT
    with pytest.raises(hf.HuggingFaceError, match=f"lists {REPO_ID} at commit {OTHER_COMMIT} when asked for {COMMIT}"):
        hf.list_files(hub.url, REPO_ID, COMMIT, token=TOKEN)


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "dir\\file"])
def test_a_listed_file_with_an_unsafe_path_is_refused(hub: HubSite, path: str) -> None:
    hub.extra_siblings.append({"rfilename": path, "size": 1, "blobId": "0" * 40})
    with pytest.raises(hf.HuggingFaceError, match="lists a file with an unsafe path"):
        hf.list_files(hub.url, REPO_ID, COMMIT, token=TOKEN)


# --- refusals: pinning, access ------------------------------------------------------------------------

def test_a_full_commit_is_accepted_without_a_request(hub: HubSite) -> None:
    assert hf.require_commit(hub.url, REPO_ID, COMMIT, token=TOKEN) == COMMIT
    assert hub.seen == []


def test_a_branch_is_refused_naming_the_commit_it_points_at_now(hub: HubSite) -> None:
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.require_commit(hub.url, REPO_ID, "main", token=TOKEN)
    assert "revision 'main' is not a full commit sha: a branch or tag moves" in info.value.message
    assert info.value.hint == f"{REPO_ID} main is at {COMMIT} now: pin it with --input revision={COMMIT}"


def test_no_revision_names_the_commit_of_main_and_the_input_to_pin(hub: HubSite) -> None:
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.require_commit(hub.url, REPO_ID, None, token=TOKEN, name="fp8_revision")
    assert info.value.message.startswith(f"no fp8_revision is pinned for {REPO_ID}: a branch or tag moves")
    assert f"pin it with --input fp8_revision={COMMIT}" in info.value.hint
    assert [s.path for s in hub.seen] == [f"/api/models/{REPO_ID}/revision/main"]


@pytest.mark.parametrize("revision", [COMMIT[:7], COMMIT.upper()])
def test_a_short_or_uppercase_sha_is_not_a_pinned_commit(hub: HubSite, revision: str) -> None:
    hub.branches = (revision,)  # a server that would resolve it: still refused, with the full sha
    with pytest.raises(hf.HuggingFaceError, match="is not a full commit sha") as info:
        hf.require_commit(hub.url, REPO_ID, revision, token=TOKEN)
    assert f"--input revision={COMMIT}" in info.value.hint


def test_download_repo_refuses_a_branch_before_downloading(hub: HubSite, tmp_path: Path) -> None:
    with pytest.raises(hf.HuggingFaceError, match="is not a full commit sha"):
        hf.download_repo(hub.url, REPO_ID, "main", tmp_path / "model", token=TOKEN)
    assert resolved(hub) == [] and not (tmp_path / "model").exists()


def test_401_without_a_token_says_how_to_give_one(hub: HubSite) -> None:
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.list_files(hub.url, REPO_ID, COMMIT)
    assert info.value.message == f"{REPO_ID} needs a token, or does not exist (HTTP 401 from {hub.url})"
    assert "set HF_TOKEN" in info.value.hint and hub.seen[0].authorization is None


def test_a_token_without_access_gets_403_and_the_licence_hint_without_the_token(hub: HubSite) -> None:
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.list_files(hub.url, REPO_ID, COMMIT, token=Secret(OTHER_TOKEN))
    assert info.value.message == f"{REPO_ID} is gated and the token given has no access to it (HTTP 403)"
    assert info.value.hint == f"accept the licence on {hub.url}/{REPO_ID} with the account of the token, then run again"
    assert OTHER_TOKEN not in info.value.render() and OTHER_TOKEN not in repr(info.value.args)


def test_a_refused_token_is_not_shown(hub: HubSite) -> None:
    wrong = "hf_ThisTokenIsWrongAndMustNotAppear"
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.list_files(hub.url, REPO_ID, COMMIT, token=wrong)
    assert "(HTTP 401)" in info.value.message and wrong not in info.value.render()


def test_404_names_a_missing_repository_or_revision(hub: HubSite) -> None:
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.list_files(hub.url, "meta-llama/No-Such-Model", COMMIT, token=TOKEN)
    assert info.value.message == f"{hub.url} has no model repository 'meta-llama/No-Such-Model' (HTTP 404)"
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.list_files(hub.url, REPO_ID, OTHER_COMMIT, token=TOKEN)
    assert info.value.message == f"{REPO_ID} has no revision {OTHER_COMMIT!r} at {hub.url}"
    assert TOKEN not in info.value.render()


def test_a_refused_connection_is_retried_then_reported(tmp_path: Path) -> None:
    site = HubSite(files={}, lfs=set())
    for served in serve(site):
        url = served.url
    with pytest.raises(hf.HuggingFaceError, match=r"cannot list the files of .*: connection refused \(4 attempts\)"):
        hf.list_files(url, REPO_ID, COMMIT, token=TOKEN, backoff=0)


# --- choosing files ------------------------------------------------------------------------------------

def listed(hub: HubSite) -> list[hf.RepoFile]:
    return hf.list_files(hub.url, REPO_ID, COMMIT, token=TOKEN)


def test_the_default_selection_skips_gitattributes_and_duplicate_weights(hub: HubSite) -> None:
    assert {f.path for f in hf.select_files(listed(hub), repo=REPO_ID, revision=COMMIT)} == CHOSEN


def test_without_safetensors_the_other_weight_formats_are_kept(hub: HubSite) -> None:
    files = [f for f in listed(hub) if not f.path.endswith(".safetensors")]
    chosen = {f.path for f in hf.select_files(files, repo=REPO_ID, revision=COMMIT)}
    assert chosen == {"config.json", "tokenizer.json", "pytorch_model.bin", "original/params.json"}


def test_include_globs_choose_the_files(hub: HubSite) -> None:
    chosen = hf.select_files(listed(hub), "*.json original/*", repo=REPO_ID, revision=COMMIT)
    assert {f.path for f in chosen} == {"config.json", "tokenizer.json", "original/params.json"}
    with pytest.raises(hf.HuggingFaceError, match=r"no file of .* at .* matches include='\*.gguf'") as info:
        hf.select_files(listed(hub), "*.gguf", repo=REPO_ID, revision=COMMIT)
    assert "config.json" in info.value.hint


# --- downloading -----------------------------------------------------------------------------------------

def test_download_repo_fetches_the_chosen_files_checks_each_and_reports_progress(
        hub: HubSite, tmp_path: Path, log: logging.Logger, caplog: pytest.LogCaptureFixture) -> None:
    progress: list[tuple[int, int]] = []
    dest = fetch(hub, tmp_path / "model", log=log, on_progress=lambda done, total: progress.append((done, total)))
    assert dest == tmp_path / "model"
    assert {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()} == CHOSEN
    assert all((dest / name).read_bytes() == FILES[name] for name in CHOSEN)
    assert set(resolved(hub)) == CHOSEN and all(s.authorization == f"Bearer {TOKEN}" for s in hub.seen)
    total = sum(len(FILES[n]) for n in CHOSEN)
    assert progress[-1] == (total, total) and all(t == total for _, t in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert "model.safetensors: 3145728 bytes, sha256 verified" in caplog.messages
    assert f"config.json: {len(FILES['config.json'])} bytes, git blob id verified" in caplog.messages
    assert not (tmp_path / ".model.download").exists()  # the default scratch goes on success
    assert TOKEN not in caplog.text


def test_a_weight_file_that_fails_its_sha256_is_removed_and_nothing_is_published(hub: HubSite,
                                                                                 tmp_path: Path) -> None:
    hub.corrupt.add("model.safetensors")
    scratch = tmp_path / "scratch"
    with pytest.raises(DownloadError, match=r"sha256 mismatch for .*model.safetensors") as info:
        fetch(hub, tmp_path / "model", scratch=scratch)
    assert "the downloaded file was removed" in info.value.message and TOKEN not in info.value.render()
    assert not (tmp_path / "model").exists()
    assert not (scratch / "model.safetensors").exists() and not partial_path(scratch / "model.safetensors").exists()


def test_a_small_file_that_fails_its_git_blob_id_is_removed(hub: HubSite, tmp_path: Path) -> None:
    hub.corrupt.add("config.json")
    scratch = tmp_path / "scratch"
    with pytest.raises(hf.HuggingFaceError) as info:
        fetch(hub, tmp_path / "model", scratch=scratch)
    expected = hf.list_files(hub.url, REPO_ID, COMMIT, token=TOKEN)
    blob = next(f.blob_id for f in expected if f.path == "config.json")
    assert info.value.message.startswith(f"config.json of {REPO_ID} does not match its git blob id: expected {blob}, ")
    assert info.value.message.endswith("; the file was removed")
    assert not (scratch / "config.json").exists() and not (tmp_path / "model").exists()


def test_a_connection_dropped_mid_file_is_resumed_with_a_range_request(hub: HubSite, tmp_path: Path) -> None:
    hub.drops["model.safetensors"] = [MIB + MIB // 2]  # the first whole chunk is kept
    dest = fetch(hub, tmp_path / "model")
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS
    assert hub.ranges("model.safetensors") == [None, f"bytes={MIB}-"]


def test_a_later_call_skips_verified_files_and_resumes_the_partial_one(hub: HubSite, tmp_path: Path,
                                                                      log: logging.Logger,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    hub.drops["model.safetensors"] = [MIB + MIB // 2, 10]  # then an attempt that gets nowhere: give up
    scratch = tmp_path / "scratch"
    with pytest.raises(DownloadError, match="gave up after 2 attempts"):
        fetch(hub, tmp_path / "model", scratch=scratch, retries=0, log=log)
    assert partial_path(scratch / "model.safetensors").stat().st_size == MIB
    assert (scratch / hf.MANIFEST).is_file() and not (tmp_path / "model").exists()
    asked_before = len(resolved(hub))
    caplog.clear()
    dest = fetch(hub, tmp_path / "model", scratch=scratch, log=log)
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS
    assert resolved(hub)[asked_before:] == ["model.safetensors"]  # config and tokenizer: not asked again
    assert hub.ranges("model.safetensors")[-1] == f"bytes={MIB}-"
    assert "config.json: already downloaded and checked" in caplog.messages
    assert scratch.is_dir()  # the caller's scratch is the caller's to remove


def test_a_changed_file_in_the_scratch_folder_is_downloaded_again(hub: HubSite, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    hub.corrupt.add("model.safetensors")
    with pytest.raises(DownloadError):
        fetch(hub, tmp_path / "model", scratch=scratch)  # config.json and tokenizer.json verified and kept
    (scratch / "config.json").write_bytes(b'{"tampered": true}\n')
    hub.corrupt.clear()
    asked_before = len(resolved(hub))
    dest = fetch(hub, tmp_path / "model", scratch=scratch)
    assert (dest / "config.json").read_bytes() == FILES["config.json"]
    assert resolved(hub)[asked_before:] == ["config.json", "model.safetensors"]


def test_too_little_free_space_is_refused_before_any_download(hub: HubSite, tmp_path: Path) -> None:
    with pytest.raises(hf.HuggingFaceError) as info:
        fetch(hub, tmp_path / "model", scratch=tmp_path / "scratch", min_free=10**15)
    assert re.fullmatch(r"the download needs 0.0 GB more \(and 1000000.0 GB must stay free\) and "
                        rf"{re.escape(str(tmp_path / 'scratch'))} has [0-9.]+ GB free", info.value.message)
    assert info.value.hint == "free space, or move the cache to a larger disk with CMX_CACHE=/big/disk/cache"
    assert resolved(hub) == [] and not (tmp_path / "model").exists()


def test_the_free_space_check_counts_only_what_is_still_to_fetch(tmp_path: Path) -> None:
    files = [hf.RepoFile("a.bin", 10**12, None, None), hf.RepoFile("b.bin", 10**12, None, None)]
    with open(tmp_path / "a.bin", "wb") as f:
        f.truncate(10**12)  # sparse: a complete file that takes no room
    with pytest.raises(hf.HuggingFaceError) as info:
        hf.check_space(tmp_path, files, min_free=10**18)
    assert info.value.message.startswith("the download needs 1000.0 GB more (and")
    hf.check_space(tmp_path, files[:1])  # nothing left to fetch


def test_a_callers_file_list_is_downloaded_as_given(hub: HubSite, tmp_path: Path) -> None:
    files = [f for f in listed(hub) if f.path in ("config.json", "original/params.json")]
    dest = fetch(hub, tmp_path / "model", files=files)
    assert (dest / "original" / "params.json").read_bytes() == FILES["original/params.json"]
    assert sorted(resolved(hub)) == ["config.json", "params.json"]


def test_a_callers_file_list_with_an_unsafe_path_is_refused(hub: HubSite, tmp_path: Path) -> None:
    with pytest.raises(hf.HuggingFaceError, match=r"unsafe path: '../x'"):
        fetch(hub, tmp_path / "model", files=[hf.RepoFile("../x", 1, None, None)])
    assert resolved(hub) == []


def test_git_blob_id_is_what_git_computes(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(FILES["config.json"])
    git = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    assert hf.git_blob_id(path) == git.stdout.strip()


def test_importing_the_module_does_not_import_requests() -> None:
    import sys

    code = "import sys, cmx.tools.huggingface; print('requests' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_dataset_repository_is_listed_and_fetched_under_the_hubs_dataset_paths(tmp_path: Path) -> None:
    site = HubSite(files={"data/train-00000-of-00001.parquet": WEIGHTS, "README.md": b"# card\n"},
                   lfs={"data/train-00000-of-00001.parquet"}, repo="datasets/Shopify/product-catalogue")
    for hub in serve(site):
        repo = "datasets/Shopify/product-catalogue"
        dest = hf.download_repo(hub.url, repo, COMMIT, tmp_path / "set", token=Secret(TOKEN), backoff=0)
        assert (dest / "data/train-00000-of-00001.parquet").read_bytes() == WEIGHTS
        assert hub.requests_for(f"/api/{repo}/revision/") and not hub.requests_for("/api/models")
        assert len(hub.requests_for(f"/{repo}/resolve/{COMMIT}/")) == 2
        with pytest.raises(hf.HuggingFaceError, match="has no dataset repository 'Shopify/other'"):
            hf.list_files(hub.url, "datasets/Shopify/other", COMMIT, token=Secret(TOKEN), backoff=0)
