"""How the mixtral-8x7b reference samples, with the file of mlcommons/inference each fact comes from.

`language/mixtral-8x7b/` at commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9.

- Sampling (SUT.py, module-level `gen_kwargs`, used by the Offline and Server SUTs' `generate`):
  `do_sample: False`, `temperature: None`, `top_p: None`: greedy search. No seed is set anywhere
  (none is needed: greedy draws nothing).
- Output length (the same `gen_kwargs`): `max_new_tokens: 1024`, `min_new_tokens: 2`; EOS is the
  tokenizer's </s>.
"""

from __future__ import annotations

from cmx.mlperf.backends.base import GREEDY

MAX_NEW_TOKENS = 1024  # SUT.py gen_kwargs "max_new_tokens"
REFERENCE_SAMPLING = GREEDY  # SUT.py gen_kwargs "do_sample": False, "temperature": None, "top_p": None

__all__ = ["MAX_NEW_TOKENS", "REFERENCE_SAMPLING"]
