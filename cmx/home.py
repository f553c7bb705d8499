"""Where the registry file, the cache and the run records are, as plain strings.

The core of cmx.settings without pathlib or typing (~15 ms of imports here): the start-up path
of a cached `cmx run` (cmx.execute.memo) finds its memo with it before anything else loads.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself costs ~8 ms to import; type checkers read this name as typing's
if TYPE_CHECKING:
    from collections.abc import Mapping

# the checkout that holds this package: registry.yaml, recipes/, cache/ live beside cmx/
PACKAGE = os.path.dirname(os.path.realpath(__file__))
CHECKOUT = os.path.dirname(PACKAGE)


def builtin_recipes() -> str:
    """The recipes this cmx ships: an installed package's copy (cmx/_recipes, put there by the wheel's build), or
    the checkout's recipes/ (a checkout, or an editable install of one, has no copy)."""
    packaged = os.path.join(PACKAGE, "_recipes")
    return packaged if os.path.isdir(packaged) else os.path.join(CHECKOUT, "recipes")


def locations(registry: str | os.PathLike | None = None,
              environ: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(registry file, cache, runs), absolute. The registry in force: explicit `registry`, then CMX_REGISTRY
    (either may name a missing file: that is the caller's error to report), then the home's registry.yaml when it
    exists, then the default registry that ships in the package (its one source: the built-in recipes). Cache and
    runs: CMX_CACHE / CMX_RUNS, else the home's."""
    env = os.environ if environ is None else environ
    home = home_dir(env)
    reg = os.fspath(registry) if registry else env.get("CMX_REGISTRY") or home_registry(home)
    cache = env.get("CMX_CACHE") or os.path.join(home, "cache")
    runs = env.get("CMX_RUNS") or os.path.join(home, "runs")
    return _absolute(reg), _absolute(cache), _absolute(runs)


# the registry an installed cmx uses until one is written (`cmx registry add` writes the home's): the built-in
# recipes, named by kind (`builtin: true`), never by a path into site-packages that a new venv would leave stale
DEFAULT_REGISTRY = os.path.join(PACKAGE, "default-registry.yaml")


def home_dir(environ: Mapping[str, str] | None = None) -> str:
    """CMX_HOME; else the cmx checkout (where registry.yaml sits beside cmx/); else ~/.cmx (an installed package)."""
    env = os.environ if environ is None else environ
    if env.get("CMX_HOME"):
        return _absolute(env["CMX_HOME"])
    if os.path.isfile(os.path.join(CHECKOUT, "registry.yaml")):
        return CHECKOUT
    return os.path.join(os.path.expanduser("~"), ".cmx")


def home_registry(home: str, *, existing: bool = True) -> str:
    """The home's registry.yaml; with `existing`, the packaged default when the home has none yet."""
    path = os.path.join(home, "registry.yaml")
    return path if not existing or os.path.isfile(path) else DEFAULT_REGISTRY


def _absolute(path: str) -> str:
    """What Path(path).expanduser().absolute() names, without normalising `..` (as pathlib does not)."""
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
