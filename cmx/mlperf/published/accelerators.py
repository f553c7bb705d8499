"""Accelerator names as submitters write them, reduced to what can be compared: the model and a count.

The published tables name one GPU many ways: "NVIDIA H200-SXM-141GB", "H200", "AMD Instinct MI355X 288GB
HBM3e", "MI355X", and a system's own name may lead with a count ("8x H200", "8xMI350X", "H200x8"). A name
is split into lower-case words (at spaces, '-', '_', '/', parentheses and commas); the vendor's words
("NVIDIA", "AMD Instinct") go, and a count, where one leads or ends the name, is set apart. What is left are
the name's `words`; its `model` is those words less the ones that say memory, form factor or partitioning
("141gb", "sxm", "pcie", "hbm3e", "nvl72", "nps1"), so "NVIDIA H200-SXM-141GB" and nvidia-smi's "NVIDIA
H200" are both the model "h200".

Two rules use them:

- `name_matches(query, name)`: every word of the query is a word of the name. "H200" finds
  "NVIDIA H200-SXM-141GB" and not "NVIDIA GH200-144GB_aarch64" (a word is compared whole, never as a
  part: "gh200" is not "h200", "l40s" is not "l40"); "H200-SXM-141GB" finds only the SXM 141 GB part.
- `same_model(a, b)`: the two names have the same model, the rule `cmx results --compare` ranks by.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# words that say who made it, not what it is ("Intel(R) Xeon(R)" leaves an "r")
_VENDOR = frozenset({"nvidia", "amd", "intel", "instinct", "google", "qualcomm", "tesla", "r", "tm"})
# words that say memory, form factor, power or partitioning: kept for matching, left out of the model
_NOISE = re.compile(r"^(?:\d+(?:gb|gib|g|tb|w)|sxm\d?|pcie|oam|nvl\d*|hbm\d?e?|nps\d+|[sdqc]px|aarch64|x86|64|"
                    r"gpu|graphics|superchip|module)$")
_SPLIT = re.compile(r"[\s\-_/(),;]+")
_LEADING_COUNT = re.compile(r"^\s*(\d+)\s*[x×]\s*(?=[^\s\d])", re.I)   # "8x H200", "8xMI350X"
_TRAILING_COUNT = re.compile(r"(?<=[a-z0-9])\s*[x×](\d+)\s*$", re.I)  # "H200x8", "MI300X x8"


@dataclass(frozen=True)
class AcceleratorName:
    """A name as written (`raw`), its words (vendor words and a count left out), its model, and the count it
    carried (None when it names none)."""

    raw: str
    words: tuple[str, ...]
    model: str
    count: int | None

    @classmethod
    def parse(cls, raw: str) -> AcceleratorName:
        text, count = raw.strip(), None
        lead = _LEADING_COUNT.match(text)
        if lead:
            count, text = int(lead.group(1)), text[lead.end():]
        else:
            trail = _TRAILING_COUNT.search(text)
            # "MI355X" ends in an x and no digits; "H200x8" ends in x8 after a model that has a digit
            if trail and re.search(r"\d", text[:trail.start()]):
                count, text = int(trail.group(1)), text[:trail.start()]
        words = tuple(w for w in _SPLIT.split(text.lower()) if w and w not in _VENDOR)
        model = " ".join(w for w in words if not _NOISE.match(w))
        return cls(raw=raw, words=words, model=model, count=count)


def name_matches(query: str, name: str | None) -> bool:
    """Whether every word of `query` (its count aside) is a whole word of `name`; no name matches nothing."""
    if not name:
        return False
    asked = AcceleratorName.parse(query).words
    return bool(asked) and set(asked) <= set(AcceleratorName.parse(name).words)


def same_model(a: str | None, b: str | None) -> bool:
    """Whether two names are of one accelerator model ("NVIDIA H200" and "NVIDIA H200-SXM-141GB": yes)."""
    if not a or not b:
        return False
    model_a, model_b = AcceleratorName.parse(a).model, AcceleratorName.parse(b).model
    return bool(model_a) and model_a == model_b
