"""The served model and engine choices come from the resolved plan of the repository's app recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cmx.k8s.served import (
    DEFAULT_CACHE_SIZE,
    ServedModel,
    ServedModelError,
    cache_size_for,
    engine_inputs,
    plan_precision,
    served_model,
)
from cmx.mlperf.benchmarks import all_benchmarks, benchmark_for
from cmx.resolve.plan import Plan
from cmx.settings import Settings
from tests.conftest import REPO


def _plan(query: str, settings: Settings, **inputs: str) -> Plan:
    """The plan as `cmx deploy` resolves it (no run's plan-time checks: the Job's run has its own)."""
    from cmx.execute.request import Runtime, resolved

    return resolved(query, inputs, {}, Runtime(settings))


def test_llama2_serves_the_pinned_repository_at_its_commit(repo_settings: Settings) -> None:
    model = served_model(_plan("app mlperf inference llama2 _rocm", repo_settings))
    assert (model.repo, model.revision) == ("meta-llama/Llama-2-70b-chat-hf",
                                            "e4b287212771ce25f782ed8636cbea2d7c5ac7e2")
    assert model.recipe == "get-ml-model-llama2" and model.cache_size == "200Gi" and not model.quantized
    assert model.snapshot_dir("/c") == ("/c/hub/models--meta-llama--Llama-2-70b-chat-hf/snapshots/"
                                        "e4b287212771ce25f782ed8636cbea2d7c5ac7e2")


def test_llama3_serves_its_own_model_with_a_smaller_cache(repo_settings: Settings) -> None:
    model = served_model(_plan("app mlperf inference llama3 _cuda", repo_settings))
    assert model.repo == "meta-llama/Llama-3.1-8B-Instruct" and model.cache_size == "50Gi"


def test_a_revision_input_changes_what_is_served(repo_settings: Settings) -> None:
    plan = _plan("app mlperf inference llama2 _cuda", repo_settings, **{"get-ml-model-llama2.revision": "a" * 40})
    assert served_model(plan).revision == "a" * 40


def test_fp8_serves_the_quantized_repository_and_needs_its_commit(repo_settings: Settings) -> None:
    with pytest.raises(ServedModelError, match="fp8_revision"):
        served_model(_plan("app mlperf inference llama2 _rocm _fp8", repo_settings))
    plan = _plan("app mlperf inference llama2 _rocm _fp8", repo_settings,
                 **{"get-ml-model-llama2.fp8_revision": "b" * 40})
    model = served_model(plan)
    assert (model.repo, model.revision, model.quantized) == ("amd/Llama-2-70b-chat-hf_FP8_MLPerf_V2", "b" * 40, True)
    assert plan_precision(plan) == "fp8"


def test_the_tiny_model_cannot_be_served_from_a_hub(repo_settings: Settings) -> None:
    with pytest.raises(ServedModelError, match="_tiny"):
        served_model(_plan("app mlperf inference llama2 _cuda _tiny", repo_settings))


def test_a_local_model_folder_cannot_be_served(repo_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(ServedModelError, match="local folder"):
        served_model(_plan("app mlperf inference llama2 _cuda", repo_settings, model_path=str(tmp_path)))


def test_engine_inputs_are_the_app_recipes(repo_settings: Settings) -> None:
    plan = _plan("app mlperf inference llama2 _cuda", repo_settings, tensor_parallel_size="4", max_num_seqs="512")
    assert engine_inputs(plan) == {"tensor_parallel_size": 4, "max_num_seqs": 512, "max_num_batched_tokens": None,
                                   "gpu_memory_utilization": None, "max_model_len": None}
    assert plan_precision(plan) == "bf16"


# the benchmark's weights (Benchmark.model_size, each model.py citing its figure) and half again, in 50Gi steps
@pytest.mark.parametrize(("query", "family", "size"), [
    ("app mlperf inference llama2-70b", "llama2-70b", "200Gi"),  # 130 GB
    ("app mlperf inference llama3.1-8b", "llama3.1-8b", "50Gi"),  # 16 GB
    ("app mlperf inference llama3.1-405b", "llama3.1-405b", "1150Gi"),  # 800 GB
    ("app mlperf inference mixtral-8x7b", "mixtral-8x7b", "150Gi"),  # 93 GB
    ("app mlperf inference deepseek-r1", "deepseek-r1", "1000Gi"),  # 690 GB
    ("app mlperf inference gpt-oss-120b", "gpt-oss-120b", "100Gi"),  # 65 GB
])
def test_the_model_cache_is_sized_from_the_benchmarks_model_size(repo_settings: Settings, query: str, family: str,
                                                                 size: str) -> None:
    model = served_model(_plan(query + " _cuda", repo_settings))
    assert model.model_size == benchmark_for(family).model_size and model.cache_size == size


def test_the_cache_holds_the_weights_and_half_again_in_50gi_steps() -> None:
    assert [cache_size_for(n) for n in (1, 33 * 2**30, 34 * 2**30, 130 * 10**9)] == ["50Gi", "50Gi", "100Gi",
                                                                                     "200Gi"]
    assert ServedModel(repo="r", revision="c" * 40, recipe="get-my-model").cache_size == DEFAULT_CACHE_SIZE


def test_every_model_recipe_names_its_benchmark_among_its_tags() -> None:
    families = {b.family for b in all_benchmarks()}
    for path in sorted((REPO / "recipes").glob("get-ml-model-*/recipe.yaml")):
        tags = yaml.safe_load(path.read_text(encoding="utf-8"))["tags"]
        assert len(families & set(tags)) == 1, path
