"""A tiny random-weight Whisper and a LibriSpeech-format dataset, made locally and byte-identically from a seed.

They let the whole whisper pipeline (vLLM's Whisper with its feature extractor, LoadGen, the
labels, the scorer, the submission tree) run on any machine with no download. The weights are
random, so the transcripts are noise and the WER means nothing; only the formats are real:

- the model is a `WhisperForConditionalGeneration` checkpoint of whisper-large-v3's architecture
  (an encoder over 128 mel bins and 1,500 positions, a decoder of 448, head size 64, the output
  projection tied to the token embeddings) with tiny widths and depths; the rows of its special
  tokens are zero, so that their logits never win and the model writes text (it then runs to
  max_tokens, as a model that never says <|endoftext|> does);
- the tokenizer is a GPT-2-style byte-level BPE trained on generated text, then Whisper's special
  tokens in Whisper's order (<|endoftext|> last of the text tokens, <|startoftranscript|>, the
  language, the tasks, <|notimestamps|>; only English among the languages and no timestamp tokens);
  the folder holds tokenizer.json, vocab.json, merges.txt, the configs `WhisperProcessor` loads, and a
  small British-to-American spelling table as normalizer.json;
- the dataset is a folder with dev-all-repack.json and dev-all-repack/*.wav: 16-bit mono WAVs at
  16 kHz written with the standard library's `wave` (a tone per word, a little noise), named like
  LibriSpeech's speakers and chapters, with manifest entries of the repack script's shape.

Nothing here imports torch or transformers (slow to import).
"""

from __future__ import annotations

import json
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.samples import TinyDataset, check_tiny_rows
from cmx.mlperf.benchmarks.kit.tokenizer import byte_level_document, train_byte_level_bpe
from cmx.mlperf.benchmarks.kit.weights import F16, write_random_weights
from cmx.mlperf.benchmarks.synthetic import HEAD_SIZE, Lexicon, TinyModelFolder, write_json, write_text
from cmx.mlperf.benchmarks.whisper.dataset import CLIPS, MANIFEST, SAMPLE_RATE, SAMPLE_WIDTH
from cmx.mlperf.benchmarks.whisper.normalizer import NORMALIZER_JSON

# whisper-large-v3's fixed shapes (config.json): what the feature extractor and vLLM's Whisper expect
MEL_BINS = 128
SOURCE_POSITIONS = 1500  # 30 s of audio: 3,000 mel frames, halved by the second convolution
TARGET_POSITIONS = 448
# Whisper's special tokens, in its order, after the text tokens (large-v3: <|endoftext|> is 50256, then 50257...)
ENDOFTEXT = "<|endoftext|>"
SPECIALS = (ENDOFTEXT, "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
            "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")
# GPT-2's split, which Whisper's byte-level BPE applies before its merges
SPLIT_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# a few British spellings and the American ones the normaliser writes instead (the real table has about 1,700)
SPELLINGS = {"colour": "color", "honour": "honor", "centre": "center", "theatre": "theater", "grey": "gray",
             "organise": "organize", "realise": "realize", "travelled": "traveled", "neighbour": "neighbor"}
WORD_S, GAP_S, EDGE_S = 0.06, 0.02, 0.05  # the tiny clips: a tone per word, gaps between, silence at each end
TINY_WORDS = (2, 24)  # words per tiny clip: under 2 s of audio


@dataclass(frozen=True)
class TinyWhisper(TinyModelFolder):
    """A tiny Whisper folder made by make_tiny_whisper, and what it was made from."""

    layers: int  # in the encoder and in the decoder
    heads: int

    @property
    def endoftext_id(self) -> int:
        return self.vocab_size - len(SPECIALS)

    def special_id(self, token: str) -> int:
        return self.endoftext_id + SPECIALS.index(token)


