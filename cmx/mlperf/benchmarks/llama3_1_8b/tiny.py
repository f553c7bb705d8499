"""A tiny random-weight Llama 3 and a cnn_eval.json-format dataset, made locally and byte-identically from a seed.

They let the whole llama3.1-8b pipeline (tokenizer, vLLM, LoadGen, accuracy, submission tree) run
on any machine with no download. The weights are random, so what the model writes is noise and
its ROUGE scores mean nothing; only the formats are real:

- the model is a `LlamaForCausalLM` checkpoint (config.json, model.safetensors in bfloat16,
  generation_config.json) shaped like Llama-3.1-8B-Instruct's: grouped-query attention (a
  quarter as many key/value heads), rope_theta 500000 with the "llama3" RoPE scaling, untied
  embeddings, three end ids, with a head size of 64, which vLLM's CPU attention accepts (it
  rejects 16; Llama 3 uses 128);
- the tokenizer is a byte-level BPE (the pre-tokenizer regex and byte alphabet of Llama 3's
  tiktoken-style tokenizer, `ignore_merges`), trained here on generated English-like text,
  followed by Llama 3.1's 256 special tokens at the same offsets (<|begin_of_text|> first,
  <|eot_id|> ninth after it...), saved as a tokenizer.json that `AutoTokenizer` loads offline.
  The reference applies no chat template to its prompts, so none is written;
- the dataset has the structure of the MLCommons cnn_eval.json (see `make_tiny_cnndm`).

Nothing here imports torch or transformers (slow to import): weights are drawn with numpy and
written in bfloat16 by kit.weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.samples import TinyDataset, check_tiny_rows
from cmx.mlperf.benchmarks.kit.tokenizer import added_token, byte_level_document, train_byte_level_bpe
from cmx.mlperf.benchmarks.kit.weights import BF16, write_random_weights
from cmx.mlperf.benchmarks.llama3_1_8b.dataset import (
    COLUMNS,
    PROMPT_TEMPLATE,
    SAMPLES,
    TEMPLATE_KEY,
)
from cmx.mlperf.benchmarks.synthetic import (
    Lexicon,
    TinyLlamaFamily,
    check_llama_sizes,
    llama_intermediate_size,
    llama_weight_shapes,
    read_llama3_tokenizer,
    write_json,
    write_text,
)

# Llama 3's pre-tokenizer: this regex splits text (tokenizer.json's "Split" step), then bytes map to
# printable characters (GPT-2's ByteLevel alphabet)
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_COUNT = 256  # Llama 3: ids 128000..128255, after the 128000 learned ones
_NAMED_SPECIALS = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>",
                   6: "<|start_header_id|>", 7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>",
                   10: "<|python_tag|>"}  # offsets in the special block, as in Llama 3.1
BOS, EOT = "<|begin_of_text|>", "<|eot_id|>"
END_OFFSETS = (1, 8, 9)  # <|end_of_text|>, <|eom_id|>, <|eot_id|>: generation_config.json's eos_token_id
MAX_POSITIONS = 131072  # Llama 3.1's; a full-length sequence holds 64 MiB of tiny KV cache in bfloat16
_LEXICON_TEXTS = 6000


@dataclass(frozen=True)
class TinyLlama3(TinyLlamaFamily):
    """A tiny model folder made by make_tiny_llama3, and what it was made from."""

    @property
    def bos_id(self) -> int:
        return self.vocab_size - SPECIAL_COUNT

    @property
    def eot_id(self) -> int:
        """<|eot_id|>, the tokenizer's eos_token, as in Llama-3.1-8B-Instruct."""
        return self.bos_id + 9

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """The ids generation stops at (<|end_of_text|>, <|eom_id|>, <|eot_id|>)."""
        return self.specials(SPECIAL_COUNT, END_OFFSETS)


# --- the model ---------------------------------------------------------------------------------

