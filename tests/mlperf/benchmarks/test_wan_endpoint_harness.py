"""wan-2.2-t2v-a14b's _endpoint through cmx's harness on real parts: real LoadGen runs an Offline accuracy test of the
tiny Wan 2.2's prompts twice, each in a harness process of its own, once with the pipeline in the harness process and
once against the stand-in video server (tests/mlperf/video_server.py, a process of its own, on vllm-omni's route), and
the two accuracy logs and videos folders are the same bytes.

The stand-in loads the dataset's fixed latent (--latent): no route carries it, so a real server would have to be
configured with the same file for a served run to be the in-process one.
"""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log
from cmx.mlperf.loadgen.harness import run_test
from cmx.mlperf.loadgen.harness_config import EndpointSettings, HarnessConfig, VideoShape
from cmx.mlperf.loadgen.run_record import ACCURACY_LOG
from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf
from cmx.mlperf.rounds import load_round
from tests.conftest import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    importlib.util.find_spec("diffusers") is None or importlib.util.find_spec("imageio_ffmpeg") is None,
    reason="the video extra (diffusers, imageio-ffmpeg) is needed")]

LOG = logging.getLogger("test-wan-endpoint-harness")
BENCHMARK = "wan-2.2-t2v-a14b"
ROWS = 3


def test_an_accuracy_run_against_the_stand_in_server_logs_and_writes_what_in_process_does(tmp_path: Path) -> None:
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import make_tiny_prompts
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import LATENT_FILE, make_tiny_wan

    model = make_tiny_wan(tmp_path / "model", seed=0).path
    prompts = make_tiny_prompts(tmp_path / "data" / "vbench_prompts.txt", model, rows=ROWS)
    conf = user_conf(load_round("v6.1"), BENCHMARK, "Offline", target_qps=5.0,
                     short=ShortProfile(samples=ROWS, min_duration_ms=100, min_query_count=ROWS)
                     ).write(tmp_path / "Offline.conf")

    def config(name: str, endpoint: EndpointSettings | None = None) -> HarnessConfig:
        return HarnessConfig(model=model, dataset=prompts.parent, scenario="Offline", mode="accuracy", user_conf=conf,
                             output=tmp_path / name, round="v6.1", benchmark=BENCHMARK, rows=ROWS,
                             video=VideoShape(width=32, height=32, frames=5, steps=2), endpoint=endpoint)

    server = subprocess.Popen([sys.executable, "-m", "tests.mlperf.video_server", "--model", str(model),
                               "--latent", str(prompts.parent / LATENT_FILE)], stdout=subprocess.PIPE, text=True,
                              cwd=REPO)
    try:  # the server loads while the in-process test runs
        local = run_test(config("in-process"), timeout=120, logger=LOG)
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[-1])
        served = run_test(config("served", EndpointSettings(url=f"http://127.0.0.1:{port}/v1")), timeout=120,
                          logger=LOG)
    finally:
        server.kill()
        server.wait()
    assert local.ok and served.ok, (local.verdict(), served.verdict())
    logged = {name: {r.qsl_idx: r.data for r in read_accuracy_log(tmp_path / name / ACCURACY_LOG)}
              for name in ("in-process", "served")}
    assert sorted(logged["served"]) == list(range(ROWS)) and logged["served"] == logged["in-process"]
    videos = {name: {p.name: p.read_bytes() for p in (tmp_path / name / "videos").iterdir()}
              for name in ("in-process", "served")}
    assert len(videos["served"]) == ROWS and videos["served"] == videos["in-process"]
    assert len(set(logged["served"].values())) == ROWS  # three prompts, three videos: the comparison can fail
