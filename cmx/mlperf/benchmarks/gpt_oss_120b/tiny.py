"""A tiny random-weight GptOssForCausalLM with a harmony-format tokenizer, and the gpt-oss sets in their real
format, made from a seed.

They let the gpt-oss-120b pipeline (harmony prompts, vLLM, LoadGen, the final-channel scorer, the
LiveCodeBench sandbox, the submission tree) run anywhere with no download. The weights are random,
so the model writes noise and scores 0; only the formats are real:

- the model has gpt-oss-120b's architecture at toy sizes: attention with learned sinks and
  biases, sliding-window (128) and full attention alternating by layer, grouped-query attention,
  YaRN RoPE (gpt-oss's parameters), a mixture-of-experts MLP (router with bias, fused gate_up and
  down experts with biases, clamped SwiGLU), untied embeddings; head size 64 (vLLM's CPU attention
  needs it; gpt-oss uses 64 too). Weights are unquantized float32 (the real experts are MXFP4, which
  vLLM's CPU build cannot run) and run in bfloat16;
- the tokenizer is a byte-level BPE with o200k's pre-tokenizer regex, trained here on generated
  text, followed by the harmony format's special tokens at o200k_harmony's relative offsets
  (<|startoftext|>, <|endoftext|>, <|return|>, <|constrain|>, <|channel|>, <|start|>, <|end|>,
  <|message|>, <|call|>, ... <|endofprompt|>); it adds no BOS, as gpt-oss's does not;
- the sets (see `make_tiny_sets`) are DataFrames in the reference's pickle form with harmony
  prompts, plus LiveCodeBench problems in code_generation_lite's form with generated tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import ACCURACY_FILE, PERFORMANCE_FILE, TEST07_FILE
from cmx.mlperf.benchmarks.gpt_oss_120b.livecodebench import FOLDER as LCB_FOLDER
from cmx.mlperf.benchmarks.kit.frames import write_frame
from cmx.mlperf.benchmarks.kit.samples import check_tiny_rows
from cmx.mlperf.benchmarks.kit.tokenizer import added_token, byte_level_document, train_byte_level_bpe
from cmx.mlperf.benchmarks.kit.weights import F32, attention_shapes, decoder_shapes, write_random_weights
from cmx.mlperf.benchmarks.synthetic import HEAD_SIZE, Lexicon, TinyModelFolder, read_tokenizer, write_json, write_text
from cmx.mlperf.scoring.livecodebench import encode_private_tests

# tiktoken's o200k pattern (o200k_harmony uses it): the text is split by this regex, then byte-level BPE
SPLIT_PATTERN = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
                 "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                 "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}"
                 "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# o200k_harmony's specials from <|startoftext|> (199998) on, by offset; the others are reserved
HARMONY = {0: "<|startoftext|>", 1: "<|endoftext|>", 4: "<|return|>", 5: "<|constrain|>", 7: "<|channel|>",
           8: "<|start|>", 9: "<|end|>", 10: "<|message|>", 14: "<|call|>", 20: "<|endofprompt|>"}
SPECIAL_COUNT = 21
END_OFFSETS = (4, 1, 14)  # <|return|>, <|endoftext|>, <|call|>: gpt-oss's generation_config.json order
SUBSETS = ("aime25", "gpqa_diamond", "livecodebench_v6")  # eval_mlperf_accuracy.py DATASET_REPEATS' keys
_TEXTS = 4000


@dataclass(frozen=True)
class TinyGptOss(TinyModelFolder):
    """A tiny model folder made by make_tiny_gpt_oss, and what it was made from."""

    layers: int
    heads: int
    kv_heads: int
    experts: int

    @property
    def first_special(self) -> int:
        return self.vocab_size - SPECIAL_COUNT

    @property
    def end_ids(self) -> tuple[int, ...]:
        return self.specials(SPECIAL_COUNT, END_OFFSETS)


def make_tiny_gpt_oss(dest: Path, seed: int = 0, *, vocab_size: int = 4096, hidden_size: int = 256, layers: int = 2,
                      heads: int = 4, experts: int = 4) -> TinyGptOss:
    """Write the random GptOss model and its tokenizer into `dest`; the same arguments give the same bytes."""
    if heads < 2 or hidden_size != heads * HEAD_SIZE or layers < 1 or experts < 2 or vocab_size < 600:
        raise CmxError(f"no tiny gpt-oss with vocab {vocab_size}, hidden {hidden_size}, {layers} layers, "
                       f"{heads} heads, {experts} experts",
                       hint=f"hidden_size = heads × {HEAD_SIZE}, heads ≥ 2, layers ≥ 1, experts ≥ 2, vocab_size ≥ 600")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tiny = TinyGptOss(dest, seed, vocab_size, hidden_size, layers, heads, max(1, heads // 2), experts)
    write_text(dest / "tokenizer.json", _tokenizer_json(seed, vocab_size))
    specials = _specials(vocab_size)
    write_json(dest / "tokenizer_config.json", {
        "added_tokens_decoder": {str(i): {**added_token(t), "special": True} for i, t in specials},
        "bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>",
        "clean_up_tokenization_spaces": False, "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"})
    write_json(dest / "config.json", _config(tiny))
    write_json(dest / "generation_config.json", {"bos_token_id": tiny.first_special, "do_sample": True,
                                                  "eos_token_id": list(tiny.end_ids),
                                                  "pad_token_id": tiny.first_special + 1})
    # N(0, 0.02) tensors, unit norms, zero biases, unquantized float32
    write_random_weights(dest / "model.safetensors", _shapes(tiny), seed, F32)
    return tiny


def _config(t: TinyGptOss) -> dict[str, object]:
    """openai/gpt-oss-120b's config.json keys (as transformers 5 writes them), tiny sizes, no quantization."""
    return {"architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
            "bos_token_id": t.first_special, "eos_token_id": t.first_special + 4, "head_dim": HEAD_SIZE,
            "hidden_act": "silu", "hidden_size": t.hidden_size, "initializer_range": 0.02,
            "intermediate_size": t.hidden_size, "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                                                               for i in range(t.layers)],
            "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": t.heads,
            "num_experts_per_tok": 2, "num_hidden_layers": t.layers, "num_key_value_heads": t.kv_heads,
            "num_local_experts": t.experts, "output_router_logits": False, "pad_token_id": t.first_special + 1,
            "rms_norm_eps": 1e-05, "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                                       "original_max_position_embeddings": 4096,
                                                       "rope_theta": 150000.0, "rope_type": "yarn",
                                                       "truncate": False},
            "sliding_window": 128, "swiglu_limit": 7.0, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": t.vocab_size}


