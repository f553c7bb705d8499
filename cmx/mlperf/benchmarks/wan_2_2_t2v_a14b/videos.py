"""How wan-2.2-t2v-a14b names its videos and answers LoadGen: VBench's file names, the sample's digest.

The reference's run_inference.py (mlcommons/inference at b66003e, text_to_video/wan-2.2-t2v-a14b) saves each
video as `<prompt>-<iteration>.mp4` ("VBench format": VBench's standard prompts are read back from the file
names), iteration 0 for the one video a prompt gets; data/samples_filename_ids.txt pairs such names with the
sample ids the submission checker wants under accuracy/videos/ (`130.mp4`: the prompt on line 131 of
data/vbench_prompts.txt). LoadGen is answered with the sha256 of the sample's mp4 (32 bytes; why that is enough
for TEST04 and for re-scoring: cmx.mlperf.backends.diffusion).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.backends.base import VIDEO_FOLDER, GenRequest, GenResult, VideoPrompt

if TYPE_CHECKING:
    import numpy as np


def vbench_name(prompt: str, iteration: int = 0) -> str:
    """VBench's file name for the `iteration`th video of `prompt`."""
    return f"{prompt}-{iteration}.mp4"


def sample_name(index: int) -> str:
    """The name the submission checker wants for sample `index`'s video under accuracy/videos/."""
    return f"{index}.mp4"


def packaged_videos(accuracy_dir: Path, prompts: Sequence[str]) -> dict[str, Path]:
    """Each sample's path in the packaged accuracy/ folder (videos/<i>.mp4) and the file the accuracy run in
    `accuracy_dir` wrote for it (videos/<prompt>-0.mp4: backends.base.VIDEO_FOLDER)."""
    return {f"{VIDEO_FOLDER}/{sample_name(i)}": Path(accuracy_dir) / VIDEO_FOLDER / vbench_name(p)
            for i, p in enumerate(prompts)}


def video_request(request_id: int, index: int, prompt: str) -> GenRequest:
    """The request for sample `index`, whose prompt is `prompt`: its video written under VBench's name."""
    return GenRequest(id=request_id, prompt_ids=(), video=VideoPrompt(prompt, vbench_name(prompt)), sample=index)


def digest_answer(result: GenResult) -> np.ndarray:
    """The ResponseEncoder of this benchmark: the sha256 of the sample's mp4, as 32 uint8 bytes (LoadGen's accuracy
    log writes them as the hex `sha256sum` prints); a result without a video fails its sample alone (SutError)."""
    import numpy as np

    from cmx.mlperf.loadgen.sut import SutError

    if result.video is None:
        raise SutError("answered without a video, and this benchmark answers LoadGen with its mp4's sha256",
                       hint="run it on the diffusion engine (its model: a diffusers pipeline folder)")
    return np.frombuffer(result.video.digest, dtype=np.uint8)
