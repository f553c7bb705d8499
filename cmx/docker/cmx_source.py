"""Where an image's cmx comes from: the same distribution and version as the cmx that renders it.

In order: the wheel the user gives (`--cmx-wheel PATH`, which must be of the running version);
else, when cmx runs from a checkout (pyproject.toml beside cmx/), a wheel built from it; else the
wheel pip installed the running cmx from, when pip recorded a local file for it (PEP 610's
direct_url.json) and that file is still there, unchanged; else `pip install cmx-bench==VERSION`
from the package index inside the image. Choosing reads files and builds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from cmx import DISTRIBUTION, __version__
from cmx.docker import DockerError
from cmx.settings import CHECKOUT
from cmx.tools.fs import sha256_file

# a wheel's file name spells the distribution with underscores (cmx-bench: cmx_bench-0.2.0-py3-none-any.whl)
WHEEL_PREFIX = DISTRIBUTION.replace("-", "_")
WHEEL_NAME = f"{WHEEL_PREFIX}-{__version__}-py3-none-any.whl"   # the name a checkout's wheel is built under
# what a checkout's wheel is built from (pyproject.toml's wheel target: cmx/, templates/ and recipes/ force-included,
# the license file, the readme): when none of these changed, the wheel is the same
WHEEL_SOURCES = ("cmx", "templates", "recipes", "pyproject.toml", "README.md", "LICENSE")
DIST_IN_IMAGE = "/opt/cmx/dist"
_SKIP = ("__pycache__", ".index", ".sources")


@dataclass(frozen=True)
class CmxSource:
    """How the image gets cmx. `sha256`: of the wheel file (kind wheel), of the sources a checkout's wheel is
    built from (kind checkout), empty for the index; `chosen`: why this source, for the user."""

    kind: Literal["checkout", "wheel", "index"]
    sha256: str = ""
    wheel: Path | None = None       # kind wheel: the file copied into the image
    chosen: str = ""

    @property
    def wheel_name(self) -> str | None:
        """The wheel's name in the build context's dist/ (None: nothing is copied, pip takes it from the index)."""
        return WHEEL_NAME if self.kind == "checkout" else self.wheel.name if self.wheel is not None else None

    def requirement(self, extra: str | None) -> str:
        """What the image's pip installs: the wheel in dist/, or the distribution pinned to this version."""
        suffix = f"[{extra}]" if extra else ""
        if self.wheel_name is not None:
            return f"{DIST_IN_IMAGE}/{self.wheel_name}{suffix}"
        return f"{DISTRIBUTION}{suffix}=={__version__}"

    def summary(self) -> str:
        """What is installed, for the Dockerfile's comment (the files' hashes are the build context's)."""
        if self.kind == "checkout":
            return f"{DISTRIBUTION} {__version__}, a wheel built from the checkout that rendered this file"
        if self.kind == "wheel":
            return f"{DISTRIBUTION} {__version__}, the wheel {self.wheel_name}"
        return f"{DISTRIBUTION} {__version__} from the package index"

    def describe(self) -> str:
        """What is installed, with its hash, for the run record (CMX_CONTAINER_CMX_SOURCE)."""
        if self.kind == "checkout":
            return f"{DISTRIBUTION} {__version__}, a wheel built from a checkout (its sources' sha256 {self.sha256})"
        if self.kind == "wheel":
            return f"{DISTRIBUTION} {__version__}, the wheel {self.wheel_name} (sha256 {self.sha256})"
        return self.summary()


def choose(given: Path | None = None, *, checkout: Path = CHECKOUT,
           search_path: list[str] | None = None) -> CmxSource:
    """The source of the image's cmx, in the module's order. `checkout`: the folder above the running cmx
    package; `search_path`: where the running distribution's metadata is looked for (default sys.path)."""
    if given is not None:
        return CmxSource("wheel", sha256_file(given_wheel(given)), given, chosen="given with --cmx-wheel")
    if is_checkout(checkout):
        return CmxSource("checkout", sources_sha256(checkout), chosen=f"built from the checkout {checkout}")
    recorded = recorded_wheel(search_path)
    if recorded is not None:
        return CmxSource("wheel", sha256_file(recorded), recorded,
                         chosen="the wheel the running cmx was installed from")
    return CmxSource("index", chosen=f"neither a checkout nor a recorded wheel: pip installs {DISTRIBUTION} "
                                     f"{__version__} from the package index")


