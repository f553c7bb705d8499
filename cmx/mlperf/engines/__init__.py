"""The engine registry: the only place that lists the engines (cmx.mlperf.engines.base.Engine), and the choice of
one for an app run or a harness config.

A new engine is a module of this package and one line in ENGINES. The order matters where two engines share a
backend: the first that says it is asked for wins, so a specific engine comes before its backend's general one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.engines import diffusion, disaggregated, endpoint, ray, vllm
from cmx.mlperf.engines.base import AppRun, Engine

if TYPE_CHECKING:
    from cmx.mlperf.loadgen.harness_config import HarnessConfig

ENGINES: tuple[Engine, ...] = (
    diffusion,  # before ray and vllm: a diffusers pipeline's folder asks for it whatever else is given
    ray,
    vllm,
    disaggregated,
    endpoint,
)
BACKENDS = tuple(dict.fromkeys(e.backend for e in ENGINES))  # what the app's `backend` may name


def engine_for_run(run: AppRun) -> Engine:
    """The engine an app run asks for (its backend, then its inputs), its inputs checked against it."""
    if run.backend not in BACKENDS:
        raise AppConfigError(f"unknown backend {run.backend!r}", hint=f"one of {', '.join(BACKENDS)}")
    engine = next(e for e in ENGINES if e.backend == run.backend and e.asked(run))
    engine.check(run)
    return engine


def engine_for_harness(config: HarnessConfig) -> Engine:
    """The engine whose Backend a harness, tune or pareto process builds for `config`."""
    return next(e for e in ENGINES if e.asked_by(config))


def http_backend() -> str:
    """The app's backend variation whose engines reach a server over HTTP (`_endpoint`): what `cmx pareto` measures
    and what an endpoint_url asks for."""
    return endpoint.backend
