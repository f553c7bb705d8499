"""Whisper's dataset as speech2text reads it (the repacked LibriSpeech manifest and its WAVs), what cmx refuses
where the reference would go on silently, the tiny model and dataset generators, and what the engine gets for a
clip and LoadGen gets back."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest

from cmx.errors import CmxError
from cmx.mlperf.backends.base import GenResult
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.whisper.dataset import CLIPS, MANIFEST, SAMPLE_RATE, load_librispeech
from cmx.mlperf.benchmarks.whisper.prompts import DECODER_PROMPT, LabelAnswer, WhisperPrompts, decoder_prompt_ids
from cmx.mlperf.benchmarks.whisper.tiny import (
    SPECIALS,
    make_tiny_librispeech,
    make_tiny_whisper,
    whisper_weight_shapes,
)
from cmx.mlperf.benchmarks.whisper.transcript import labels_text, reference_transcript, response_labels


def write_wav(path: Path, samples: np.ndarray, rate: int = SAMPLE_RATE, channels: int = 1, width: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(width)
        wav.setframerate(rate)
        wav.writeframes(samples.astype(f"<i{width}").tobytes())
    return path


def entry(fname: str, transcript: object, seconds: float) -> dict:
    return {"transcript": transcript, "files": [{"fname": fname, "speed": 1, "sample_rate": 16000.0, "channels": 1}],
            "original_duration": seconds, "original_num_samples": round(seconds * SAMPLE_RATE)}


def dataset(folder: Path, entries: list[dict]) -> Path:
    (folder / MANIFEST).write_text(json.dumps(entries))
    return folder


def one_clip(folder: Path, seconds: float = 1.0, **wav: int) -> Path:
    frames = round(seconds * SAMPLE_RATE) * wav.get("channels", 1)
    write_wav(folder / CLIPS / "a.wav", np.zeros(frames), **wav)
    return dataset(folder, [entry(f"{CLIPS}/a.wav", "a clip", seconds)])


# --- reading ---------------------------------------------------------------------------------------


def test_the_audio_reaches_the_model_as_int16_over_32768_at_16_khz(tmp_path: Path):
    samples = np.array([0, 16384, -32768, 32767, -1], dtype=np.int16)
    write_wav(tmp_path / CLIPS / "a.wav", samples)
    data = load_librispeech(dataset(tmp_path, [entry(f"{CLIPS}/a.wav", "hello", 5 / SAMPLE_RATE)]))
    audio = data.audio(0)
    assert audio.dtype == np.float32 and audio.tolist() == [0.0, 0.5, -1.0, 32767 / 32768, -1 / 32768]
    assert data.reference(0) == "hello" and len(data) == 1


def test_entries_over_30_s_or_without_a_text_transcript_are_skipped_as_the_reference_skips_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture):
    for name in ("a", "b", "c"):
        write_wav(tmp_path / CLIPS / f"{name}.wav", np.zeros(SAMPLE_RATE))
    data = load_librispeech(dataset(tmp_path, [
        entry(f"{CLIPS}/a.wav", "kept", 1.0), entry(f"{CLIPS}/b.wav", "too long", 30.5),
        entry(f"{CLIPS}/c.wav", None, 1.0), entry(f"{CLIPS}/c.wav", "", 1.0)]))
    # qsl_idx counts the kept entries; an empty transcript is kept (its words are insertions)
    assert [data.reference(i) for i in range(len(data))] == ["kept", ""] and data.skipped == 2
    assert "skipped 2 entries over 30 s or without a text transcript" in caplog.text


def test_the_manifest_file_itself_can_be_given(tmp_path: Path):
    assert len(load_librispeech(one_clip(tmp_path) / MANIFEST)) == 1


def test_an_absolute_fname_from_the_repack_script_is_found_under_the_dataset_folder(tmp_path: Path):
    write_wav(tmp_path / CLIPS / "1272-128104_0.wav", np.zeros(100))
    data = load_librispeech(dataset(tmp_path, [entry(f"/data/{CLIPS}/1272-128104_0.wav", "x", 100 / SAMPLE_RATE)]))
    assert data.clips[0].wav == tmp_path / CLIPS / "1272-128104_0.wav"


def test_limit_keeps_the_first_clips_and_refuses_more_than_there_are(tmp_path: Path):
    for name in ("a", "b"):
        write_wav(tmp_path / CLIPS / f"{name}.wav", np.zeros(10))
    data = load_librispeech(dataset(tmp_path, [entry(f"{CLIPS}/{n}.wav", n, 10 / SAMPLE_RATE) for n in "ab"]))
    assert data.limit(1).reference(0) == "a" and len(data.limit(1)) == 1
    with pytest.raises(DatasetError, match="cannot keep 3 samples"):
        data.limit(3)


# --- what is refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("wav", "said"), [
    ({"rate": 8000}, "1-channel, 16-bit at 8000 Hz, not mono 16-bit at 16000 Hz"),
    ({"channels": 2}, "2-channel, 16-bit at 16000 Hz"),
    ({"width": 4}, "1-channel, 32-bit at 16000 Hz"),
])
def test_a_wav_that_is_not_16_bit_mono_at_16_khz_is_refused_saying_what_it_is(tmp_path: Path, wav: dict, said: str):
    with pytest.raises(DatasetError, match=said) as raised:
        load_librispeech(one_clip(tmp_path, **wav))
    assert "entry 0" in str(raised.value) and "sox a.wav -r 16000 -c 1 -b 16" in str(raised.value.hint)


def test_a_wav_over_30_s_is_refused_though_its_entry_says_less(tmp_path: Path):
    write_wav(tmp_path / CLIPS / "a.wav", np.zeros(31 * SAMPLE_RATE))
    with pytest.raises(DatasetError, match=r"31\.00 s long, over Whisper's 30 s window"):
        load_librispeech(dataset(tmp_path, [entry(f"{CLIPS}/a.wav", "x", 29.0)]))


def test_a_wav_longer_than_its_entry_is_refused(tmp_path: Path):
    write_wav(tmp_path / CLIPS / "a.wav", np.zeros(2 * SAMPLE_RATE))
    with pytest.raises(DatasetError, match=r"2\.00 s of audio, more than the 1\.00 s its entry says"):
        load_librispeech(dataset(tmp_path, [entry(f"{CLIPS}/a.wav", "x", 1.0)]))


def test_a_missing_wav_names_where_it_was_looked_for(tmp_path: Path):
    with pytest.raises(DatasetError, match=r"entry 0: its audio dev-all-repack/gone.wav is missing \(looked for"):
        load_librispeech(dataset(tmp_path, [entry(f"{CLIPS}/gone.wav", "x", 1.0)]))


def test_a_file_that_is_not_a_wav_is_refused(tmp_path: Path):
    (tmp_path / CLIPS).mkdir()
    (tmp_path / CLIPS / "a.wav").write_bytes(b"fLaC not a wav")
    with pytest.raises(DatasetError, match="is not a readable WAV"):
        load_librispeech(dataset(tmp_path, [entry(f"{CLIPS}/a.wav", "x", 1.0)]))


@pytest.mark.parametrize(("manifest", "said"), [
    ({"transcript": "x"}, "holds a dict, not a list of clips"),
    (["x"], "entry 0 is a str, not an object"),
    ([{"transcript": "x", "files": []}], "entry 0 has no numeric original_duration"),
    ([{"transcript": "x", "files": [], "original_duration": 1.0}], "has 0 files of speed 1 with a fname, not one"),
])
def test_a_manifest_of_another_shape_is_refused(tmp_path: Path, manifest: object, said: str):
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match=said):
        load_librispeech(tmp_path)


def test_a_folder_without_the_manifest_says_how_to_get_it(tmp_path: Path):
    with pytest.raises(DatasetError, match=f"{MANIFEST} does not exist") as raised:
        load_librispeech(tmp_path)
    assert "get dataset whisper" in str(raised.value.hint)


# --- the tiny generators -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    return make_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"), seed=3)


def test_the_tiny_whisper_is_byte_identical_for_a_seed(tiny, tmp_path: Path):
    again = make_tiny_whisper(tmp_path / "again", seed=3)
    for path in sorted(tiny.path.iterdir()):
        assert (again.path / path.name).read_bytes() == path.read_bytes(), path.name


def test_the_tiny_whisper_loads_in_transformers_and_transcribes_a_tiny_clip_into_text(tiny, tmp_path: Path):
    torch = pytest.importorskip("torch")
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    model, info = WhisperForConditionalGeneration.from_pretrained(tiny.path, dtype=torch.float32,
                                                                  output_loading_info=True)
    assert not any(info.values()), info  # no missing, unexpected or mismatched tensors
    assert whisper_weight_shapes(tiny) == {k: tuple(v.shape) for k, v in model.state_dict().items()
                                           if k != "proj_out.weight"}  # tied to the token embeddings
    assert model.config.num_mel_bins == 128 and model.config.d_model // model.config.encoder_attention_heads == 64
    processor = WhisperProcessor.from_pretrained(tiny.path)
    clip = load_librispeech(make_tiny_librispeech(tmp_path, tiny.path, rows=1).path).audio(0)
    features = processor.feature_extractor(clip, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    prompt = processor.tokenizer("<|startoftranscript|><|en|><|transcribe|><|notimestamps|>",
                                 add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(features, decoder_input_ids=prompt, max_new_tokens=8, do_sample=False)
    new = out[0, prompt.shape[1]:].tolist()
    assert new and max(new) < tiny.endoftext_id  # text tokens only (Whisper counts the prompt in max_new_tokens)
    assert processor.tokenizer.decode(new, skip_special_tokens=True).strip()


def test_the_tiny_whispers_special_tokens_cannot_win_so_it_writes_text(tiny):
    from safetensors.numpy import load_file

    embeddings = load_file(str(tiny.path / "model.safetensors"))["model.decoder.embed_tokens.weight"]
    assert not embeddings[tiny.endoftext_id:].any() and embeddings[:tiny.endoftext_id].any(axis=1).all()


def test_the_tiny_tokenizer_gives_the_reference_prompt_its_special_ids(tiny):
    from transformers import WhisperProcessor

    processor = WhisperProcessor.from_pretrained(tiny.path)
    prompt = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
    assert processor.tokenizer(prompt, add_special_tokens=False).input_ids == [
        tiny.special_id(t) for t in ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")]
    assert len(processor.tokenizer) == tiny.vocab_size == tiny.endoftext_id + len(SPECIALS)
    words = "she said the colour was grey"
    assert processor.tokenizer.decode(processor.tokenizer(words, add_special_tokens=False).input_ids) == words
    assert processor.feature_extractor.feature_size == 128


def test_a_tiny_whisper_head_size_other_than_64_is_refused(tmp_path: Path):
    with pytest.raises(CmxError, match="head size other than 64"):
        make_tiny_whisper(tmp_path, hidden_size=96, heads=2)


def test_the_tiny_dataset_is_the_repacked_layout_and_reads_back(tiny, tmp_path: Path):
    made = make_tiny_librispeech(tmp_path / "a", tiny.path, rows=12, seed=1)
    again = make_tiny_librispeech(tmp_path / "b", tiny.path, rows=12, seed=1)
    assert (made.path / MANIFEST).read_bytes() == (again.path / MANIFEST).read_bytes()
    data = load_librispeech(made.path)
    assert len(data) == 12 and data.skipped == 0
    entries = json.loads((made.path / MANIFEST).read_text())
    assert set(entries[0]) == {"transcript", "files", "original_duration", "original_num_samples"}
    for i, clip in enumerate(data.clips):
        assert clip.wav.read_bytes() == (again.path / clip.wav.relative_to(made.path)).read_bytes()
        assert 0 < clip.duration_s < 2 and clip.num_samples == entries[i]["original_num_samples"]
        # LibriSpeech-like: lower-case words only, every character one the answer can carry
        assert data.reference(i) == reference_transcript(data.reference(i)) != ""
        assert np.abs(data.audio(i)).max() > 0.1


# --- what the engine gets, and what LoadGen gets back ---------------------------------------------------


def test_the_decoder_prompt_is_the_references_four_special_tokens(tiny):
    assert decoder_prompt_ids(tiny.path) == tuple(tiny.special_id(t) for t in DECODER_PROMPT)
    assert DECODER_PROMPT == ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")


def test_a_tokenizer_without_whispers_specials_is_refused(tmp_path: Path):
    from tokenizers import Tokenizer, models

    Tokenizer(models.BPE()).save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(DatasetError, match=r"has no <\|startoftranscript\|>, <\|en\|>.*it is not Whisper's"):
        decoder_prompt_ids(tmp_path)


def test_each_clip_goes_to_the_engine_as_its_audio_with_the_decoder_prompt(tiny, tmp_path: Path):
    data = load_librispeech(make_tiny_librispeech(tmp_path, tiny.path, rows=3).path)
    prompts = WhisperPrompts(data, decoder_prompt_ids(tiny.path))
    assert len(prompts) == 3 and prompts.prompt_ids(1) == list(decoder_prompt_ids(tiny.path))
    (audio,) = prompts.media(2)
    assert audio.sample_rate == SAMPLE_RATE and np.array_equal(audio.samples, data.audio(2))


def test_the_answer_is_the_decoded_text_as_the_reference_sut_labels_it(tiny):
    from tokenizers import Tokenizer

    answer = LabelAnswer(tiny.path)
    ids = Tokenizer.from_file(str(tiny.path / "tokenizer.json")).encode(" She said: Colour, 25%!").ids
    labels = answer(GenResult(0, [*ids, tiny.endoftext_id]))  # the special token is skipped, as vLLM's detokenizer
    assert labels.dtype == np.dtype("<i8") and labels.tolist() == response_labels(" She said: Colour, 25%!")
    assert labels_text(labels.tolist()) == "she said colour 25%"
    assert answer(GenResult(0, [tiny.endoftext_id])).tolist() == []
    # a transcription route's text, taken as it is, with the server's token count
    assert answer(GenResult(0, [], text=" She said: Colour, 25%!", count=9)).tolist() == labels.tolist()
