"""The reference's prompts: `text_input` as one chat user message, through the model's own chat template, as token ids.

utils/tokenization.py `StandardTokenizer.tokenize_prompts` (mlcommons/inference b66003e) calls
`tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
max_length=32768, truncation=True)`. transformers renders tokenizer_config.json's `chat_template` with
jinja2 (trim_blocks, lstrip_blocks, the special tokens as variables) and encodes the text without
adding special tokens (the template writes <｜begin▁of▁sentence｜> itself). This module does the same
with jinja2 and the fast tokenizer, so that the real model's template and the tiny model's are read
from their folders and applied alike, with no transformers import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.deepseek_r1.generation import MAX_PROMPT_TOKENS


class PromptError(CmxError):
    """A tokenizer folder cannot make the reference's prompts (no chat template, no tokenizer.json)."""


@dataclass(frozen=True)
class ChatTokenizer:
    """A tokenizer folder's fast tokenizer and chat template, ready to make prompts."""

    folder: Path
    template: str
    special: dict[str, str]  # bos_token, eos_token, ... as the template sees them

    def render(self, prompt: str) -> str:
        """The prompt text the template makes of one user message, with the generation prompt."""
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
        try:
            return env.from_string(self.template).render(
                messages=[{"role": "user", "content": prompt}], add_generation_prompt=True, **self.special)
        except TemplateError as exc:
            raise PromptError(f"the chat template of {self.folder} failed: {exc}") from None

    def encode(self, prompts: Sequence[str], max_tokens: int = MAX_PROMPT_TOKENS) -> list[list[int]]:
        """Token ids of each prompt's rendering, without added special tokens, cut at `max_tokens`
        (tokenize_prompts' truncation)."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        texts = [self.render(p) for p in prompts]
        return [e.ids[:max_tokens] for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def chat_tokenizer(folder: Path | str) -> ChatTokenizer:
    """The chat tokenizer of a model folder (tokenizer.json, and tokenizer_config.json with a chat_template)."""
    folder = Path(folder)
    config_path = folder / "tokenizer_config.json"
    if not (folder / "tokenizer.json").is_file():
        raise PromptError(f"{folder} has no tokenizer.json", hint="give the model folder: its tokenizer makes the "
                                                                  "prompts")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PromptError(f"cannot read {config_path}: {exc}",
                          hint="the reference applies the tokenizer's chat template; its folder must hold "
                               "tokenizer_config.json") from None
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: transformers uses "default"
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"),
                        None)
    if not isinstance(template, str) or not template:
        raise PromptError(f"{config_path} has no chat_template",
                          hint="DeepSeek-R1's tokenizer_config.json carries one; copy the original file")
    special = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        value = config.get(key)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            special[key] = value
    return ChatTokenizer(folder, template, special)


__all__ = ["ChatTokenizer", "PromptError", "chat_tokenizer"]
