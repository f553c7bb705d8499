"""The Engine contract: what the harness, the app step, tune, pareto and Ray read of an engine, and the defaults
most engines share.

An engine is a module of this package (vllm.py, ray.py, endpoint.py, disaggregated.py) that meets `Engine`; the
registry (cmx.mlperf.engines) is the only place that lists them. Each engine says, from the run's inputs, whether
it is the one asked for (`asked` in the app, `asked_by` in the harness process), refuses inputs that contradict it,
starts what serves the model when the engine needs a server (`serve`), builds the harness's Backend, and writes
cmx_run.json's "backend" record; what its model runner starts with on a device kind is its `profile`. A module gets
a hook it does not need from here:

    from cmx.mlperf.engines.base import no_preflight as preflight, no_server as serve
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from cmx.mlperf.app_plan import AppConfigError

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend, Sampling
    from cmx.mlperf.backends.disaggregated import PrefillDecode, TopologyReport
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.loadgen.harness_config import EndpointSettings, EngineSettings, HarnessConfig
    from cmx.mlperf.run_summary import RunSummary
    from cmx.mlperf.serving_stack import ServingStack


class AppRun(Protocol):
    """What an engine reads of the app's run (cmx.mlperf.app.AppConfig meets it; named here, not imported, so the
    engines sit below the app)."""

    @property
    def backend(self) -> str: ...
    @property
    def benchmark(self) -> str: ...
    @property
    def model(self) -> Path: ...
    @property
    def device(self) -> str: ...
    @property
    def results_dir(self) -> Path: ...
    @property
    def engine(self) -> EngineSettings: ...
    @property
    def endpoint(self) -> EndpointSettings | None: ...
    @property
    def server_log_dir(self) -> Path | None: ...
    @property
    def server_log(self) -> Path | None: ...
    @property
    def server_python_path(self) -> tuple[Path, ...]: ...
    @property
    def serving_stack(self) -> ServingStack | None: ...
    @property
    def prefill_decode(self) -> PrefillDecode | None: ...
    @property
    def topology(self) -> Callable[[], TopologyReport] | None: ...
    @property
    def sampling(self) -> Sampling: ...


class Served(NamedTuple):
    """What an engine's `serve` started: the endpoint the run's tests use instead of none, its log, and (a
    topology of several servers) its report so far."""

    endpoint: EndpointSettings
    server_log: Path
    topology: Callable[[], TopologyReport] | None = None


class Engine(Protocol):
    """One way to reach the model. Its hooks run in this order: `asked` (the app picks the first engine of its
    backend that says yes), `check`, `refuse`, `preflight`, `serve` (around every scenario), `build` (in each
    harness, tune or pareto process, picked by `asked_by`), `record` (into each scenario's cmx_run.json). `profile`
    is what `preflight`, `serve` and `build` start the model runner with."""

    name: str  # the registry's word for it
    backend: str  # the app's backend that reaches it: "vllm" (in the harness process) or "endpoint" (over HTTP)
    modules: tuple[str, ...]  # what it imports to run, beyond cmx's own (cmx.extras names the extra of each)

    def asked(self, run: AppRun) -> bool:
        """Among the engines of `run.backend`, whether the run's inputs ask for this one."""
        ...

    def asked_by(self, config: HarnessConfig) -> bool:
        """Whether a harness config (one test, in the harness process) asks for this engine's backend."""
        ...

    def check(self, run: AppRun) -> None:
        """Refuse (AppConfigError) inputs this engine cannot honour."""
        ...

    def refuse(self, run: AppRun) -> None:
        """Refuse a benchmark this engine cannot run, before anything runs."""
        ...

    def preflight(self, run: AppRun) -> None:
        """What must be there before the first test (a Ray cluster big enough): refused now, not in each harness."""
        ...

    def serve(self, run: AppRun, log: logging.Logger, tokenizer: bool) -> AbstractContextManager[Served | None]:
        """Start what serves the model for the whole run and stop it when the block ends (None: nothing to start).
        `tokenizer`: the server tokenizes text prompts too."""
        ...

    def profile(self, settings: EngineSettings, device: str) -> EngineOptions:
        """What the model runner it starts (in the harness process, in Ray's actors, as a server) is given on the
        device kind `device`: the device profile's defaults under the run's engine settings."""
        ...

    def build(self, config: HarnessConfig, logger: logging.Logger, environ: Mapping[str, str]) -> Backend:
        """The Backend a harness, tune or pareto process drives (not started)."""
        ...

    def record(self, run: AppRun, runs: Sequence[RunSummary]) -> dict[str, Any]:
        """cmx_run.json's "backend": how the SUT reached the model (no key, no secret URL part)."""
        ...


# --- shared defaults ------------------------------------------------------------------------------------------------

def no_check(run: AppRun) -> None:
    """Nothing to refuse."""


def no_preflight(run: AppRun) -> None:
    """Nothing to check before the first test."""


def takes_any_benchmark(run: AppRun) -> None:
    """Every benchmark's samples reach this engine."""


@contextmanager
def no_server(run: AppRun, log: logging.Logger, tokenizer: bool) -> Iterator[Served | None]:
    """The engine runs in the harness process (or the server is already up): nothing to start."""
    yield None


def vllm_profile(settings: EngineSettings, device: str) -> EngineOptions:
    """vLLM's profile of the device kind (cmx.mlperf.backends.profiles: its engine arguments and environment), with
    the engine settings the run gave: what every engine that runs vLLM starts it with."""
    return settings.options(device)


def refuse_chat_in_process(run: AppRun) -> None:
    """A benchmark whose samples are conversations runs through an endpoint's chat route only."""
    from cmx.mlperf.benchmarks import benchmark_for

    if benchmark_for(run.benchmark).chat:
        raise AppConfigError(f"{run.benchmark}'s samples are conversations (chat messages with an image), which "
                             "only an endpoint's chat route takes, not vLLM in the harness process",
                             hint="add _endpoint: cmx starts vllm serve for the model, or give --input endpoint_url")


def refuse_endpoint_url(run: AppRun) -> None:
    """An engine in the harness process takes no endpoint URL and starts no disaggregated topology."""
    if run.endpoint is not None:
        raise AppConfigError("an endpoint url was given, but the backend is vllm (in-process)",
                             hint="add _endpoint to the query, or drop --input endpoint_url")
    if run.prefill_decode is not None:
        raise AppConfigError("prefill_decode starts a disaggregated topology for the endpoint backend, and the "
                             "backend is vllm", hint="drop endpoint_url (cmx starts the instances and the proxy "
                                                     "itself) and add _endpoint, or drop prefill_decode and "
                                                     "disagg_proxy")


def refuse_replicas(run: AppRun) -> None:
    """An engine behind an endpoint starts no Ray replicas: the server does its own scaling."""
    if run.engine.on_ray:
        raise AppConfigError("replicas and ray_address are for the vllm backend: engine replicas cmx starts",
                             hint="drop them with _endpoint (the server behind the URL does its own scaling)")
