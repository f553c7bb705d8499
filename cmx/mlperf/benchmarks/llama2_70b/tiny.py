"""A tiny random-weight Llama 2 and an OpenOrca-format dataset, made locally and byte-identically from a seed.

They let the whole llama2-70b pipeline (tokenizer, vLLM, LoadGen, accuracy, submission tree) run on
any machine with no download. The weights are random, so what the model writes is noise and its
ROUGE scores mean nothing; only the formats are real:

- the model is a `LlamaForCausalLM` checkpoint (config.json, model.safetensors,
  generation_config.json) of the Llama 2 architecture (RoPE, SwiGLU, RMSNorm, grouped-query
  attention as in the 70B) with a head size of 64, which vLLM's CPU attention accepts (it
  rejects 16); weights are stored in float16 like the real checkpoint's;
- the tokenizer is a byte-fallback BPE over SentencePiece-style pieces ("▁word"), trained here
  on generated English-like text, with Llama 2's special ids (<unk>=0, <s>=1, </s>=2) and its
  256 byte tokens at ids 3..258, saved as a tokenizer.json that `AutoTokenizer` and
  `LlamaTokenizer(Fast)` load offline;
- the dataset has the columns, dtypes and prompt format of the MLCommons-processed OpenOrca
  pickle (see `make_tiny_openorca`).

Nothing here imports torch or transformers (slow to import): weights are drawn with numpy and
written by kit.weights, and config.json is written as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.frames import write_frame
from cmx.mlperf.benchmarks.kit.samples import TinyDataset, check_tiny_rows
from cmx.mlperf.benchmarks.kit.weights import F16, write_random_weights
from cmx.mlperf.benchmarks.synthetic import (
    Lexicon,
    TextSample,
    TinyLlamaFamily,
    check_llama_sizes,
    llama_intermediate_size,
    llama_weight_shapes,
    read_tokenizer,
    write_json,
    write_text,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
SPACE = "▁"  # SentencePiece's word-start mark; Llama 2's id 29871 is this piece alone
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))  # Llama 2's byte-fallback pieces, ids 3..258
SPECIALS = ("<unk>", "<s>", "</s>")
ORIGINS = ("cot", "flan", "niv", "t0")  # OpenOrca's sub-datasets; processorca samples equally from each
OPENORCA_ROWS = 24576
MAX_VOCAB = 16384  # the training text yields about 18000 pieces; Llama 2 has 32000
# the column order and dtypes of open_orca_gpt4_tokenized_llama.sampled_24576.pkl (processorca.py)
OPENORCA_COLUMNS = ("id", "system_prompt", "question", "output", "input", "tok_input", "tok_output", "origin",
                    "tok_input_length", "tok_output_length")
_PROMPT_SYSTEM = "<s>[INST] <<SYS>>\n{}\n<</SYS>>\n\n{} [/INST]"  # processorca's Llama 2 chat format
_PROMPT_NO_SYSTEM = "<s>[INST] {} [/INST]"
_SYSTEM_PROMPTS = (
    "",
    "You are an AI assistant. You will be given a task. You must write a detailed and long answer.",
    "You are a helpful assistant, who always explains. Answer as if to a child of five.",
    "You are an AI assistant that helps people find information. Think step by step before you answer.",
    "You are a teacher. Given a task, explain in simple steps what the task asks and how to do it.",
    "Explain how you used the definition to come up with the answer.",
)


@dataclass(frozen=True)
class TinyLlama(TinyLlamaFamily):
    """A tiny model folder made by make_tiny_llama, and what it was made from."""

    space_id: int  # the id of "▁" alone: what processorca appends to every prompt (29871 in Llama 2)


def make_tiny_llama(dest: Path, seed: int = 0, *, vocab_size: int = 4096, hidden_size: int = 256, layers: int = 2,
                    heads: int = 4, kv_heads: int | None = None) -> TinyLlama:
    """Write a random-weight Llama 2 model and its tokenizer into the folder `dest`.

    The same arguments give byte-identical files. `kv_heads` defaults to half the heads
    (grouped-query attention, as in Llama 2 70B). `hidden_size` must be `heads * 64`.
    """
    kv_heads = kv_heads if kv_heads is not None else max(1, heads // 2)
    _check_sizes(vocab_size, hidden_size, layers, heads, kv_heads)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer_json = _trained_tokenizer_json(seed, vocab_size)
    write_text(dest / "tokenizer.json", tokenizer_json)
    write_json(dest / "tokenizer_config.json", _tokenizer_config())
    write_json(dest / "special_tokens_map.json", {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    intermediate = llama_intermediate_size(hidden_size)
    write_json(dest / "config.json", _model_config(vocab_size, hidden_size, intermediate, layers, heads, kv_heads))
    write_json(dest / "generation_config.json", {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
                                                  "pad_token_id": UNK_ID})
    write_random_weights(dest / "model.safetensors",
                         llama_weight_shapes(vocab_size, hidden_size, intermediate, layers, heads, kv_heads), seed, F16)
    space_id = json.loads(tokenizer_json)["model"]["vocab"][SPACE]
    return TinyLlama(dest, seed, vocab_size, hidden_size, intermediate, layers, heads, kv_heads, space_id)


def _check_sizes(vocab_size: int, hidden_size: int, layers: int, heads: int, kv_heads: int) -> None:
    check_llama_sizes(hidden_size, layers, heads, kv_heads)
    smallest = len(SPECIALS) + len(BYTE_TOKENS) + 200
    if not smallest <= vocab_size <= MAX_VOCAB:
        raise CmxError(f"vocab_size {vocab_size} is out of range for a tiny tokenizer",
                       hint=f"give a vocab_size from {smallest} (specials, 256 bytes and a few pieces) to "
                            f"{MAX_VOCAB} (the generated training text holds no more distinct pieces)")


def _model_config(vocab_size: int, hidden_size: int, intermediate: int, layers: int, heads: int,
                  kv_heads: int) -> dict[str, object]:
    """The keys of Llama-2-70b-chat-hf's config.json, with tiny sizes."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "max_position_embeddings": 4096,
        "model_type": "llama",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "pad_token_id": UNK_ID,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def _trained_tokenizer_json(seed: int, vocab_size: int) -> str:
    """Train a BPE on generated text, then lay its vocabulary out like Llama 2's: specials at 0..2,
    the 256 byte pieces at 3..258, then the learned pieces. Returns the tokenizer.json text."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # split=True while training, so that no merge spans two words (SentencePiece never does)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(BYTE_TOKENS), special_tokens=list(SPECIALS),
                                  show_progress=False)
    corpus = _training_corpus(seed)
    tok.train_from_iterator(corpus, trainer, length=len(corpus))
    trained = json.loads(tok.to_str())
    learned = sorted(((i, t) for t, i in trained["model"]["vocab"].items() if t not in SPECIALS))
    pieces = [*SPECIALS, *BYTE_TOKENS, *(t for _, t in learned if t not in BYTE_TOKENS)]
    if len(pieces) != vocab_size:
        raise CmxError(f"the tiny tokenizer learned {len(pieces)} pieces, not {vocab_size}",
                       hint="give a smaller vocab_size: the generated training text has too few distinct words")
    return json.dumps(_tokenizer_document({t: i for i, t in enumerate(pieces)}, trained["model"]["merges"]),
                      ensure_ascii=False, indent=2, sort_keys=False)


def _tokenizer_document(vocab: dict[str, int], merges: list[object]) -> dict[str, object]:
    """A tokenizer.json shaped like Llama 2's as transformers 5 builds it (LlamaTokenizer): Metaspace
    pieces with a "▁" before every text segment, byte fallback, and a <s> added in front."""
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(SPECIALS)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [BOS_ID], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def _tokenizer_config() -> dict[str, object]:
    # legacy: true makes transformers' LlamaTokenizer put "▁" before every text segment, also the
    # one after a literal "<s>" (prepend_scheme "always"), as Llama 2's original tokenizer does and
    # as tokenizer.json says: "<s>[INST]" gives <s>, ▁[, INST, ] in both
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for i, t in enumerate(SPECIALS)},
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": True,
        "model_max_length": 4096,
        "pad_token": None,
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
    }


def _training_corpus(seed: int) -> list[str]:
    """Generated sentences, the system prompts and the chat template's markers. No newlines: like
    Llama 2, the tokenizer then writes "\\n" as the byte piece <0x0A>."""
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    texts = Lexicon.shared().texts(rng, rng.integers(20, 120, size=6000))
    markers = ["[INST] <<SYS>> <</SYS>> [/INST]"] * 200
    return [*texts, *(p for p in _SYSTEM_PROMPTS if p), *markers]


class _PieceIds:
    """Token ids of every word form, with and without the "▁" a space in front gives it.

    With a SentencePiece-style BPE, no merge crosses a "▁" or a byte-fallback newline, so a
    text's ids are its pieces' ids one after another: composing them from this table costs a
    tenth of tokenizing every text. make_tiny_openorca checks that on a sample of rows and
    tokenizes everything when a tokenizer does not behave so.
    """

    def __init__(self, tokenizer: Tokenizer, lexicon: Lexicon) -> None:
        forms = lexicon.forms.ravel().tolist()
        self.spaced = [[t.id for t in tokenizer.model.tokenize(SPACE + f)] for f in forms]
        self.bare = [[t.id for t in tokenizer.model.tokenize(f)] for f in forms]

    def words(self, codes: list[int], first_bare: bool) -> list[int]:
        spaced = self.spaced
        if not codes:
            return []
        head = self.bare[codes[0]] if first_bare else spaced[codes[0]]
        return [*head, *chain.from_iterable(map(spaced.__getitem__, codes[1:]))]


def make_tiny_openorca(dest_pickle: Path, tokenizer_dir: Path, rows: int = OPENORCA_ROWS,
                       seed: int = 0) -> TinyDataset:
    """Write an OpenOrca-format pickle of `rows` generated samples, tokenized with the tokenizer in
    `tokenizer_dir` (its tokenizer.json).

    Like processorca.py: `input` is the Llama 2 chat prompt of system_prompt and question (with
    the literal "<s>" in front); `tok_input` is its tokenization (with the tokenizer's <s> added,
    so it starts <s>, <s>) plus the id of "▁" appended, the first token Llama 2 writes (29871 in
    Llama 2's vocabulary); `tok_output` is the reference answer's tokenization; the lengths
    are int64; the rows come in four equal blocks of origins (cot, flan, niv, t0) with ids like
    "niv.123456". Every text and list column has dtype object, as in the real pickle.
    The same arguments give a byte-identical file.
    """
    import pandas as pd

    check_tiny_rows(rows)
    tokenizer, space_id = _load_tokenizer(Path(tokenizer_dir))
    rng = np.random.Generator(np.random.PCG64([seed, 2]))
    lexicon = Lexicon.shared()
    origin = np.repeat(np.array(ORIGINS, dtype=object), [len(b) for b in np.array_split(np.arange(rows), 4)])
    numbers = rng.permutation(1_000_000)[:rows] if rows <= 1_000_000 else np.arange(rows)
    ids = [f"{o}.{n}" for o, n in zip(origin.tolist(), numbers.tolist(), strict=True)]
    system = [_SYSTEM_PROMPTS[i] for i in rng.integers(len(_SYSTEM_PROMPTS), size=rows).tolist()]
    questions = lexicon.sample(rng, rng.integers(8, 120, size=rows), last="?")
    outputs = lexicon.sample(rng, rng.integers(8, 220, size=rows))
    question, output = questions.strings(lexicon), outputs.strings(lexicon)
    prompt = [chat_prompt(s, q) for s, q in zip(system, question, strict=False)]
    tok_input, tok_output = _token_ids(tokenizer, lexicon, system, questions, outputs, prompt, output)
    tok_input = [[*ids, space_id] for ids in tok_input]
    frame = pd.DataFrame({
        "id": pd.Series(ids, dtype=object), "system_prompt": pd.Series(system, dtype=object),
        "question": pd.Series(question, dtype=object), "output": pd.Series(output, dtype=object),
        "input": pd.Series(prompt, dtype=object), "tok_input": pd.Series(tok_input, dtype=object),
        "tok_output": pd.Series(tok_output, dtype=object), "origin": pd.Series(origin.tolist(), dtype=object),
        "tok_input_length": pd.Series([len(t) for t in tok_input], dtype="int64"),
        "tok_output_length": pd.Series([len(t) for t in tok_output], dtype="int64"),
    }, columns=list(OPENORCA_COLUMNS))
    longest = int(max(frame["tok_input_length"].max(), frame["tok_output_length"].max()))
    if longest >= 1024:  # processorca keeps only samples under 1024 tokens each way
        raise CmxError(f"a generated sample has {longest} tokens, over processorca's limit of 1023",
                       hint=f"the tokenizer in {tokenizer_dir} splits text into very small pieces; use the tiny "
                            "model's tokenizer or one with a larger vocabulary")
    return TinyDataset(write_frame(frame, dest_pickle, protocol=5), rows, seed)


def _token_ids(tokenizer: Tokenizer, lexicon: Lexicon, system: list[str], questions: TextSample, outputs: TextSample,
               prompt: list[str], output: list[str]) -> tuple[list[list[int]], list[list[int]]]:
    """The ids of every prompt and answer, as tokenizer.encode gives them (with <s> in front).

    Composed from per-word ids (see _PieceIds) when that agrees with the tokenizer on a spread of
    rows; otherwise every text is tokenized (batch-encoded, several times slower).
    """
    pieces = _PieceIds(tokenizer, lexicon)
    # the template around the question: "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n" ends in a
    # newline, so the question's first word has no "▁"; "<s>[INST] " ends in a space, so it has one
    head = {p: tokenizer.encode(chat_prompt(p, "")[:-len(" [/INST]")].rstrip(" ")).ids for p in set(system)}
    tail = tokenizer.encode("[/INST]", add_special_tokens=False).ids
    bos = tokenizer.encode("", add_special_tokens=True).ids

    def prompt_ids(i: int) -> list[int]:
        codes = questions.codes[questions.starts[i]:questions.ends[i]]
        return [*head[system[i]], *pieces.words(codes, first_bare=bool(system[i])), *tail]

    def output_ids(i: int) -> list[int]:
        return [*bos, *pieces.words(outputs.codes[outputs.starts[i]:outputs.ends[i]], first_bare=False)]

    rows = len(prompt)
    probe = sorted(set(np.linspace(0, rows - 1, num=min(rows, 64)).astype(int).tolist()))
    composable = all(prompt_ids(i) == tokenizer.encode(prompt[i]).ids and output_ids(i) == tokenizer.encode(
        output[i]).ids for i in probe)
    if composable:
        return [prompt_ids(i) for i in range(rows)], [output_ids(i) for i in range(rows)]
    return [e.ids for e in tokenizer.encode_batch(prompt)], [e.ids for e in tokenizer.encode_batch(output)]


def _load_tokenizer(folder: Path) -> tuple[Tokenizer, int]:  # the tokenizer, the id of its space piece
    tokenizer = read_tokenizer(folder)
    space_id = tokenizer.token_to_id(SPACE)
    if space_id is None:
        raise CmxError(f"the tokenizer in {folder} has no piece {SPACE!r}: it is not a Llama-style (SentencePiece) "
                       "tokenizer", hint="use the tiny model's tokenizer or Llama 2's")
    return tokenizer, space_id


def chat_prompt(system_prompt: str, question: str) -> str:
    """The Llama 2 chat prompt processorca.py builds (with the literal "<s>" in front)."""
    return _PROMPT_SYSTEM.format(system_prompt, question) if system_prompt else _PROMPT_NO_SYSTEM.format(question)


__all__ = [
    "BOS_ID",
    "EOS_ID",
    "OPENORCA_COLUMNS",
    "OPENORCA_ROWS",
    "UNK_ID",
    "TinyLlama",
    "chat_prompt",
    "make_tiny_llama",
    "make_tiny_openorca",
]
