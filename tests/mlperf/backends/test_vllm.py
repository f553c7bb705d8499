"""The vLLM backend (cmx/mlperf/backends/base.py, cmx/mlperf/backends/vllm.py).

Unit tests cover the pure parts (requests, ordering, warm-up prompts, the engine environment).
The e2e tests run real vLLM (the CPU build) on a tiny random Llama made with transformers, each
mode in its own process with the `__main__` guard vLLM's spawned processes need, one engine start
per process: a direct `LLM.generate` (the reference), the backend's Offline path, and its
streaming path. Each process writes a JSON report that the tests read.

A process costs about a minute here (vLLM's import in three processes, the engine start, and
vLLM's shutdown, which waits 5 s for the engine process), so the direct and Offline runs go side
by side, each with its OpenMP threads bound to a CPU of its own (two engines spinning on the same
cores would slow each other down by far more than they gain).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cmx.mlperf.backends.base import (
    GREEDY,
    MIN_OUTPUT_TOKENS,
    Audio,
    BackendError,
    GenRequest,
    GenResult,
    Sampling,
    check_result,
)
from cmx.mlperf.backends.batching import (
    WARMUP_MAX_TOKENS,
    audio_warmup_requests,
    longest_first,
    request_cost,
    token_list,
    warmup_requests,
)
from cmx.mlperf.backends.machine import ModelFacts, read_cpu_bf16
from cmx.mlperf.backends.profiles import EngineOptions, EngineSpec
from cmx.mlperf.backends.vllm import (
    VllmBackend,
    VllmBackendConfig,
    _OfflineEngines,
    _ParamsCache,
    engine_environment,
    engine_prompt,
)

# --- unit: requests, results, ordering, environment ----------------------------------------------


def test_a_requests_clip_goes_to_vllm_as_the_audio_of_its_decoder_prompt():
    clip = Audio(np.zeros(16000, dtype=np.float32), 16000)
    prompt = engine_prompt(GenRequest(id=1, prompt_ids=[5, 6], max_tokens=4, media=(clip,)))
    assert prompt["prompt_token_ids"] == [5, 6]
    samples, rate = prompt["multi_modal_data"]["audio"]
    assert samples is clip.samples and rate == 16000
    assert engine_prompt(GenRequest(id=1, prompt_ids=[5], max_tokens=4)) == {"prompt_token_ids": [5]}


def test_a_speech_models_warm_up_sends_its_start_token_with_a_second_of_silence():
    (request,) = audio_warmup_requests(1, decoder_start=50258)
    assert request.id < 0 and request.prompt_ids == [50258] and request.max_tokens == WARMUP_MAX_TOKENS
    (clip,) = request.media
    assert clip.sample_rate == 16000 and clip.samples.shape == (16000,) and not clip.samples.any()


def test_a_request_must_ask_for_at_least_two_tokens():
    with pytest.raises(ValueError, match="fewer than 2 tokens"):
        GenRequest(id=1, prompt_ids=[1, 2], max_tokens=10, min_tokens=1)
    with pytest.raises(ValueError, match="max_tokens 1 < min_tokens 2"):
        GenRequest(id=1, prompt_ids=[1, 2], max_tokens=1)
    with pytest.raises(ValueError, match="empty prompt"):
        GenRequest(id=1, prompt_ids=[])
    assert GenRequest(id=1, prompt_ids=[1]).min_tokens == MIN_OUTPUT_TOKENS == 2


def test_n_tokens_counts_every_output_token_the_first_included():
    assert GenResult(id=1, token_ids=[5, 6, 2]).n_tokens == 3


def test_a_result_shorter_than_min_tokens_is_an_error_that_names_the_request():
    request = GenRequest(id=7, prompt_ids=[1], max_tokens=10)
    with pytest.raises(BackendError, match="request 7: the engine returned 1 tokens"):
        check_result(request, GenResult(id=7, token_ids=[3], finish_reason="length"))
    ok = GenResult(id=7, token_ids=[3, 2], finish_reason="stop")
    assert check_result(request, ok) is ok


def test_engines_get_the_longest_prompts_first_and_ties_keep_their_order():
    requests = [GenRequest(id=i, prompt_ids=[1] * n) for i, n in enumerate([3, 9, 3, 1, 9])]
    assert [r.id for r in longest_first(requests)] == [1, 4, 0, 2, 3]


def test_a_requests_cost_is_its_prompt_and_its_likely_output():
    assert request_cost(GenRequest(id=0, prompt_ids=[1] * 100, max_tokens=1024), 300) == 400
    assert request_cost(GenRequest(id=0, prompt_ids=[1] * 100, max_tokens=20), 300) == 120


def test_warmup_requests_are_short_valid_and_never_a_callers_id():
    requests = warmup_requests(6, max_model_len=256)
    assert len(requests) == 6
    assert all(r.id < 0 for r in requests)
    assert all(len(r.prompt_ids) + r.max_tokens <= 256 for r in requests)
    assert all(r.max_tokens == WARMUP_MAX_TOKENS for r in requests)
    assert len({len(r.prompt_ids) for r in requests}) > 1  # several prefill sizes
    assert requests == warmup_requests(6, max_model_len=256)  # the same every run


def test_token_lists_are_plain_ints_from_lists_and_arrays():
    array = pytest.importorskip("numpy").array([1, 29871], dtype="int32")
    assert token_list(array) == [1, 29871] and type(token_list(array)[0]) is int
    assert token_list((3, 4)) == [3, 4]


def test_an_engines_environment_applies_while_it_is_built_and_is_restored_after(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # what vLLM's import copies from HIP_VISIBLE_DEVICES
    monkeypatch.setenv("VLLM_ROCM_USE_AITER", "0")  # the user's own choice
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_FORCE_DEV_KERNARG", raising=False)
    spec = EngineSpec(devices=("2", "3"), engine_kwargs={}, env={"HIP_VISIBLE_DEVICES": "2,3"},
                      env_defaults={"VLLM_ROCM_USE_AITER": "1", "HIP_FORCE_DEV_KERNARG": "1"},
                      env_unset=("CUDA_VISIBLE_DEVICES",))
    with engine_environment(spec, logging.getLogger("test")):
        assert os.environ["HIP_VISIBLE_DEVICES"] == "2,3"
        assert "CUDA_VISIBLE_DEVICES" not in os.environ
        assert os.environ["VLLM_ROCM_USE_AITER"] == "0"  # a user's value is kept
        assert os.environ["HIP_FORCE_DEV_KERNARG"] == "1"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "HIP_VISIBLE_DEVICES" not in os.environ and "HIP_FORCE_DEV_KERNARG" not in os.environ


class IgnoringSink:
    def on_first_token(self, request_id: int, token_id: int) -> None:
        pass

    def on_done(self, result: GenResult) -> None:
        pass

    def on_error(self, request_id: int, error: BaseException) -> None:
        pass


def test_a_backend_that_is_not_started_says_so_and_starts_nothing(tmp_path: Path):
    backend = VllmBackend(VllmBackendConfig(model=tmp_path, options=EngineOptions(device="cpu")))
    with pytest.raises(BackendError, match="not started"):
        backend.generate([GenRequest(id=1, prompt_ids=[1])])
    with pytest.raises(BackendError, match="not started"):
        backend.submit(GenRequest(id=1, prompt_ids=[1]), IgnoringSink())
    backend.stop()  # stopping what never started is a no-op


class FakeParams:
    """Stands in for vllm.SamplingParams: keeps the keyword arguments it was built with."""

    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs


class FakeEngine:
    """Stands in for vLLM's LLMEngine: each step finishes the `per_step` oldest requests with two tokens; it
    keeps the params of every request, what it held at most, and what was aborted."""

    def __init__(self, max_num_seqs: int = 4, per_step: int = 1, fail_at_step: int | None = None) -> None:
        from types import SimpleNamespace

        self.vllm_config = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs))
        self.engine_core = SimpleNamespace(shutdown=lambda: None)
        self.per_step, self.fail_at_step, self.steps = per_step, fail_at_step, 0
        self.params: list[FakeParams] = []
        self.held: list[str] = []
        self.added: list[str] = []
        self.aborted: list[str] = []
        self.most_held = 0

    def add_request(self, request_id: str, prompt: dict, params: FakeParams) -> None:
        assert request_id not in self.held and all(isinstance(t, int) for t in prompt["prompt_token_ids"])
        self.params.append(params)
        self.held.append(request_id)
        self.added.append(request_id)
        self.most_held = max(self.most_held, len(self.held))

    def step(self) -> list:
        from types import SimpleNamespace

        self.steps += 1
        if self.steps == self.fail_at_step:
            raise RuntimeError("EngineCore encountered an issue")
        done, self.held = self.held[:self.per_step], self.held[self.per_step:]
        return [SimpleNamespace(request_id=r, finished=True,
                                outputs=[SimpleNamespace(token_ids=[5, 2], finish_reason="stop")]) for r in done]

    def abort_request(self, request_ids: list[str]) -> None:
        self.aborted += request_ids
        self.held = [r for r in self.held if r not in request_ids]


class FakeLLM:
    """Stands in for vllm.LLM: only its engine is used."""

    def __init__(self, **engine: Any) -> None:
        self.llm_engine = FakeEngine(**engine)

    @property
    def params(self) -> list[FakeParams]:
        return self.llm_engine.params


def fake_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llms: list[FakeLLM], warmup_requests: int = 0,
                 sampling: Sampling = GREEDY) -> VllmBackend:
    """A VllmBackend whose Offline engines are `llms` (one per device group)."""

    def import_vllm(self: _OfflineEngines) -> None:
        self._params_class = FakeParams

    def build(self: _OfflineEngines, engines: object) -> None:
        self.llms += llms

    monkeypatch.setattr(_OfflineEngines, "import_vllm", import_vllm)
    monkeypatch.setattr(_OfflineEngines, "build", build)
    specs = tuple(EngineSpec(devices=(str(i),), engine_kwargs={}, env={}) for i in range(len(llms)))
    facts = ModelFacts(kv_bytes_per_token=1, max_model_len=2048)
    monkeypatch.setattr(VllmBackend, "_plan", lambda self: (specs, facts))
    config = VllmBackendConfig(model=tmp_path, options=EngineOptions(device="cpu"), warmup_requests=warmup_requests,
                               sampling=sampling)
    return VllmBackend(config)


def test_offline_results_come_as_each_finishes_from_a_window_of_twice_max_num_seqs(tmp_path: Path, monkeypatch):
    llm = FakeLLM(max_num_seqs=4)
    with fake_backend(monkeypatch, tmp_path, [llm]) as backend:
        requests = [GenRequest(id=i, prompt_ids=list(range(1, 2 + i % 7)), max_tokens=8) for i in range(40)]
        stream = backend.generate(requests)
        first = next(stream)
        assert len(llm.llm_engine.added) == 8  # answered before the rest of the query reached the engine
        results = [first, *stream]
    assert sorted(r.id for r in results) == list(range(40))
    assert llm.llm_engine.most_held == 8 and llm.llm_engine.aborted == []
    assert [r.id for r in results[:3]] == [r.id for r in longest_first(requests)[:3]]  # longest prompts first


def test_an_offline_query_the_caller_stops_reading_is_aborted_in_the_engine(tmp_path: Path, monkeypatch):
    llm = FakeLLM(max_num_seqs=2)
    with fake_backend(monkeypatch, tmp_path, [llm]) as backend:
        stream = backend.generate([GenRequest(id=i, prompt_ids=[1, 2], max_tokens=8) for i in range(20)])
        taken = [next(stream) for _ in range(3)]
        stream.close()  # LoadGen's test ended (Ctrl-C, a dead backend): nothing of it stays in the engine
    engine = llm.llm_engine
    assert engine.held == [] and sorted(engine.aborted) == sorted(set(engine.added) - {f"cmx-{r.id:x}" for r in taken})
    assert len(engine.added) < 20


def test_an_engine_that_fails_mid_query_fails_the_offline_generate_with_its_error(tmp_path: Path, monkeypatch):
    llms = [FakeLLM(max_num_seqs=2), FakeLLM(max_num_seqs=2, fail_at_step=3)]
    with fake_backend(monkeypatch, tmp_path, llms) as backend, \
            pytest.raises(RuntimeError, match="EngineCore encountered an issue"):
        list(backend.generate([GenRequest(id=i, prompt_ids=[1, 2], max_tokens=8) for i in range(30)]))
    assert all(llm.llm_engine.held == [] for llm in llms)  # what either engine still held was aborted


GPT_OSS_LIKE = Sampling(temperature=1.0, top_p=1.0, top_k=-1)


def test_sampling_params_carry_the_runs_temperature_top_p_top_k_and_seed_once_per_length():
    cache = _ParamsCache(FakeParams, Sampling(temperature=1.0, top_p=0.9, top_k=40, seed=42), output_kind="DELTA")
    first = cache.get(GenRequest(id=1, prompt_ids=[1], max_tokens=16))
    assert first.kwargs == {"temperature": 1.0, "top_p": 0.9, "top_k": 40, "seed": 42, "max_tokens": 16,
                            "min_tokens": MIN_OUTPUT_TOKENS, "detokenize": False, "output_kind": "DELTA"}
    assert cache.get(GenRequest(id=2, prompt_ids=[7, 8], max_tokens=16)) is first  # one object per length
    greedy = _ParamsCache(FakeParams).get(GenRequest(id=1, prompt_ids=[1]))
    assert (greedy.kwargs["temperature"], greedy.kwargs["top_k"], greedy.kwargs["seed"]) == (0.0, 0, None)


def test_the_offline_path_and_its_warm_up_sample_as_the_config_says(tmp_path: Path, monkeypatch):
    llm = FakeLLM()
    with fake_backend(monkeypatch, tmp_path, [llm], warmup_requests=2, sampling=GPT_OSS_LIKE) as backend:
        results = list(backend.generate([GenRequest(id=i, prompt_ids=[1, 2, 3], max_tokens=8) for i in range(3)]))
    assert sorted(r.id for r in results) == [0, 1, 2]
    assert len(llm.params) == 2 + 3  # the warm-up's two, then the batch's three
    assert {(p.kwargs["temperature"], p.kwargs["top_p"], p.kwargs["top_k"], p.kwargs["seed"]) for p in llm.params} \
        == {(1.0, 1.0, -1, None)}


# --- e2e: real vLLM on the CPU -------------------------------------------------------------------

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM (the cpu extra) is not installed")

MAKE_MODEL = """
import sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=32000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)
LlamaForCausalLM(config).save_pretrained(sys.argv[1])
"""

# One process per mode: `direct` (vllm.LLM as a user would call it), `offline` and `streaming`
# (the backend). All three serve the same 32 prompts; the streaming one also serves 16 concurrent
# requests submitted from another thread, as LoadGen's issue thread would.
RUN_MODE = r'''
import json, logging, random, sys, threading, time
from dataclasses import replace
from typing import Any
from pathlib import Path

MODEL, MODE, OUT = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
BIND = sys.argv[4] if len(sys.argv) > 4 else None  # CPUs for the engine's OpenMP threads
MAX_MODEL_LEN, MAX_NUM_SEQS = 2048, 16


def prompts(seed, count, max_tokens=None):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        ids = [rng.randrange(3, 32000) for _ in range(rng.randrange(4, 300))]
        out.append((5000 + 3 * i, ids, max_tokens or rng.randrange(2, 48)))
    out[0] = (out[0][0], out[0][1], 2)  # the smallest request LoadGen accepts: exactly 2 tokens
    rng.shuffle(out)
    return out


CHECK = prompts(7, 32)


def direct(report):
    import os
    if BIND:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = BIND
    from vllm import LLM, SamplingParams
    began = time.monotonic()
    from cmx.mlperf.backends.machine import read_cpu_bf16
    # the dtype cmx's cpu profile picks: bf16 where the CPU has it natively, else float32
    llm = LLM(model=str(MODEL), skip_tokenizer_init=True, dtype="bfloat16" if read_cpu_bf16() else "float32",
              max_model_len=MAX_MODEL_LEN,
              max_num_seqs=MAX_NUM_SEQS, kv_cache_memory_bytes=64 << 20, enforce_eager=True)
    report["start_seconds"] = time.monotonic() - began

    params = [SamplingParams(temperature=0.0, max_tokens=m, min_tokens=2, detokenize=False) for _, _, m in CHECK]
    outs = llm.generate([{"prompt_token_ids": ids} for _, ids, _ in CHECK], params, use_tqdm=False)
    report["tokens"] = {str(i): list(o.outputs[0].token_ids) for (i, _, _), o in zip(CHECK, outs)}
    llm.llm_engine.engine_core.shutdown()


def backend_run(report, streaming):
    from cmx.mlperf.backends.base import GenRequest
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.vllm import VllmBackend, VllmBackendConfig

    options = EngineOptions(device="cpu", max_num_seqs=MAX_NUM_SEQS, cpu_threads_bind=BIND)
    config = VllmBackendConfig(model=MODEL, options=options, streaming=streaming, max_model_len=MAX_MODEL_LEN)
    backend = VllmBackend(config, logging.getLogger("cmx-test"))
    info = backend.start()
    report["start"] = {"start_seconds": info.start_seconds, "warmup_requests": info.warmup_requests,
                       "warmup_seconds": info.warmup_seconds, "engines": len(info.engines),
                       "engine_kwargs": dict(info.engines[0]["engine_kwargs"])}
    try:
        requests = [GenRequest(id=i, prompt_ids=ids, max_tokens=m) for i, ids, m in CHECK]
        results = list(backend.generate(requests))
        report["order"] = [r.id for r in results]
        report["tokens"] = {str(r.id): r.token_ids for r in results}
        report["n_tokens"] = {str(r.id): r.n_tokens for r in results}
        if streaming:
            report["stream"] = stream(backend, GenRequest)
        else:
            report["window"] = window(backend, GenRequest)
    finally:
        backend.stop()


def window(backend, GenRequest):
    """A query three times max_num_seqs long: how many requests the engine had been given when the first
    result came, and at most at once."""
    engine = backend._engines.llms[0].llm_engine
    added, done, most = [], [], [0]
    add = engine.add_request

    def counted(request_id, *args, **kwargs):
        added.append(request_id)
        most[0] = max(most[0], len(added) - len(done))
        return add(request_id, *args, **kwargs)

    engine.add_request = counted
    batch = [GenRequest(id=i, prompt_ids=ids, max_tokens=m) for i, ids, m in prompts(19, 3 * MAX_NUM_SEQS, 8)]
    first_at = None
    for result in backend.generate(batch):
        first_at = len(added) if first_at is None else first_at
        done.append(result.id)
    return {"first_at": first_at, "most": most[0], "done": sorted(done), "ids": sorted(r.id for r in batch)}


def stream(backend, GenRequest):
    events, lock, done = [], threading.Lock(), threading.Event()
    batch = prompts(13, 16, max_tokens=24)

    class Sink:
        def on_first_token(self, request_id, token_id):
            with lock:
                events.append(["first", request_id, token_id, time.monotonic()])

        def on_done(self, result):
            with lock:
                events.append(["done", result.id, result.token_ids, time.monotonic()])
                if sum(e[0] != "first" for e in events) == len(batch):
                    done.set()

        def on_error(self, request_id, error):
            with lock:
                events.append(["error", request_id, repr(error), time.monotonic()])
                if sum(e[0] != "first" for e in events) == len(batch):
                    done.set()

    submit_seconds = []

    def issue():  # LoadGen's issue thread: submit every query, then return
        sink = Sink()
        for i, ids, m in batch:
            began = time.monotonic()
            backend.submit(GenRequest(id=i, prompt_ids=ids, max_tokens=m), sink)
            submit_seconds.append(time.monotonic() - began)

    issuer = threading.Thread(target=issue)
    issuer.start()
    issuer.join()
    finished = done.wait(120)
    return {"finished": finished, "events": events, "submit_seconds": submit_seconds,
            "ids": [i for i, _, _ in batch]}


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    report = {"mode": MODE}
    if MODE == "direct":
        direct(report)
    else:
        backend_run(report, streaming=MODE == "streaming")
    OUT.write_text(json.dumps(report))
'''


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([sys.executable, "-c", MAKE_MODEL, str(folder)], check=True, capture_output=True, timeout=300)
    return folder


def run_modes(tiny_model: Path, folder: Path, modes: dict[str, str | None]) -> dict[str, dict]:
    """Run each mode in its own process, all at once, with its CPU binding; their reports."""
    script = folder / "run_mode.py"
    script.write_text(textwrap.dedent(RUN_MODE))
    procs = {}
    for mode, bind in modes.items():
        args = [sys.executable, str(script), str(tiny_model), mode, str(folder / f"{mode}.json")]
        args += [bind] if bind else []
        procs[mode] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder)
    reports = {}
    for mode, proc in procs.items():
        try:
            output, _ = proc.communicate(timeout=420)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        out = folder / f"{mode}.json"
        if proc.returncode != 0 or not out.exists():
            raise AssertionError(f"{mode} run failed ({proc.returncode}):\n{output[-8000:]}")
        reports[mode] = json.loads(out.read_text())
    return reports


def separate_cpus() -> tuple[str | None, str | None]:
    """Two CPUs of this process's, one per engine; None (run one after the other) with fewer."""
    cpus = sorted(os.sched_getaffinity(0))
    return (str(cpus[0]), str(cpus[1])) if len(cpus) >= 2 else (None, None)


