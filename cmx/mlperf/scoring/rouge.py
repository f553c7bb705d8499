"""ROUGE as the MLCommons LLM references score it: sentence-split text, rouge-score with stemming, means in percent.

What the references do (language/llama2-70b/evaluate-accuracy.py, language/llama3.1-8b/evaluation.py):
predictions and targets are stripped and split into sentences joined by newlines (nltk punkt);
ROUGE comes from the `rouge-score` package with stemming (through Hugging Face `evaluate`,
which calls `RougeScorer.score(reference, prediction)` pair by pair); each metric is
`round(np.mean(fmeasures) * 100, 4)`.

One deliberate difference: punkt's model must be downloaded at run time (`nltk.download("punkt")`),
which a reproducible, offline pipeline cannot do. cmx splits with `split_sentences`, a documented
regex splitter. Sentence splitting changes only newlines between sentences, and the ROUGE
tokenizer treats those as spaces, so ROUGE-1, ROUGE-2 and ROUGE-L are unaffected; ROUGE-Lsum
(which reads sentences from newlines) may differ slightly from the reference.

`rouge_fmeasures` imports rouge-score and numpy when called.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from cmx.extras import install_command
from cmx.mlperf.loadgen.accuracy_log import AccuracyError

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
# the curly quotes are meant: nltk's sentence splitter treats them as quotes, as it does ' and "
_CLOSERS = "\"'”’)]"  # noqa: RUF001 - curly quotes on purpose (above)
_OPENERS = "\"'“‘(["  # noqa: RUF001 - curly quotes on purpose (above)
_SENTENCE_END = re.compile(r"([.!?]+)[" + re.escape(_CLOSERS) + r"]*$")
_DOTTED_ABBREVIATION = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # e.g  i.e  U.S  a.m
_INITIAL = re.compile(r"[A-Za-z]")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "fig", "approx"})
_WORD = re.compile(r"\S+")


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences; cmx's stand-in for nltk's punkt `sent_tokenize`.

    A sentence ends at a word ending in `.`, `!` or `?` (possibly several, possibly followed by
    closing quotes or brackets) that is followed by more text. A `.` does not end a sentence
    after a title or common abbreviation (Mr., Dr., vs., ...), a single-letter initial (J.),
    or a dotted abbreviation (e.g., i.e., U.S.). Whitespace between sentences is dropped and
    whitespace inside one (newlines included) is kept, as punkt does.
    """
    words = list(_WORD.finditer(text))
    sentences: list[str] = []
    start: int | None = None
    for i, word in enumerate(words):
        if start is None:
            start = word.start()
        if i + 1 < len(words) and _ends_sentence(word.group()):
            sentences.append(text[start:word.end()])
            start = None
    if start is not None:
        sentences.append(text[start:words[-1].end()])
    return sentences


def postprocess_text(text: str) -> str:
    """The reference's postprocess_text for one text: strip, one sentence per line."""
    return "\n".join(split_sentences(text.strip()))


def _ends_sentence(word: str) -> bool:
    end = _SENTENCE_END.search(word)
    if end is None:
        return False
    if end.group(1) != ".":
        return True
    body = word[:end.start()].lstrip(_OPENERS)
    return not (body.lower() in _ABBREVIATIONS or _INITIAL.fullmatch(body) or _DOTTED_ABBREVIATION.fullmatch(body))


def mean_percent(values: list[float]) -> float:
    # the reference's round(np.mean(v) * 100, 4): numpy's pairwise mean and numpy's rounding
    np = _numpy()
    return float(np.round(np.mean(values) * 100, 4))


_CHUNK = 256  # samples per task when scoring in several processes


def rouge_fmeasures(pairs: list[tuple[str, str]], jobs: int) -> dict[str, list[float]]:
    if jobs == 1 or len(pairs) <= _CHUNK:
        return _score_chunk(pairs)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [pairs[i:i + _CHUNK] for i in range(0, len(pairs), _CHUNK)]
    merged: dict[str, list[float]] = {name: [] for name in ROUGE_TYPES}
    # spawn, not fork: the caller may hold threads (vLLM, LoadGen) that a fork would copy mid-flight
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for part in pool.map(_score_chunk, chunks):
            for name in ROUGE_TYPES:
                merged[name].extend(part[name])
    return merged


def _score_chunk(pairs: list[tuple[str, str]]) -> dict[str, list[float]]:
    scorer = _rouge_scorer()
    fmeasures: dict[str, list[float]] = {name: [] for name in ROUGE_TYPES}
    for target, prediction in pairs:
        scores = scorer.score(target, prediction)
        for name in ROUGE_TYPES:
            fmeasures[name].append(scores[name].fmeasure)
    return fmeasures


def _rouge_scorer() -> Any:  # rouge_score.rouge_scorer.RougeScorer: rouge-score has no types
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise AccuracyError("the rouge-score package is not installed",
                            hint=f"pip install rouge-score==0.1.2 (or install cmx with its cpu extra: "
                                 f"{install_command('cpu')})") from None
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def _numpy() -> ModuleType:
    try:
        import numpy
    except ImportError:
        raise AccuracyError("numpy is not installed", hint="pip install numpy (rouge-score needs it too)") from None
    return numpy
