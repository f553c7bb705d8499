"""Whisper through cmx's harness on real parts: vLLM's CPU build runs the tiny random Whisper in the harness
process, real LoadGen runs Offline performance and accuracy on the tiny clips, and the scorer writes the
accuracy.txt the checker reads.

One harness process for the module (one engine; about a minute here), as the app runs a scenario's tests.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from cmx.mlperf.backends.base import GenResult
from cmx.mlperf.benchmarks.whisper.prompts import LabelAnswer
from cmx.mlperf.benchmarks.whisper.tiny import make_tiny_librispeech, make_tiny_whisper
from cmx.mlperf.benchmarks.whisper.transcript import LABELS, labels_from_bytes
from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log
from cmx.mlperf.loadgen.harness import evaluate_accuracy, run_tests
from cmx.mlperf.loadgen.harness_config import EngineSettings, HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.run_record import ACCURACY_LOG
from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf
from cmx.mlperf.rounds import load_round
from tests.conftest import needs_vllm

pytestmark = [needs_vllm, pytest.mark.e2e, pytest.mark.timeout(900)]

LOG = logging.getLogger("test-whisper-harness")
ROWS = 12
MAX_TOKENS = 24  # the reference's 200 would only make the random model's noise longer
CHECKER_ACCURACY = r"Word Error Rate\:.*, accuracy=([0-9\.]+)%"  # constants.py ACC_PATTERN["ACCURACY"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, tuple[HarnessResult, Path]], Path, Path]:
    """The tiny model and clips, and the Offline performance and accuracy tests in one harness process."""
    root = tmp_path_factory.mktemp("whisper-harness")
    model = make_tiny_whisper(root / "model").path
    dataset = make_tiny_librispeech(root / "librispeech", model, rows=ROWS).path
    conf = user_conf(load_round("v6.0"), "whisper", "Offline", target_qps=50,
                     short=ShortProfile(samples=ROWS, min_duration_ms=1000, min_query_count=ROWS)
                     ).write(root / "Offline.conf")
    configs = [HarnessConfig(model=model, dataset=dataset, scenario="Offline", mode=mode, user_conf=conf,
                             output=root / mode, round="v6.0", benchmark="whisper", device="cpu",
                             max_tokens=MAX_TOKENS, rows=ROWS, engine=EngineSettings(max_num_seqs=8))
               for mode in ("performance", "accuracy")]
    results = run_tests(configs, timeout=600, logger=LOG)
    return {c.mode: (r, c.output) for c, r in zip(configs, results, strict=True)}, model, dataset


Run = tuple[dict[str, tuple[HarnessResult, Path]], Path, Path]


def test_offline_performance_of_the_tiny_whisper_is_valid_with_tokens_per_second(run: Run):
    result, out = run[0]["performance"]
    assert result.ok and result.validity == "VALID", result.verdict()
    assert result.tokens_per_second and result.tokens_per_second > 0 and result.failed_samples == 0
    assert read_loadgen_run(out).errors == ()


def test_the_accuracy_log_holds_each_clips_labels_and_its_token_count(run: Run):
    results, model, _ = run
    result, out = results["accuracy"]
    assert result.ok, result.verdict()
    records = read_accuracy_log(out / ACCURACY_LOG)
    assert sorted(r.qsl_idx for r in records) == list(range(ROWS))
    for record in records:
        labels = labels_from_bytes(record.data)
        assert all(0 <= i < len(LABELS) for i in labels)
        assert record.token_count == MAX_TOKENS  # the random model never says <|endoftext|>
    assert any(labels_from_bytes(r.data) for r in records), "the tiny Whisper wrote no text at all"
    assert LabelAnswer(model)(GenResult(0, [])).tolist() == []


def test_the_accuracy_txt_is_the_evaluators_line_the_checker_reads(run: Run):
    results, model, dataset = run
    _, out = results["accuracy"]
    text = evaluate_accuracy(out, dataset, model, benchmark="whisper", rows=ROWS).read_text()
    first, second = text.splitlines()
    match = re.match(CHECKER_ACCURACY, first)
    assert match and float(match.group(1)) <= 100.0
    assert re.fullmatch(r"hash=[0-9a-f]{64}", second)
