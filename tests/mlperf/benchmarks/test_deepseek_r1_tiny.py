"""deepseek-r1's _tiny generators: a DeepseekV3 checkpoint (MLA, MoE) and tokenizer with DeepSeek-R1's chat shape,
and a dataset of every subset whose prompts are the chat template's and whose code rows have real tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.deepseek_r1.accuracy import evaluate
from cmx.mlperf.benchmarks.deepseek_r1.dataset import load_deepseek
from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import load_tests
from cmx.mlperf.benchmarks.deepseek_r1.prompts import PromptError, chat_tokenizer
from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_dataset, make_tiny_deepseek, weight_shapes
from cmx.mlperf.loadgen.accuracy_log import AccuracyRecord
from cmx.mlperf.scoring.decode import reference_decoder
from cmx.mlperf.scoring.sandbox import Program, SandboxUnavailable, run_program


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tiny")
    model = make_tiny_deepseek(folder / "model", seed=0)
    data = make_tiny_dataset(folder / "data" / "set.pkl", model.path, rows=10, seed=0)
    return model, data


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_the_same_seed_makes_the_same_bytes(made, tmp_path: Path):
    model, data = made
    again = make_tiny_deepseek(tmp_path / "model", seed=0)
    assert _digests(again.path) == _digests(model.path)
    other = make_tiny_dataset(tmp_path / "data" / "set.pkl", again.path, rows=10, seed=0)
    assert _digests(other.path.parent) == _digests(data.path.parent)
    assert _digests(make_tiny_deepseek(tmp_path / "m1", seed=1).path)["model.safetensors"] != \
        _digests(model.path)["model.safetensors"]


def test_the_model_is_a_deepseek_v3_with_mla_and_moe(made):
    model, _ = made
    config = json.loads((model.path / "config.json").read_text())
    assert config["architectures"] == ["DeepseekV3ForCausalLM"] and config["model_type"] == "deepseek_v3"
    assert (config["kv_lora_rank"], config["qk_rope_head_dim"]) == (512, 64)  # vLLM's CPU MLA kernel: 576
    routing = (config["topk_method"], config["scoring_func"], config["first_k_dense_replace"])
    assert routing == ("noaux_tc", "sigmoid", 1)
    header_size = int.from_bytes((model.path / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((model.path / "model.safetensors").read_bytes()[8:8 + header_size])
    header.pop("__metadata__")
    assert {k: tuple(v["shape"]) for k, v in header.items()} == weight_shapes(model)
    assert header["model.layers.1.mlp.gate.e_score_correction_bias"]["dtype"] == "F32"
    assert "model.layers.1.mlp.experts.7.down_proj.weight" in header and "model.layers.0.mlp.gate.weight" not in header


def test_prompts_are_the_chat_template_and_the_think_tokens_survive_decoding(made):
    model, data = made
    dataset = load_deepseek(data.path)
    tok = chat_tokenizer(model.path)
    text = tok.render("What is 2+2?")
    assert text == "<｜begin▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜><think>\n"
    ids = dataset.prompt_ids(0)
    decode = reference_decoder(model.path)
    assert ids[0] == 0 and decode(ids).endswith("<think>\n")  # <think> is no special token: it stays
    assert "<｜Assistant｜>" not in decode(ids)  # a special one is skipped


def test_every_subset_has_rows_and_the_code_rows_have_tests(made):
    _, data = made
    dataset = load_deepseek(data.path)
    assert [dataset.subset(i) for i in range(5)] == ["aime", "math500", "gpqa", "mmlu_pro", "livecodebench"]
    problems = load_tests(dataset.tests_path)
    assert sorted(problems) == ["tiny0004", "tiny0009"]
    assert problems["tiny0009"].fn_name == "largest" and problems["tiny0004"].fn_name is None
    assert len(problems["tiny0004"].inputs) == 3  # one public and two private tests


def test_correct_answers_to_the_tiny_rows_score_100(made):
    try:
        run_program(Program("python", "print(1)"))
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")
    _, data = made
    dataset = load_deepseek(data.path)
    solutions = {"livecodebench": "```python\nprint(sum(map(int, input().split())))\n```"}
    texts = {}
    for i in range(5):
        subset, truth = dataset.subset(i), dataset.answer(i)
        texts[i] = solutions.get(subset) or (f"\\boxed{{{truth}}}" if subset in ("aime", "math500")
                                             else f"ANSWER: {truth}")
    records = [AccuracyRecord(i, i, bytes(4 * (i + 1))) for i in range(5)]
    result = evaluate(records, [dataset.answer(i) for i in range(5)], [dataset.subset(i) for i in range(5)],
                      lambda ids: texts[len(ids) - 1], lambda: load_tests(dataset.tests_path), timeout_s=5)
    assert result.exact_match == 100.0 and result.tokens_per_sample == 3.0


def test_a_folder_without_a_chat_template_is_refused(tmp_path: Path, made):
    model, _ = made
    (tmp_path / "tokenizer.json").write_bytes((model.path / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(PromptError, match="no chat_template"):
        chat_tokenizer(tmp_path)