def _shapes(t: TinyGptOss) -> dict[str, tuple[int, ...]]:
    """Attention with biases and sinks; a router with a bias and fused gate_up and down experts with biases."""
    h, e, i = t.hidden_size, t.experts, t.hidden_size

    def layer(n: int) -> dict[str, tuple[int, ...]]:
        return {**attention_shapes(h, t.heads * HEAD_SIZE, t.kv_heads * HEAD_SIZE, bias=True),
                "self_attn.sinks": (t.heads,), "mlp.router.weight": (e, h), "mlp.router.bias": (e,),
                "mlp.experts.gate_up_proj": (e, h, 2 * i), "mlp.experts.gate_up_proj_bias": (e, 2 * i),
                "mlp.experts.down_proj": (e, i, h), "mlp.experts.down_proj_bias": (e, h)}

    return decoder_shapes(t.vocab_size, h, t.layers, layer)


# --- the tokenizer -------------------------------------------------------------------------------

def _specials(vocab_size: int) -> list[tuple[int, str]]:
    first = vocab_size - SPECIAL_COUNT
    return [(first + o, HARMONY.get(o, f"<|reserved_{199998 + o}|>")) for o in range(SPECIAL_COUNT)]


def _tokenizer_json(seed: int, vocab_size: int) -> str:
    """A byte-level BPE of vocab_size - 21 tokens trained on generated text, the harmony specials after them;
    no post-processor: gpt-oss adds no BOS."""
    trained = train_byte_level_bpe(_corpus(seed), vocab_size - SPECIAL_COUNT, SPLIT_PATTERN)
    return json.dumps(byte_level_document(trained, SPLIT_PATTERN, _specials(vocab_size), None), ensure_ascii=False,
                      indent=2)


def _corpus(seed: int) -> list[str]:
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    texts = Lexicon.shared().texts(rng, rng.integers(20, 120, size=_TEXTS))
    digits = [" ".join(str(v) for v in rng.integers(0, 1000, size=12)) for _ in range(200)]
    return [*texts, *digits, *[harmony_prompt(t, "high") for t in texts[:200]], *_CODE_SNIPPETS * 20]


_CODE_SNIPPETS = ["```python\nimport sys\nprint(sum(map(int, sys.stdin.read().split())))\n```",
                  "class Solution:\n    def maxValue(self, nums: List[int]) -> int:\n        return max(nums)\n",
                  "The answer is \\boxed{42}.", "Answer: C", "Please reason step by step."]


def harmony_prompt(user_text: str, effort: str) -> str:
    """A prompt as the harmony chat format renders it: system (with the reasoning effort), user, then the
    assistant's turn."""
    return ("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\n\n"
            f"Reasoning: {effort}\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message."
            f"<|end|><|start|>user<|message|>{user_text}<|end|><|start|>assistant")


# --- the sets ------------------------------------------------------------------------------------

