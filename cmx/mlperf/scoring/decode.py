"""Decoding an accuracy log's token ids as the references' evaluators do with transformers 4.46: the folder's fast
tokenizer without special tokens, then transformers' clean_up_tokenization when tokenizer_config.json asks for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cmx.mlperf.loadgen.accuracy_log import AccuracyError


def clean_up_tokenization(text: str) -> str:
    """transformers 4.46's `clean_up_tokenization`: spaces before punctuation and English contractions removed."""
    return (text.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",").replace(" ' ", "'")
            .replace(" n't", "n't").replace(" 'm", "'m").replace(" 's", "'s").replace(" 've", "'ve")
            .replace(" 're", "'re"))


def reference_decoder(tokenizer_dir: Path | str) -> Callable[[list[int]], str]:
    """The decode function of the model folder `tokenizer_dir` (its tokenizer.json and tokenizer_config.json).
    Llama 3.1's config sets clean_up_tokenization_spaces; transformers 4.46's default is False. DeepSeek-R1 has
    no slow tokenizer, so its reference's use_fast=False gets the fast one too."""
    from tokenizers import Tokenizer

    folder = Path(tokenizer_dir)
    if not (folder / "tokenizer.json").is_file():
        raise AccuracyError(f"{folder} has no tokenizer.json", hint="give the model folder (its tokenizer decodes "
                                                                   "the outputs)")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    config_path = folder / "tokenizer_config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    except (OSError, ValueError) as exc:
        raise AccuracyError(f"cannot read {config_path}: {exc}") from None
    clean_up = bool(config.get("clean_up_tokenization_spaces", False))

    def decode(ids: list[int]) -> str:
        text = tokenizer.decode(ids, skip_special_tokens=True)
        return clean_up_tokenization(text) if clean_up else text

    return decode
