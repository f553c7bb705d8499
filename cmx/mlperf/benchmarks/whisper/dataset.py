"""Whisper's dataset: LibriSpeech dev-clean and dev-other, repacked into clips of at most 30 s (1,633 WAVs and
the manifest dev-all-repack.json), read as speech2text's QSL and evaluator read it.

The manifest is a JSON list with one entry per clip (speech2text/utils/repackage_librispeech.py):
`transcript` (lower-case text), `files` (one file per speed: `fname`, `sample_rate`, `channels`,
`num_samples`, `duration`, `speed`, ...) and `original_duration`. What cmx matches (manifest.py):
- an entry whose `original_duration` is over 30 s is skipped, as is one whose transcript is not text,
  and sample i is the i-th entry kept: LoadGen's qsl_idx counts the kept ones;
- a sample's audio is its file of speed 1, at `fname` joined to the dataset folder (an absolute
  `fname`, as the repack script writes it, is looked up under the dataset folder by its last two
  parts, then by its name, when it is not there as written);
- the audio reaches the model as float32 samples at 16 kHz, 16-bit values divided by 32,768 (what
  librosa.load gives for such a file).

Where the reference would go on silently, cmx refuses, naming the clip and what to do: a WAV that
is not 16-bit mono at 16 kHz (librosa would resample and mix it down; make it so instead), a WAV
longer than its manifest entry says or over 30 s (Whisper's feature extractor cuts everything after
30 s), a file that is missing or is not a WAV. A clip whose transcript is empty is kept (the reference
keeps it: every word said for it counts as an insertion).
"""

from __future__ import annotations

import json
import logging
import math
import wave
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.samples import check_limit

if TYPE_CHECKING:  # numpy is imported when audio is read, not when cmx starts
    import numpy as np

log = logging.getLogger(__name__)

SAMPLES = 1633  # mlperf.conf: whisper.*.performance_sample_count_override, whisper.Offline.min_query_count
MANIFEST = "dev-all-repack.json"
CLIPS = "dev-all-repack"  # the folder of WAVs beside the manifest
SAMPLE_RATE = 16000
MAX_DURATION_S = 30.0  # speech2text's MAX_DURATION: longer entries are skipped
SAMPLE_WIDTH = 2  # bytes: 16-bit PCM, as the repack script writes
FACTS = DatasetFacts(SAMPLES, what="LibriSpeech-format", default_name="librispeech-dev-all-repack",
                     whole_listing=True)
_HINT = ("it is not the repacked LibriSpeech dev set of whisper (dev-all-repack.json and its WAVs, as "
         "speech2text/utils/repackage_librispeech.py writes them)")


@dataclass(frozen=True)
class Clip:
    """One sample: its WAV, its length in samples, and the reference transcript."""

    wav: Path
    num_samples: int
    transcript: str

    @property
    def duration_s(self) -> float:
        return self.num_samples / SAMPLE_RATE


@dataclass(frozen=True)
class LibriSpeech:
    """The kept clips of a manifest, in its order; `path` is the dataset folder (the manifest's)."""

    clips: tuple[Clip, ...]
    path: Path
    skipped: int = 0  # entries over 30 s or without a text transcript, as the reference skips them

    def __len__(self) -> int:
        return len(self.clips)

    def reference(self, i: int) -> str:
        """The transcript of clip i, which the evaluator compares the model's with."""
        return self.clips[i].transcript

    def audio(self, i: int) -> np.ndarray:
        """Clip i's samples as float32 in [-1, 1), at SAMPLE_RATE (checked when the manifest was read)."""
        import numpy as np

        clip = self.clips[i]
        try:
            with wave.open(str(clip.wav), "rb") as wav:
                frames = wav.readframes(wav.getnframes())
        except (OSError, EOFError, wave.Error) as err:
            raise DatasetError(f"{clip.wav}: cannot read its audio: {err}", hint=_HINT) from None
        audio: np.ndarray = np.frombuffer(frames, dtype="<i2").astype(np.float32) / np.float32(32768.0)
        return audio

    @property
    def durations_s(self) -> tuple[float, ...]:
        return tuple(c.duration_s for c in self.clips)

    def limit(self, n: int) -> LibriSpeech:
        """The first n clips (for short test runs; a compliant run uses all of them)."""
        check_limit(n, len(self), self.path)
        return replace(self, clips=self.clips[:n])