@pytest.fixture(scope="module")
def direct_and_offline(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    first, second = separate_cpus()
    folder = tmp_path_factory.mktemp("offline")
    if first is None:
        return {**run_modes(tiny_model, folder, {"direct": None}), **run_modes(tiny_model, folder, {"offline": None})}
    return run_modes(tiny_model, folder, {"direct": first, "offline": second})


@pytest.fixture(scope="module")
def direct(direct_and_offline: dict[str, dict]) -> dict:
    return direct_and_offline["direct"]


@pytest.fixture(scope="module")
def offline(direct_and_offline: dict[str, dict]) -> dict:
    return direct_and_offline["offline"]


@pytest.fixture(scope="module")
def streaming(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_modes(tiny_model, tmp_path_factory.mktemp("streaming"), {"streaming": None})["streaming"]


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_offline_generate_returns_each_request_once_with_int32_ids_and_at_least_two_tokens(offline: dict):
    assert len(offline["order"]) == 32 and len(set(offline["order"])) == 32
    for key, tokens in offline["tokens"].items():
        assert offline["n_tokens"][key] == len(tokens) >= 2
        assert all(isinstance(t, int) and 0 <= t < 2**31 for t in tokens)
    assert 2 in offline["n_tokens"].values()  # the request with max_tokens 2 got exactly 2


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_offline_generate_answers_the_first_sample_before_the_query_is_all_in_the_engine(offline: dict):
    window = offline["window"]
    assert window["done"] == window["ids"]
    assert window["first_at"] == window["most"] == 32  # twice max_num_seqs (16), of 48


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_offline_generate_gives_the_same_tokens_as_a_direct_llm_generate(offline: dict, direct: dict):
    assert offline["tokens"] == direct["tokens"]


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_start_warms_the_engine_up_and_sizes_the_cpu_kv_cache_from_the_model(offline: dict, streaming: dict):
    for report in (offline, streaming):
        start = report["start"]
        assert start["engines"] == 1
        assert start["warmup_requests"] >= 1 and start["warmup_seconds"] > 0
        # 16 sequences of 2048 tokens, 2 layers of 2 KV heads of 64 at bf16 (twice that in float32)
        width = 2 if read_cpu_bf16() else 4
        assert start["engine_kwargs"]["kv_cache_memory_bytes"] == 16 * 2048 * (2 * 2 * 2 * 64 * width)


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_streaming_sends_the_first_token_before_completion_and_completion_starts_with_it(streaming: dict):
    stream = streaming["stream"]
    assert stream["finished"]
    events = stream["events"]
    for request_id in stream["ids"]:
        mine = [e for e in events if e[1] == request_id]
        assert [e[0] for e in mine] == ["first", "done"], mine
        (_, _, first, first_at), (_, _, tokens, done_at) = mine
        assert tokens[0] == first
        assert len(tokens) >= 2
        assert first_at < done_at


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_streaming_completes_every_concurrent_request_and_submit_returns_at_once(streaming: dict):
    stream = streaming["stream"]
    done = sorted(e[1] for e in stream["events"] if e[0] == "done")
    assert done == sorted(stream["ids"])
    assert not [e for e in stream["events"] if e[0] == "error"]
    # scheduling onto the backend's loop, not generating: well under a millisecond each here
    assert max(stream["submit_seconds"]) < 0.05


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_streaming_generate_gives_the_same_tokens_as_a_direct_llm_generate(streaming: dict, direct: dict):
    assert streaming["tokens"] == direct["tokens"]


@pytest.mark.parametrize("device, sampling, whole", [
    ("cpu", Sampling(temperature=1.0, top_k=1, seed=42), True),   # llama3.1-405b's: seeded draws
    ("cpu", Sampling(temperature=1.0, top_k=-1), False),           # gpt-oss-120b's: no seed, no generator
    ("cpu", Sampling(seed=42), False),                             # greedy with a seed: no generator either
    ("cuda", Sampling(temperature=1.0, top_k=1, seed=42), False),  # a GPU generator rewinds
])
def test_seeded_draws_on_the_cpu_prefill_whole_prompts(tmp_path: Path, monkeypatch, device: str,
                                                       sampling: Sampling, whole: bool):
    """torch's CPU generator cannot rewind, which vLLM does to a seeded request after a chunked prefill."""
    from cmx.mlperf.backends import vllm as module

    spec = EngineSpec(devices=(), engine_kwargs={"max_num_seqs": 256}, env={})
    monkeypatch.setattr(module, "read_machine_facts", lambda *a, **k: None)
    monkeypatch.setattr(module, "read_model_facts", lambda *a: ModelFacts(kv_bytes_per_token=1, max_model_len=4096))
    monkeypatch.setattr(module, "engine_specs", lambda *a: (spec,))
    backend = VllmBackend(VllmBackendConfig(model=tmp_path, options=EngineOptions(device=device), sampling=sampling))
    kwargs = backend.engine_kwargs(backend._plan()[0][0])
    if whole:
        assert kwargs["enable_chunked_prefill"] is False and kwargs["max_num_batched_tokens"] == 4096
    else:
        assert "enable_chunked_prefill" not in kwargs and "max_num_batched_tokens" not in kwargs


def test_a_vllm_serve_cmx_starts_for_seeded_draws_on_the_cpu_prefills_whole_prompts(tmp_path: Path, monkeypatch):
    from cmx.mlperf.backends import vllm_server as module

    spec = EngineSpec(devices=(), engine_kwargs={"max_num_seqs": 256}, env={})
    monkeypatch.setattr(module, "read_machine_facts", lambda *a, **k: None)
    monkeypatch.setattr(module, "read_model_facts", lambda *a: ModelFacts(kv_bytes_per_token=1, max_model_len=1024))
    monkeypatch.setattr(module, "engine_specs", lambda *a: (spec,))
    config = module.VllmServerConfig(model=tmp_path, options=EngineOptions(device="cpu"), log_path=tmp_path / "log",
                                     sampling=Sampling(temperature=1.0, top_k=1, seed=42))
    kwargs = module.VllmServer(config)._plan()[0]
    assert kwargs["enable_chunked_prefill"] is False and kwargs["max_num_batched_tokens"] == 2048
    assert "enable_chunked_prefill" not in module.VllmServer(replace(config, sampling=Sampling()))._plan()[0]
