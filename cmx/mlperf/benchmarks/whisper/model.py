"""The Whisper model folder whisper runs: what it must hold, and what get-ml-model-whisper reports about it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit
from cmx.mlperf.benchmarks.whisper.normalizer import NORMALIZER_JSON

# beside config.json: the tokenizer (the decoder prompt's ids, the transcripts' text), the feature extractor's
# settings (vLLM's Whisper processor reads them), and the spelling table the scorer's normaliser reads
FILES = kit.ModelFiles(tokenizer=(("tokenizer.json",), ("preprocessor_config.json",), (NORMALIZER_JSON,)),
                       hint="copy tokenizer.json, preprocessor_config.json and normalizer.json of "
                            "openai/whisper-large-v3 into the folder")
# whisper-large-v3: 1.55 billion parameters, about 3.1 GB of float16 safetensors
SIZE = 31 * kit.GB // 10


def describe(folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, read from its config.json and generation_config.json; it must hold FILES.

    The dtype is the precision's (bf16, the reference's, or fp16). A config whose `model_type` is not
    `whisper` is accepted, with a warning to `log`.
    """
    folder = Path(folder)
    config, generation = kit.read_configs_of(folder, FILES, "whisper", "Whisper",
                                             "whisper's closed division needs openai/whisper-large-v3", log)
    precision = precision or "bf16"
    ends = kit.required_end_ids(folder, config, generation, hint="whisper-large-v3 ends at <|endoftext|>")
    return kit.ModelFolder(folder, name, revision, kit.DTYPES[precision], precision, ends[0], is_tiny,
                           eos_token_ids=ends, architecture=kit.architecture(config),
                           reports=("eos_token_ids", "architecture"))


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.whisper.tiny import make_tiny_whisper

    return make_tiny_whisper(dest, seed, **(sizes or {})).path


TINY = kit.TinyModel("Whisper", "tiny-whisper-random-seed{seed}", make_tiny_model,
                     sizes={"seed": 0, "hidden_size": 128, "layers": 2, "heads": 2})
MODEL = kit.ModelSpec(SIZE, TINY, FILES, describe)
