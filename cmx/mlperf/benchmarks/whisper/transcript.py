"""Whisper's answer to LoadGen: a transcript as indices into the reference's 42 labels, not token ids.

What speech2text/ in mlcommons/inference does, and cmx matches:
- the SUT (reference_SUT.py) lower-cases and strips vLLM's text, keeps each character that is one
  of the labels, as its index, in order, and hands LoadGen those indices as int64; `n_tokens` is
  the number of tokens the model generated, not the number of labels;
- the evaluator (accuracy_eval.py) reads each record's data as int64 and maps the indices back to
  characters; the reference transcripts of the manifest go through the same filter, without the
  lower-casing (manifest.py; the preprocessing lower-cased them already).

So a character outside the labels (a full stop, a comma, an accented letter, an upper-case letter
left in a transcript) is dropped before the normaliser ever sees the text: "Mr. Smith" is scored
as "mr smith".
"""

from __future__ import annotations

import string
from collections.abc import Iterable

import numpy as np

from cmx.mlperf.loadgen.accuracy_log import AccuracyError

# speech2text/accuracy_eval.py and reference_SUT.py: the space, a to z, the apostrophe, 0 to 9, $ % + -
LABELS: tuple[str, ...] = (" ", *string.ascii_lowercase, "'", *string.digits, "$", "%", "+", "-")
_INDEX = {label: i for i, label in enumerate(LABELS)}
LABEL_BYTES = 8  # int64, little-endian as LoadGen logs what it was handed
LABEL_DTYPE = "<i8"


def label_indices(text: str) -> list[int]:
    """The indices of `text`'s characters that are labels, in order; other characters are dropped."""
    return [_INDEX[c] for c in text if c in _INDEX]


def response_labels(generated: str) -> list[int]:
    """What the reference SUT sends LoadGen for vLLM's `generated` text: lower-cased, stripped, filtered."""
    return label_indices(generated.lower().strip())


def response_array(generated: str) -> np.ndarray:
    """response_labels as the int64 little-endian array a QuerySampleResponse points at."""
    return np.asarray(response_labels(generated), dtype=LABEL_DTYPE)


def response_bytes(generated: str) -> bytes:
    """response_array's bytes: a record's `data` in LoadGen's accuracy log."""
    return response_array(generated).tobytes()


def labels_from_bytes(data: bytes, where: str = "a record") -> list[int]:
    """The label indices in an accuracy-log record's `data` (int64, little-endian)."""
    if len(data) % LABEL_BYTES:
        raise AccuracyError(f"{where} holds {len(data)} bytes, not a whole number of int64 labels",
                            hint="score a log that a Whisper run wrote (its data is int64 label indices)")
    labels: list[int] = np.frombuffer(data, dtype=LABEL_DTYPE).tolist()
    return labels


def labels_text(indices: Iterable[int], where: str = "a record") -> str:
    """The characters of label `indices` (the evaluator's mapping back); an index outside the labels is refused."""
    chars = []
    for i in indices:
        if not 0 <= i < len(LABELS):
            raise AccuracyError(f"{where} holds label {i}, outside the {len(LABELS)} labels (0 to {len(LABELS) - 1})",
                                hint="score a log that a Whisper run wrote (its data is int64 label indices)")
        chars.append(LABELS[i])
    return "".join(chars)


def reference_transcript(text: str) -> str:
    """A manifest transcript as the evaluator scores it: only its label characters, not lower-cased."""
    return "".join(c for c in text if c in _INDEX)
