"""How the gpt-oss-120b reference generates: output lengths, sampling, end ids, token dtype, the model, with
their sources.

Every fact cites mlcommons/inference at commit b66003e (`language/gpt-oss-120b/` unless the path
says otherwise).

- Output length (README.md, "Generation Configuration"): performance runs (and TEST07/TEST09, whose
  README rows say "perf config (max_output_len=10240)") allow 10240 new tokens; accuracy runs
  32768 (generation_config.json `max_new_tokens`; run_mlperf.py `--max-new-tokens` overrides it).
  cmx's app runs every test with one `max_tokens`, 10240 by default: give `--input
  max_tokens=32768` to an accuracy-only run to match the reference's accuracy setting.
- Reasoning effort (README.md): `high` for the accuracy set and TEST07, `low` for the performance
  set and TEST09. It is part of the prompt (the harmony system message), so it is already in each
  set's `input_tokens`: nothing to set at generation time.
- Sampling (generation_config.json `temperature`, `top_p`, `top_k`, read by run_mlperf.py and
  passed to the SUT): temperature 1.0, top_p 1.0, top_k -1 (off), streamed, `skip_special_tokens`
  false. No seed anywhere in the reference (run_mlperf.py, the SUTs, the backends), so none here:
  two runs draw different tokens, and their accuracy differs by a little (docs/benchmarks/gpt-oss-120b.md).
  cmx samples the same way (`REFERENCE_SAMPLING`); `--input temperature=0` makes a greedy debug run.
- Stopping: the model's own end ids (generation_config.json of openai/gpt-oss-120b:
  <|return|> 200002, <|endoftext|> 199999, <|call|> 200012); the SUT sets no stop ids of its own.
- Token dtype (mlperf/offline_sut.py, server_sut.py: `np.array(output_ids, dtype=np.int32)`): int32,
  n_tokens = len(output_ids).
- The model (README.md): openai/gpt-oss-120b at commit b5c939de8f754692c1647ca79fbf85e8c1e70f8a. Its
  MoE expert weights ship in MXFP4 (config.json `quantization_config` quant_method mxfp4) and the rest
  in bfloat16; that checkpoint is what the reference and submitters run (vLLM and SGLang load MXFP4
  natively).
"""

from __future__ import annotations

from cmx.mlperf.backends.base import Sampling

MODEL_REPO = "openai/gpt-oss-120b"  # README.md
MODEL_REVISION = "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"  # README.md: the commit id it links
PERFORMANCE_MAX_TOKENS = 10240  # README.md: max_output_len, Performance column
ACCURACY_MAX_TOKENS = 32768     # README.md: max_output_len, Accuracy column; generation_config.json max_new_tokens
TEMPERATURE = 1.0               # generation_config.json "temperature"
TOP_P = 1.0                     # generation_config.json "top_p"
TOP_K = -1                      # generation_config.json "top_k" (off)
REFERENCE_SAMPLING = Sampling(temperature=TEMPERATURE, top_p=TOP_P, top_k=TOP_K, seed=None)  # no seed in the reference
TOKEN_DTYPE = "int32"
END_IDS = (200002, 199999, 200012)  # <|return|>, <|endoftext|>, <|call|>: openai/gpt-oss-120b generation_config.json

__all__ = ["ACCURACY_MAX_TOKENS", "END_IDS", "MODEL_REPO", "MODEL_REVISION", "PERFORMANCE_MAX_TOKENS",
           "REFERENCE_SAMPLING", "TEMPERATURE", "TOKEN_DTYPE", "TOP_K", "TOP_P"]
