"""Sampling as data: its bounds, what it calls greedy, how a run's differs from the reference's, each benchmark's."""

from __future__ import annotations

import pytest

from cmx.mlperf.backends.base import GREEDY, Sampling, SamplingError
from cmx.mlperf.benchmarks import benchmark_for


@pytest.mark.parametrize(("fields", "message"), [
    ({"temperature": -0.1}, "temperature -0.1 is outside"),
    ({"temperature": float("nan")}, "temperature nan is outside"),
    ({"top_p": 0.0}, "top_p 0.0 is outside"),
    ({"top_p": 1.5}, "top_p 1.5 is outside"),
    ({"top_k": -2}, "top_k -2 is not an integer"),
    ({"top_k": 2.5}, "top_k 2.5 is not an integer"),
])
def test_sampling_an_engine_would_refuse_is_refused_with_a_hint(fields: dict, message: str):
    with pytest.raises(SamplingError, match=message) as caught:
        Sampling(**fields)
    assert caught.value.hint


def test_greedy_is_temperature_zero_or_top_k_one_whatever_the_rest():
    assert GREEDY.greedy and Sampling(temperature=1.0, top_k=1, seed=42).greedy
    assert not Sampling(temperature=1.0, top_k=-1).greedy and not Sampling(temperature=0.7, top_p=0.9).greedy


def test_an_override_names_the_fields_that_differ_and_round_trips_through_json():
    reference = Sampling(temperature=1.0, top_p=1.0, top_k=-1)
    debug = Sampling(temperature=0.0, top_p=1.0, top_k=-1, seed=7)
    assert debug.differences(reference) == ("temperature", "seed") and reference.differences(reference) == ()
    assert Sampling.from_json({**debug.to_json(), "from_a_newer_cmx": 1}) == debug
    assert reference.describe() == "temperature 1, top_p 1, top_k off, no seed"
    assert debug.describe() == "temperature 0, top_p 1, top_k off, seed 7"


# each reference SUT's values, as generation.py cites them (mlcommons/inference at b66003e)
REFERENCES = {
    "llama2-70b": GREEDY,  # SUT.py gen_kwargs do_sample False, num_beams 1
    "mixtral-8x7b": GREEDY,  # SUT.py gen_kwargs do_sample False
    "llama3.1-8b": Sampling(temperature=0.0, top_p=1.0, top_k=1, seed=42),  # SUT_VLLM.py gen_kwargs
    "llama3.1-405b": Sampling(temperature=1.0, top_p=1.0, top_k=1, seed=42),  # SUT_VLLM.py (top_p 0 refused by vLLM)
    "deepseek-r1": Sampling(temperature=0.0, top_p=1.0, top_k=0, seed=42),  # backend_registry.py 'vllm'
    "gpt-oss-120b": Sampling(temperature=1.0, top_p=1.0, top_k=-1, seed=None),  # generation_config.json
}


@pytest.mark.parametrize("family", sorted(REFERENCES))
def test_each_benchmark_generates_with_its_references_sampling(family: str):
    sampling = benchmark_for(family).generation.sampling
    assert sampling == REFERENCES[family]
    assert sampling.greedy == (family != "gpt-oss-120b")  # gpt-oss-120b alone samples
