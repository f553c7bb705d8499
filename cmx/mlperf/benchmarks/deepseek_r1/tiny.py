"""A tiny random DeepSeek-R1 (DeepseekV3ForCausalLM: MLA attention, MoE) and a dataset of every subset, from a seed.

The model has DeepSeek-R1's architecture and config keys (config.json of deepseek-ai/DeepSeek-R1:
multi-head latent attention with q/kv LoRA ranks, decoupled RoPE, YaRN scaling; dense layers first,
then MoE layers with sigmoid routing, `noaux_tc` group-limited top-k, a score-correction bias and
shared experts) at tiny sizes, in bfloat16 (the real checkpoint is FP8; vLLM's CPU build runs
bf16). vLLM's CPU MLA decode kernel needs the latent cache of the real model, kv_lora_rank 512 +
qk_rope_head_dim 64 (vllm/v1/attention/backends/mla/cpu_mla.py), so those two keep their real
sizes; the multi-token-prediction layer (num_nextn_predict_layers) is left out.

The tokenizer is a byte-level BPE trained here on generated text, with DeepSeek-R1's special tokens
where it has them (<｜begin▁of▁sentence｜> 0, <｜end▁of▁sentence｜> 1, <｜▁pad▁｜> 2) and, after the
learned ones, <｜User｜>, <｜Assistant｜> and the ordinary added tokens <think> and </think>. Its
chat template is the single-conversation part of DeepSeek-R1's (system prompt, <｜User｜>, the
assistant's reply after </think>, and the generation prompt `<｜Assistant｜><think>\\n`): the real
template's tool-call branches are left out.

The dataset is the real pickle's columns with rows of every subset eval_accuracy.py scores (AIME,
MATH500, GPQA, MMLU-Pro, LiveCodeBench), and a LiveCodeBench problems file in
code_generation_lite's row format (public tests as JSON, private tests as base64 of zlib of a
pickled JSON string) for its code rows. The weights are random, so scores mean nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.deepseek_r1.dataset import SAMPLES, TESTS_FILE, with_prompt_ids
from cmx.mlperf.benchmarks.kit.frames import write_frame
from cmx.mlperf.benchmarks.kit.samples import check_tiny_rows
from cmx.mlperf.benchmarks.kit.tokenizer import train_byte_level_bpe
from cmx.mlperf.benchmarks.kit.weights import BF16, F32, decoder_shapes, swiglu_shapes, write_random_weights
from cmx.mlperf.benchmarks.synthetic import Lexicon, TinyModelFolder, write_json, write_text
from cmx.mlperf.scoring.livecodebench import encode_private_tests

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
USER, ASSISTANT, THINK, END_THINK = "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system_prompt='') %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}"
    "{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}{%- endif %}"
    "{%- endfor -%}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}")
# the subsets in turn, named as eval_accuracy.py's DATASET_EVALUATORS match them
SUBSET_NAMES = ("aime1983", "math500", "gpqa", "mmlu_pro", "livecodebench")


@dataclass(frozen=True)
class TinyDeepSeek(TinyModelFolder):
    """A tiny model folder made by make_tiny_deepseek, and its sizes."""

    layers: int
    heads: int
    experts: int

    @property
    def architecture(self) -> str:
        return "DeepseekV3ForCausalLM"


@dataclass(frozen=True)
class TinyDeepSeekDataset:
    path: Path
    tests_path: Path
    rows: int
    seed: int


# --- the model -----------------------------------------------------------------------------------

def make_tiny_deepseek(dest: Path, seed: int = 0, *, vocab_size: int = 4096, hidden_size: int = 256, layers: int = 2,
                       heads: int = 4, experts: int = 8) -> TinyDeepSeek:
    """Write a random-weight DeepseekV3ForCausalLM and its tokenizer into `dest`; the same arguments give the
    same bytes. The first layer is dense, the others MoE (`experts` routed, 2 per token, one shared)."""
    if layers < 2:
        raise CmxError(f"a tiny DeepSeek needs 2 or more layers (one dense, then MoE), not {layers}")
    if heads < 1 or hidden_size < 64 or experts < 4 or experts % 2:
        raise CmxError(f"heads {heads}, hidden_size {hidden_size}, experts {experts} do not make a DeepSeek",
                       hint="give heads >= 1, hidden_size >= 64 and an even number of experts >= 4")
    if vocab_size < 1024:
        raise CmxError(f"vocab_size {vocab_size} is too small for the tiny tokenizer", hint="give 1024 or more")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tiny = TinyDeepSeek(dest, seed, vocab_size, hidden_size, layers, heads, experts)
    write_text(dest / "tokenizer.json", _tokenizer_json(seed, vocab_size))
    write_json(dest / "tokenizer_config.json", _tokenizer_config())
    write_json(dest / "config.json", _model_config(tiny))
    # DeepSeek-R1's generation_config.json asks for sampling (temperature 0.6, top_p 0.95): the harness sets its own
    write_json(dest / "generation_config.json", {"_from_model_config": True, "bos_token_id": 0, "do_sample": True,
                                                  "eos_token_id": 1, "temperature": 0.6, "top_p": 0.95})
    # N(0, 0.02) matrices, unit norms, bfloat16; the routing bias zero and in float32, as DeepSeek-R1 stores it
    write_random_weights(dest / "model.safetensors", weight_shapes(tiny), seed, BF16,
                         dtypes={"e_score_correction_bias": F32})
    return tiny


_LATENT = {"kv_lora_rank": 512, "qk_rope_head_dim": 64}  # cpu_mla.py: the CPU decode kernel's only head size, 576
_DIMS = {"q_lora_rank": 128, "qk_nope_head_dim": 64, "v_head_dim": 64}


def _model_config(tiny: TinyDeepSeek) -> dict[str, object]:
    """DeepSeek-R1's config.json keys (its quantization_config left out: the tiny weights are bf16)."""
    hidden = tiny.hidden_size
    return {
        "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 1,
        "hidden_act": "silu", "hidden_size": hidden, "initializer_range": 0.02, "intermediate_size": hidden * 2,
        "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": hidden // 2,
        "moe_layer_freq": 1, "n_group": 2, "n_routed_experts": tiny.experts, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_attention_heads": tiny.heads, "num_experts_per_tok": 2,
        "num_hidden_layers": tiny.layers, "num_key_value_heads": tiny.heads, "num_nextn_predict_layers": 0,
        "pretraining_tp": 1, "rms_norm_eps": 1e-06,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096, "type": "yarn"},
        "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": True,
        "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": tiny.vocab_size, **_LATENT, **_DIMS,
    }


