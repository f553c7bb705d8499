"""Word error rate as speech2text's evaluator counts it: words that run together are not errors.

The reference (speech2text/helpers.py `compute_wer_with_concatenation`, legacy_helpers.py
`__levenshtein`) first walks the reference and the hypothesis words side by side, once, left to
right. Where the two words differ it looks, for k = 2 then 3, whether k reference words written
together are the hypothesis word, then whether k hypothesis words written together are the
reference word; the first that holds is merged into one word on both sides ("air plane" against
"airplane"). Otherwise, and wherever the words are equal, both sides step one word on. The edit
distance of the two merged word lists is the clip's errors, and its word count is the reference's
own, before merging. WER is the errors of every clip over the words of every clip.

The walk is greedy and never looks back: a word skipped by an insertion shifts every later pair, so
a concatenation after it may not be found. That is the reference's result, and so cmx's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_JOINED = 3  # words written together that still count as one


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two word lists: insertions, deletions and substitutions, each 1."""
    if len(a) > len(b):
        a, b = b, a
    row = list(range(len(a) + 1))
    for i, word in enumerate(b, start=1):
        diagonal, row[0] = row[0], i
        for j, other in enumerate(a, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (word != other))
    return row[-1]


def merge_concatenations(reference: Sequence[str], hypothesis: Sequence[str]) -> tuple[list[str], list[str]]:
    """Both word lists with each run-together match found by the reference's walk made one word."""
    ref, hyp = [], []
    i = j = 0
    while i < len(reference) and j < len(hypothesis):
        step_ref = step_hyp = 1
        if reference[i] != hypothesis[j]:
            for k in range(2, MAX_JOINED + 1):
                if i + k <= len(reference) and "".join(reference[i:i + k]) == hypothesis[j]:
                    step_ref = k
                    break
                if j + k <= len(hypothesis) and "".join(hypothesis[j:j + k]) == reference[i]:
                    step_hyp = k
                    break
        ref.append("".join(reference[i:i + step_ref]))
        hyp.append("".join(hypothesis[j:j + step_hyp]))
        i += step_ref
        j += step_hyp
    return ref + list(reference[i:]), hyp + list(hypothesis[j:])


def clip_errors(reference: Sequence[str], hypothesis: Sequence[str]) -> tuple[int, int]:
    """(errors, reference words) of one clip, as compute_wer_with_concatenation returns them."""
    return edit_distance(*merge_concatenations(reference, hypothesis)), len(reference)


@dataclass(frozen=True)
class WordErrors:
    """Errors and reference words summed over clips; `wer` is their ratio (1.0 is 100 %), and `as_dict` gives WER
    and accuracy in percent, as the evaluator prints them (the scorer's result)."""

    errors: int
    words: int
    clips: int

    @property
    def wer(self) -> float:
        return self.errors / self.words

    def as_dict(self) -> dict[str, float | int]:
        return {"wer": self.wer * 100, "accuracy": (1 - self.wer) * 100,
                "errors": self.errors, "words": self.words, "clips": self.clips}


def word_errors(pairs: Iterable[tuple[str, str]]) -> WordErrors:
    """The summed errors of (reference, hypothesis) texts, each already normalised and split on whitespace."""
    errors = words = clips = 0
    for reference, hypothesis in pairs:
        e, w = clip_errors(reference.split(), hypothesis.split())
        errors, words, clips = errors + e, words + w, clips + 1
    return WordErrors(errors, words, clips)
