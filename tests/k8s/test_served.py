"""The served model and engine choices come from the resolved plan of the repository's app recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx import api
from cmx.k8s.served import ServedModelError, engine_inputs, plan_precision, served_model
from cmx.resolve.plan import Plan
from cmx.settings import Settings


def _plan(query: str, settings: Settings, **inputs: str) -> Plan:
    return api.plan(query, inputs=inputs, settings=settings).plan


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
