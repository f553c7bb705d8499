"""The vLLM backend: token ids in, token ids out, on CUDA, ROCm or a CPU.

Two engine kinds, chosen by `VllmBackendConfig.streaming`:

- Offline (`streaming=False`): `vllm.LLM`, each engine driven step by step over its whole share
  of the batch: a window of twice max_num_seqs requests is in the engine at a time, each finished
  one is answered at once and replaced by the next, so vLLM's scheduler keeps the batch full
  (continuous batching, as one `LLM.generate` call would) while samples complete as they finish
  (live progress, nothing lost but what is in flight) and memory holds the window, not the query.
- Server / Interactive (`streaming=True`): vLLM's `AsyncLLM` in this process, on one asyncio
  event loop in a thread the backend owns (`loop_thread.LoopThread`, which also sets the order
  of shutting down). `submit()` only schedules the request onto that loop
  (thread-safe, microseconds), and the loop streams vLLM's token deltas to the sink.
  `generate()` works here too, through the same path.

Either way: no tokenizer (`skip_tokenizer_init`: the dataset is already token ids, and outputs
stay token ids, `detokenize=False`; a speech model keeps it, for vLLM's Whisper processor, and its
requests carry their clip as `multi_modal_data`, see `engine_prompt`), the config's `Sampling` (the
benchmark reference's: greedy for most, temperature 1 for some) in every request's
SamplingParams, warm-up included,
and `min_tokens` of at least 2 (LoadGen rejects a response of fewer; see
`backend.MIN_OUTPUT_TOKENS`). EOS comes from the model's generation_config.json, which vLLM reads
even without a tokenizer.

Data parallelism: when there are more GPUs than `tensor_parallel_size`, one engine per group of
GPUs (see `profiles.device_groups`), each pinned with the vendor's visibility variable while it is
built. Offline batches are split so each engine gets about the same number of tokens; streaming
requests go to the engine with the fewest tokens outstanding. A CPU runs one engine.

vLLM is imported in `start()`, not at import time: importing it costs seconds and needs the
engine's platform, and a SUT module must be importable (for tests, for `--help`) without it.
Scripts that start the backend need the `if __name__ == "__main__":` guard, because vLLM starts
its engine processes with spawn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.backends.base import (
    GREEDY,
    Audio,
    BackendDefaults,
    BackendError,
    GenRequest,
    GenResult,
    Sampling,
    StartInfo,
    StreamSink,
    check_result,
)
from cmx.mlperf.backends.batching import (
    QueueSink,
    audio_warmup_requests,
    longest_first,
    request_cost,
    token_list,
    warmup_requests,
)
from cmx.mlperf.backends.loop_thread import LoopThread
from cmx.mlperf.backends.machine import (
    MachineFacts,
    ModelFacts,
    read_machine_facts,
    read_model_facts,
)
from cmx.mlperf.backends.profiles import (
    EngineOptions,
    EngineSpec,
    engine_specs,
    for_sampling,
    shard_by_cost,
)

# the most an AsyncLLM's shutdown (its engine processes ending) may take when the backend stops
ENGINE_SHUTDOWN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class VllmBackendConfig:
    """model: a Hugging Face checkpoint folder (config.json, weights, and generation_config.json,
        whose eos_token_id is what stops generation, since there is no tokenizer).
    options: the device profile's inputs (device, precision, parallelism, memory).
    streaming: build AsyncLLM engines for Server/Interactive instead of LLM engines for Offline.
    max_model_len: the longest sequence (prompt and output); None is the model's own.
    facts: the machine; None reads it in start() (after vLLM's import, whose memory it counts).
    detected_gpus, gpu_name, gpu_arch: what the caller's GPU detection found (cmx.tools.gpu):
        the count is used when the user set no visibility variable and no gpu_ids (without it, a
        single engine sees every visible GPU and there is no data parallelism); the name and
        architecture choose ROCm's AITER kernels.
    warmup_requests: warm-up requests per engine in start().
    output_tokens_estimate: the expected output length, used only to balance data-parallel
        shards (a text LLM's reference answers average a few hundred tokens).
    sampling: how every request (warm-up included) chooses its tokens: temperature, top_p, top_k, seed.
    """

    model: Path
    options: EngineOptions
    streaming: bool = False
    max_model_len: int | None = None
    facts: MachineFacts | None = None
    detected_gpus: int = 0
    gpu_name: str = ""
    gpu_arch: str = ""
    warmup_requests: int = 4
    output_tokens_estimate: int = 300
    sampling: Sampling = GREEDY


@contextlib.contextmanager
def engine_environment(spec: EngineSpec, log: logging.Logger) -> Iterator[None]:
    """The process environment `spec` asks for while its engine is built (vLLM starts the
    engine's processes then, and they inherit it), restored afterwards so that the next engine
    and the rest of the process see the user's environment again."""
    keys = {*spec.env, *spec.env_defaults, *spec.env_unset}
    saved = {k: os.environ.get(k) for k in keys}
    try:
        for key in spec.env_unset:
            os.environ.pop(key, None)
        for key, value in spec.env_defaults.items():
            if key in os.environ:
                log.info("keeping %s=%s from the environment (the profile's default is %s)",
                         key, os.environ[key], value)
            else:
                os.environ[key] = value
        os.environ.update(spec.env)
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


class VllmBackend(BackendDefaults):
    """The Backend protocol (cmx.mlperf.backends.base) on vLLM. Construction only stores the config;
    `start()` builds and warms up the engines; `stop()` shuts them down."""

    def __init__(self, config: VllmBackendConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self._engines: _OfflineEngines | _StreamingEngines | None = None

    def engine_kwargs(self, spec: EngineSpec, model: ModelFacts | None = None) -> dict[str, Any]:
        """vLLM's arguments for one engine: the profile's, plus what this backend needs. A speech model (`model`'s
        audio_decoder_start) keeps its tokenizer: vLLM's Whisper processor cannot be built without one."""
        kwargs: dict[str, Any] = {
            "model": str(self.config.model),
            "skip_tokenizer_init": model is None or model.audio_decoder_start is None,
            "disable_log_stats": True,
            **spec.engine_kwargs,
        }
        if self.config.max_model_len is not None:
            kwargs["max_model_len"] = self.config.max_model_len
        return kwargs

    def _plan(self) -> tuple[tuple[EngineSpec, ...], ModelFacts]:
        cfg = self.config
        facts = cfg.facts or read_machine_facts(cfg.options.device, detected_gpus=cfg.detected_gpus,
                                                gpu_name=cfg.gpu_name, gpu_arch=cfg.gpu_arch)
        model = read_model_facts(cfg.model, cfg.max_model_len)
        specs = for_sampling(engine_specs(cfg.options, facts, model), cfg.options.device, model, cfg.sampling)
        return specs, model

    def _describe(self, spec: EngineSpec, model: ModelFacts) -> dict[str, Any]:
        return {**asdict(spec), "engine_kwargs": self.engine_kwargs(spec, model)}

    def start(self) -> StartInfo:
        if self._engines is not None:
            raise BackendError("the vLLM backend is already started")
        began = time.monotonic()
        sampling = self.config.sampling
        engines = (_StreamingEngines(self.log, sampling) if self.config.streaming
                   else _OfflineEngines(self.log, sampling))
        engines.import_vllm()  # before measuring memory, so the facts count vLLM's own share
        specs, model = self._plan()
        for spec in specs:
            self.log.info("vLLM engine on %s: %s; environment %s, defaults %s, unset %s",
                          ",".join(spec.devices) or self.config.options.device, self.engine_kwargs(spec, model),
                          dict(spec.env), dict(spec.env_defaults), list(spec.env_unset))
        count = self.config.warmup_requests * len(specs)
        warmup = (warmup_requests(count, model.max_model_len) if model.audio_decoder_start is None
                  else audio_warmup_requests(count, model.audio_decoder_start))
        try:
            engines.build([(spec, self.engine_kwargs(spec, model)) for spec in specs])
            built = time.monotonic()
            self.log.info("%d vLLM engine(s) started in %.1f s", len(specs), built - began)
            # the same path the benchmark takes, so that whatever vLLM does lazily on its first
            # requests happens here and not inside LoadGen's timed window
            for _ in engines.generate(warmup, self.config.output_tokens_estimate) if warmup else ():
                pass
        except BaseException:
            engines.shutdown()
            raise
        self._engines = engines
        warmed = time.monotonic()
        self.log.info("warm-up: %d requests in %.1f s; sampling: %s", len(warmup), warmed - built, sampling.describe())
        return StartInfo(engines=tuple(self._describe(s, model) for s in specs), start_seconds=built - began,
                         warmup_requests=len(warmup), warmup_seconds=warmed - built,
                         details={"streaming": self.config.streaming})

    def _started(self) -> _OfflineEngines | _StreamingEngines:
        if self._engines is None:
            raise BackendError("the vLLM backend is not started", hint="call start() first")
        return self._engines

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        """Every request's result, as each is ready (any order). Offline engines take their share longest
        prompt first (see `longest_first`), a window at a time (`_OfflineEngines._stream`)."""
        engines = self._started()
        if not requests:
            return iter(())
        return engines.generate(requests, self.config.output_tokens_estimate)

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        """Start one streaming request and return at once (streaming backends only)."""
        engines = self._started()
        if not isinstance(engines, _StreamingEngines):
            raise BackendError("submit() needs a streaming backend",
                               hint="build the backend with VllmBackendConfig(streaming=True) for Server/Interactive")
        engines.submit(request, sink, self.config.output_tokens_estimate)

    def stop(self) -> None:
        engines, self._engines = self._engines, None
        if engines is not None:
            engines.shutdown()
            self.log.info("vLLM engine(s) stopped")


# --- Offline: vllm.LLM ------------------------------------------------------------------------------


class _OfflineEngines:
    """One `vllm.LLM` per device group; a batch split across them by tokens. Each engine is driven step by
    step (`_stream`), so every sample is answered as it finishes and the engine holds only a window of the
    batch at a time."""

    def __init__(self, log: logging.Logger, sampling: Sampling = GREEDY) -> None:
        self.log = log
        self.sampling = sampling
        self.llms: list[Any] = []

    def import_vllm(self) -> None:
        from vllm import LLM, SamplingParams  # lazy: see the module docstring

        self._llm_class, self._params_class = LLM, SamplingParams

    def build(self, engines: Sequence[tuple[EngineSpec, Mapping[str, Any]]]) -> None:
        for spec, kwargs in engines:
            with engine_environment(spec, self.log):
                self.llms.append(self._llm_class(**kwargs))

    def generate(self, requests: Sequence[GenRequest], output_tokens_estimate: int) -> Iterator[GenResult]:
        if len(self.llms) == 1:
            yield from self._stream(self.llms[0], requests, threading.Event())
            return
        costs = [request_cost(r, output_tokens_estimate) for r in requests]
        shards = [[requests[i] for i in shard] for shard in shard_by_cost(costs, len(self.llms))]
        jobs = [(llm, shard) for llm, shard in zip(self.llms, shards, strict=True) if shard]
        # each engine on a thread of its own (stepping an engine waits on its engine process, without
        # the GIL); their results meet on one queue, in the order they finish
        results: queue.SimpleQueue[GenResult | BaseException | None] = queue.SimpleQueue()
        stop = threading.Event()

        def drive(llm: Any, shard: Sequence[GenRequest]) -> None:
            try:
                for result in self._stream(llm, shard, stop):
                    results.put(result)
                results.put(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
                results.put(exc)

        with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="cmx-vllm-shard") as pool:
            try:
                for llm, shard in jobs:
                    pool.submit(drive, llm, shard)
                running = len(jobs)
                while running:
                    item = results.get()
                    if item is None:
                        running -= 1
                    elif isinstance(item, BaseException):
                        raise item
                    else:
                        yield item
            finally:
                stop.set()  # an engine that failed, or a consumer that stopped listening, ends the others' steps

    def _stream(self, llm: Any, requests: Sequence[GenRequest], stop: threading.Event) -> Iterator[GenResult]:
        """Longest prompt first, as LLM.generate would be given them, but added to the engine a window at a
        time (`in_flight_limit`) and answered as each finishes: the batch stays full (continuous batching
        refills each freed slot from the waiting requests), progress shows from the first finished sample,
        and the memory held is the window's, not the whole query's. Requests still in the engine when the
        caller stops listening (or `stop` is set) are aborted."""
        engine = llm.llm_engine
        ordered = iter(longest_first(requests))
        params = _ParamsCache(self._params_class, self.sampling)
        window = in_flight_limit(llm)
        in_flight: dict[str, GenRequest] = {}

        def add(count: int) -> None:
            for request in itertools.islice(ordered, count):
                request_id = f"cmx-{request.id:x}"
                engine.add_request(request_id, engine_prompt(request), params.get(request))
                in_flight[request_id] = request

        add(window)
        try:
            while in_flight and not stop.is_set():
                finished = [(request, out) for out in engine.step() if out.finished
                            for request in [in_flight.pop(out.request_id, None)] if request is not None]
                for request, out in finished:
                    yield check_result(request, GenResult(id=request.id, token_ids=list(out.outputs[0].token_ids),
                                                          finish_reason=str(out.outputs[0].finish_reason or "")))
                add(len(finished))
        finally:
            if in_flight:
                engine.abort_request(list(in_flight))

    def shutdown(self) -> None:
        llms, self.llms = self.llms, []
        for llm in llms:
            llm.llm_engine.engine_core.shutdown()


def engine_prompt(request: GenRequest) -> dict[str, Any]:
    """vLLM's prompt for `request`: its token ids, and its media as multi_modal_data (Whisper: the decoder prompt's
    ids, with the clip as the audio its encoder hears, as (samples, sample rate))."""
    prompt: dict[str, Any] = {"prompt_token_ids": token_list(request.prompt_ids)}
    clips = [(m.samples, m.sample_rate) for m in request.media if isinstance(m, Audio)]
    if clips:
        prompt["multi_modal_data"] = {"audio": clips[0] if len(clips) == 1 else clips}
    return prompt


# requests an Offline engine holds at once, per sequence it can run: twice max_num_seqs keeps a full queue of
# waiting requests behind the running batch, so a freed slot is refilled in the next step
IN_FLIGHT_PER_SEQ = 2
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's own default, for an engine whose config cannot be read


def in_flight_limit(llm: Any) -> int:
    """How many requests `_stream` keeps in the engine `llm` at once."""
    try:
        seqs = int(llm.llm_engine.vllm_config.scheduler_config.max_num_seqs)
    except (AttributeError, TypeError, ValueError):
        seqs = DEFAULT_MAX_NUM_SEQS
    return IN_FLIGHT_PER_SEQ * max(seqs, 1)


class _ParamsCache:
    """vLLM SamplingParams per (max_tokens, min_tokens): one object shared by every request that
    asks the same, instead of 24,576 copies. The run's sampling, token ids only; `extra` adds the
    output kind (the streaming path wants DELTA: only the new tokens of each step, not the whole
    list again). Sharing one object is safe with a seed too: vLLM seeds a generator per request
    from it, so every request draws as the reference's did (one SamplingParams for all)."""

    def __init__(self, params_class: Any, sampling: Sampling = GREEDY, **extra: Any) -> None:
        self._class = params_class
        self._sampling = sampling
        self._extra = extra
        self._cache: dict[tuple[int, int], Any] = {}

    def get(self, request: GenRequest) -> Any:
        key = (request.max_tokens, request.min_tokens)
        if key not in self._cache:
            s = self._sampling
            self._cache[key] = self._class(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=s.seed,
                                           max_tokens=request.max_tokens, min_tokens=request.min_tokens,
                                           detokenize=False, **self._extra)
        return self._cache[key]


# --- Server / Interactive: AsyncLLM on the backend's event loop -------------------------------------


class _StreamingEngines:
    """One `AsyncLLM` per device group, all driven by one event loop on the backend's thread."""

    def __init__(self, log: logging.Logger, sampling: Sampling = GREEDY) -> None:
        self.log = log
        self.sampling = sampling
        self.engines: list[Any] = []
        self.outstanding: list[int] = []  # tokens in flight per engine; touched on the loop only
        # an engine's shutdown waits for its processes: give it longer than the loop's default
        self.loop = LoopThread("cmx-vllm-loop", log, close_timeout_s=ENGINE_SHUTDOWN_TIMEOUT_S)
        self.counter = 0

    def import_vllm(self) -> None:
        from vllm import SamplingParams  # lazy: see the module docstring
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.async_llm import AsyncLLM

        self._args_class, self._async_llm = AsyncEngineArgs, AsyncLLM
        self.params = _ParamsCache(SamplingParams, self.sampling, output_kind=RequestOutputKind.DELTA)

    async def _new_engine(self, kwargs: Mapping[str, Any]) -> Any:
        return self._async_llm.from_engine_args(self._args_class(**kwargs))

    def build(self, engines: Sequence[tuple[EngineSpec, Mapping[str, Any]]]) -> None:
        self.loop.start()
        for spec, kwargs in engines:
            with engine_environment(spec, self.log):
                # built on the loop, so vLLM attaches its output handler to it
                engine = self.loop.call(self._new_engine(kwargs))
            self.engines.append(engine)
            self.loop.on_close(engine.shutdown)
            self.outstanding.append(0)

    def submit(self, request: GenRequest, sink: StreamSink, output_tokens_estimate: int) -> None:
        self.loop.spawn(self._serve(request, sink, request_cost(request, output_tokens_estimate)))

    async def _serve(self, request: GenRequest, sink: StreamSink, cost: int) -> None:
        # the engine is chosen here, on the loop, where `outstanding` is kept
        slot = min(range(len(self.engines)), key=lambda i: (self.outstanding[i], i))
        self.outstanding[slot] += cost
        self.counter += 1
        tokens: list[int] = []
        finish = ""
        try:
            stream = self.engines[slot].generate(engine_prompt(request), self.params.get(request), str(self.counter))
            async for out in stream:
                delta = out.outputs[0].token_ids
                if delta and not tokens:
                    sink.on_first_token(request.id, delta[0])
                tokens.extend(delta)
                finish = str(out.outputs[0].finish_reason or "")
            result = check_result(request, GenResult(id=request.id, token_ids=tokens, finish_reason=finish))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure goes to the sink, which must hear of it
            self.log.error("%s failed: %s", request.name, exc)
            sink.on_error(request.id, exc)
            return
        finally:
            self.outstanding[slot] -= cost
        sink.on_done(result)

    def generate(self, requests: Sequence[GenRequest], output_tokens_estimate: int) -> Iterator[GenResult]:
        sink = QueueSink()
        for request in longest_first(requests):
            self.submit(request, sink, output_tokens_estimate)
        for _ in requests:
            item = sink.queue.get()
            if isinstance(item, BaseException):
                raise BackendError(f"a request failed: {item}") from item
            yield item

    def shutdown(self) -> None:
        """Cancel the requests in flight, shut the engines down on their loop, and end it (see loop_thread)."""
        self.loop.close()
        self.engines = []
