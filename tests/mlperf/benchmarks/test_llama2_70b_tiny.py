"""cmx.mlperf.benchmarks.llama2_70b.tiny: the tiny random Llama 2, its trained tokenizer and the OpenOrca-format
dataset.

Real parts only: the files are loaded with transformers, tokenizers, safetensors and pandas.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.llama2_70b.tiny import (
    BOS_ID,
    EOS_ID,
    OPENORCA_COLUMNS,
    UNK_ID,
    TinyLlama,
    make_tiny_llama,
    make_tiny_openorca,
)
from cmx.mlperf.benchmarks.synthetic import HEAD_SIZE

MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json",
               "tokenizer.json", "tokenizer_config.json")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyLlama:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny") / "model", seed=0)


# --- the model ---------------------------------------------------------------------------------------

def test_the_same_seed_gives_byte_identical_model_and_tokenizer_files(tiny: TinyLlama, tmp_path: Path) -> None:
    again = make_tiny_llama(tmp_path / "again", seed=0)
    assert sorted(p.name for p in again.path.iterdir()) == sorted(MODEL_FILES)
    for name in MODEL_FILES:
        assert sha256(again.path / name) == sha256(tiny.path / name), name


def test_files_are_byte_identical_when_made_by_another_process(tiny: TinyLlama, tmp_path: Path) -> None:
    # a fresh interpreter has other hash seeds and thread timings: nothing may depend on them
    code = ("from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama; "
            f"make_tiny_llama({str(tmp_path / 'other')!r}, seed=0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    for name in MODEL_FILES:
        assert sha256(tmp_path / "other" / name) == sha256(tiny.path / name), name


def test_another_seed_gives_other_weights(tiny: TinyLlama, tmp_path: Path) -> None:
    other = make_tiny_llama(tmp_path / "seed1", seed=1)
    assert sha256(other.path / "model.safetensors") != sha256(tiny.path / "model.safetensors")
    assert (other.path / "config.json").read_text() == (tiny.path / "config.json").read_text()


def test_config_is_a_llama_with_head_size_64_and_grouped_query_attention(tiny: TinyLlama) -> None:
    config = json.loads((tiny.path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["hidden_size"] // config["num_attention_heads"] == HEAD_SIZE == 64
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    assert config["hidden_act"] == "silu" and config["vocab_size"] == tiny.vocab_size
    generation = json.loads((tiny.path / "generation_config.json").read_text())
    assert (generation["bos_token_id"], generation["eos_token_id"]) == (BOS_ID, EOS_ID) == (1, 2)


def test_the_model_loads_in_transformers_and_generates_greedily(tiny: TinyLlama) -> None:
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny.path)
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.head_dim == 64
    prompt = torch.tensor([[BOS_ID, 300, 400, 500, tiny.space_id]])
    first = model.generate(prompt, max_new_tokens=4, do_sample=False)
    second = model.generate(prompt, max_new_tokens=4, do_sample=False)
    assert first.shape == (1, 9) and torch.equal(first, second)
    assert int(first.max()) < tiny.vocab_size


def test_a_head_size_other_than_64_is_refused_with_the_size_to_give(tmp_path: Path) -> None:
    with pytest.raises(CmxError, match="head size other than 64") as info:
        make_tiny_llama(tmp_path / "bad", hidden_size=64, heads=4)
    assert "256" in (info.value.hint or "")
    assert not (tmp_path / "bad").exists()


# --- the tokenizer -------------------------------------------------------------------------------

def test_the_tokenizer_loads_offline_with_llama_special_ids_and_round_trips_text(tiny: TinyLlama) -> None:
    from transformers import AutoTokenizer, LlamaTokenizerFast

    tok = AutoTokenizer.from_pretrained(tiny.path)
    assert (tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (UNK_ID, BOS_ID, EOS_ID)
    assert len(tok) == tiny.vocab_size
    text = "The river is long. Answer the question, step by step?\nCafé: 5€ (bytes too)"
    ids = tok(text)["input_ids"]
    assert ids[0] == BOS_ID
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert LlamaTokenizerFast.from_pretrained(tiny.path)(text)["input_ids"] == ids


def test_the_tokenizer_keeps_llama_2_layout_bytes_and_newline_as_a_byte(tiny: TinyLlama) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny.path / "tokenizer.json"))
    assert [tok.id_to_token(i) for i in range(5)] == ["<unk>", "<s>", "</s>", "<0x00>", "<0x01>"]
    assert tok.token_to_id("<0xFF>") == 258
    assert tok.encode("a\nb", add_special_tokens=False).tokens[1] == "<0x0A>"  # as Llama 2 writes "\n"
    assert tok.id_to_token(tiny.space_id) == "▁"


# --- the dataset ---------------------------------------------------------------------------------

def test_the_default_dataset_has_24576_rows_in_the_real_format_within_seconds(tiny: TinyLlama,
                                                                              tmp_path: Path) -> None:
    import pandas as pd

    start = time.perf_counter()
    made = make_tiny_openorca(tmp_path / "orca.pkl", tiny.path, seed=0)
    seconds = time.perf_counter() - start
    assert seconds < 30, f"generating 24576 rows took {seconds:.1f}s"  # ~2 s on 2 idle cores
    frame = pd.read_pickle(made.path)
    assert made.rows == len(frame) == 24576
    assert tuple(frame.columns) == OPENORCA_COLUMNS
    assert {c: str(t) for c, t in frame.dtypes.items()} == {
        **{c: "object" for c in OPENORCA_COLUMNS}, "tok_input_length": "int64", "tok_output_length": "int64"}
    assert frame["origin"].value_counts().to_dict() == {"cot": 6144, "flan": 6144, "niv": 6144, "t0": 6144}
    assert frame["id"].is_unique
    assert (frame["tok_input"].map(len) == frame["tok_input_length"]).all()
    assert (frame["tok_output"].map(len) == frame["tok_output_length"]).all()
    assert frame["tok_input"].map(lambda ids: ids[-1] == tiny.space_id).all()
    assert frame["tok_input"].map(lambda ids: ids[:2] == [BOS_ID, BOS_ID]).all()  # "<s>" in the text, plus BOS
    assert frame["tok_input_length"].max() < 1024 and frame["tok_output_length"].min() >= 3


def test_prompts_are_llama_2_chat_prompts_and_tok_input_is_their_tokenization(tiny: TinyLlama,
                                                                             tmp_path: Path) -> None:
    import pandas as pd
    from transformers import AutoTokenizer

    frame = pd.read_pickle(make_tiny_openorca(tmp_path / "orca.pkl", tiny.path, rows=40, seed=3).path)
    tok = AutoTokenizer.from_pretrained(tiny.path)
    for row in frame.itertuples():
        if row.system_prompt:
            assert row.input == f"<s>[INST] <<SYS>>\n{row.system_prompt}\n<</SYS>>\n\n{row.question} [/INST]"
        else:
            assert row.input == f"<s>[INST] {row.question} [/INST]"
        assert row.tok_input == tok(row.input)["input_ids"] + [tiny.space_id]
        assert row.tok_output == tok(row.output)["input_ids"]
    assert frame["system_prompt"].eq("").any() and frame["system_prompt"].ne("").any()


def test_the_same_seed_gives_a_byte_identical_pickle(tiny: TinyLlama, tmp_path: Path) -> None:
    a = make_tiny_openorca(tmp_path / "a.pkl", tiny.path, rows=300, seed=7)
    b = make_tiny_openorca(tmp_path / "b.pkl", tiny.path, rows=300, seed=7)
    c = make_tiny_openorca(tmp_path / "c.pkl", tiny.path, rows=300, seed=8)
    assert sha256(a.path) == sha256(b.path) != sha256(c.path)


def test_a_tokenizer_whose_ids_cannot_be_composed_per_word_tokenizes_every_text(tiny: TinyLlama,
                                                                                tmp_path: Path) -> None:
    import pandas as pd
    from tokenizers import Tokenizer

    # a lowercasing normalizer makes per-word ids (taken before normalization) wrong for "The"
    folder = tmp_path / "lower"
    shutil.copytree(tiny.path, folder)
    document = json.loads((folder / "tokenizer.json").read_text())
    document["normalizer"] = {"type": "Lowercase"}
    (folder / "tokenizer.json").write_text(json.dumps(document))
    frame = pd.read_pickle(make_tiny_openorca(tmp_path / "orca.pkl", folder, rows=30).path)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert frame["tok_input"].tolist() == [[*tok.encode(t).ids, tiny.space_id] for t in frame["input"]]
    assert frame["tok_output"].tolist() == [tok.encode(t).ids for t in frame["output"]]


def test_a_folder_without_tokenizer_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CmxError, match=r"has no tokenizer.json"):
        make_tiny_openorca(tmp_path / "x.pkl", tmp_path, rows=4)


# vLLM serving this model from token ids is tested where it runs, on one engine per module:
# tests/mlperf/loadgen/test_harness.py (each token id within the vocabulary) and the llama2 row of
# tests/mlperf/test_app_benchmarks.py.
