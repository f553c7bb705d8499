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
    """(registry file, cache, runs), absolute: explicit `registry`, then CMX_REGISTRY / CMX_CACHE /
    CMX_RUNS / CMX_HOME. Without CMX_HOME the home is the cmx checkout (where registry.yaml sits
    beside cmx/), or ~/.cmx for an installed package."""
    env = os.environ if environ is None else environ
    if env.get("CMX_HOME"):
        home = _absolute(env["CMX_HOME"])
    elif os.path.isfile(os.path.join(CHECKOUT, "registry.yaml")):
        home = CHECKOUT
    else:
        home = os.path.join(os.path.expanduser("~"), ".cmx")
    reg = os.fspath(registry) if registry else env.get("CMX_REGISTRY") or os.path.join(home, "registry.yaml")
    cache = env.get("CMX_CACHE") or os.path.join(home, "cache")
    runs = env.get("CMX_RUNS") or os.path.join(home, "runs")
    return _absolute(reg), _absolute(cache), _absolute(runs)


def _absolute(path: str) -> str:
    """What Path(path).expanduser().absolute() names, without normalising `..` (as pathlib does not)."""
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
