"""cmx.mlperf.benchmarks.llama3_1_8b.tiny: the tiny random Llama 3, its byte-level tokenizer and the
cnn_eval.json-format dataset.

Real parts only: the files are loaded with transformers, tokenizers, safetensors and the
benchmark's own dataset loader, and (e2e) served by vLLM's CPU engine in a child process.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.llama3_1_8b.dataset import (
    COLUMNS,
    PROMPT_TEMPLATE,
    load_cnndm,
)
from cmx.mlperf.benchmarks.llama3_1_8b.generation import MIN_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.llama3_1_8b.tiny import (
    SPECIAL_COUNT,
    TinyLlama3,
    make_tiny_cnndm,
    make_tiny_llama3,
)
from tests.conftest import REPO

MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json",
               "tokenizer.json", "tokenizer_config.json")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyLlama3:
    return make_tiny_llama3(tmp_path_factory.mktemp("tiny") / "model", seed=0)


# --- the model ---------------------------------------------------------------------------------------

def test_the_same_seed_gives_byte_identical_files_in_another_process(tiny: TinyLlama3, tmp_path: Path) -> None:
    # a fresh interpreter has other hash seeds and thread timings: nothing may depend on them
    code = ("from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_llama3; "
            f"make_tiny_llama3({str(tmp_path / 'other')!r}, seed=0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == sorted(MODEL_FILES)
    for name in MODEL_FILES:
        assert sha256(tmp_path / "other" / name) == sha256(tiny.path / name), name


def test_another_seed_gives_other_weights_and_tokenizer(tiny: TinyLlama3, tmp_path: Path) -> None:
    other = make_tiny_llama3(tmp_path / "seed1", seed=1)
    assert sha256(other.path / "model.safetensors") != sha256(tiny.path / "model.safetensors")
    assert sha256(other.path / "tokenizer.json") != sha256(tiny.path / "tokenizer.json")
    assert (other.path / "config.json").read_text() == (tiny.path / "config.json").read_text()


def test_config_is_llama_3_1_shaped_with_grouped_query_attention_and_llama3_rope(tiny: TinyLlama3) -> None:
    config = json.loads((tiny.path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["hidden_size"] // config["num_attention_heads"] == 64
    assert config["num_attention_heads"] == 4 * config["num_key_value_heads"]  # 32 and 8 in Llama 3.1 8B
    assert config["rope_theta"] == 500000.0 and config["rope_scaling"] == {
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
        "rope_type": "llama3"}
    assert config["tie_word_embeddings"] is False and config["torch_dtype"] == "bfloat16"
    assert config["max_position_embeddings"] == 131072 and config["vocab_size"] == 4096
    generation = json.loads((tiny.path / "generation_config.json").read_text())
    assert generation["eos_token_id"] == config["eos_token_id"] == list(tiny.eos_ids) == [3841, 3848, 3849]
    assert generation["bos_token_id"] == tiny.bos_id == 3840  # 128000 of 128256 in Llama 3.1


def test_weights_are_bfloat16_safetensors_drawn_from_a_normal_distribution(tiny: TinyLlama3) -> None:
    import torch
    from safetensors import safe_open

    with safe_open(str(tiny.path / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        embed = f.get_tensor("model.embed_tokens.weight")
        norm = f.get_tensor("model.layers.0.input_layernorm.weight")
        k_proj = f.get_tensor("model.layers.1.self_attn.k_proj.weight")
    assert len(names) == 2 * 9 + 3 and "lm_head.weight" in names
    assert embed.dtype == torch.bfloat16 and tuple(embed.shape) == (4096, 256)
    assert tuple(k_proj.shape) == (64, 256)  # one key/value head of 64
    assert torch.equal(norm, torch.ones(256, dtype=torch.bfloat16))
    assert abs(float(embed.float().std()) - 0.02) < 0.001 and abs(float(embed.float().mean())) < 0.001


def test_the_model_loads_in_transformers_and_generates_greedily(tiny: TinyLlama3) -> None:
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny.path)
    assert isinstance(model, LlamaForCausalLM) and model.config.head_dim == 64
    prompt = torch.tensor([[tiny.bos_id, 300, 400, 500]])
    first = model.generate(prompt, max_new_tokens=4, do_sample=False)
    assert first.shape == (1, 8) and torch.equal(first, model.generate(prompt, max_new_tokens=4, do_sample=False))
    assert int(first.max()) < tiny.vocab_size


def test_sizes_that_vllm_or_the_tokenizer_cannot_take_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CmxError, match="head size other than 64") as info:
        make_tiny_llama3(tmp_path / "bad", hidden_size=128, heads=4)
    assert "256" in (info.value.hint or "")
    with pytest.raises(CmxError, match="cannot be shared by 3 key/value heads"):
        make_tiny_llama3(tmp_path / "bad", kv_heads=3)
    with pytest.raises(CmxError, match="vocab_size 600 is too small"):
        make_tiny_llama3(tmp_path / "bad", vocab_size=600)
    assert not (tmp_path / "bad").exists()


# --- the tokenizer -------------------------------------------------------------------------------

def test_the_tokenizer_has_llama_3_1s_special_tokens_at_their_offsets(tiny: TinyLlama3) -> None:
    from tokenizers import Tokenizer, pre_tokenizers

    tok = Tokenizer.from_file(str(tiny.path / "tokenizer.json"))
    first = tiny.vocab_size - SPECIAL_COUNT
    assert [tok.id_to_token(first + i) for i in (0, 1, 2, 4, 6, 7, 8, 9, 10, 11, 255)] == [
        "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|finetune_right_pad_id|>",
        "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
        "<|reserved_special_token_3|>", "<|reserved_special_token_247|>"]
    assert tok.get_vocab_size() == tiny.vocab_size
    # byte-level: every byte is a token (GPT-2's printable alphabet), "!" and "A" at 0 and 32 as in Llama 3
    assert set(pre_tokenizers.ByteLevel.alphabet()) <= set(tok.get_vocab()) and tok.token_to_id("!") == 0
    assert tok.token_to_id("A") == 32 and tok.encode("\x00\u2603", add_special_tokens=False).tokens[0] == "Ā"
    # Llama 3's split: a space goes with the word after it, digits in groups of three, newlines apart
    assert [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("The river 12345\n\nSummary:")] == \
        ["The", "Ġriver", "Ġ", "123", "45", "ĊĊ", "Summary", ":"]


def test_the_tokenizer_loads_offline_in_transformers_and_round_trips_text(tiny: TinyLlama3) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.path)
    assert (tok.bos_token, tok.eos_token) == ("<|begin_of_text|>", "<|eot_id|>")
    assert (tok.bos_token_id, tok.eos_token_id) == (tiny.bos_id, tiny.eot_id)
    assert len(tok) == tiny.vocab_size
    text = "The river is long.\n\nCafé: 5€ (bytes too) — naïve"
    ids = tok(text)["input_ids"]
    assert ids[0] == tiny.bos_id and tiny.bos_id not in ids[1:]
    assert tok.decode(ids, skip_special_tokens=True) == text


# --- the dataset ---------------------------------------------------------------------------------

def test_the_default_dataset_has_13368_rows_that_the_benchmark_loads_within_seconds(tiny: TinyLlama3,
                                                                                  tmp_path: Path) -> None:
    start = time.perf_counter()
    made = make_tiny_cnndm(tmp_path / "cnn_eval.json", tiny.path)
    seconds = time.perf_counter() - start
    assert seconds < 30, f"generating 13368 rows took {seconds:.1f}s"  # ~3 s on 2 idle cores
    data = load_cnndm(made.path)
    assert made.rows == len(data) == 13368
    assert all(ids[0] == tiny.bos_id for ids in data.token_ids)
    assert min(data.input_lengths) > 30 and max(data.input_lengths) < 1024
    raw = json.loads(made.path.read_text())
    assert all(tuple(r) == COLUMNS and r["instruction"] == {"llama": PROMPT_TEMPLATE} for r in raw)


def test_prompts_are_the_reference_template_and_tok_input_is_their_tokenization(tiny: TinyLlama3,
                                                                               tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    data = load_cnndm(make_tiny_cnndm(tmp_path / "cnn_eval.json", tiny.path, rows=40, seed=3).path)
    tok = AutoTokenizer.from_pretrained(tiny.path)
    for i in range(len(data)):
        prompt = data.prompt_text(i)
        assert prompt.startswith("Summarize the following news article in 128 tokens.")
        assert prompt.endswith(f"\n\nArticle:\n{data.articles[i]}\n\nSummary:")
        assert data.prompt_ids(i) == tok(prompt)["input_ids"]
        lines = data.reference(i).split("\n")  # CNN/DailyMail highlights: one a line, ending " ."
        assert 2 <= len(lines) <= 4 and all(line.endswith(" .") for line in lines)
        assert 30 <= len(data.articles[i].split()) <= 200


def test_the_same_seed_gives_a_byte_identical_file(tiny: TinyLlama3, tmp_path: Path) -> None:
    a = make_tiny_cnndm(tmp_path / "a.json", tiny.path, rows=300, seed=7)
    b = make_tiny_cnndm(tmp_path / "b.json", tiny.path, rows=300, seed=7)
    c = make_tiny_cnndm(tmp_path / "c.json", tiny.path, rows=300, seed=8)
    assert sha256(a.path) == sha256(b.path) != sha256(c.path)


def test_a_tokenizer_that_is_not_llama_3s_is_refused(tiny: TinyLlama3, tmp_path: Path) -> None:
    with pytest.raises(CmxError, match=r"has no tokenizer.json"):
        make_tiny_cnndm(tmp_path / "x.json", tmp_path, rows=4)
    (tmp_path / "tokenizer.json").write_text((tiny.path / "tokenizer.json").read_text().replace(
        '"<|begin_of_text|>"', '"<s>"'))
    with pytest.raises(CmxError, match="is not a Llama 3 tokenizer"):
        make_tiny_cnndm(tmp_path / "x.json", tmp_path, rows=4)
    with pytest.raises(CmxError, match="at least one row"):
        make_tiny_cnndm(tmp_path / "x.json", tiny.path, rows=0)


# --- vLLM ------------------------------------------------------------------------------------------

VLLM_SMOKE = textwrap.dedent("""
    import json, sys

    if __name__ == "__main__":  # vLLM starts worker processes that import this file
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        from cmx.mlperf.backends.machine import read_cpu_bf16

        model, dataset, eot, settings = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
        llm = LLM(model=model, dtype="bfloat16" if read_cpu_bf16() else "float32", enforce_eager=True,
                  max_model_len=2048, max_num_seqs=4)
        prompts = [TokensPrompt(prompt_token_ids=r["tok_input"]) for r in json.load(open(dataset))]
        greedy = SamplingParams(**settings)
        first = llm.generate(prompts, greedy, use_tqdm=False)
        second = llm.generate(prompts, greedy, use_tqdm=False)
        # push <|eot_id|> to the top: min_tokens 1 must hold it back for one token, then it ends the output
        ended = llm.generate(prompts[:1], SamplingParams(**settings, logit_bias={eot: 100.0}), use_tqdm=False)
        out = ended[0].outputs[0]
        print("REPORT " + json.dumps({
            "tokens": [list(o.outputs[0].token_ids) for o in first],
            "again": [list(o.outputs[0].token_ids) for o in second],
            "texts": [o.outputs[0].text for o in first],
            "ended": {"tokens": list(out.token_ids), "text": out.text, "finish_reason": out.finish_reason},
        }))
