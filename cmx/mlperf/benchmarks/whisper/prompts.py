"""What the engine gets for a Whisper sample, and what LoadGen gets back.

The reference's QSL (speech2text/QSL.py) gives vLLM the decoder prompt
`<|startoftranscript|><|en|><|transcribe|><|notimestamps|>` with the clip as the audio; cmx hands
the engine the same prompt as its four token ids (read from the checkpoint's tokenizer) with the
clip's samples. The reference SUT answers LoadGen with vLLM's text as labels (transcript.py); cmx's
in-process engines return token ids, which `LabelAnswer` decodes with the same tokenizer, special
tokens skipped (as vLLM's own detokenizer does by default), before the labels are made; a server's
transcription route returns the text itself, which `LabelAnswer` takes as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cmx.mlperf.backends.base import Audio, GenResult
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.synthetic import read_tokenizer
from cmx.mlperf.benchmarks.whisper.dataset import SAMPLE_RATE, LibriSpeech
from cmx.mlperf.benchmarks.whisper.transcript import response_array

DECODER_PROMPT = ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")  # QSL.py's prompt


def decoder_prompt_ids(model_dir: Path) -> tuple[int, ...]:
    """The ids of DECODER_PROMPT's tokens in the tokenizer in `model_dir`; refused unless it has them all."""
    tokenizer = read_tokenizer(Path(model_dir))
    ids = [tokenizer.token_to_id(token) for token in DECODER_PROMPT]
    missing = [token for token, i in zip(DECODER_PROMPT, ids, strict=True) if i is None]
    if missing:
        raise DatasetError(f"the tokenizer in {model_dir} has no {', '.join(missing)}: it is not Whisper's",
                           hint="give the whisper-large-v3 checkpoint folder (or the tiny Whisper's)")
    return tuple(int(i) for i in ids if i is not None)


@dataclass(frozen=True)
class WhisperPrompts:
    """The QSL's samples (a MediaSource): each clip's decoder prompt ids and its audio."""

    dataset: LibriSpeech
    decoder_ids: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.dataset)

    def prompt_ids(self, i: int) -> list[int]:
        return list(self.decoder_ids)

    def media(self, i: int) -> tuple[Audio, ...]:
        return (Audio(self.dataset.audio(i), SAMPLE_RATE),)


class LabelAnswer:
    """The ResponseEncoder: a result's text (its output token ids decoded, special tokens skipped, or the text a
    transcription route answered) -> the reference SUT's int64 labels."""

    def __init__(self, model_dir: Path) -> None:
        self._tokenizer: Any = read_tokenizer(Path(model_dir))

    def text(self, token_ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def __call__(self, result: GenResult) -> np.ndarray:
        return response_array(result.text if result.text is not None else self.text(result.token_ids))
