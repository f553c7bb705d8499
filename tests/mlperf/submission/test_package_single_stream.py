"""The packager and `cmx report` on a cmx results folder with a SingleStream scenario: the tree the packager writes
holds the result as `cmx check` reads it (the early-stopping latency, in the round's unit), and its README and the
report say the result is a latency.

The results folder is what the app leaves (logs, user.conf, cmx_run.json), its LoadGen logs written by real LoadGen
runs in this process (tests/mlperf/single_stream.py) under a copy of cmx's rounds in which Qwen3-VL has a
SingleStream scenario in s; the run is short, so it goes to open, and breaks only what a short run breaks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cmx.mlperf import rounds
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.loadgen.userconf import user_conf
from cmx.mlperf.report.collect import collect
from cmx.mlperf.report.page import write_report
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from cmx.mlperf.submission.package import package
from cmx.mlperf.submission.sources import PackageRequest
from cmx.tools.fs import sha256_file
from tests.mlperf import single_stream
from tests.mlperf.single_stream import QWEN, OneAtATime, run_single_stream
from tests.submission_trees import ORIGIN, RAN, RUN_RECORD, SYSTEM, USER_SYSTEM, builtin_source, write_lock

SHORT = {"loadgen.min-duration", "loadgen.sample-count", "loadgen.equal-issue", "accuracy.coverage"}


@pytest.fixture
def use_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return single_stream.use_rounds(tmp_path, monkeypatch)


def single_stream_results(root: Path) -> float:
    """`<root>/box/qwen3-vl-235b-a22b/SingleStream/` as a short app run leaves it; its result in s."""
    record = root.parent / "runs" / RUN_RECORD
    write_lock(record, [(builtin_source(), RAN)])
    folder = root / SYSTEM / QWEN / "SingleStream"
    _, run = run_single_stream(folder / "performance" / "run_1", OneAtATime(), token_latencies=False)
    run_single_stream(folder / "accuracy", OneAtATime(), mode="accuracy", token_latencies=False)
    log = folder / "accuracy" / "mlperf_log_accuracy.json"
    (folder / "accuracy" / "accuracy.txt").write_text(
        benchmark_for(QWEN).format_accuracy_txt({"f1": 0.5}, sha256_file(log)), encoding="utf-8")
    user_conf(rounds.load_round("v6.1"), QWEN, "SingleStream").write(folder / "user.conf")
    ns = run.results.early_stopping_latency_ns
    assert ns
    runs = [{"scenario": "SingleStream", "mode": mode, "folder": str(folder / sub), "problems": [],
             "validity": "VALID" if mode == "performance" else None, "tokens_per_second": None, "ttft_p99_ms": None,
             "tpot_p99_ms": None, "rouge": {"f1": 0.5} if mode == "accuracy" else None,
             "latency": ns / 1e9 if mode == "performance" else None,
             "latency_unit": "s" if mode == "performance" else None}
            for mode, sub in (("performance", "performance/run_1"), ("accuracy", "accuracy"))]
    (folder / "cmx_run.json").write_text(json.dumps({
        "round": "v6.1", "benchmark": QWEN, "scenario": "SingleStream", "system": SYSTEM, "device": "cpu",
        "short": True, "tiny": False, "rows": None, "max_tokens": 16, "compliant": False, "noncompliance": ["short"],
        "ok": True, "runs": runs, "engine": {"precision": "bf16"},
        "origin": {**ORIGIN, "run_record": str(record / "run.json")}}), encoding="utf-8")
    return ns / 1e9


def test_a_single_stream_result_is_packaged_with_its_latency_in_the_rounds_unit(tmp_path: Path, use_rounds: Path):
    seconds = single_stream_results(tmp_path / "results")
    system = tmp_path / "system.yaml"
    system.write_text(yaml.safe_dump(USER_SYSTEM), encoding="utf-8")
    done = package(PackageRequest(results_dir=tmp_path / "results", out_dir=tmp_path / "out", submitter="cmx-test",
                                  division="open", system_file=system))
    assert [r.name for r in done.results] == [f"{SYSTEM}/{QWEN}/SingleStream"]
    report = check_tree(tmp_path / "out", "v6.1")
    assert report.rules_broken() == SHORT, format_report(report)
    [row] = report.results
    assert (row.scenario, row.validity, row.metric, row.units) == ("SingleStream", "VALID", seconds, "Latency (s)")
    readme = (done.tree / "results" / SYSTEM / QWEN / "SingleStream" / "README.md").read_text(encoding="utf-8")
    assert f"The performance result is a latency: the 90th percentile, LoadGen's early-stopping estimate, " \
           f"{seconds:.4g} s" in readme


def test_the_report_shows_a_single_stream_result_in_the_rounds_unit_beside_its_latencies(tmp_path: Path,
                                                                                          use_rounds: Path):
    seconds = single_stream_results(tmp_path / "results")
    report = collect(tmp_path / "results")
    perf, accuracy = report.tests
    assert (perf.scenario, perf.mode, perf.result_latency, perf.result_unit) == ("SingleStream", "performance",
                                                                                  seconds, "s")
    assert perf.latency is not None and perf.latency_limit_ms is None  # SingleStream has no limit to meet
    assert accuracy.result_latency is None and accuracy.latency is None
    page = write_report(tmp_path / "results", tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"result: 90th percentile latency {seconds:.4g} s (early stopping)" in page
