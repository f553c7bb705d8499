"""deepseek-r1's dataset loader: the reference's columns and fallbacks, and each malformed field named."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.deepseek_r1.dataset import dataset_names, load_deepseek, read_frame, subset_of


def write(tmp_path: Path, **columns) -> Path:
    path = tmp_path / "d.pkl"
    pd.DataFrame(columns).to_pickle(path)
    return path


def good(**overrides) -> dict:
    return {"text_input": ["q1", "q2"], "ground_truth": ["7", "B"], "dataset": ["aime1983", "gpqa"],
            "tok_input": [[0, 5, 6], [0, 7]], "tok_input_len": [3, 2], **overrides}


def test_a_row_reads_as_the_reference_reads_it(tmp_path: Path):
    data = load_deepseek(write(tmp_path, **good()))
    assert len(data) == 2 and data.prompt_ids(0) == [0, 5, 6] and data.reference(1) == "B"
    assert [data.subset(i) for i in range(2)] == ["aime", "gpqa"] and len(data.limit(1)) == 1
    assert data.tests_path == tmp_path / "livecodebench_tests.jsonl"


def test_gt_output_wins_over_ground_truth_and_metric_stands_in_for_dataset(tmp_path: Path):
    columns = good(gt_output=["9", "C"], metric=["math500_em", "gpqa_em"])
    del columns["dataset"]
    data = load_deepseek(write(tmp_path, **columns))
    assert data.reference(0) == "9" and data.subset(0) == "math500"


def test_a_metric_name_the_reference_cannot_map_is_refused(tmp_path: Path):
    # eval_accuracy.py strips '_' from a metric name: mmlu_pro_em becomes "mmlupro", which no scorer matches
    columns = good(metric=["mmlu_pro_em", "gpqa_em"])
    del columns["dataset"]
    with pytest.raises(DatasetError, match="row 0: no scorer for dataset 'mmlupro'"):
        dataset_names(read_frame(write(tmp_path, **columns)))


@pytest.mark.parametrize(("change", "message"), [
    ({"tok_input_len": [3, 5]}, "row 1 has 2 ids in tok_input but tok_input_len 5"),
    ({"tok_input": [[0, 5, 6], []], "tok_input_len": [3, 0]}, "row 1: 'tok_input' is empty"),
    ({"text_input": ["q1", None]}, "row 1: 'text_input' is null, not text"),
    ({"text_input": ["q1", 3]}, r"row 1: 'text_input' is a int \(3\), not text"),
    ({"dataset": ["aime", "trivia"]}, "no scorer for dataset 'trivia'"),
])
def test_malformed_rows_are_named(tmp_path: Path, change: dict, message: str):
    with pytest.raises(DatasetError, match=message):
        load_deepseek(write(tmp_path, **good(**change)))


def test_missing_columns_and_missing_prompt_ids_are_named(tmp_path: Path):
    columns = good()
    del columns["ground_truth"]
    with pytest.raises(DatasetError, match="no column 'gt_output' or 'ground_truth'"):
        load_deepseek(write(tmp_path, **columns))
    columns = good()
    del columns["tok_input"], columns["tok_input_len"]
    with pytest.raises(DatasetError, match="no prompt ids"):
        load_deepseek(write(tmp_path, **columns))
    with pytest.raises(DatasetError, match="no dataset file"):
        load_deepseek(tmp_path / "absent.pkl")


def test_the_first_matching_scorer_wins_in_the_references_order():
    assert subset_of("GPQA_diamond") == "gpqa" and subset_of("aime2024") == "aime"
    assert subset_of("livecodebench_v1") == "livecodebench"
