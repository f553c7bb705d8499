"""VBench's pretrained networks for the six dimensions MLPerf's wan-2.2-t2v-a14b scores, fetched into the folder
layout VBench reads (its CACHE_DIR, named by VBENCH_CACHE_DIR), each file checked against a published sha256 where
one is published and otherwise recorded in the folder's manifest and checked again before every scoring run.

Where VBench 0.1.5 looks (PyPI's wheel, vbench/utils.py `init_submodules` with `local=True`, as the reference's
`--load_ckpt_from_local True` runs it; and each dimension's module):

- subject_consistency: DINO ViT-B/16, by `torch.hub.load(repo_or_dir=..., source='local')` from
  dino_model/facebookresearch_dino_main/ (DINO's hub code, a git checkout);
- background_consistency and appearance_style: CLIP ViT-B/32 (`clip.load`), clip_model/ViT-B-32.pt;
- motion_smoothness: AMT-S (vbench's bundled config AMT-S.yaml), amt_model/amt-s.pth;
- dynamic_degree: RAFT, raft_model/models/raft-things.pth (from the models.zip VBench unzips there);
- scene: Tag2Text Swin-B, caption_model/tag2text_swin_14m.pth.

Two more, which VBench does not name in CACHE_DIR:
- DINO's hub code ignores the `path` VBench passes (its `dino_vitb16(pretrained=True, **kwargs)` hands the extra
  keywords to the ViT and loads its weights with `torch.hub.load_state_dict_from_url`, facebookresearch/dino
  7c446df, hubconf.py), so the weights must be in torch hub's cache: `torch/hub/checkpoints/` here, a link to
  dino_model/dino_vitbase16_pretrain.pth, found with TORCH_HOME=<folder>/torch;
- Tag2Text builds a BertModel and a BertTokenizer `from_pretrained('bert-base-uncased')` (vbench
  third_party/tag2Text/tag2text.py): a folder of that name in the working directory is read before the Hub, so
  the scorer runs VBench with this folder as its working directory, and `bert-base-uncased/` holds that
  repository's config, tokenizer and weights at a pinned commit.

MANIFEST (networks.json) says, per file, where it came from, its sha256, and whether that sha256 was checked against
a published one or only recorded; `is_random` marks the tiny path's random-weight networks.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.tools.archive import extract
from cmx.tools.download import download
from cmx.tools.fs import sha256_file

MANIFEST = "networks.json"
TORCH_HOME = "torch"  # TORCH_HOME=<folder>/torch: torch.hub's checkpoints/ under it
BERT = "bert-base-uncased"  # the name Tag2Text asks transformers for, read as a folder in the working directory
DINO_HUB = "dino_model/facebookresearch_dino_main"  # init_submodules' repo_or_dir under CACHE_DIR
DINO_WEIGHTS = "dino_model/dino_vitbase16_pretrain.pth"
DINO_HUB_CACHE = f"{TORCH_HOME}/hub/checkpoints/dino_vitbase16_pretrain.pth"  # what hubconf.py's URL caches as
RAFT_ARCHIVE_MEMBER = "models/raft-things.pth"  # in models.zip, which VBench unzips into raft_model/


class NetworksError(CmxError):
    """A network file is missing, or its bytes are not those its manifest or its publisher names."""


@dataclass(frozen=True)
class NetworkFile:
    """One file VBench loads: where it goes under CACHE_DIR, where it comes from, its published sha256 (None when
    its publisher gives none), and the dimensions that read it."""

    path: str
    url: str
    sha256: str | None
    dimensions: tuple[str, ...]


@dataclass(frozen=True)
class Fetched:
    """A file in the folder: its sha256, and whether that was checked against a published one (`verified`) or only
    recorded here when it was fetched or made."""

    path: str
    source: str
    sha256: str
    size: int
    verified: bool


@dataclass(frozen=True)
class Manifest:
    """networks.json: every file of the folder that VBench reads, and whether the networks are random weights."""

    files: tuple[Fetched, ...]
    is_random: bool
    note: str = ""

    def write(self, folder: Path) -> Path:
        path = Path(folder) / MANIFEST
        data = {"is_random": self.is_random, "note": self.note, "files": [asdict(f) for f in self.files]}
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = Path(folder) / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            files = tuple(Fetched(**f) for f in data["files"])
            return cls(files, bool(data["is_random"]), str(data.get("note", "")))
        except FileNotFoundError:
            raise NetworksError(f"{folder} has no {MANIFEST}: it is not a folder of VBench's networks",
                                hint="make it with `cmx run \"get ml-model vbench-networks\"` (or its _tiny)") from None
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise NetworksError(f"{path} is not a networks manifest ({exc})",
                                hint="remove the folder's cache entry and fetch it again") from None


def check_folder(folder: Path, on_file: Callable[[str], None] | None = None) -> Manifest:
    """Every file the manifest lists is there with the sha256 it lists (re-hashed: a few GB, seconds), and the
    links VBench's loaders follow resolve: what the scorer checks before it runs VBench on the folder."""
    folder = Path(folder)
    manifest = Manifest.read(folder)
    for f in manifest.files:
        path = folder / f.path
        if on_file:
            on_file(f.path)
        if not path.is_file():
            raise NetworksError(f"{path} is missing from VBench's networks",
                                hint="remove the folder's cache entry (cmx cache rm) and fetch it again")
        got = sha256_file(path)
        if got != f.sha256:
            raise NetworksError(f"{path} has sha256 {got}, not the {f.sha256} recorded when it was "
                                f"{'checked' if f.verified else 'fetched'}",
                                hint="the file changed since; remove the folder's cache entry and fetch it again")
    if not (folder / DINO_HUB_CACHE).is_file() or not (folder / DINO_HUB / "hubconf.py").is_file():
        raise NetworksError(f"{folder} lacks DINO's hub code or its weights in torch hub's cache ({DINO_HUB_CACHE})",
                            hint="fetch the networks again")
    return manifest


