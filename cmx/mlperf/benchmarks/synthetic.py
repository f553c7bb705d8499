"""What every _tiny generator shares: English-like text from a fixed lexicon, and the Llama family's sizes and shapes.

The text is sentences of real and made-up words with a Zipf-like frequency (`Lexicon`), drawn
from a seeded numpy generator, byte-identical for the same seed on every platform (PCG64 streams);
the Llama tensors' names and shapes (`llama_weight_shapes`) are filled by kit.weights. A benchmark's
own tiny module adds its tokenizer, config.json and dataset format (cmx.mlperf.benchmarks.llama2_70b.tiny, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.weights import attention_shapes, decoder_shapes, swiglu_shapes

if TYPE_CHECKING:
    from tokenizers import Tokenizer

HEAD_SIZE = 64  # vLLM's CPU attention rejects small head sizes (16); Llama 2 itself uses 128
_LEXICON_SEED = 20230718  # fixed: the word list is the same for every seed, so every tiny tokenizer knows it
# common English words, most frequent first (the sampler weights them by 1/rank, like Zipf's law)
_WORDS = ["the", "of", "and", "to", "a", "in", "is", "that", "it", "was", "for", "on", "are", "as", "with", "his",
          "they", "at", "be", "this", "from", "have", "or", "by", "one", "had", "not", "but", "what", "all", "were",
          "when", "we", "there", "can", "an", "your", "which", "their", "said", "if", "do", "will", "each", "about",
          "how", "up", "out", "them", "then", "she", "many", "some", "so", "these", "would", "other", "into", "has",
          "more", "her", "two", "like", "him", "see", "time", "could", "no", "make", "than", "first", "been", "its",
          "who", "now", "people", "my", "made", "over", "did", "down", "only", "way", "find", "use", "may", "water",
          "long", "little", "very", "after", "words", "called", "just", "where", "most", "know", "get", "through",
          "back", "much", "before", "go", "good", "new", "write", "our", "used", "me", "man", "too", "any", "day",
          "same", "right", "look", "think", "also", "around", "another", "came", "come", "work", "three", "word",
          "must", "because", "does", "part", "even", "place", "well", "such", "here", "take", "why", "things", "help",
          "put", "years", "different", "away", "again", "off", "went", "old", "number", "great", "tell", "men", "say",
          "small", "every", "found", "still", "between", "name", "should", "home", "big", "give", "air", "line", "set",
          "own", "under", "read", "last", "never", "us", "left", "end", "along", "while", "might", "next", "sound",
          "below", "saw", "something", "thought", "both", "few", "those", "always", "looked", "show", "large", "often",
          "together", "asked", "house", "world", "going", "want", "school", "important", "until", "form", "food",
          "keep", "children", "feet", "land", "side", "without", "boy", "once", "animals", "life", "enough", "took",
          "sometimes", "four", "head", "above", "kind", "began", "almost", "live", "page", "got", "earth", "need",
          "far", "hand", "high", "year", "mother", "light", "parts", "country", "father", "let", "night", "following",
          "picture", "being", "study", "second", "eyes", "soon", "times", "story", "boys", "since", "white", "days",
          "ever", "paper", "hard", "near", "sentence", "better", "best", "across", "during", "today", "others",
          "however", "sure", "means", "knew", "try", "told", "young", "miles", "sun", "ways", "thing", "whole", "hear",
          "example", "heard", "several", "change", "answer", "room", "sea", "against", "top", "turned", "learn",
          "point", "city", "play", "toward", "five", "using", "himself", "usually", "money", "seen", "car", "morning",
          "given", "body", "family", "later", "order", "river", "question", "plants", "short", "fish", "state", "book",
          "test", "model", "data", "system", "result", "problem", "method", "small", "value", "step", "answer",
          "because", "true", "false", "task", "explain", "reason", "based", "text", "following", "sentence", "review",
          "movie"]
_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
           "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sl", "st", "th", "tr", "wh", "")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "oa", "ou", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck", "rt", "ll")


@dataclass(frozen=True)
class Lexicon:
    """Words (real ones first, then pronounceable made-up ones) in every written form, and the
    Zipf-like probability of each; the same for every seed."""

    forms: np.ndarray  # (8, n) object array: [capitalised?][suffix "", ".", ",", "?"] x word
    probs: np.ndarray

    @staticmethod
    @lru_cache(maxsize=1)
    def shared() -> Lexicon:
        """The lexicon: a constant, built on first use (a few milliseconds)."""
        return Lexicon._build()

    @classmethod
    def _build(cls) -> Lexicon:
        rng = np.random.Generator(np.random.PCG64(_LEXICON_SEED))
        made_up: list[str] = []
        seen = set(_WORDS)
        while len(made_up) < 2500:
            syllables = 1 + int(rng.random() < 0.6) + int(rng.random() < 0.2)  # mostly one or two
            word = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
                           + _CODAS[rng.integers(len(_CODAS))] for _ in range(syllables))
            if word not in seen and len(word) > 1:
                seen.add(word)
                made_up.append(word)
        words = [*dict.fromkeys(_WORDS), *made_up]
        forms = np.empty((8, len(words)), dtype=object)
        for cap in (0, 1):
            for s, suffix in enumerate(("", ".", ",", "?")):
                forms[cap * 4 + s] = [(w.capitalize() if cap else w) + suffix for w in words]
        weights = 1.0 / np.arange(1, len(words) + 1) ** 0.9
        return cls(forms, weights / weights.sum())

    def texts(self, rng: np.random.Generator, lengths: np.ndarray | Sequence[int], last: str = ".") -> list[str]:
        """One text per entry of `lengths` (in words); see `sample`."""
        return self.sample(rng, lengths, last).strings(self)

    def sample(self, rng: np.random.Generator, lengths: np.ndarray | Sequence[int], last: str = ".") -> TextSample:
        """Word forms for one text per entry of `lengths` (in words): sentences of about ten words,
        capitalised, with a few commas; each text ends with `last` ("." or "?")."""
        lengths = np.asarray(lengths, dtype=np.int64)
        total = int(lengths.sum())
        ends = np.cumsum(lengths)
        starts = ends - lengths
        words = rng.choice(self.probs.size, size=total, p=self.probs)
        stop = rng.random(total) < 0.1
        stop[ends - 1] = True
        capital = np.empty(total, dtype=bool)
        capital[0], capital[1:] = True, stop[:-1]
        capital[starts] = True
        suffix = np.where(stop, 1, np.where(rng.random(total) < 0.05, 2, 0))
        suffix[ends - 1] = 3 if last == "?" else 1
        codes = (capital * 4 + suffix) * self.probs.size + words  # an index into forms.ravel()
        return TextSample(codes.tolist(), starts.tolist(), ends.tolist())


@dataclass(frozen=True)
class TextSample:
    """Texts as word-form codes: text i is codes[starts[i]:ends[i]], joined by spaces."""

    codes: list[int]
    starts: list[int]
    ends: list[int]

    def strings(self, lexicon: Lexicon) -> list[str]:
        pieces = lexicon.forms.ravel()[self.codes].tolist()
        return [" ".join(pieces[a:b]) for a, b in zip(self.starts, self.ends, strict=True)]


@dataclass(frozen=True)
class TinyModelFolder:
    """A tiny model folder, the seed it was drawn from and the sizes every architecture has; each tiny
    generator's record adds its own."""

    path: Path
    seed: int
    vocab_size: int
    hidden_size: int

    def specials(self, count: int, offsets: Iterable[int]) -> tuple[int, ...]:
        """The ids at `offsets` among the vocabulary's last `count`: the special tokens, where the tiny tokenizers
        put them."""
        return tuple(self.vocab_size - count + offset for offset in offsets)


