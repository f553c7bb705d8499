"""The mixtral-8x7b pickle loader on the real layout and malformed fields; the tiny model and dataset generators."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.model import ModelError
from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import COLUMNS, SUBSETS, load_mixtral
from cmx.mlperf.benchmarks.mixtral_8x7b.mbxp import MbxpProblem, grade
from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_dataset import make_tiny_dataset
from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_model import TinyMixtral, make_tiny_mixtral, weight_shapes
from cmx.mlperf.scoring.sandbox import LanguageUnavailable, check_language, run_programs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_mixtral(tmp_path_factory.mktemp("model") / "m", seed=0).path


def test_tiny_model_is_a_mixtral_with_experts_and_gqa(tiny: Path) -> None:
    config = json.loads((tiny / "config.json").read_text())
    assert config["architectures"] == ["MixtralForCausalLM"] and config["model_type"] == "mixtral"
    assert (config["num_local_experts"], config["num_experts_per_tok"]) == (8, 2)
    assert config["hidden_size"] // config["num_attention_heads"] == 64
    assert config["num_key_value_heads"] * 4 == config["num_attention_heads"]
    assert config["sliding_window"] is None and config["rope_theta"] == 1e6
    from safetensors.numpy import load_file

    tensors = load_file(str(tiny / "model.safetensors"))
    assert "model.layers.1.block_sparse_moe.experts.7.w2.weight" in tensors
    assert tensors["model.layers.0.block_sparse_moe.gate.weight"].shape == (8, 256)
    tokenizer = json.loads((tiny / "tokenizer.json").read_text())
    assert [tokenizer["model"]["vocab"][t] for t in ("<unk>", "<s>", "</s>", "<0x0A>")] == [0, 1, 2, 13]
    shapes = weight_shapes(TinyMixtral(tiny, 0, config["vocab_size"], 256, config["intermediate_size"], 2, 4, 1, 8, 2))
    assert {k: v.shape for k, v in tensors.items()} == shapes  # 2 layers x (4 attention + gate + 2 norms + 8 x 3)


def test_tiny_model_is_the_same_bytes_for_the_same_seed(tiny: Path, tmp_path: Path) -> None:
    again = make_tiny_mixtral(tmp_path / "m", seed=0).path
    for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (again / name).read_bytes() == (tiny / name).read_bytes(), name
    other = make_tiny_mixtral(tmp_path / "o", seed=1).path
    assert (other / "model.safetensors").read_bytes() != (tiny / "model.safetensors").read_bytes()


def test_tiny_model_refuses_a_head_size_vllm_cpu_cannot_run(tmp_path: Path) -> None:
    with pytest.raises(CmxError, match="head size"):
        make_tiny_mixtral(tmp_path / "m", hidden_size=64, heads=4)
    with pytest.raises(CmxError, match="experts per token"):
        make_tiny_mixtral(tmp_path / "m", experts=2, experts_per_token=3)


def test_tiny_dataset_has_the_real_columns_and_all_three_subsets(tiny: Path, tmp_path: Path) -> None:
    path = make_tiny_dataset(tmp_path / "d.pkl", tiny, rows=7, seed=3).path
    frame = pd.read_pickle(path)
    assert tuple(frame.columns) == COLUMNS
    assert frame["dataset"].tolist() == [SUBSETS[i % 3] for i in range(7)]
    assert all(ids[:2] == [1, 1] for ids in frame["tok_input"])  # <s> added, then the literal one
    assert frame.loc[frame["dataset"] == "MBXP", "tok_stop_sequence"].tolist()[0][0] == 13  # "\n" first, like [13, ...]
    assert frame.loc[frame["dataset"] == "GSM8K", "tok_stop_sequence"].tolist()[0] == [2]
    dataset = load_mixtral(path)
    assert len(dataset) == 7 and dataset.prompt_ids(0) == frame["tok_input"][0]
    assert make_tiny_dataset(tmp_path / "e.pkl", tiny, rows=7, seed=3).path.read_bytes() == path.read_bytes()


def test_tiny_reference_answers_score_full_marks(tiny: Path, tmp_path: Path) -> None:
    try:
        check_language("python")
    except LanguageUnavailable as exc:
        pytest.skip(str(exc))
    frame = pd.read_pickle(make_tiny_dataset(tmp_path / "d.pkl", tiny, rows=9).path)
    from cmx.mlperf.benchmarks.mixtral_8x7b.gsm8k import gsm8k_accuracy

    gsm = frame[frame["dataset"] == "GSM8K"]
    assert gsm8k_accuracy(gsm["ref_output"].tolist(), gsm["gt_output"].tolist()) == 100.0
    mbxp = frame[frame["dataset"] == "MBXP"]
    problems = [MbxpProblem.from_row(i, t, r)
                for i, t, r in zip(mbxp["id"], mbxp["gt_output"], mbxp["ref_output"], strict=True)]
    assert grade(problems, run_programs).score == 100.0


def test_the_model_step_reports_the_architecture_and_refuses_a_vocab_size(tiny: Path, tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    bench = benchmark_for("mixtral-8x7b")
    describe, make_tiny = bench.describe, bench.make_tiny
    model = describe(tiny, "mine", "", "fp16", is_tiny=False)
    assert (model.architecture, model.eos_token_id, model.dtype) == ("MixtralForCausalLM", 2, "float16")
    made = make_tiny(tmp_path / "t", "bf16", {"seed": 1, "layers": 1})
    assert made.is_tiny and made.name == "tiny-mixtral-random-seed1" and made.outputs()["architecture"] == \
        "MixtralForCausalLM"
    with pytest.raises(ModelError, match="vocabulary is its tokenizer's"):
        make_tiny(tmp_path / "v", "bf16", {"vocab_size": 8000})
    config = json.loads((tiny / "config.json").read_text())
    other = tmp_path / "llama"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({**config, "architectures": ["LlamaForCausalLM"]}))
    (other / "tokenizer.json").write_bytes((tiny / "tokenizer.json").read_bytes())
    log = logging.getLogger("test-mixtral-model")
    with caplog.at_level(logging.WARNING, logger="test-mixtral-model"):
        assert describe(other, "llama", "", "bf16", is_tiny=False, log=log).architecture == "LlamaForCausalLM"
    assert "not a MixtralForCausalLM" in caplog.text
    (other / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="has no tokenizer"):
        describe(other, "llama", "", "bf16", is_tiny=False)


def _frame(**changes: object) -> pd.DataFrame:
    frame = pd.DataFrame({"dataset": ["OpenOrca", "MBXP"], "id": ["flan.1", "cpp_add"], "input": ["a", "b"],
                          "tok_input": [[1, 2], [1, 3, 4]], "gt_output": ["x", "y"], "tok_input_len": [2, 3]})
    for key, value in changes.items():
        frame[key] = value
    return frame


@pytest.mark.parametrize(("changes", "message"), [
    ({"dataset": ["OpenOrca", "HumanEval"]}, "row 1: dataset 'HumanEval' is none of"),
    ({"id": ["flan.1", "cppadd"]}, "not <language>_<entry point>"),
    ({"tok_input_len": [2, 4]}, "row 1 has 3 ids in tok_input but tok_input_len 4"),
    ({"gt_output": ["x", 3]}, "row 1: 'gt_output' is a int"),
    ({"tok_input": [[1, 2], [1, -3, 4]]}, "holds -3"),
])
def test_loader_names_the_bad_row(tmp_path: Path, changes: dict, message: str) -> None:
    path = tmp_path / "bad.pkl"
    _frame(**changes).to_pickle(path)
    with pytest.raises(DatasetError, match=message):
        load_mixtral(path)


def test_loader_names_missing_columns_and_a_file_that_is_no_pickle(tmp_path: Path) -> None:
    path = tmp_path / "bad.pkl"
    _frame().drop(columns=["gt_output", "dataset"]).to_pickle(path)
    with pytest.raises(DatasetError, match="no columns 'dataset', 'gt_output'"):
        load_mixtral(path)
    path.write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="not a pandas pickle"):
        load_mixtral(path)


def test_the_benchmark_is_found_by_name() -> None:
    bench = benchmark_for("mixtral-8x7b")
    assert bench.names == ("mixtral-8x7b",) and set(bench.loadgen_models) == {"Offline", "Server"}
    assert bench.generation.max_tokens == 1024
