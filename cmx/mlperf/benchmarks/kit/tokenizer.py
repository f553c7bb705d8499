"""The one trainer of a tiny model's byte-level BPE tokenizer, and the tokenizer.json it is saved as.

Llama 3, DeepSeek-R1 and gpt-oss tokenize alike: a regex splits the text (each its own pattern),
bytes map to printable characters (GPT-2's ByteLevel alphabet), then BPE merges apply. A tiny
generator trains such a BPE on its generated text (`train_byte_level_bpe`) and lays its special
tokens out where the real tokenizer has them: after the learned ones (`byte_level_document`), or
among them (DeepSeek-R1's, given to the trainer). The `tokenizers` package is imported when called:
it is slow to import, and only a tiny generator needs it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cmx.errors import CmxError


def train_byte_level_bpe(corpus: Sequence[str], vocab_size: int, split_pattern: str, *,
                         special_tokens: Sequence[str] = ()) -> Any:  # -> tokenizers.Tokenizer
    """A BPE of exactly `vocab_size` tokens (`special_tokens` first among them) trained on `corpus`, split by
    `split_pattern` then byte-level; the same corpus gives the same tokenizer."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=list(special_tokens), show_progress=False)
    tok.train_from_iterator(corpus, trainer, length=len(corpus))
    if tok.get_vocab_size() != vocab_size:
        raise CmxError(f"the tiny tokenizer learned {tok.get_vocab_size()} tokens, not {vocab_size}",
                       hint="give a smaller vocab_size: the generated training text has too few distinct words")
    return tok


def added_token(content: str) -> dict[str, object]:
    """An added token's entry in tokenizer.json and tokenizer_config.json (without its id and `special`)."""
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}


def byte_level_document(trained: Any, split_pattern: str, specials: Sequence[tuple[int, str]],
                        post_processor: Mapping[str, object] | None) -> dict[str, object]:
    """The tokenizer.json of `trained` (a tokenizers.Tokenizer from train_byte_level_bpe) as the real one
    is shaped: its split and ByteLevel steps, BPE with ignore_merges, the `specials` (id, text) as added
    special tokens after the learned ones, and `post_processor` (Llama 3's adds <|begin_of_text|>)."""
    model = json.loads(trained.to_str())["model"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, **added_token(t), "special": True} for i, t in specials],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split_pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": post_processor,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": model["vocab"], "merges": model["merges"]},
    }
