"""Wan 2.2's dataset: VBench's prompts, one per line, and the fixed initial latent every video starts from.

The reference (mlcommons/inference at b66003e, text_to_video/wan-2.2-t2v-a14b) reads data/vbench_prompts.txt as
run_mlperf.py's `load_prompts` does (each line stripped, blank lines dropped: 248 prompts; sample i is the i-th)
and data/fixed_latent.pt, the one latent tensor every sample's pipeline call starts from (its `--fixed-latent`).
cmx's dataset is a folder holding both under those names. The prompts are VBench's own standard prompts: VBench
finds a video's prompt from its file name (`<prompt>-0.mp4`), so a prompt must be usable as a file name (no `/`,
at most 250 bytes) and no two may be equal (their videos would share a file); cmx refuses a file where one is not.

A sample's `reference` is its prompt: VBench scores each video on its own (consistency, motion, style, scene
against the prompt's words), not against a reference video.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.backends.base import VideoPrompt
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.samples import check_limit
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import LATENT_FILE
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import vbench_name

if TYPE_CHECKING:
    from cmx.execute.context import StepContext

PROMPTS_FILE = "vbench_prompts.txt"  # the reference's data/ names
SAMPLES = 248  # constants.py MODEL_CONFIG['v6.1']['dataset-size']['wan-2.2-t2v-a14b']; the file's 248 lines
MAX_NAME_BYTES = 250  # a file name's limit (255 on ext4 and xfs) less "-0.mp4"
FACTS = DatasetFacts(SAMPLES, what="VBench-prompt", default_name=PROMPTS_FILE, suffix=".txt")
_HINT = f"it is not the reference's data/{PROMPTS_FILE} (one VBench prompt per line)"

# words of the tiny set's generated prompts: VBench-like subjects, actions and styles
_SUBJECTS = ("a cat", "a dog", "a person", "a car", "a boat", "the city", "a river", "the sky")
_ACTIONS = ("walking", "running", "sailing", "turning a corner", "drinking water", "in the rain", "at sunset")
_STYLES = ("", ", watercolor painting", ", pixel art", ", black and white", ", in cyberpunk style")


@dataclass(frozen=True)
class VBenchPrompts:
    """The prompts, in the file's order (sample i is `prompts[i]`), and the dataset folder (`path`), which holds
    the fixed latent. It is its own VideoSource: `video(i)` is sample i's prompt with VBench's file name."""

    prompts: tuple[str, ...]
    path: Path

    def __len__(self) -> int:
        return len(self.prompts)

    def reference(self, i: int) -> str:
        return self.prompts[i]

    def limit(self, n: int) -> VBenchPrompts:
        check_limit(n, len(self), self.path / PROMPTS_FILE)
        return VBenchPrompts(self.prompts[:n], self.path)

    def video(self, i: int) -> VideoPrompt:
        return VideoPrompt(self.prompts[i], vbench_name(self.prompts[i]))

    def index_of(self, prompt: str) -> int:
        """The sample whose prompt is `prompt` (DatasetError when none is)."""
        try:
            return self.prompts.index(prompt)
        except ValueError:
            raise DatasetError(f"no sample of {self.path / PROMPTS_FILE} has the prompt {prompt!r}") from None

    @property
    def latent(self) -> Path:
        return self.path / LATENT_FILE


def load_prompts(path: Path) -> VBenchPrompts:
    """The dataset at `path`: its folder, or the prompts file in it. DatasetError naming what is wrong."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    file = folder / PROMPTS_FILE if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{file} is not there", hint=_HINT) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {file}: {exc}", hint=_HINT) from None
    prompts = tuple(line.strip() for line in text.splitlines() if line.strip())  # run_mlperf.py's load_prompts
    if not prompts:
        raise DatasetError(f"{file} holds no prompt", hint=_HINT)
    seen: dict[str, int] = {}
    for i, prompt in enumerate(prompts):
        where = f"{file}:{i + 1}" if len(prompts) == len(text.splitlines()) else f"{file}, prompt {i}"
        if "/" in prompt or "\0" in prompt or len(vbench_name(prompt).encode("utf-8")) > MAX_NAME_BYTES + 6:
            raise DatasetError(f"{where}: the prompt cannot be a file name (VBench reads each video's prompt from "
                               "its file name): it holds a / or is over 250 bytes", hint="shorten or reword it")
        if prompt in seen:
            raise DatasetError(f"{where}: the prompt repeats prompt {seen[prompt]}, and both videos would be one file",
                               hint="keep each prompt once")
        seen[prompt] = i
    return VBenchPrompts(prompts, folder)


def make_tiny_prompts(dest: Path, model_dir: Path, rows: int, seed: int = 0) -> Path:
    """Write `rows` generated prompts to `dest` (the prompts file) and, beside it, the tiny model's fixed latent
    (tiny.make_tiny_wan writes it in the pipeline folder `model_dir`, shaped for the tiny run's frames)."""
    if rows < 1:
        raise DatasetError(f"a prompt set needs at least 1 prompt, not {rows}")
    latent = Path(model_dir) / LATENT_FILE
    if not latent.is_file():
        raise DatasetError(f"{model_dir} has no {LATENT_FILE}: it is not the tiny Wan 2.2 pipeline",
                           hint="make the dataset from `get ml-model wan-2.2-t2v-a14b _tiny`")
    draw = random.Random(seed)
    prompts: list[str] = []
    while len(prompts) < rows:
        prompt = f"{draw.choice(_SUBJECTS)} {draw.choice(_ACTIONS)}{draw.choice(_STYLES)} {len(prompts)}"
        prompts.append(prompt)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(f"{p}\n" for p in prompts), encoding="utf-8")
    shutil.copyfile(latent, dest.parent / LATENT_FILE)
    return dest


def finish(step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
    """The dataset folder: for the real set, the prompts file the step downloaded and the fixed latent fetched here
    beside it (recipe inputs latent_url and latent_sha256); the tiny set has its latent already."""
    folder = Path(path).parent
    if not is_tiny:
        from cmx.tools.download import download

        url, expected = step.inputs["latent_url"], step.inputs.get("latent_sha256")
        bar = step.progress(None, f"download {LATENT_FILE}")
        got = download(url, step.scratch / LATENT_FILE, sha256=expected or None, keep_partial=True,
                       on_progress=bar.update, token=step.inputs["token"], retries=step.inputs["retries"],
                       log=step.log).moved_to(folder / LATENT_FILE)
        if got.verified:
            step.log.info("%s: sha256 %s verified", LATENT_FILE, got.sha256)
        else:
            step.log.warning("%s: sha256 %s not verified (MLCommons publishes none); pin it with --input "
                             "latent_sha256=%s", LATENT_FILE, got.sha256, got.sha256)
    if not (folder / LATENT_FILE).is_file():
        raise DatasetError(f"{folder} has no {LATENT_FILE}", hint="the dataset step fetches it beside the prompts")
    return DatasetMade(folder)
