"""Import mlperf_loadgen as a test was told to (HarnessConfig.loadgen, get-loadgen's outputs): the cached folder
first on sys.path, and a LoadGen of any other version refused in one line, since its compiled-in seeds would be
another round's.

Runs in the processes that drive LoadGen (the harness, the tune's probes), never in cmx's own.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from cmx.mlperf.loadgen.harness_config import HarnessError, LoadgenSource


def import_loadgen(source: LoadgenSource | None, round_name: str) -> ModuleType:
    """mlperf_loadgen from `source` (None: the round's pin, the interpreter's own or the cached folder, as
    get-loadgen finds it), checked to be `source.version`."""
    if source is None:
        source = round_source(round_name)
    if source.path is not None and str(source.path) not in sys.path:
        sys.path.insert(0, str(source.path))
    import mlperf_loadgen

    from cmx.mlperf.runtime import loadgen_version_in

    where = Path(mlperf_loadgen.__file__ or "").parent
    found = loadgen_version_in(where)
    if found != source.version or (source.path is not None and where.resolve() != source.path.resolve()):
        wanted = f"{source.version} from {source.path}" if source.path else source.version
        raise HarnessError(f"this test needs LoadGen {wanted} ({round_name}'s pin), but mlperf_loadgen "
                           f"{found or '(version unknown)'} from {where} was imported",
                           hint="another copy shadows it (PYTHONPATH?) or was imported first; run the test "
                                "through cmx run, or give HarnessConfig.loadgen get-loadgen's outputs")
    return mlperf_loadgen


def round_source(round_name: str) -> LoadgenSource:
    """The round's LoadGen for this interpreter, for a config that names none (a HarnessConfig made by hand):
    found, or cached, in the cache the settings name (CMX_CACHE, the home's)."""
    from cmx.cache.store import Store
    from cmx.mlperf.runtime import ensure_loadgen
    from cmx.settings import load_settings

    return ensure_loadgen(round_name, python=sys.executable, store=Store(load_settings().cache)).source