def make_tiny_sets(dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
    """Write the folder the reference's download makes, at `rows` rows a set: perf/perf_eval_ref.pkl
    (reasoning low), acc/acc_eval_ref.pkl (high), acc/acc_eval_compliance_gpqa.pkl (GPQA, high),
    each a DataFrame with `dataset`, `ground_truth`, `question` and `input_tokens`, the sub-datasets in
    turn (AIME, GPQA, LiveCodeBench), and livecodebench/test6.jsonl with the problems they name."""
    import pandas as pd

    check_tiny_rows(rows)
    tokenizer = read_tokenizer(Path(tokenizer_dir))
    if tokenizer.token_to_id("<|start|>") is None or tokenizer.token_to_id("<|channel|>") is None:
        raise CmxError(f"the tokenizer in {tokenizer_dir} has no harmony tokens (<|start|>, <|channel|>)",
                       hint="use the tiny gpt-oss model's tokenizer or gpt-oss-120b's")
    dest = Path(dest)
    problems: list[dict[str, object]] = []
    sets = {PERFORMANCE_FILE: ("low", SUBSETS), ACCURACY_FILE: ("high", SUBSETS), TEST07_FILE: ("high", SUBSETS[1:2])}
    for n, (stem, (effort, subsets)) in enumerate(sets.items()):
        rng = np.random.Generator(np.random.PCG64([seed, 3, n]))
        records = [_row(rng, subsets[i % len(subsets)], f"{n}-{i}", problems) for i in range(rows)]
        prompts = [harmony_prompt(str(r["question"]), effort) for r in records]
        ids = tokenizer.encode_batch(prompts, add_special_tokens=False)
        for record, encoded in zip(records, ids, strict=True):
            record["input_tokens"] = np.asarray(encoded.ids, dtype=np.int64)
        # protocol 5: pandas' default, which the reference's own pickles were written with
        write_frame(pd.DataFrame(records, columns=["dataset", "question", "ground_truth", "input_tokens"]),
                    dest / (stem + ".pkl"), protocol=5)
    (dest / LCB_FOLDER).mkdir(parents=True, exist_ok=True)
    write_text(dest / LCB_FOLDER / "test6.jsonl", "".join(json.dumps(p) + "\n" for p in problems))
    return dest


def _row(rng: np.random.Generator, subset: str, key: str, problems: list[dict[str, object]]) -> dict[str, object]:
    words = " ".join(Lexicon.shared().texts(rng, [int(rng.integers(12, 40))]))
    if subset == "aime25":
        return {"dataset": subset, "ground_truth": str(int(rng.integers(0, 1000))),
                "question": f"{words} Please reason step by step, and put your final answer within \\boxed{{}}."}
    if subset == "gpqa_diamond":
        choices = Lexicon.shared().texts(rng, rng.integers(2, 6, size=4))
        listed = "\n".join(f"({letter}) {c}" for letter, c in zip("ABCD", choices, strict=True))
        return {"dataset": subset, "ground_truth": "ABCD"[int(rng.integers(0, 4))],
                "question": f"{words}\n\n{listed}\n\nAnswer with the letter of the correct choice."}
    qid = f"tiny{key}"
    problems.append(_problem(rng, qid, functional=len(problems) % 2 == 1))
    return {"dataset": subset, "ground_truth": qid, "question": f"{words}\n\n{problems[-1]['question_content']}"}


def _problem(rng: np.random.Generator, qid: str, *, functional: bool) -> dict[str, object]:
    """A code_generation_lite problem: print the sum of the numbers on stdin, or return the largest (call-based)."""
    cases = [rng.integers(-50, 50, size=int(rng.integers(1, 6))).tolist() for _ in range(4)]
    if functional:
        tests = [{"input": json.dumps(c), "output": json.dumps(max(c)), "testtype": "functional"} for c in cases]
        content, meta, starter = ("Return the largest value of nums.", {"func_name": "maxValue"},
                                  "class Solution:\n    def maxValue(self, nums: List[int]) -> int:\n        ")
    else:
        tests = [{"input": " ".join(map(str, c)) + "\n", "output": f"{sum(c)}\n", "testtype": "stdin"} for c in cases]
        content, meta, starter = "Read integers from standard input and print their sum.", {}, ""
    return {"question_title": qid, "question_content": content, "platform": "leetcode" if functional else "atcoder",
            "question_id": qid, "contest_id": "tiny", "contest_date": "2025-01-01T00:00:00", "starter_code": starter,
            "difficulty": "easy", "public_test_cases": json.dumps(tests[:1]),
            "private_test_cases": encode_private_tests(tests[1:]), "metadata": json.dumps(meta)}


__all__ = ["HARMONY", "SPECIAL_COUNT", "SUBSETS", "TinyGptOss", "harmony_prompt", "make_tiny_gpt_oss", "make_tiny_sets"]
