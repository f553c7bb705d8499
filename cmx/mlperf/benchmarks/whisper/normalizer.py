"""The text normaliser speech2text's evaluator applies to both sides before it counts words.

The reference calls openai-whisper's `EnglishTextNormalizer`: it spells numbers as digits ("twenty
one" -> "21"), currencies and percentages as symbols, expands contractions and titles ("won't" ->
"will not", "mr" -> "mister"), drops fillers ("um", "hmm") and bracketed noise, and maps British
spellings to American ones from a table of about 1,700 words (openai-whisper's english.json).

cmx does not depend on openai-whisper: the package imports torch, numba, tiktoken and triton at its
top, for a normaliser that needs none of them. It uses the port that transformers ships
(`transformers.models.whisper.english_normalizer`, the one `WhisperTokenizer.normalize` calls),
which takes the spelling table as an argument, and reads that table from the checkpoint folder's
`normalizer.json`: Hugging Face's Whisper checkpoints carry english.json there for their tokenizer.
tests/mlperf/benchmarks/whisper/test_normalizer.py checks that the two normalisers agree on
hand-made transcripts, openai-whisper's taken from its source distribution on PyPI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cmx.mlperf.loadgen.accuracy_log import AccuracyError

NORMALIZER_JSON = "normalizer.json"


def read_spelling_table(model_dir: Path) -> dict[str, str]:
    """The British-to-American spelling table in `model_dir`'s normalizer.json."""
    path = Path(model_dir) / NORMALIZER_JSON
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccuracyError(f"{path} does not exist: the Whisper scorer reads its spelling table from the checkpoint",
                            hint="point at the whole openai/whisper-large-v3 checkpoint folder, which ships "
                                 "normalizer.json beside its tokenizer files") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AccuracyError(f"{path} is not a readable JSON table: {err}",
                            hint="download the checkpoint again (`cmx cache rm` its entry first)") from None
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise AccuracyError(f"{path} is not a table of words to words",
                            hint="it must be the checkpoint's own normalizer.json (British to American spellings)")
    return table


def english_normalizer(model_dir: Path) -> Callable[[str], str]:
    """openai-whisper's EnglishTextNormalizer, with the spelling table of the checkpoint in `model_dir`."""
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer  # slow to import

    normalize: Callable[[str], str] = EnglishTextNormalizer(read_spelling_table(model_dir))
    return normalize