def make_tiny_whisper(dest: Path, seed: int = 0, *, vocab_size: int = 1024, hidden_size: int = 128, layers: int = 2,
                      heads: int = 2) -> TinyWhisper:
    """Write a random-weight Whisper and its tokenizer and feature extractor into the folder `dest`.

    The same arguments give byte-identical files. `hidden_size` must be `heads * 64`; `vocab_size`
    counts the text tokens and the specials (large-v3 has 51,866).
    """
    if heads < 1 or hidden_size != heads * HEAD_SIZE:
        raise CmxError(f"a tiny Whisper with hidden_size {hidden_size} and {heads} heads has a head size other than "
                       f"{HEAD_SIZE}", hint=f"give hidden_size = heads × {HEAD_SIZE}; vLLM's CPU attention rejects "
                                            "small head sizes")
    if layers < 1:
        raise CmxError(f"a model needs at least one layer, not {layers}")
    if not 256 + 64 + len(SPECIALS) <= vocab_size <= 8192:
        raise CmxError(f"vocab_size {vocab_size} is out of range for a tiny Whisper tokenizer",
                       hint=f"give 256 byte tokens, some merges and the {len(SPECIALS)} specials: 329 to 8192")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    model = TinyWhisper(dest, seed, vocab_size, hidden_size, layers, heads)
    _write_tokenizer(dest, seed, vocab_size)
    write_json(dest / "config.json", _model_config(model))
    write_json(dest / "generation_config.json", _generation_config(model))
    write_json(dest / "preprocessor_config.json", _feature_extractor_config())
    write_json(dest / NORMALIZER_JSON, SPELLINGS)
    specials = slice(model.endoftext_id, vocab_size)

    def silence_specials(embeddings: np.ndarray) -> None:
        embeddings[specials] = 0.0

    write_random_weights(dest / "model.safetensors", whisper_weight_shapes(model), seed, F16,
                         edits={"model.decoder.embed_tokens.weight": silence_specials})
    return model


def whisper_weight_shapes(model: TinyWhisper) -> dict[str, tuple[int, ...]]:
    """A WhisperForConditionalGeneration checkpoint's tensors and shapes (proj_out is tied, so not stored)."""
    d, ffn = model.hidden_size, 4 * model.hidden_size
    shapes: dict[str, tuple[int, ...]] = {
        "model.encoder.conv1.weight": (d, MEL_BINS, 3), "model.encoder.conv1.bias": (d,),
        "model.encoder.conv2.weight": (d, d, 3), "model.encoder.conv2.bias": (d,),
        "model.encoder.embed_positions.weight": (SOURCE_POSITIONS, d),
        "model.encoder.layer_norm.weight": (d,), "model.encoder.layer_norm.bias": (d,),
        "model.decoder.embed_tokens.weight": (model.vocab_size, d),
        "model.decoder.embed_positions.weight": (TARGET_POSITIONS, d),
        "model.decoder.layer_norm.weight": (d,), "model.decoder.layer_norm.bias": (d,),
    }
    for side, blocks in (("encoder", ("self_attn",)), ("decoder", ("self_attn", "encoder_attn"))):
        for i in range(model.layers):
            p = f"model.{side}.layers.{i}."
            for block in blocks:
                shapes.update({p + f"{block}.{proj}.weight": (d, d) for proj in ("q_proj", "k_proj", "v_proj",
                                                                                 "out_proj")})
                shapes.update({p + f"{block}.{proj}.bias": (d,) for proj in ("q_proj", "v_proj", "out_proj")})
                shapes.update({p + f"{block}_layer_norm.weight": (d,), p + f"{block}_layer_norm.bias": (d,)})
            shapes.update({p + "fc1.weight": (ffn, d), p + "fc1.bias": (ffn,), p + "fc2.weight": (d, ffn),
                           p + "fc2.bias": (d,), p + "final_layer_norm.weight": (d,),
                           p + "final_layer_norm.bias": (d,)})
    return shapes