""")


@pytest.mark.e2e
def test_vllm_cpu_serves_the_tiny_model_greedily_and_stops_at_its_end_ids(tiny: TinyLlama3, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    from tokenizers import Tokenizer

    made = make_tiny_cnndm(tmp_path / "cnn_eval.json", tiny.path, rows=3, seed=1)
    script = tmp_path / "smoke.py"
    script.write_text(VLLM_SMOKE)
    settings = {"temperature": REFERENCE_SAMPLING.temperature, "top_p": REFERENCE_SAMPLING.top_p,
                "top_k": REFERENCE_SAMPLING.top_k, "seed": REFERENCE_SAMPLING.seed, "max_tokens": 8,
                "min_tokens": MIN_NEW_TOKENS}
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script), str(tiny.path), str(made.path), str(tiny.eot_id),
                           json.dumps(settings)], check=False, capture_output=True, text=True, timeout=400,
                          cwd=tmp_path, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(lines[-1].removeprefix("REPORT "))
    tokens = report["tokens"]
    assert len(tokens) == 3 and tokens == report["again"]  # greedy: the same tokens every time
    assert all(1 <= len(t) <= 8 and all(0 <= i < tiny.vocab_size for i in t) for t in tokens)
    tok = Tokenizer.from_file(str(tiny.path / "tokenizer.json"))
    assert report["texts"] == [tok.decode(t, skip_special_tokens=True) for t in tokens]  # vLLM used our tokenizer
    ended = report["ended"]
    assert len(ended["tokens"]) == 2 and ended["tokens"][1] == tiny.eot_id and ended["finish_reason"] == "stop"
    assert "<|eot_id|>" not in ended["text"]