def make_tiny_llama3(dest: Path, seed: int = 0, *, vocab_size: int = 4096, hidden_size: int = 256, layers: int = 2,
                     heads: int = 4, kv_heads: int | None = None) -> TinyLlama3:
    """Write a random-weight Llama 3 model and its tokenizer into the folder `dest`.

    The same arguments give byte-identical files. `vocab_size` counts the 256 special tokens;
    `kv_heads` defaults to a quarter of the heads (8 of 32 in Llama 3.1 8B); `hidden_size`
    must be `heads * 64`.
    """
    kv_heads = kv_heads if kv_heads is not None else max(1, heads // 4)
    _check_sizes(vocab_size, hidden_size, layers, heads, kv_heads)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tiny = TinyLlama3(dest, seed, vocab_size, hidden_size, llama_intermediate_size(hidden_size), layers, heads,
                      kv_heads)
    write_text(dest / "tokenizer.json", _trained_tokenizer_json(seed, vocab_size))
    write_json(dest / "tokenizer_config.json", _tokenizer_config(tiny))
    write_json(dest / "special_tokens_map.json", {"bos_token": added_token(BOS), "eos_token": added_token(EOT)})
    write_json(dest / "config.json", _model_config(tiny))
    # the real file also asks for sampling (temperature 0.6, top_p 0.9): the harness must set its own
    write_json(dest / "generation_config.json", {"bos_token_id": tiny.bos_id, "do_sample": True,
                                                  "eos_token_id": list(tiny.eos_ids), "temperature": 0.6,
                                                  "top_p": 0.9})
    write_random_weights(dest / "model.safetensors", llama_weight_shapes(
        tiny.vocab_size, tiny.hidden_size, tiny.intermediate_size, tiny.layers, tiny.heads, tiny.kv_heads), seed, BF16)
    return tiny


def _check_sizes(vocab_size: int, hidden_size: int, layers: int, heads: int, kv_heads: int) -> None:
    check_llama_sizes(hidden_size, layers, heads, kv_heads)
    smallest = 256 + 256 + SPECIAL_COUNT  # the byte alphabet, some merges, the specials
    if vocab_size < smallest:
        raise CmxError(f"vocab_size {vocab_size} is too small for a tiny Llama 3 tokenizer",
                       hint=f"give at least {smallest}: 256 byte tokens, a few merges and {SPECIAL_COUNT} specials")


def _model_config(tiny: TinyLlama3) -> dict[str, object]:
    """The keys of Llama-3.1-8B-Instruct's config.json, with tiny sizes."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tiny.bos_id,
        "eos_token_id": list(tiny.eos_ids),
        "hidden_act": "silu",
        "hidden_size": tiny.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": tiny.intermediate_size,
        "max_position_embeddings": MAX_POSITIONS,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": tiny.heads,
        "num_hidden_layers": tiny.layers,
        "num_key_value_heads": tiny.kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": tiny.vocab_size,
    }


# --- the tokenizer -----------------------------------------------------------------------------

def _special_tokens(vocab_size: int) -> list[tuple[int, str]]:
    first = vocab_size - SPECIAL_COUNT
    reserved = iter(range(SPECIAL_COUNT))
    return [(first + offset, _NAMED_SPECIALS.get(offset) or f"<|reserved_special_token_{next(reserved)}|>")
            for offset in range(SPECIAL_COUNT)]


def _trained_tokenizer_json(seed: int, vocab_size: int) -> str:
    """Train a byte-level BPE of vocab_size - 256 tokens on generated text and add Llama 3.1's 256
    special tokens after them, <|begin_of_text|> put in front of every text. Returns the tokenizer.json text."""
    trained = train_byte_level_bpe(_training_corpus(seed), vocab_size - SPECIAL_COUNT, SPLIT_PATTERN)
    bos_id = vocab_size - SPECIAL_COUNT
    post_processor = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": BOS, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {BOS: {"id": BOS, "ids": [bos_id], "tokens": [BOS]}}}]}
    document = byte_level_document(trained, SPLIT_PATTERN, _special_tokens(vocab_size), post_processor)
    return json.dumps(document, ensure_ascii=False, indent=2)


def _tokenizer_config(tiny: TinyLlama3) -> dict[str, object]:
    """Llama-3.1-8B-Instruct's tokenizer_config.json without its chat template (the reference uses none).
    clean_up_tokenization_spaces is true there, and changes decoded text (" ." becomes ".")."""
    return {
        "added_tokens_decoder": {str(i): {**added_token(t), "special": True} for i, t in _special_tokens(
            tiny.vocab_size)},
        "bos_token": BOS,
        "clean_up_tokenization_spaces": True,
        "eos_token": EOT,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def _training_corpus(seed: int) -> list[str]:
    """Generated articles and CNN-style highlights (" ." line ends), and the prompt template."""
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    lexicon = Lexicon.shared()
    texts = lexicon.texts(rng, rng.integers(20, 120, size=_LEXICON_TEXTS))
    return [*texts, *_highlights(lexicon, rng, 500), *[PROMPT_TEMPLATE.format_map({"input": t}) for t in texts[:200]]]


def _highlights(lexicon: Lexicon, rng: np.random.Generator, rows: int) -> list[str]:
    """Summaries as cnn_dailymail 3.0.0 writes them: 2 to 4 sentences, one a line, each ending " ."."""
    counts = rng.integers(2, 5, size=rows)
    sentences = lexicon.texts(rng, rng.integers(6, 17, size=int(counts.sum())))
    ends = np.cumsum(counts).tolist()
    return ["\n".join(s[:-1] + " ." for s in sentences[end - n:end])
            for n, end in zip(counts.tolist(), ends, strict=True)]


# --- the dataset ---------------------------------------------------------------------------------

def make_tiny_cnndm(dest_json: Path, tokenizer_dir: Path, rows: int = SAMPLES, seed: int = 0) -> TinyDataset:
    """Write a cnn_eval.json of `rows` generated samples, tokenized with the tokenizer in `tokenizer_dir`.

    Like download_cnndm.py: every row holds `instruction` ({"llama": PROMPT_TEMPLATE}), `input`
    (an article of 30 to 200 English-like words), `tok_input` (the tokenization of the template
    filled with the article, <|begin_of_text|> first) and `output` (a CNN-style highlights
    summary). The same arguments give a byte-identical file (written without the reference's
    indentation, which would only make it larger).
    """
    check_tiny_rows(rows)
    tokenizer = read_llama3_tokenizer(Path(tokenizer_dir), BOS, "Summary:")
    rng = np.random.Generator(np.random.PCG64([seed, 2]))
    lexicon = Lexicon.shared()
    articles = lexicon.texts(rng, rng.integers(30, 201, size=rows))
    summaries = _highlights(lexicon, rng, rows)
    prompts = [PROMPT_TEMPLATE.format_map({"input": a}) for a in articles]
    ids = [e.ids for e in tokenizer.encode_batch(prompts)]
    records = [dict(zip(COLUMNS, ({TEMPLATE_KEY: PROMPT_TEMPLATE}, a, i, s), strict=False))
               for a, i, s in zip(articles, ids, summaries, strict=False)]
    dest_json = Path(dest_json)
    dest_json.parent.mkdir(parents=True, exist_ok=True)
    write_text(dest_json, json.dumps(records, ensure_ascii=False))
    return TinyDataset(dest_json, rows, seed)



__all__ = ["BOS", "EOT", "SPECIAL_COUNT", "SPLIT_PATTERN", "TinyLlama3", "make_tiny_cnndm",
           "make_tiny_llama3"]