def given_wheel(path: Path) -> Path:
    """`--cmx-wheel PATH`, checked: an existing wheel of this distribution at the running version."""
    if not path.is_file():
        raise DockerError(f"--cmx-wheel {path} is not a file", hint=_wheel_hint())
    name, version = wheel_identity(path)
    if name != DISTRIBUTION or version != __version__:
        raise DockerError(f"--cmx-wheel {path} holds {name} {version}, not the running {DISTRIBUTION} {__version__}",
                          hint=_wheel_hint())
    return path


def _wheel_hint() -> str:
    return (f"give the {DISTRIBUTION} {__version__} wheel the running cmx was installed from "
            f"(`pip wheel --no-deps` of its checkout makes one)")


def wheel_identity(path: Path) -> tuple[str, str]:
    """(distribution, version) of a wheel, as its METADATA says; DockerError when its file name says otherwise or
    it is not a wheel."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        file_name, file_version, _, _ = parse_wheel_filename(path.name)
        with zipfile.ZipFile(path) as archive:
            member = next((n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")),
                          None)
            text = archive.read(member).decode("utf-8", errors="replace") if member else ""
    except (InvalidWheelFilename, zipfile.BadZipFile, OSError) as exc:
        raise DockerError(f"{path} is not a wheel ({exc})", hint=_wheel_hint()) from None
    fields = dict(line.split(": ", 1) for line in text.split("\n\n", 1)[0].splitlines() if ": " in line)
    name, version = fields.get("Name", ""), fields.get("Version", "")
    if not name or canonicalize_name(name) != file_name or version != str(file_version):
        raise DockerError(f"{path}'s file name says {file_name} {file_version}, its METADATA "
                          f"{name or 'nothing'} {version}", hint=_wheel_hint())
    return str(canonicalize_name(name)), version


def is_checkout(folder: Path) -> bool:
    """Whether `folder` is a checkout of this distribution (its pyproject.toml beside cmx/), which a wheel is
    built from."""
    project = folder / "pyproject.toml"
    return (folder / "cmx").is_dir() and project.is_file() and \
        f'name = "{DISTRIBUTION}"' in project.read_text(encoding="utf-8", errors="replace")


def recorded_wheel(search_path: list[str] | None = None) -> Path | None:
    """The local wheel file pip installed the running cmx from (PEP 610: the dist-info's direct_url.json), when it is
    still there with the version running and the hash pip recorded; None otherwise (installed from the index, from a
    folder, or the file moved or changed)."""
    from urllib.parse import unquote, urlparse

    dist = next(iter(metadata.distributions(name=DISTRIBUTION, path=sys.path if search_path is None else search_path)),
                None)
    if dist is None or dist.version != __version__:
        return None
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(direct, dict) or "archive_info" not in direct or not str(direct.get("url")).startswith("file:"):
        return None
    path = Path(unquote(urlparse(direct["url"]).path))
    if not path.is_file() or not path.name.endswith(".whl"):
        return None
    recorded = str((direct.get("archive_info") or {}).get("hash") or "")
    if recorded.startswith("sha256=") and recorded[len("sha256="):] != sha256_file(path):
        return None  # rebuilt since: not what runs here
    try:
        return path if wheel_identity(path) == (DISTRIBUTION, __version__) else None
    except DockerError:
        return None


def sources_sha256(checkout: Path) -> str:
    """A hash of the files a checkout's wheel is built from (WHEEL_SOURCES): the same files, the same wheel."""
    digest = hashlib.sha256()
    for top in WHEEL_SOURCES:
        path = checkout / top
        files = [path] if path.is_file() else [path / rel for rel in tree(path)]
        for file in files:
            digest.update(f"{file.relative_to(checkout).as_posix()}\0".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def not_on_the_index(build_error: str) -> DockerError | None:
    """The refusal for an image build whose pip found no cmx of this version on the package index (it is not
    published yet, or the index is one without it); None for any other failure."""
    text = build_error.lower()
    if not any(f"no matching distribution found for {name}" in text for name in (DISTRIBUTION, WHEEL_PREFIX)):
        return None
    return DockerError(f"{DISTRIBUTION} {__version__} is not on the package index: give --cmx-wheel PATH (the wheel "
                       "you installed), or run from a checkout",
                       hint="the image installs the same cmx as the one running here")


def tree(folder: Path) -> Iterator[str]:
    """The files under `folder` (relative, sorted) that an image takes: no hidden folders, caches or bytecode."""
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP)
        for name in sorted(names):
            if not name.endswith(".pyc"):
                yield (Path(root) / name).relative_to(folder).as_posix()
