"""wan-2.2-t2v-a14b: VBench's 248 prompts made into 5 s videos by Wan-AI/Wan2.2-T2V-A14B-Diffusers (a diffusers
WanPipeline run in process), scored by VBench (text_to_video/wan-2.2-t2v-a14b in mlcommons/inference). Offline and
SingleStream, the latter reported in seconds; TEST04.

The modules: dataset (the prompts file and the fixed latent), videos (VBench's file names, the sha256 answered to
LoadGen), model (the pipeline folder), accuracy (VBench run on the accuracy run's videos, in its own environment),
tiny (a random Wan 2.2 of the real architecture). `BENCHMARK`'s methods import them when called. The engine is the
diffusion one (cmx.mlperf.engines.diffusion), asked for by the model folder; `generation.video` is what it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.backends.diffusion import VideoSettings
from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.model import MODEL

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.samples import ResponseEncoder, VideoSource
    from cmx.mlperf.scoring.external import ExternalScorer

# inference_config.yaml (mlcommons/inference b66003e): its negative_prompt is a YAML block, whose line breaks
# run_mlperf.py keeps (it strips only the ends), so they are kept here
NEGATIVE_PROMPT = ("vivid colors, overexposed, static, blurry details, subtitles, style,\n"
                   "work of art, painting, picture, still, overall grayish, worst quality,\n"
                   "low quality, JPEG artifacts, ugly, deformed, extra fingers, poorly drawn hands,\n"
                   "poorly drawn face, deformed, disfigured, deformed limbs, fused fingers,\n"
                   "static image, cluttered background, three legs, many people in the background,\n"
                   "walking backwards")
# inference_config.yaml: 720x1280, 81 frames at 16 fps, 20 steps, seed 42 (a generator seeded afresh for each
# sample), guidance 4.0 (high-noise expert) and 3.0 (low-noise), boundary_ratio 0.875; run_mlperf.py's
# --fixed-latent default data/fixed_latent.pt, which cmx's dataset folder holds as fixed_latent.pt
REFERENCE_VIDEO = VideoSettings(height=720, width=1280, frames=81, fps=16, steps=20, seed=42, guidance_scale=4.0,
                                guidance_scale_2=3.0, boundary_ratio=0.875, negative_prompt=NEGATIVE_PROMPT,
                                latent=Path("fixed_latent.pt"))


@dataclass(frozen=True)
class Wan22T2V(BenchmarkDefaults):
    family: str = "wan-2.2-t2v-a14b"
    names: tuple[str, ...] = ("wan-2.2-t2v-a14b",)  # constants.py MODEL_CONFIG['v6.0'/'v6.1']['models']
    loadgen_model: str = "wan-2.2-t2v-a14b"  # loadgen/mlperf.conf: wan-2.2-t2v-a14b.*
    interactive: bool = False
    response_dtype: str = "uint8"  # the sha256 of the sample's mp4 (videos.digest_answer)
    # a video has no tokens: the token bounds (GenRequest's least, 2) bound nothing, and no engine or route sends them
    generation: Generation = Generation(max_tokens=2, video=REFERENCE_VIDEO)
    model: ModelSpec = MODEL

    @property
    def loadgen_models(self) -> Mapping[str, str]:
        # required-scenarios-datacenter (constants.py): Offline and SingleStream, one LoadGen model for both
        return {"Offline": self.loadgen_model, "SingleStream": self.loadgen_model}

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import load_prompts

        return load_prompts(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        """VBench's score of the videos the accuracy run logged, run by `scorer` (its environment and networks)."""
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.accuracy import score_log
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import VBenchPrompts

        return score_log(accuracy_log, dataset_as(VBenchPrompts, dataset), jobs=jobs, scorer=scorer).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import make_tiny_prompts

        return make_tiny_prompts(dest, tokenizer_dir, rows, seed)

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import FACTS

        return FACTS

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        """The folder of the prompts file, with the fixed latent fetched beside it (the real set)."""
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import finish

        return finish(step, path, is_tiny=is_tiny)

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> VideoSource:
        """The prompts themselves: the pipeline tokenizes each with its own text encoder's tokenizer."""
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import VBenchPrompts

        return dataset_as(VBenchPrompts, dataset)

    def accuracy_files(self, accuracy_dir: Path, dataset: Dataset) -> dict[str, Path]:
        """Every sample's video as the checker names it in accuracy/ (videos/<sample>.mp4), from the file the
        accuracy run wrote under VBench's name; the round's accuracy_files pick the ones packaged."""
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import VBenchPrompts
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import packaged_videos

        return packaged_videos(accuracy_dir, dataset_as(VBenchPrompts, dataset).prompts)

    def response_encoder(self, model_dir: Path) -> ResponseEncoder | None:
        from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import digest_answer

        return digest_answer


BENCHMARK: Benchmark = Wan22T2V()