def _model_config(model: TinyWhisper) -> dict[str, object]:
    """The keys of whisper-large-v3's config.json, with tiny sizes."""
    eot, start = model.endoftext_id, model.special_id("<|startoftranscript|>")
    return {
        "activation_dropout": 0.0, "activation_function": "gelu", "apply_spec_augment": False,
        "architectures": ["WhisperForConditionalGeneration"], "attention_dropout": 0.0, "begin_suppress_tokens": [],
        "bos_token_id": eot, "d_model": model.hidden_size, "decoder_attention_heads": model.heads,
        "decoder_ffn_dim": 4 * model.hidden_size, "decoder_layerdrop": 0.0, "decoder_layers": model.layers,
        "decoder_start_token_id": start, "dropout": 0.0, "encoder_attention_heads": model.heads,
        "encoder_ffn_dim": 4 * model.hidden_size, "encoder_layerdrop": 0.0, "encoder_layers": model.layers,
        "eos_token_id": eot, "init_std": 0.02, "is_encoder_decoder": True,
        "max_source_positions": SOURCE_POSITIONS, "max_target_positions": TARGET_POSITIONS, "model_type": "whisper",
        "num_hidden_layers": model.layers, "num_mel_bins": MEL_BINS, "pad_token_id": eot, "scale_embedding": False,
        "suppress_tokens": [], "tie_word_embeddings": True, "torch_dtype": "float16", "use_cache": True,
        "vocab_size": model.vocab_size,
    }


def _generation_config(model: TinyWhisper) -> dict[str, object]:
    eot = model.endoftext_id
    return {"bos_token_id": eot, "decoder_start_token_id": model.special_id("<|startoftranscript|>"),
            "eos_token_id": eot, "pad_token_id": eot, "max_length": TARGET_POSITIONS,
            "no_timestamps_token_id": model.special_id("<|notimestamps|>"), "is_multilingual": True,
            "lang_to_id": {"<|en|>": model.special_id("<|en|>")},
            "task_to_id": {"translate": model.special_id("<|translate|>"),
                           "transcribe": model.special_id("<|transcribe|>")}}


def _feature_extractor_config() -> dict[str, object]:
    """WhisperFeatureExtractor's settings for 128 mel bins over 30 s windows at 16 kHz (large-v3's)."""
    return {"chunk_length": 30, "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": MEL_BINS,
            "hop_length": 160, "n_fft": 400, "n_samples": 30 * SAMPLE_RATE, "nb_max_frames": 3000,
            "padding_side": "right", "padding_value": 0.0, "processor_class": "WhisperProcessor",
            "return_attention_mask": False, "sampling_rate": SAMPLE_RATE}


def _write_tokenizer(dest: Path, seed: int, vocab_size: int) -> None:
    eot = vocab_size - len(SPECIALS)
    trained = train_byte_level_bpe(_corpus(seed), eot, SPLIT_PATTERN)
    document = byte_level_document(trained, SPLIT_PATTERN, [(eot + i, t) for i, t in enumerate(SPECIALS)], None)
    model = document["model"]
    assert isinstance(model, dict)
    model["vocab"] = {**model["vocab"], ENDOFTEXT: eot}  # in the BPE's vocabulary too, as Whisper's vocab.json has it
    write_text(dest / "tokenizer.json", json.dumps(document, ensure_ascii=False, indent=2))
    write_json(dest / "vocab.json", model["vocab"])
    write_text(dest / "merges.txt", "#version: 0.2\n" + "".join(" ".join(m) + "\n" for m in model["merges"]))
    added = {str(eot + i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                            "single_word": False, "special": True} for i, t in enumerate(SPECIALS)}
    write_json(dest / "tokenizer_config.json", {
        "added_tokens_decoder": added, "additional_special_tokens": list(SPECIALS[1:]), "bos_token": ENDOFTEXT,
        "clean_up_tokenization_spaces": False, "eos_token": ENDOFTEXT, "errors": "replace",
        "model_max_length": 1000000000000000019884624838656, "pad_token": ENDOFTEXT,
        "processor_class": "WhisperProcessor", "return_attention_mask": False, "tokenizer_class": "WhisperTokenizer",
        "unk_token": ENDOFTEXT})
    write_json(dest / "special_tokens_map.json", {"additional_special_tokens": list(SPECIALS[1:]),
                                                  "bos_token": ENDOFTEXT, "eos_token": ENDOFTEXT,
                                                  "pad_token": ENDOFTEXT, "unk_token": ENDOFTEXT})


