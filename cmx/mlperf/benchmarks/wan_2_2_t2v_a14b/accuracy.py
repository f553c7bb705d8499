"""wan-2.2-t2v-a14b's accuracy: the videos an accuracy run's log lists, each checked against the sha256 LoadGen
logged for it, scored by VBench in its own environment (cmx.mlperf.scoring.vbench_run) into `vbench_score`.

The reference has no glue from LoadGen's log to VBench: it scores whatever folder of mp4s it is given
(run_evaluation.py --videos-path). cmx scores exactly the samples the log lists, and only when each one's video is
the file LoadGen was answered with: a sample's logged data is the 32-byte sha256 of its mp4
(videos.digest_answer), so a video changed, swapped or missing after the run is found here, before VBench reads it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cmx.mlperf.backends.base import VIDEO_FOLDER
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import VBenchPrompts
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import vbench_name
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, read_accuracy_log, unique_samples
from cmx.mlperf.scoring.external import ExternalScorer
from cmx.mlperf.scoring.vbench import VBenchResult
from cmx.mlperf.scoring.vbench_run import VBenchJob, run_vbench
from cmx.tools.fs import sha256_file

RESULTS = "vbench"  # beside the log, as the videos are: VBench's output folder, its log and the prompt suite it read
DIGEST_BYTES = 32

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())


def logged_prompts(accuracy_log: Path, prompts: VBenchPrompts) -> tuple[str, ...]:
    """The prompts of the samples the log lists, in its order, each sample's video checked against its logged
    sha256 (AccuracyError naming the first that differs or is missing)."""
    records, _ = unique_samples(read_accuracy_log(accuracy_log, item_size=1))
    videos = Path(accuracy_log).parent / VIDEO_FOLDER
    out: list[str] = []
    for record in records:
        if not 0 <= record.qsl_idx < len(prompts):
            raise AccuracyError(f"{accuracy_log}: sample {record.qsl_idx} is not one of the {len(prompts)} prompts "
                                f"of {prompts.path}", hint="score the log with the dataset its run read")
        if len(record.data) != DIGEST_BYTES:
            raise AccuracyError(f"{accuracy_log}: sample {record.qsl_idx} logged {len(record.data)} bytes, not the "
                                f"{DIGEST_BYTES}-byte sha256 of its video", hint="it is not a wan-2.2-t2v-a14b log")
        prompt = prompts.reference(record.qsl_idx)
        video = videos / vbench_name(prompt)
        if not video.is_file():
            raise AccuracyError(f"sample {record.qsl_idx}'s video {video} is missing",
                                hint="score the folder the accuracy run wrote, with its videos/ beside the log")
        digest = sha256_file(video)
        if digest != record.data.hex():
            raise AccuracyError(f"sample {record.qsl_idx}'s video {video} has sha256 {digest}, not the "
                                f"{record.data.hex()} LoadGen logged for it",
                                hint="the video changed after the run; run the accuracy test again")
        out.append(prompt)
    return tuple(out)


def score_log(accuracy_log: Path, prompts: VBenchPrompts, *, jobs: int = 1,
              scorer: ExternalScorer | None = None) -> VBenchResult:
    """`vbench_score` of an accuracy run: its logged videos checked, then scored by VBench (in `<log
    folder>/vbench/`). `jobs` is unused: VBench's parallelism is the scorer's GPUs."""
    logged = logged_prompts(accuracy_log, prompts)
    if scorer is None:
        raise AccuracyError("wan-2.2-t2v-a14b's accuracy is VBench's score, which runs in an environment of its own, "
                            "and none was given",
                            hint="run the app (its deps scorer_env: get vbench-env, and scorer_models: get ml-model "
                                 "vbench-networks), or give the harness config a `scorer` with VBench's python and "
                                 "the networks' folder")
    folder = Path(accuracy_log).parent
    return run_vbench(scorer, VBenchJob(folder / VIDEO_FOLDER, logged, folder / RESULTS), log=_log)