def link_dino_hub_cache(folder: Path) -> None:
    """torch hub's cache entry for DINO's weights, a relative link to the file VBench's layout names."""
    link = Path(folder) / DINO_HUB_CACHE
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(Path(folder) / DINO_WEIGHTS, link.parent))


def copy_hub_code(checkout: Path, folder: Path) -> Path:
    """DINO's checkout copied to where init_submodules looks, without its .git."""
    dest = Path(folder) / DINO_HUB
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(checkout, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if not (dest / "hubconf.py").is_file():
        raise NetworksError(f"{checkout} has no hubconf.py: it is not DINO's repository",
                            hint="pass --input dino_repo= the URL of facebookresearch/dino and dino_rev= a commit")
    return dest


def recorded(folder: Path, paths: Iterable[str], source: str) -> list[Fetched]:
    """Files made or copied here, each with the sha256 it has now, recorded (nothing published to check)."""
    out = []
    for rel in paths:
        path = Path(folder) / rel
        out.append(Fetched(rel, source, sha256_file(path), path.stat().st_size, verified=False))
    return out


def fetch_file(f: NetworkFile, folder: Path, scratch: Path, *, retries: int, log: logging.Logger,
               on_progress: Callable[[int, int | None], None] | None = None) -> Fetched:
    """One network file downloaded (resumable, sha256-checked when published) to its place under `folder`."""
    got = download(f.url, Path(scratch) / Path(f.path).name, sha256=f.sha256, retries=retries, keep_partial=True,
                   on_progress=on_progress, log=log).moved_to(Path(folder) / f.path)
    _said(log, f.path, got.sha256, got.verified)
    return Fetched(f.path, f.url, got.sha256, got.size, got.verified)


def fetch_raft(f: NetworkFile, folder: Path, scratch: Path, *, retries: int, log: logging.Logger,
               on_progress: Callable[[int, int | None], None] | None = None) -> Fetched:
    """RAFT's models.zip downloaded (its sha256 checked when given) and only raft-things.pth kept from it, where
    VBench's unzip would put it; the file counts as checked when the archive was."""
    archive = download(f.url, Path(scratch) / "models.zip", sha256=f.sha256, retries=retries, keep_partial=True,
                       on_progress=on_progress, log=log)
    unpacked = Path(scratch) / "raft"
    if unpacked.exists():
        shutil.rmtree(unpacked)
    extract(archive.path, unpacked)
    member = unpacked / RAFT_ARCHIVE_MEMBER
    if not member.is_file():
        raise NetworksError(f"{f.url} holds no {RAFT_ARCHIVE_MEMBER}: it is not RAFT's models.zip",
                            hint="pass --input raft_url= the URL of RAFT's models.zip")
    dest = Path(folder) / f.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(member, dest)
    shutil.rmtree(unpacked)
    archive.path.unlink()
    digest = sha256_file(dest)
    log.info("%s: from models.zip (sha256 %s, %s)", f.path, archive.sha256,
             "verified" if archive.verified else "not published, recorded")
    _said(log, f.path, digest, archive.verified)
    return Fetched(f.path, f"{f.url} ({RAFT_ARCHIVE_MEMBER}; models.zip sha256 {archive.sha256})", digest,
                   dest.stat().st_size, archive.verified)


def _said(log: logging.Logger, path: str, sha256: str, verified: bool) -> None:
    if verified:
        log.info("%s: sha256 %s verified", path, sha256)
    else:
        log.warning("%s: sha256 %s recorded in %s (its publisher gives none to check; every scoring run checks "
                    "it again)", path, sha256, MANIFEST)
