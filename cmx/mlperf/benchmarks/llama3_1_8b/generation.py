"""How the llama3.1-8b reference generates: sampling settings, output length, token dtype and EOS, with their sources.

Every fact cites the file of mlcommons/inference it comes from (`language/llama3.1-8b/` unless
the path says otherwise; read at commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9).

- Sampling (SUT_VLLM.py, `gen_kwargs` of `SUT.__init__`, used by both the Offline and the
  Server SUT): greedy (`temperature 0.0, top_p 1, top_k 1`), `seed 42`, at most 128 new tokens
  (`max_tokens: 128`), at least one (`min_tokens: 1`). The prompt says the same
  ("Summarize the following news article in 128 tokens", download_cnndm.py).
- Stopping (SUT_VLLM.py): no `stop_token_ids` and no `ignore_eos` are set (the line that would
  add the tokenizer's EOS is commented out), so vLLM stops at the model's own end ids, those of
  generation_config.json: <|end_of_text|> 128001, <|eom_id|> 128008 and <|eot_id|> 128009 for
  Llama-3.1-8B-Instruct. vLLM keeps that last id in `token_ids`, so it is sent to LoadGen and
  counted in n_tokens; the evaluator drops it when decoding (`skip_special_tokens=True`).
  `min_tokens: 1` makes vLLM hold the end ids back for the first token, so an output that ends
  at an end id has at least two tokens (tests/mlperf/benchmarks/test_llama3_1_8b_tiny.py checks both on vLLM).
  TEST06 (compliance/TEST06/run_verification.py) allows at most one trailing EOS id.
- Token dtype (dataset.py `postProcess`: `np.asarray(out, dtype=np.int32)`; SUT_VLLM.py
  `SUTServer.stream_output`: `np.array(..., np.int32)`): LoadGen gets int32 ids. evaluation.py
  reads `--dtype`, whose *default is int64*, but README.md and run_accuracy.sh pass
  `--dtype int32`, matching the SUT; TEST06's default is int32 too.
- The model (README.md, "External Download"): meta-llama/Llama-3.1-8B-Instruct at commit
  be673f326cab4cd22ccfef76109faf68e41aa5f1, run in bfloat16 (`--dtype bfloat16`).
"""

from __future__ import annotations

from cmx.mlperf.backends.base import Sampling

MODEL_REPO = "meta-llama/Llama-3.1-8B-Instruct"  # README.md
MODEL_REVISION = "be673f326cab4cd22ccfef76109faf68e41aa5f1"  # README.md: `git checkout be673f3...`
MODEL_DTYPE = "bfloat16"  # README.md: `--dtype bfloat16` in every run command

MAX_NEW_TOKENS = 128  # SUT_VLLM.py: "max_tokens": 128
MIN_NEW_TOKENS = 1  # SUT_VLLM.py: "min_tokens": 1
TOKEN_DTYPE = "int32"  # dataset.py postProcess, SUT_VLLM.py stream_output, README.md `--dtype int32`
EVALUATOR_DEFAULT_DTYPE = "int64"  # evaluation.py `--dtype` default: a log read with it must be int64

BOS_TOKEN_ID = 128000  # <|begin_of_text|>: the first id of every tok_input (download_cnndm.py encodes with it)
EOS_TOKEN_IDS = (128001, 128008, 128009)  # generation_config.json of Llama-3.1-8B-Instruct: vLLM stops at any
EOT_TOKEN_ID = 128009  # <|eot_id|>: the Instruct tokenizer's eos_token, where a turn ends

# SUT_VLLM.py `gen_kwargs`: "temperature": 0.0, "top_p": 1, "top_k": 1, "seed": 42 (greedy; the seed draws nothing)
REFERENCE_SAMPLING = Sampling(temperature=0.0, top_p=1.0, top_k=1, seed=42)

__all__ = [
    "BOS_TOKEN_ID",
    "EOS_TOKEN_IDS",
    "EOT_TOKEN_ID",
    "EVALUATOR_DEFAULT_DTYPE",
    "MAX_NEW_TOKENS",
    "MIN_NEW_TOKENS",
    "MODEL_DTYPE",
    "MODEL_REPO",
    "MODEL_REVISION",
    "REFERENCE_SAMPLING",
    "TOKEN_DTYPE",
]
