"""How the llama2-70b reference samples, with the file of mlcommons/inference each fact comes from.

`language/llama2-70b/` at commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9.

- Sampling (SUT.py, module-level `gen_kwargs`, used by the Offline and Server SUTs' `generate`):
  `do_sample: False`, `num_beams: 1`: greedy search, so no temperature, top_p or top_k applies.
  SUT_API.py (the API-server variant) sends `temperature: 0`: greedy too. No seed is set anywhere
  (none is needed: greedy draws nothing).
- Output length (the same `gen_kwargs`): `max_new_tokens: 1024`, `min_new_tokens: 1` (2 in cmx:
  LoadGen needs two tokens for TPOT).
"""

from __future__ import annotations

from cmx.mlperf.backends.base import GREEDY

MAX_NEW_TOKENS = 1024  # SUT.py gen_kwargs "max_new_tokens"
REFERENCE_SAMPLING = GREEDY  # SUT.py gen_kwargs "do_sample": False, "num_beams": 1

__all__ = ["MAX_NEW_TOKENS", "REFERENCE_SAMPLING"]
