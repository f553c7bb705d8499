"""get-vbench-networks through the CLI in a throw-away cmx home: every network file downloaded from HTTP servers on
127.0.0.1 (a file server for the plain URLs, tests/hf_server.py's Hub for bert-base-uncased, a local git repository
for DINO's hub code), laid out as VBench reads it, checked or recorded, cached, and checked again by the scorer.

The served files are bytes the test makes (no network of VBench's is needed to test the fetching); RAFT's is a zip
the test writes with the one member VBench's unzip yields.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cmx.mlperf.scoring.vbench_networks import DINO_HUB_CACHE, DINO_WEIGHTS, NetworksError, check_folder
from tests.conftest import CMX, Home
from tests.hf_server import COMMIT, TOKEN, HubSite, serve

BERT_REPO = "google-bert/bert-base-uncased"
PLAIN = {"clip": "/clip/ViT-B-32.pt", "dino": "/dino/dino_vitbase16_pretrain.pth", "amt": "/AMT/amt-s.pth",
         "raft": "/raft/models.zip", "tag2text": "/t2t/tag2text_swin_14m.pth"}


@dataclass
class Files:
    """Files served by path, each request's path recorded."""

    files: dict[str, bytes]
    seen: list[str] = field(default_factory=list)
    url: str = ""


class FilesHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: Files

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.site.seen.append(path)
        data = self.site.files.get(path)
        body = data if data is not None else b"Not Found"
        self.send_response(200 if data is not None else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def raft_zip(weights: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("models/raft-things.pth", weights)
        z.writestr("models/raft-small.pth", b"another checkpoint VBench does not read")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def files() -> Iterator[Files]:
    made = {path: f"{name} weights {os.urandom(8).hex()}".encode() * 100 for name, path in PLAIN.items()}
    made[PLAIN["raft"]] = raft_zip(b"raft-things weights" * 100)
    served = serve(Files(made), FilesHandler)
    yield next(served)
    next(served, None)


@pytest.fixture(scope="module")
def hub() -> Iterator[HubSite]:
    bert = {"config.json": b'{"model_type": "bert"}', "vocab.txt": b"[PAD]\n[UNK]\n", "tokenizer.json": b"{}",
            "tokenizer_config.json": b'{"do_lower_case": true}', "model.safetensors": b"bert weights" * 1000,
            "pytorch_model.bin": b"the same weights, another format"}
    served = serve(HubSite(bert, lfs={"model.safetensors", "pytorch_model.bin"}, repo=BERT_REPO))
    yield next(served)
    next(served, None)


@pytest.fixture(scope="module")
def dino_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("dino") / "dino"
    repo.mkdir()
    (repo / "hubconf.py").write_text("def dino_vitb16(pretrained=True, **kwargs): ...\n", encoding="utf-8")
    (repo / "vision_transformer.py").write_text("# the ViT\n", encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "hub code"], check=True)
    rev = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, rev


def fetch(home: Home, files: Files, hub: HubSite, dino: tuple[Path, str], **inputs: str) -> subprocess.CompletedProcess:
    given = {**{f"{name}_url": files.url + path for name, path in PLAIN.items()},
             "clip_sha256": hashlib.sha256(files.files[PLAIN["clip"]]).hexdigest(),
             "dino_repo": str(dino[0]), "dino_rev": dino[1], "bert_revision": COMMIT, **inputs}
    args = [a for k, v in given.items() for a in ("--input", f"{k}={v}")]
    env = {**home.env, "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN}
    return subprocess.run([*CMX, "run", "get ml-model vbench-networks", *args, "--json"], env=env, cwd=home.root,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.e2e  # real cmx processes
def test_networks_are_fetched_into_vbenchs_layout_checked_or_recorded_and_cached(
        builtin: Home, files: Files, hub: HubSite, dino_repo: tuple[Path, str]) -> None:
    proc = fetch(builtin, files, hub, dino_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    folder = Path(out["path"])
    assert folder.is_relative_to(builtin.root / "cache" / "get-vbench-networks") and out["is_random"] is False
    served = files.files
    assert (folder / "clip_model/ViT-B-32.pt").read_bytes() == served[PLAIN["clip"]]
    assert (folder / DINO_WEIGHTS).read_bytes() == served[PLAIN["dino"]]
    assert (folder / "amt_model/amt-s.pth").read_bytes() == served[PLAIN["amt"]]
    assert (folder / "caption_model/tag2text_swin_14m.pth").read_bytes() == served[PLAIN["tag2text"]]
    assert (folder / "raft_model/models/raft-things.pth").read_bytes() == b"raft-things weights" * 100
    assert not (folder / "raft_model/models/raft-small.pth").exists() and not list(folder.rglob("*.zip"))
    # DINO's hubconf.py loads its weights through torch hub's cache: TORCH_HOME=<folder>/torch finds them
    assert (folder / DINO_HUB_CACHE).resolve() == (folder / DINO_WEIGHTS).resolve()
    assert (folder / "dino_model/facebookresearch_dino_main/hubconf.py").is_file()
    assert not (folder / "dino_model/facebookresearch_dino_main/.git").exists()
    bert = folder / "bert-base-uncased"
    assert sorted(p.name for p in bert.iterdir()) == sorted(["config.json", "vocab.txt", "tokenizer.json",
                                                             "tokenizer_config.json", "model.safetensors"])
    manifest = json.loads(Path(out["manifest"]).read_text(encoding="utf-8"))
    verified = {f["path"]: f["verified"] for f in manifest["files"]}
    assert verified["clip_model/ViT-B-32.pt"] and verified["bert-base-uncased/model.safetensors"]
    assert sorted(out["unverified"]) == sorted(["amt_model/amt-s.pth", "caption_model/tag2text_swin_14m.pth",
                                                DINO_WEIGHTS, "raft_model/models/raft-things.pth",
                                                "dino_model/facebookresearch_dino_main/hubconf.py"])
    assert all(f["sha256"] == hashlib.sha256((folder / f["path"]).read_bytes()).hexdigest()
               for f in manifest["files"])
    assert "recorded in networks.json" in proc.stderr + "".join(
        p.read_text(encoding="utf-8") for p in builtin.root.rglob("*.log"))
    assert check_folder(folder).is_random is False

    asked = len(files.seen)
    again = fetch(builtin, files, hub, dino_repo)
    assert again.returncode == 0 and json.loads(again.stdout)["outputs"]["path"] == str(folder)
    assert len(files.seen) == asked  # cached: nothing fetched again

    # a file that changed after it was recorded is refused by the check the scorer makes before every run
    (folder / "amt_model/amt-s.pth").chmod(0o644)
    (folder / "amt_model/amt-s.pth").write_bytes(b"other weights")
    with pytest.raises(NetworksError, match=r"amt-s\.pth has sha256"):
        check_folder(folder)


@pytest.mark.e2e
def test_a_file_whose_published_sha256_differs_is_refused(builtin: Home, files: Files, hub: HubSite,
                                                          dino_repo: tuple[Path, str]) -> None:
    proc = fetch(builtin, files, hub, dino_repo, clip_sha256="0" * 64)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr  # --json: the error is in the JSON answer
    assert "sha256" in said and "ViT-B-32.pt" in said
    assert not list((builtin.root / "cache").glob("get-vbench-networks/*/clip_model/ViT-B-32.pt"))
