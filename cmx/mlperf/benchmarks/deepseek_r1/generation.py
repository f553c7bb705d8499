"""How the deepseek-r1 reference generates, with the file of mlcommons/inference each fact comes from.

`language/deepseek-r1/` at commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 unless a path says otherwise.

- Output length: utils/backend_registry.py `MAX_OSL = 20 * 1000` (every backend's max_new_tokens /
  max_output_len / max_tokens); prompts are at most `MAX_ISL = 3136` tokens plus
  `MAX_TEMPLATE_TOKS = 4` of chat template, so `max_model_len = 3136 + 20000 + 4`.
- Sampling: greedy (`temperature 0.0`, `top_p 1.0`, `seed 42`; no top_k) in the vllm and sglang
  entries (backends/vllm_backend.py passes all three to SamplingParams); no stop ids besides the
  model's own end id (<｜end▁of▁sentence｜>, id 1: generation_config.json), which vLLM keeps in the
  output. The pytorch entry is greedy too (`temperature 0.0`, `seed 965`); cmx runs vLLM, so 42.
- Prompts: the pickle's `text_input`, wrapped by the tokenizer's chat template as one user message
  with `add_generation_prompt=True` (utils/tokenization.py `StandardTokenizer.tokenize_prompts`,
  truncated at `DEFAULT_MAX_LENGTH = 32 * 1024` tokens). DeepSeek-R1's template ends the prompt with
  `<｜Assistant｜><think>\\n`, so every answer starts inside its reasoning.
- Token dtype: int32 (mlperf/offline_sut.py and server_sut.py `np.array(tokens, dtype=np.int32)`;
  eval_accuracy.py `process_mlperf_log_accuracy(dtype="int32")`).
- The model: README.md "Model & Dataset Download": deepseek-ai/DeepSeek-R1 at revision
  56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad (also backend_registry.py `MODEL_REVISION` and the
  tokenizer eval_accuracy.py loads). The checkpoint is natively FP8 (block-scaled e4m3 weights,
  its config.json's quantization_config); the reference runs it with `dtype: auto`.
- Reference scores (README.md "Reference Evals", the PyTorch backend): mean accuracy 81.3582,
  mean output length 3886.2274 tokens, 4388 samples: the constants.py targets are built on them.
"""

from __future__ import annotations

from cmx.mlperf.backends.base import Sampling

MODEL_REPO = "deepseek-ai/DeepSeek-R1"  # README.md
MODEL_REVISION = "56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad"  # README.md; backend_registry.py MODEL_REVISION

MAX_INPUT_TOKENS = 3136  # backend_registry.py MAX_ISL
MAX_NEW_TOKENS = 20_000  # backend_registry.py MAX_OSL
MAX_TEMPLATE_TOKENS = 4  # backend_registry.py MAX_TEMPLATE_TOKS
MAX_MODEL_LEN = MAX_INPUT_TOKENS + MAX_NEW_TOKENS + MAX_TEMPLATE_TOKENS  # backend_registry.py vllm max_model_len
MAX_PROMPT_TOKENS = 32 * 1024  # utils/tokenization.py StandardTokenizer.DEFAULT_MAX_LENGTH (truncation)
TOKEN_DTYPE = "int32"  # offline_sut.py, server_sut.py; eval_accuracy.py dtype="int32"
# backend_registry.py 'vllm' config: "temperature": 0.0, "top_p": 1.0, "seed": 42 (no top_k: vLLM's off)
REFERENCE_SAMPLING = Sampling(temperature=0.0, top_p=1.0, top_k=0, seed=42)

__all__ = ["MAX_INPUT_TOKENS", "MAX_MODEL_LEN", "MAX_NEW_TOKENS", "MAX_PROMPT_TOKENS", "MAX_TEMPLATE_TOKENS",
           "MODEL_REPO", "MODEL_REVISION", "REFERENCE_SAMPLING", "TOKEN_DTYPE"]