def _corpus(seed: int) -> list[str]:
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    texts = Lexicon.shared().texts(rng, rng.integers(8, 60, size=3000))
    return [*texts, *(t.lower() for t in texts[:1000]), *(" ".join(SPELLINGS) for _ in range(20))]


# --- the dataset ---------------------------------------------------------------------------------


def make_tiny_librispeech(dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> TinyDataset:
    """Write a folder of `rows` generated clips in the repacked LibriSpeech layout: the manifest `dev-all-repack.json`
    and `dev-all-repack/<speaker>-<chapter>_<n>.wav`. `tokenizer_dir` is the kit's argument: the transcripts are
    text, so it is not read. The same arguments give byte-identical files."""
    del tokenizer_dir
    check_tiny_rows(rows)
    dest = Path(dest)
    (dest / CLIPS).mkdir(parents=True, exist_ok=True)
    rng = np.random.Generator(np.random.PCG64([seed, 2]))
    lexicon = Lexicon.shared()
    sample = lexicon.sample(rng, rng.integers(*TINY_WORDS, size=rows))
    words = lexicon.probs.size
    entries = []
    for i in range(rows):
        codes = [c % words for c in sample.codes[sample.starts[i]:sample.ends[i]]]
        transcript = " ".join(lexicon.forms[0][c] for c in codes)
        audio = _speech_like(rng, codes)
        name = f"{CLIPS}/{1000 + i // 40}-{100000 + i // 8}_{i % 8}.wav"
        _write_wav(dest / name, audio)
        entries.append(_manifest_entry(transcript, name, len(audio)))
    write_text(dest / MANIFEST, json.dumps(entries, indent=2) + "\n")
    return TinyDataset(dest, rows, seed)


def _speech_like(rng: np.random.Generator, codes: list[int]) -> np.ndarray:
    """int16 samples: silence, a tone for each word (its pitch from the word), short gaps, silence."""
    word, gap, edge = (round(s * SAMPLE_RATE) for s in (WORD_S, GAP_S, EDGE_S))
    t = np.arange(word) / SAMPLE_RATE
    envelope = np.sin(np.pi * np.arange(word) / word)
    parts = [np.zeros(edge)]
    for n, code in enumerate(codes):
        if n:
            parts.append(np.zeros(gap))
        parts.append(0.3 * envelope * np.sin(2 * np.pi * (120 + 7 * (code % 100)) * t))
    parts.append(np.zeros(edge))
    audio = np.concatenate(parts) + rng.normal(0.0, 0.003, size=sum(len(p) for p in parts))
    return np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")


def _write_wav(path: Path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(SAMPLE_WIDTH)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(samples.tobytes())


def _manifest_entry(transcript: str, fname: str, num_samples: int) -> dict[str, object]:
    """An entry as speech2text/utils/repackage_librispeech.py writes it."""
    duration = num_samples / SAMPLE_RATE
    return {"transcript": transcript,
            "files": [{"channels": 1, "sample_rate": float(SAMPLE_RATE), "bitdepth": 16, "bitrate": 256000.0,
                       "duration": duration, "num_samples": num_samples, "encoding": "Signed Integer PCM",
                       "silent": False, "fname": fname, "speed": 1}],
            "original_duration": duration, "original_num_samples": num_samples}
