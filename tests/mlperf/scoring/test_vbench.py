"""VBench's results read as VBench 0.1.5 writes them and averaged into vbench_score as MLPerf's reference does
(mlcommons/inference b66003e, text_to_video/wan-2.2-t2v-a14b/run_evaluation.py), and accuracy.txt as the checker
reads it. Every results file here is built by hand in VBench's shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.accuracy_log import AccuracyError
from cmx.mlperf.scoring.accuracy_txt import CHECKER_PATTERNS, read_accuracy_txt
from cmx.mlperf.scoring.vbench import (
    REFERENCE_DIMENSIONS,
    VBenchResult,
    aggregate,
    latest_results,
    read_results,
    score_folder,
    write_accuracy_txt,
)

SHA = "ab" * 32


def video(i: int, **fields: object) -> dict[str, object]:
    return {"video_path": f"/videos/a prompt-{i}.mp4", **fields}


def eval_results() -> dict[str, object]:
    """`{dimension: [average, per-video]}` as VBench.evaluate saves it, each average worked out by hand from its
    per-video results the way that dimension's compute_<dimension> does when VBench runs on several processes."""
    return {
        # mean of video_results: (0.96 + 0.94) / 2
        "subject_consistency": [0.95, [video(0, video_results=0.96), video(1, video_results=0.94)]],
        # sum(video_sim) / sum(cnt_per_video): (9.6 + 19.2) / (10 + 20)
        "background_consistency": [0.96, [video(0, video_results=0.96, video_sim=9.6, cnt_per_video=10),
                                          video(1, video_results=0.96, video_sim=19.2, cnt_per_video=20)]],
        # mean of video_results: (0.99 + 0.97) / 2
        "motion_smoothness": [0.98, [video(0, video_results=0.99), video(1, video_results=0.97)]],
        # mean of the per-video moved/still verdicts: 3 of 4
        "dynamic_degree": [0.75, [video(i, video_results=i != 3) for i in range(4)]],
        # mean of cur_sim (CLIP's logit / 100): (0.21 + 0.23) / 2
        "appearance_style": [0.22, [video(0, video_results=0.21, cur_sim=0.21),
                                    video(1, video_results=0.23, cur_sim=0.23)]],
        # sum(success_frame_count) / sum(frame_count): (6 + 8) / (16 + 16)
        "scene": [0.4375, [video(0, video_results=0.375, success_frame_count=6, frame_count=16),
                           video(1, video_results=0.5, success_frame_count=8, frame_count=16)]],
    }


def write_results(folder: Path, results: object, when: str = "2026-11-28-21:05:09") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{when}_eval_results.json"
    path.write_text(json.dumps(results, indent=4), encoding="utf-8")  # utils.save_json's indent
    return path


def test_vbench_score_is_the_references_mean_of_its_six_dimensions_in_percent(tmp_path: Path) -> None:
    result = score_folder(write_results(tmp_path, eval_results()).parent)
    # parse_results (lines 59 to 69): value[0] of each dimension, added in sorted(results.items()) order, over 6:
    # appearance_style, background_consistency, dynamic_degree, motion_smoothness, scene, subject_consistency
    by_hand = (0.22 + 0.96 + 0.75 + 0.98 + 0.4375 + 0.95) / 6  # 4.2975 / 6 = 0.71625
    assert result.vbench_score == 100 * by_hand
    assert result.vbench_score == pytest.approx(71.625, abs=1e-12)
    assert result.dimensions == {"appearance_style": 0.22, "background_consistency": 0.96, "dynamic_degree": 0.75,
                                 "motion_smoothness": 0.98, "scene": 0.4375, "subject_consistency": 0.95}


def test_the_six_dimensions_are_the_references_default() -> None:
    assert REFERENCE_DIMENSIONS == ("subject_consistency", "dynamic_degree", "motion_smoothness",
                                    "appearance_style", "scene", "background_consistency")


def test_the_sum_follows_the_references_order_of_dimension_names() -> None:
    # three values whose float sum depends on the order: sorted by name, 1e16 + 1.0 is lost before - 1e16
    scores = {"c": -1e16, "a": 1e16, "b": 1.0}
    assert aggregate(scores, ("a", "b", "c")) == 100 * (((1e16 + 1.0) + -1e16) / 3)
    assert aggregate(scores, ("a", "b", "c")) == 0.0


def test_the_newest_results_file_is_read_as_the_reference_reads_it(tmp_path: Path) -> None:
    write_results(tmp_path, eval_results(), "2026-11-28-21:05:09")
    newer = eval_results()
    newer["scene"] = [0.25, []]
    last = write_results(tmp_path, newer, "2026-11-28-22:40:01")
    (tmp_path / "results_2026-11-28-22:40:01_full_info.json").write_text("[]", encoding="utf-8")
    assert latest_results(tmp_path) == last
    assert score_folder(tmp_path).dimensions["scene"] == 0.25


def test_a_folder_without_results_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AccuracyError, match="holds no VBench results"):
        score_folder(tmp_path)


def test_a_missing_or_extra_dimension_is_refused_rather_than_averaged(tmp_path: Path) -> None:
    short = eval_results()
    del short["scene"]
    with pytest.raises(AccuracyError, match="lacks scene"):
        read_results(write_results(tmp_path / "short", short))
    more = {**eval_results(), "aesthetic_quality": [0.6, []]}
    with pytest.raises(AccuracyError, match="also holds aesthetic_quality"):
        read_results(write_results(tmp_path / "more", more))


@pytest.mark.parametrize("value", [[], [None, []], [True, []], [float("nan"), []], {"average": 0.5}])
def test_a_dimension_without_a_finite_average_is_refused(tmp_path: Path, value: object) -> None:
    results = {**eval_results(), "scene": value}
    with pytest.raises(AccuracyError, match="scene"):
        read_results(write_results(tmp_path, results))


def test_a_file_that_is_not_vbenchs_object_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "results_x_eval_results.json"
    broken.write_text('{"scene": [0.5', encoding="utf-8")
    with pytest.raises(AccuracyError, match="is not JSON"):
        read_results(broken)
    with pytest.raises(AccuracyError, match="not VBench's object"):
        read_results(write_results(tmp_path / "list", [0.5]))


def test_accuracy_txt_carries_the_score_as_the_checkers_pattern_reads_it(tmp_path: Path) -> None:
    result = score_folder(write_results(tmp_path / "vbench", eval_results()).parent)
    path = write_accuracy_txt(tmp_path / "accuracy.txt", result, SHA)
    text = path.read_text(encoding="utf-8")
    # tools/submission/submission_checker/constants.py, ACC_PATTERN["vbench_score"], matched per line with re.match
    checker = r".*'vbench_score':\s([\d.]+).*"
    assert CHECKER_PATTERNS["vbench_score"] == checker
    found = [m.group(1) for line in text.splitlines(keepends=True) if (m := re.match(checker, line))]
    assert [float(v) for v in found] == [result.vbench_score]
    assert f"hash={SHA}" in text.splitlines()
    assert read_accuracy_txt(path)["vbench_score"] == result.vbench_score


@pytest.mark.parametrize("score", [5e-05, -1.5])
def test_a_score_the_checker_would_misread_is_not_written(tmp_path: Path, score: float) -> None:
    result = VBenchResult({"scene": score / 100}, score, tmp_path / "results_x_eval_results.json")
    with pytest.raises(AccuracyError, match="cannot be written as the checker reads it"):
        write_accuracy_txt(tmp_path / "accuracy.txt", result, SHA)
    assert not (tmp_path / "accuracy.txt").exists()