def load_librispeech(path: Path | str) -> LibriSpeech:
    """The clips of the dataset folder `path` (or of its manifest file), every WAV's header checked."""
    path = Path(path)
    manifest = path / MANIFEST if path.is_dir() else path
    folder = manifest.parent
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{manifest} does not exist", hint=f"point at the folder holding {MANIFEST} and {CLIPS}/ "
                                                              "(cmx run \"get dataset whisper\" makes it)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DatasetError(f"{manifest}: cannot read it as JSON: {err}", hint=_HINT) from None
    if not isinstance(entries, list):
        raise DatasetError(f"{manifest} holds a {type(entries).__name__}, not a list of clips", hint=_HINT)
    clips: list[Clip] = []
    skipped = 0
    for n, entry in enumerate(entries):
        clip = _clip(entry, n, manifest, folder)
        if clip is None:
            skipped += 1
        else:
            clips.append(clip)
    if not clips:
        raise DatasetError(f"{manifest} has no clip of 30 s or less with a transcript", hint=_HINT)
    if skipped:
        log.warning("%s: skipped %d entries over %.0f s or without a text transcript, as the reference does",
                    manifest, skipped, MAX_DURATION_S)
    return LibriSpeech(tuple(clips), folder, skipped)


def manifest_folder(path: Path) -> Path:
    """The folder under `path` (a download of MLCommons' listing) that holds the manifest: `path` itself, or the one
    folder below it that does."""
    if (path / MANIFEST).is_file():
        return path
    found = sorted(p.parent for p in path.rglob(MANIFEST))
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(path)) for p in found) or "none"
        raise DatasetError(f"{path} holds {len(found)} {MANIFEST} ({listed}), not one", hint=_HINT)
    return found[0]


def _clip(entry: object, n: int, manifest: Path, folder: Path) -> Clip | None:
    where = f"{manifest}: entry {n}"
    if not isinstance(entry, dict):
        raise DatasetError(f"{where} is a {type(entry).__name__}, not an object", hint=_HINT)
    duration = entry.get("original_duration")
    if not isinstance(duration, (int, float)) or isinstance(duration, bool) or not math.isfinite(duration):
        raise DatasetError(f"{where} has no numeric original_duration", hint=_HINT)
    transcript = entry.get("transcript")
    if duration > MAX_DURATION_S or not isinstance(transcript, str):
        return None
    files = entry.get("files")
    at_speed_1 = [f for f in files if isinstance(f, dict) and f.get("speed") == 1] if isinstance(files, list) else []
    if len(at_speed_1) != 1 or not isinstance(at_speed_1[0].get("fname"), str):
        raise DatasetError(f"{where} has {len(at_speed_1)} files of speed 1 with a fname, not one", hint=_HINT)
    wav = _find(at_speed_1[0]["fname"], folder, where)
    num_samples = _check_wav(wav, where)
    if num_samples > round(duration * SAMPLE_RATE) + 1:
        raise DatasetError(f"{where}: {wav.name} holds {num_samples / SAMPLE_RATE:.2f} s of audio, more than the "
                           f"{duration:.2f} s its entry says",
                           hint="the WAV and the manifest do not belong together: get the dataset again")
    return Clip(wav, num_samples, transcript)


def _find(fname: str, folder: Path, where: str) -> Path:
    """The file `fname` names: joined to the dataset folder (an absolute one as written, else by its last parts)."""
    given = folder / fname  # an absolute fname replaces the folder, as os.path.join does in manifest.py
    candidates = [given]
    if Path(fname).is_absolute():
        candidates += [folder / Path(*Path(fname).parts[-2:]), folder / Path(fname).name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise DatasetError(f"{where}: its audio {fname} is missing (looked for {', '.join(map(str, candidates))})",
                       hint=f"the WAVs belong in {folder / CLIPS}, beside the manifest; get the dataset again")


def _check_wav(wav: Path, where: str) -> int:
    """The number of samples of a 16-bit mono WAV at 16 kHz; anything else is refused, saying what it is."""
    try:
        with wave.open(str(wav), "rb") as audio:
            channels, width, rate, frames = (audio.getnchannels(), audio.getsampwidth(), audio.getframerate(),
                                             audio.getnframes())
    except (OSError, EOFError, wave.Error) as err:
        raise DatasetError(f"{where}: {wav} is not a readable WAV: {err}", hint=_HINT) from None
    if (channels, width, rate) != (1, SAMPLE_WIDTH, SAMPLE_RATE):
        raise DatasetError(
            f"{where}: {wav.name} is {channels}-channel, {8 * width}-bit at {rate} Hz, not mono 16-bit at "
            f"{SAMPLE_RATE} Hz", hint=f"convert it (sox {wav.name} -r {SAMPLE_RATE} -c 1 -b 16 out.wav); the "
                                      "reference resamples such a file as it reads it, cmx does not")
    if frames > MAX_DURATION_S * SAMPLE_RATE:
        raise DatasetError(f"{where}: {wav.name} is {frames / SAMPLE_RATE:.2f} s long, over Whisper's "
                           f"{MAX_DURATION_S:.0f} s window", hint="repack it into clips of 30 s or less")
    return frames


__all__ = ["FACTS", "MANIFEST", "SAMPLES", "SAMPLE_RATE", "Clip", "LibriSpeech", "load_librispeech", "manifest_folder"]
