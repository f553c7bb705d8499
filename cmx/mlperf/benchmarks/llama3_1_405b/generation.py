"""How the llama3.1-405b reference generates, with the file of mlcommons/inference each fact comes from.

`language/llama3.1-405b/` at commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 unless a path says otherwise.

- Sampling (SUT_VLLM.py, `gen_kwargs` of `SUT.__init__`, shared by the Offline and Server SUTs):
  `temperature 1, top_p 0, top_k 1, seed 42`: top_k 1 makes it greedy whatever the temperature;
  at most 2000 new tokens (`max_tokens: 2000`), at least one (`min_tokens: 1`). vLLM's
  SamplingParams refuses `top_p 0` ("top_p must be in (0, 1]", vLLM 0.32), so `REFERENCE_SAMPLING`
  has top_p 1.0: with top_k 1 a single token is left either way, the same one. At temperature 1,
  vLLM's top-k keeps every token tied for the top logit and draws between them (seeded), where
  temperature 0 takes the first: on the tiny random bf16 model, 1 of 4 prompts decoded that way
  differed from temperature 0 after its first token, the same in two runs.
- Prompts: the pickle's `tok_input` ids are fed to vLLM as they are (`prompt_token_ids=`,
  `TokensPrompt`); no chat template is applied by the SUT.
- Stopping: no stop ids are set (the line adding the tokenizer's EOS is commented out), so vLLM
  stops at the model's generation_config.json end ids, which it keeps in the output.
- Token dtype: dataset.py `postProcess` and `SUTServer.stream_output` send int32 ids; README.md
  and run_accuracy.sh run evaluate-accuracy.py with `--dtype int32` (its default is int64).
- The model: README.md "External Download": meta-llama/Llama-3.1-405B-Instruct at commit
  be673f326cab4cd22ccfef76109faf68e41aa5f1 (`git checkout be673f3...`). dataset.py and
  SUT_VLLM.py name `Meta-Llama-3.1-405B-Instruct-FP8` for `--dtype float8`; no commit of an FP8
  checkpoint is given anywhere in the reference.
"""

from __future__ import annotations

from cmx.mlperf.backends.base import Sampling

MODEL_REPO = "meta-llama/Llama-3.1-405B-Instruct"  # README.md, External Download
MODEL_REVISION = "be673f326cab4cd22ccfef76109faf68e41aa5f1"  # README.md: `git checkout be673f3...`

MAX_NEW_TOKENS = 2000  # SUT_VLLM.py: "max_tokens": 2000
MIN_NEW_TOKENS = 1  # SUT_VLLM.py: "min_tokens": 1
TOKEN_DTYPE = "int32"  # dataset.py postProcess, SUT_VLLM.py stream_output, README.md `--dtype int32`
# SUT_VLLM.py gen_kwargs: "temperature": 1, "top_p": 0 (1.0 here: see above), "top_k": 1, "seed": 42
REFERENCE_SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=1, seed=42)

__all__ = ["MAX_NEW_TOKENS", "MIN_NEW_TOKENS", "MODEL_REPO", "MODEL_REVISION", "REFERENCE_SAMPLING", "TOKEN_DTYPE"]