@dataclass(frozen=True)
class TinyLlamaFamily(TinyModelFolder):
    """A tiny Llama-family model folder (Llama 2, Llama 3, Mixtral) and the sizes it was made with."""

    intermediate_size: int
    layers: int
    heads: int
    kv_heads: int

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.heads


def llama_weight_shapes(vocab_size: int, hidden: int, intermediate: int, layers: int, heads: int,
                        kv_heads: int) -> dict[str, tuple[int, ...]]:
    """A LlamaForCausalLM checkpoint's tensors and shapes: grouped-query attention and a SwiGLU MLP per layer."""
    kv = kv_heads * (hidden // heads)
    return decoder_shapes(vocab_size, hidden, layers, lambda i: {**attention_shapes(hidden, hidden, kv),
                                                                 **swiglu_shapes("mlp.", hidden, intermediate)})


def write_json(path: Path, value: object) -> None:
    write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def llama_intermediate_size(hidden_size: int) -> int:
    """The Llama MLP width: 3.5 × hidden (Llama 2 70B: 28672 for 8192; Llama 3.1 8B: 14336 for 4096), rounded up
    to 64."""
    return -(-hidden_size * 7 // 2 // 64) * 64


def check_llama_sizes(hidden_size: int, layers: int, heads: int, kv_heads: int) -> None:
    """Refuse sizes vLLM's CPU build cannot run or a Llama cannot have: a head size other than HEAD_SIZE,
    key/value heads that do not divide the heads, no layers."""
    if heads < 1 or hidden_size != heads * HEAD_SIZE:
        raise CmxError(f"a tiny model with hidden_size {hidden_size} and {heads} heads has a head size other "
                       f"than {HEAD_SIZE}",
                       hint=f"give hidden_size = heads × {HEAD_SIZE} (for {max(heads, 1)} heads: "
                            f"{max(heads, 1) * HEAD_SIZE}); vLLM's CPU attention rejects small head sizes")
    if kv_heads < 1 or heads % kv_heads:
        raise CmxError(f"{heads} attention heads cannot be shared by {kv_heads} key/value heads",
                       hint="give a number of key/value heads that divides the number of heads")
    if layers < 1:
        raise CmxError(f"a model needs at least one layer, not {layers}")


def read_tokenizer(folder: Path) -> Tokenizer:
    """The fast tokenizer (tokenizer.json) in `folder`: the tiny model's, or a Hugging Face model's."""
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise CmxError(f"{folder} has no tokenizer.json", hint="give the folder of the tiny model (or of a Hugging "
                                                              "Face model with a fast tokenizer)")
    return Tokenizer.from_file(str(path))


def read_llama3_tokenizer(folder: Path, bos: str, probe: str) -> Tokenizer:
    """`read_tokenizer`, refused unless it starts a text (`probe`) with Llama 3's `bos` as Llama 3's does."""
    tokenizer = read_tokenizer(folder)
    bos_id = tokenizer.token_to_id(bos)
    if bos_id is None or tokenizer.encode(probe).ids[:1] != [bos_id]:
        raise CmxError(f"the tokenizer in {folder} does not start a text with {bos}: it is not a Llama 3 tokenizer",
                       hint="use the tiny model's tokenizer or Llama 3.1's")
    return tokenizer
