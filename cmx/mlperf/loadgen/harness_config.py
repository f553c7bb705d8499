"""What one LoadGen test is asked to do and what it did: HarnessConfig (written to JSON for the harness process),
its engine and endpoint settings, and HarnessResult (the process's result.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.errors import CmxError
from cmx.mlperf.backends.base import GREEDY, Sampling
from cmx.mlperf.loadgen.compliance import MODES as COMPLIANCE_MODES
from cmx.mlperf.loadgen.run_record import FAILED
from cmx.mlperf.rounds import SINGLE_STREAM_PERCENTILE, load_round
from cmx.mlperf.scoring.external import ExternalScorer
from cmx.secrets import Redactor, masked_url

if TYPE_CHECKING:  # imported where used: the engine's modules are not needed to read a config
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.ray_replicas import RayReplicasConfig
    from cmx.mlperf.backends.vllm import VllmBackendConfig

MODES = ("performance", "accuracy", *COMPLIANCE_MODES)
SCENARIOS = ("Offline", "Server", "Interactive", "SingleStream")
HARNESS_ROUND = "v6.0"  # the round of a harness config, or an accuracy evaluation, that names none


class HarnessError(CmxError):
    """A harness run could not be started, or its process failed before writing a result."""


@dataclass(frozen=True)
class EngineSettings:
    """vLLM engine options (in-process, or for the server cmx starts); None means the device profile's default.

    replicas, ray_address: engine replicas as Ray actors (cmx.mlperf.backends.ray_replicas), each with
    its own devices; None for both is vLLM in this process (data parallel over its GPU groups).
    replica_cpus: CPUs each replica reserves (on a CPU, the cores its engine computes on).
    pipeline_parallel_size, distributed_executor_backend: one model over several nodes (vLLM's own).
    """

    precision: str | None = None
    tensor_parallel_size: int = 1
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    replicas: int | None = None
    ray_address: str | None = None
    replica_cpus: int = 1
    pipeline_parallel_size: int = 1
    distributed_executor_backend: str | None = None

    def __post_init__(self) -> None:
        if self.replicas is not None and self.replicas < 1:
            raise HarnessError(f"replicas must be at least 1, not {self.replicas}")
        if self.replica_cpus < 1:
            raise HarnessError(f"replica_cpus must be at least 1, not {self.replica_cpus}")

    @property
    def on_ray(self) -> bool:
        """Replicas as Ray actors (either input given), not engines in the harness process."""
        return self.replicas is not None or self.ray_address is not None

    def options(self, device: str) -> EngineOptions:
        """The device profile's EngineOptions for these settings (cmx.mlperf.backends.profiles)."""
        from cmx.mlperf.backends.profiles import EngineOptions

        return EngineOptions(device=device, precision=self.precision, tensor_parallel_size=self.tensor_parallel_size,
                             max_num_seqs=self.max_num_seqs, max_num_batched_tokens=self.max_num_batched_tokens,
                             gpu_memory_utilization=self.gpu_memory_utilization,
                             pipeline_parallel_size=self.pipeline_parallel_size,
                             distributed_executor_backend=self.distributed_executor_backend)

    def replicas_config(self, engine: VllmBackendConfig) -> RayReplicasConfig:
        """The Ray replicas of `engine` (a VllmBackendConfig) these settings ask for."""
        from cmx.mlperf.backends.ray_replicas import RayReplicasConfig

        return RayReplicasConfig(engine=engine, replicas=self.replicas or 1, address=self.ray_address,
                                 cpus_per_replica=self.replica_cpus)


@dataclass(frozen=True)
class EndpointSettings:
    """An OpenAI-compatible server to send the samples to (cmx.mlperf.backends.endpoint).

    url: the API's base (http://HOST:PORT/v1); model: the served name (None: the only one it serves);
    request_timeout_s: the most one request may take; max_concurrency: Offline requests in flight;
    workers: client worker processes doing the HTTP (0: a thread of the harness process; endpoint_workers).
    send_min_tokens: False for a router that copies each request into a one-token prefill request (vLLM's
        disaggregation proxy: vLLM refuses min_tokens above max_tokens there); the answers are still checked
        for the minimum, after the fact.
    video_route: a text-to-video run's video server, by its name in cmx.mlperf.backends.routes.VIDEO_ROUTES
        ("vllm-omni": POST /v1/videos/sync; "trtllm-serve": POST /v1/videos/generations); unused by other runs.
    The API key travels in the environment (API_KEY_ENV), never here.
    """

    url: str
    model: str | None = None
    request_timeout_s: float = 600.0
    max_concurrency: int = 256
    workers: int = 0
    send_min_tokens: bool = True
    video_route: str = "vllm-omni"


API_KEY_ENV = "CMX_ENDPOINT_API_KEY"
# the endpoint's URL with its credentials (http://user:PASS@host/v1), when it has some: harness_config.json holds it
# masked (http://user:***@host/v1), and the harness process takes the real one from here
URL_ENV = "CMX_ENDPOINT_URL"


def endpoint_environment(endpoint: EndpointSettings | None, api_key: str | None = None) -> dict[str, str]:
    """What the harness process's environment carries for `endpoint` (never a file or its command line): the API
    key, and the URL when it holds credentials."""
    env = {API_KEY_ENV: api_key} if api_key else {}
    if endpoint is not None and masked_url(endpoint.url) != endpoint.url:
        env[URL_ENV] = endpoint.url
    return env


def endpoint_url(settings: EndpointSettings, environ: Mapping[str, str]) -> str:
    """The URL the harness process sends to: the environment's (URL_ENV) when the config holds its masked form."""
    given = environ.get(URL_ENV)
    return given if given and masked_url(given) == settings.url else settings.url


@dataclass(frozen=True)
class LoadgenSource:
    """The LoadGen a test runs on (get-loadgen's outputs): `version`, the round's pin, and `path`, the cached folder
    that holds it (put first on the harness's sys.path), or None when the interpreter's own LoadGen is the pin.
    The harness imports it with cmx.mlperf.loadgen.binding and refuses another version."""

    version: str
    path: Path | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> LoadgenSource | None:
        if not data:
            return None
        return cls(str(data["version"]), Path(data["path"]) if data.get("path") else None)


@dataclass(frozen=True)
class VideoShape:
    """A text-to-video run's shape where it is not the benchmark's reference one (None: the reference's): the
    frames' size, their count and the denoising steps. The tiny Wan 2.2 app makes 5 frames of 64x64 in 2 steps; any
    other shape than the reference's is never compliant (cmx_run.json records it)."""

    width: int | None = None
    height: int | None = None
    frames: int | None = None
    steps: int | None = None


@dataclass(frozen=True)
class HarnessConfig:
    """One test: what to run it on, and where its logs go. Written to JSON and read back (`to_json`, `from_json`).
    `sampling` is how the backend chooses tokens (the benchmark reference's, or the user's override)."""

    model: Path          # the checkpoint (tokenizer, and the weights for in-process vLLM)
    dataset: Path
    scenario: str
    mode: str
    user_conf: Path
    output: Path
    round: str = HARNESS_ROUND
    benchmark: str = ""  # none: the round's default_benchmark (its YAML file names it)
    device: str = "cpu"
    max_tokens: int = 1024
    rows: int | None = None
    engine: EngineSettings = field(default_factory=EngineSettings)
    endpoint: EndpointSettings | None = None  # None: vLLM in this process
    sampling: Sampling = GREEDY
    loadgen: LoadgenSource | None = None  # None: the round's pin, found by the harness (binding.import_loadgen)
    video: VideoShape | None = None  # a text-to-video run's shape, where not the reference's (the tiny model's)
    scorer: ExternalScorer | None = None  # an accuracy scorer in its own environment (VBench); None: in process

    def __post_init__(self) -> None:
        if not self.benchmark:
            object.__setattr__(self, "benchmark", load_round(self.round).default_benchmark)
        if self.scenario not in SCENARIOS:
            raise HarnessError(f"unknown scenario {self.scenario!r}", hint=f"one of {', '.join(SCENARIOS)}")
        if self.mode not in MODES:
            raise HarnessError(f"unknown mode {self.mode!r}", hint=f"one of {', '.join(MODES)}")

    @property
    def backend(self) -> str:
        return "endpoint" if self.endpoint else "vllm"

    def to_json(self) -> str:
        """As JSON, with the endpoint URL's credentials masked (the harness process reads them from URL_ENV)."""
        data = asdict(self)
        if data.get("endpoint"):
            data["endpoint"]["url"] = masked_url(data["endpoint"]["url"])
        data["scorer"] = self.scorer.to_json() if self.scorer else None
        return json.dumps(data, indent=2, default=str) + "\n"

    @classmethod
    def from_json(cls, text: str) -> HarnessConfig:
        data = json.loads(text)
        try:
            engine = EngineSettings(**data.pop("engine", {}))
            endpoint = data.pop("endpoint", None)
            sampling = Sampling.from_json(data.pop("sampling", {}))
            loadgen = data.pop("loadgen", None)
            video = data.pop("video", None)
            scorer = ExternalScorer.from_json(data.pop("scorer", None))
            model, dataset, user_conf, output = (Path(data.pop(k))
                                                 for k in ("model", "dataset", "user_conf", "output"))
            return cls(**data, model=model, dataset=dataset, user_conf=user_conf, output=output, engine=engine,
                       endpoint=EndpointSettings(**endpoint) if endpoint else None, sampling=sampling,
                       loadgen=LoadgenSource.from_json(loadgen), video=VideoShape(**video) if video else None,
                       scorer=scorer)
        except (TypeError, KeyError) as err:
            raise HarnessError(f"not a harness config: {err}", hint="write it with HarnessConfig.to_json") from None

    def argv(self, config_file: Path) -> list[str]:
        """The harness command's arguments: the config, written to `config_file`."""
        config_file.write_text(self.to_json(), encoding="utf-8")
        return ["--config", str(config_file)]


# LoadGen's own judgement of how fast a performance run was (and the round's p99 limits cmx checks beside it): a
# test LoadGen found INVALID that missed only these ran as it should, and stays INVALID rather than FAILED
PERFORMANCE_RULES = frozenset({"loadgen.invalid", "loadgen.early-stopping", "loadgen.latency-limit"})


def verdict_of(loadgen_validity: str | None, problems: bool, broken: bool) -> str | None:
    """The verdict people and tools read: LoadGen's when the test has no problem (None: an accuracy run), INVALID
    when LoadGen said so and nothing else went wrong, else FAILED (`broken`: failed samples, errors in the logs)."""
    if not problems:
        return loadgen_validity
    return "INVALID" if loadgen_validity == "INVALID" and not broken else FAILED


def recorded_validity(validity: str | None, problems: bool) -> str | None:
    """A verdict as an older cmx recorded it (LoadGen's, VALID even beside problems), as this one shows it."""
    return FAILED if problems and validity in ("VALID", None) else validity


def latency_phrase(latency: float, unit: str | None) -> str:
    """A SingleStream result as people read it: "90th percentile latency 12.5 s (early stopping)"."""
    return f"{SINGLE_STREAM_PERCENTILE}th percentile latency {latency:.4g} {unit or 'ms'} (early stopping)"


@dataclass(frozen=True)
class HarnessResult:
    """What one test did, as result.json holds it. `ok` is False when there is any problem.

    `validity` is cmx's verdict (VALID, INVALID, FAILED: see `verdict_of`); `loadgen_validity` is LoadGen's
    own result_validity, which stays VALID when samples failed in the backend (they were answered, empty)."""

    scenario: str
    mode: str
    validity: str | None
    problems: list[str]
    samples_per_second: float | None
    tokens_per_second: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    completed_samples: int
    failed_samples: int
    start_seconds: float
    test_seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    loadgen_validity: str | None = None
    latency_p99_ms: float | None = None  # a Server test judged on whole answers (no token latencies): its p99
    # a SingleStream test's result: LoadGen's early-stopping estimate of its 90th percentile latency (the
    # checker's early_stopping_latency_ss), in the unit the round reports it in (ms, or s)
    latency: float | None = None
    latency_unit: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def verdict(self) -> str:
        if self.mode.startswith("test"):  # an audit run; LoadGen's verdict on it is not what the test checks
            head = f"{self.scenario} {self.mode.upper()} audit run"
            if self.ok:
                return f"{head} (LoadGen: {self.loadgen_validity or 'no result'}), OK"
        else:
            head = f"{self.scenario} {self.mode}"
            if self.ok:
                result = "" if self.latency is None else f", {latency_phrase(self.latency, self.latency_unit)}"
                return f"{head}: {self.validity or 'no result'}, OK{result}"
        shown = "INVALID, FAILED" if self.validity == "INVALID" else FAILED
        return f"{head}: {shown}:\n" + "\n".join(f"  - {p}" for p in self.problems)

    @classmethod
    def read(cls, path: Path) -> HarnessResult:
        data = json.loads(path.read_text(encoding="utf-8"))
        if "loadgen_validity" not in data:  # written by a cmx before loadgen_validity: its validity was LoadGen's
            data["loadgen_validity"] = data.get("validity")
            data["validity"] = recorded_validity(data.get("validity"), bool(data.get("problems")))
        return cls(**data)

    def write(self, path: Path, redactor: Redactor | None = None) -> Path:
        """result.json, with every message passed through `redactor` (a server's error may quote a secret)."""
        data = asdict(self)
        path.write_text(json.dumps(redactor.redact_json(data) if redactor else data, indent=2) + "\n",
                        encoding="utf-8")
        return path