def weight_shapes(tiny: TinyDeepSeek) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensor names and shapes (DeepSeek-R1's, per-expert), at the tiny sizes: MLA attention, a
    dense first layer, then routed experts (a gate with its score-correction bias) and a shared one."""
    h, n = tiny.hidden_size, tiny.heads
    q_rank, kv_rank, rope = _DIMS["q_lora_rank"], _LATENT["kv_lora_rank"], _LATENT["qk_rope_head_dim"]
    nope, v = _DIMS["qk_nope_head_dim"], _DIMS["v_head_dim"]

    def layer(i: int) -> dict[str, tuple[int, ...]]:
        shapes: dict[str, tuple[int, ...]] = {
            "self_attn.q_a_proj.weight": (q_rank, h), "self_attn.q_a_layernorm.weight": (q_rank,),
            "self_attn.q_b_proj.weight": (n * (nope + rope), q_rank),
            "self_attn.kv_a_proj_with_mqa.weight": (kv_rank + rope, h),
            "self_attn.kv_a_layernorm.weight": (kv_rank,),
            "self_attn.kv_b_proj.weight": (n * (nope + v), kv_rank), "self_attn.o_proj.weight": (h, n * v)}
        if i == 0:
            return {**shapes, **swiglu_shapes("mlp.", h, h * 2)}
        shapes.update({"mlp.gate.weight": (tiny.experts, h), "mlp.gate.e_score_correction_bias": (tiny.experts,)})
        for prefix in (*(f"mlp.experts.{e}." for e in range(tiny.experts)), "mlp.shared_experts."):
            shapes.update(swiglu_shapes(prefix, h, h // 2))
        return shapes

    return decoder_shapes(tiny.vocab_size, h, tiny.layers, layer)


# --- the tokenizer -------------------------------------------------------------------------------

def _tokenizer_json(seed: int, vocab_size: int) -> str:
    from tokenizers import AddedToken, decoders

    tail = [USER, ASSISTANT, THINK, END_THINK]
    tok = train_byte_level_bpe(_corpus(seed), vocab_size - len(tail), SPLIT_PATTERN, special_tokens=[BOS, EOS, PAD])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(USER, normalized=False), AddedToken(ASSISTANT, normalized=False)])
    # DeepSeek-R1 adds <think> and </think> as ordinary tokens: skip_special_tokens keeps them in the decoded text
    tok.add_tokens([AddedToken(THINK, normalized=False, special=False),
                    AddedToken(END_THINK, normalized=False, special=False)])
    return json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=2)


def _tokenizer_config() -> dict[str, object]:
    """DeepSeek-R1's tokenizer_config.json keys, with the tiny chat template."""
    return {"add_bos_token": True, "add_eos_token": False, "bos_token": BOS, "eos_token": EOS, "pad_token": EOS,
            "clean_up_tokenization_spaces": False, "legacy": True, "model_max_length": 131072,
            "sp_model_kwargs": {}, "unk_token": None, "tokenizer_class": "LlamaTokenizerFast",
            "use_default_system_prompt": False, "chat_template": CHAT_TEMPLATE}


def _corpus(seed: int) -> list[str]:
    rng = np.random.Generator(np.random.PCG64([seed, 11]))
    texts = Lexicon.shared().texts(rng, rng.integers(20, 100, size=4000))
    extras = ["\\boxed{42} \\frac{3}{4} Answer: B ```python\nprint(sum(map(int, input().split())))\n```",
              "def solve(self, nums: List[int]) -> int:\n    return max(nums)\n"] * 50
    return [*texts, *extras]


# --- the dataset ---------------------------------------------------------------------------------

def make_tiny_dataset(dest: Path, tokenizer_dir: Path, rows: int = SAMPLES, seed: int = 0) -> TinyDeepSeekDataset:
    """Write the dataset pickle (with the prompt ids the chat template makes) and, beside it, the LiveCodeBench
    problems of its code rows. The same arguments give the same bytes."""
    import pandas as pd

    check_tiny_rows(rows)
    rng = np.random.Generator(np.random.PCG64([seed, 12]))
    lexicon = Lexicon.shared()
    records: list[dict[str, object]] = []
    problems: list[dict[str, object]] = []
    for row in range(rows):
        name = SUBSET_NAMES[row % len(SUBSET_NAMES)]
        question = lexicon.texts(rng, np.array([int(rng.integers(15, 60))]), last="?")[0]
        prompt, answer = _SAMPLERS[name](question, rng, row, problems)
        records.append({"text_input": prompt, "ground_truth": answer, "dataset": name, "question": question})
    dest = Path(dest)
    raw = write_frame(pd.DataFrame(records, columns=["text_input", "ground_truth", "dataset", "question"]),
                      dest.with_name(dest.name + ".raw"), protocol=4)
    with_prompt_ids(raw, dest, Path(tokenizer_dir))
    raw.unlink()
    tests = dest.with_name(TESTS_FILE)
    write_text(tests, "".join(json.dumps(p, sort_keys=True) + "\n" for p in problems))
    return TinyDeepSeekDataset(dest, tests, rows, seed)


def _aime(question: str, rng: np.random.Generator, row: int,
          problems: list[dict[str, object]]) -> tuple[str, str]:
    return (f"{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
            str(int(rng.integers(0, 1000))))


def _math(question: str, rng: np.random.Generator, row: int,
          problems: list[dict[str, object]]) -> tuple[str, str]:
    a, b = int(rng.integers(1, 9)), int(rng.integers(10, 20))
    return (f"{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
            f"\\frac{{{a}}}{{{b}}}" if row % 2 else str(a * b))


def _choices(question: str, rng: np.random.Generator, letters: list[str]) -> tuple[str, str]:
    options = "\n".join(f"{letter}) {w}" for letter, w in zip(letters, Lexicon.shared().texts(
        rng, rng.integers(1, 4, size=len(letters)), last=""), strict=True))
    return (f"{question}\n{options}\nThe last line of your response should be of the following format: "
            f"'ANSWER: $LETTER' (without quotes) where LETTER is one of {''.join(letters)}."), str(rng.choice(letters))


def _gpqa(question: str, rng: np.random.Generator, row: int,
          problems: list[dict[str, object]]) -> tuple[str, str]:
    return _choices(question, rng, list("ABCD"))


def _mmlu(question: str, rng: np.random.Generator, row: int,
          problems: list[dict[str, object]]) -> tuple[str, str]:
    return _choices(question, rng, list("ABCDEFGHIJ"))


def _code(question: str, rng: np.random.Generator, row: int,
          problems: list[dict[str, object]]) -> tuple[str, str]:
    question_id = f"tiny{row:04d}"
    numbers = [[int(x) for x in rng.integers(-50, 50, size=int(rng.integers(2, 6)))] for _ in range(3)]
    if row % 2:  # a LeetCode-style problem: call-based tests
        tests = [{"input": json.dumps(n), "output": json.dumps(max(n)), "testtype": "functional"} for n in numbers]
        metadata = {"func_name": "largest"}
        starter = "class Solution:\n    def largest(self, nums: List[int]) -> int:\n"
    else:  # an AtCoder/Codeforces-style problem: stdin tests
        tests = [{"input": " ".join(map(str, n)) + "\n", "output": f"{sum(n)}\n", "testtype": "stdin"} for n in numbers]
        metadata, starter = {}, ""
    private = encode_private_tests(tests[1:])
    problems.append({"question_title": question_id, "question_content": question, "platform": "atcoder",
                     "question_id": question_id, "contest_id": "tiny", "contest_date": "2023-05-01T00:00:00",
                     "starter_code": starter, "difficulty": "easy", "public_test_cases": json.dumps(tests[:1]),
                     "private_test_cases": private, "metadata": json.dumps(metadata)})
    prompt = (f"You will be given a question (problem specification) and will generate a correct Python program "
              f"that matches the specification and passes all tests.\n\nQuestion: {question}\n\n"
              f"```python\n{starter}```" if starter else f"Question: {question}\nRead the input from stdin.")
    return prompt, question_id


_SAMPLERS = {"aime1983": _aime, "math500": _math, "gpqa": _gpqa, "mmlu_pro": _mmlu, "livecodebench": _code}


__all__ = [
    "BOS",
    "CHAT_TEMPLATE",
    "END_THINK",
    "EOS",
    "SUBSET_NAMES",
    "THINK",
    "TinyDeepSeek",
    "TinyDeepSeekDataset",
    "make_tiny_dataset",
    "make_tiny_deepseek",
    "weight_shapes",
]
