"""Where cmx keeps things: the registry file, the cache and the run records."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from cmx.home import CHECKOUT as _CHECKOUT
from cmx.home import locations

# the checkout that holds this package: registry.yaml, recipes/, cache/ live beside cmx/
CHECKOUT = Path(_CHECKOUT)


class Settings(NamedTuple):  # a NamedTuple: on the `cmx find` path, where dataclasses cost ~10 ms to import
    registry: Path  # the registry file in force (cmx.home.locations says which)
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
    or ~/.cmx for an installed package. A home without registry.yaml reads the registry cmx
    ships (cmx.home.DEFAULT_REGISTRY: the built-in recipes).
    """
    reg, cache, runs = locations(registry, environ)
    return Settings(registry=Path(reg), cache=Path(cache), runs=Path(runs))
