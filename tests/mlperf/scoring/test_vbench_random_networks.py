"""VBench 0.1.5 itself, in the environment get-vbench-env builds on a CPU (`_host-torch`), on the random networks of
get-vbench-networks `_tiny`, scoring tiny Wan videos on the reference's six dimensions through cmx's own run path
(cmx.mlperf.scoring.vbench_run): the whole scorer, real code end to end, its score meaningless and said so.

The environment and the networks are built once per machine through `cmx run`, in a cmx home shared by the test
processes (a temporary folder, as conftest's loadgen_env keeps LoadGen): cold, ~50 s for the environment (PyPI's
wheels cached by pip; more to download them the first time) and ~25 s for the networks (2.8 GB); cached, ~2 s.
Scoring two 64x64 videos: ~60-100 s on 2 shared cores, nearly all of it scene's Tag2Text (Swin-B at 384 over 16
frames, then captions that the random decoder ends at once: recipes/get-vbench-networks/tiny_networks.py).
64x64, not the tiny app's 32x32: VBench's RAFT (dynamic_degree) cannot score videos under 64 pixels.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from cmx.mlperf.scoring.external import ExternalScorer
from cmx.mlperf.scoring.vbench import REFERENCE_DIMENSIONS
from cmx.mlperf.scoring.vbench_run import VBenchJob, run_vbench
from tests.conftest import CMX, REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("diffusers") is None
                       or importlib.util.find_spec("imageio_ffmpeg") is None,
                       reason="the video extra (diffusers, imageio-ffmpeg) makes the videos"),
    # get-vbench-env _host-torch installs cpu-host-torch-cp311.txt: wheels for CPython 3.11
    pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="VBench's CPU environment is pinned for CPython 3.11"),
]

HOME = Path(tempfile.gettempdir()) / "cmx-tests-vbench-home"
CONTEXT = ("-c", "device=cpu", "-c", "vbench_torch=host")  # what the tiny app's context picks on a CPU
# made up, so outside VBench's suite: vbench_run gives such a prompt (random networks only) all six dimensions
PROMPTS = ("a tiny random test video of squares", "another tiny random test video of squares")


def cmx_json(query: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMX_")}
    env.update(CMX_HOME=str(HOME), PYTHONPATH=str(REPO))
    proc = subprocess.run([*CMX, "run", query, *CONTEXT, "--json"], env=env, cwd=HOME, capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outputs: dict[str, Any] = json.loads(proc.stdout)["outputs"]
    return outputs


@pytest.fixture(scope="module")
def scorer() -> ExternalScorer:
    HOME.mkdir(exist_ok=True)
    with FileLock(str(HOME) + ".lock"):  # one build for all the test processes
        (HOME / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                            encoding="utf-8")
        env = cmx_json("get vbench-env")
        networks = cmx_json("get ml-model vbench-networks _tiny")
    assert networks["is_random"] is True
    return ExternalScorer(Path(env["python"]), Path(networks["path"]),
                          pythonpath=tuple(Path(p) for p in env["pythonpath"]))


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cmx.mlperf.backends.diffusion import DiffusionBackend, DiffusionBackendConfig, VideoSettings
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import make_tiny_wan
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import video_request

    root = tmp_path_factory.mktemp("wan")
    tiny = make_tiny_wan(root / "tiny", seed=0, height=64, width=64, frames=5, corpus=PROMPTS)
    settings = VideoSettings(height=64, width=64, frames=5, fps=16, steps=2, seed=42, guidance_scale=4.0,
                             guidance_scale_2=3.0, boundary_ratio=0.875, negative_prompt="blurry", latent=tiny.latent)
    config = DiffusionBackendConfig(model=tiny.path, settings=settings, videos=root / "videos", warmup=False)
    with DiffusionBackend(config, logging.getLogger("wan")) as backend:
        made = list(backend.generate([video_request(i, i, p) for i, p in enumerate(PROMPTS)]))
    assert len(made) == len(PROMPTS)
    return root / "videos"


def test_vbench_scores_tiny_videos_on_the_six_dimensions_with_random_networks_and_says_so(
        scorer: ExternalScorer, videos: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        result = run_vbench(scorer, VBenchJob(videos, PROMPTS, tmp_path / "vbench"))
    scores = result.as_dict()
    assert set(REFERENCE_DIMENSIONS) <= set(scores) and len(REFERENCE_DIMENSIONS) == 6
    assert all(math.isfinite(float(scores[d])) for d in REFERENCE_DIMENSIONS)
    assert math.isfinite(float(scores["vbench_score"]))
    assert result.random_networks is True
    assert any("RANDOM" in r.getMessage() and "meaningless" in r.getMessage() for r in caplog.records)
    # VBench's own results file lists both videos for every dimension: each was read, none skipped
    results = json.loads(next((tmp_path / "vbench").glob("*_eval_results.json")).read_text(encoding="utf-8"))
    for dimension in REFERENCE_DIMENSIONS:
        scored = {Path(v["video_path"]).name for v in results[dimension][1]}
        assert scored == {f"{p}-0.mp4" for p in PROMPTS}, dimension
