"""Where cmx keeps things: the registry file, the cache and the run records."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, NamedTuple

# the checkout that holds this package: registry.yaml, recipes/, cache/ live beside cmx/
CHECKOUT = Path(__file__).resolve().parent.parent


class Settings(NamedTuple):  # a NamedTuple: on the `cmx find` path, where dataclasses cost ~10 ms to import
    registry: Path  # registry.yaml
    cache: Path  # the content-addressed store (and the index, under .index/)
    runs: Path  # one folder per `cmx run`: run.json and step logs

    @property
    def index_dir(self) -> Path:
        return self.cache / ".index"

    @property
    def sources_dir(self) -> Path:
        return self.cache / ".sources"


def load_settings(registry: str | os.PathLike | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from explicit arguments, then CMX_REGISTRY / CMX_CACHE / CMX_RUNS / CMX_HOME.

    Without CMX_HOME the home is the cmx checkout (where registry.yaml sits beside cmx/),
    or ~/.cmx for an installed package.
    """
    env = os.environ if environ is None else environ
    if env.get("CMX_HOME"):
        home = Path(env["CMX_HOME"]).expanduser().absolute()
    elif (CHECKOUT / "registry.yaml").is_file():
        home = CHECKOUT
    else:
        home = Path.home() / ".cmx"
    reg = registry or env.get("CMX_REGISTRY") or home / "registry.yaml"
    cache = env.get("CMX_CACHE") or home / "cache"
    runs = env.get("CMX_RUNS") or home / "runs"
    return Settings(registry=Path(reg).expanduser().absolute(), cache=Path(cache).expanduser().absolute(),
                    runs=Path(runs).expanduser().absolute())
