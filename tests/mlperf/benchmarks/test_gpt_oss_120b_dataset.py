"""gpt-oss-120b's sets: the folder's layout, each file's columns (Parquet or pickle), malformed ones refused; the
tiny ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cmx.mlperf.benchmarks import benchmark_for, dataset_for_test
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import load_file, load_set
from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import SUBSETS, make_tiny_gpt_oss, make_tiny_sets


def _frame(**columns) -> pd.DataFrame:
    base = {"dataset": ["AIME25", "gpqa_diamond"], "ground_truth": ["12", float("nan")],
            "input_tokens": [np.array([1, 2, 3]), [4, 5]]}
    base.update(columns)
    return pd.DataFrame({k: v for k, v in base.items() if v is not None})


def test_a_set_keeps_ids_lower_cased_datasets_and_truths(tmp_path):
    path = tmp_path / "s.pkl"
    _frame().to_pickle(path)
    data = load_file(path)
    assert len(data) == 2 and data.prompt_ids(0) == [1, 2, 3] and data.prompt_ids(1) == [4, 5]
    assert (data.dataset(0), data.reference(0), data.reference(1)) == ("aime25", "12", "")
    assert len(data.limit(1)) == 1
    with pytest.raises(DatasetError, match="cannot keep 3"):
        data.limit(3)


def test_the_pre_v4_token_column_is_read_too(tmp_path):
    path = tmp_path / "s.pkl"
    _frame(input_tokens=None, tok_input=[[7], [8, 9]]).to_pickle(path)
    assert load_file(path).prompt_ids(1) == [8, 9]


@pytest.mark.parametrize(("change", "message"), [
    ({"ground_truth": None}, "has no column 'ground_truth'"),
    ({"input_tokens": None}, "has no column 'input_tokens' or 'tok_input'"),
    ({"input_tokens": [[1], []]}, "row 1: 'input_tokens' is empty"),
    ({"input_tokens": [[1], [-1]]}, "row 1: 'input_tokens' holds -1, not a token id"),
    ({"dataset": ["aime25", None]}, "row 1 names no dataset"),
])
def test_a_malformed_set_is_refused_naming_what_is_wrong(tmp_path, change, message):
    path = tmp_path / "s.pkl"
    _frame(**change).to_pickle(path)
    with pytest.raises(DatasetError, match=message):
        load_file(path)


def test_a_folder_without_the_set_a_test_reads_is_refused(tmp_path):
    with pytest.raises(DatasetError, match=r"no perf/perf_eval_ref.parquet"):
        load_set(tmp_path, "performance")
    with pytest.raises(DatasetError, match="no set for the 'test06' test"):
        load_set(tmp_path, "test06")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("gptoss")
    model = make_tiny_gpt_oss(root / "model", seed=3)
    return model, make_tiny_sets(root / "data", model.path, rows=6, seed=3)


def test_each_test_reads_its_own_set(tiny):
    _, folder = tiny
    bench = benchmark_for("gpt-oss-120b")
    accuracy, performance = dataset_for_test(bench, folder, "accuracy"), dataset_for_test(bench, folder, "performance")
    test07 = dataset_for_test(bench, folder, "test07")
    assert [accuracy.dataset(i) for i in range(6)] == [*SUBSETS, *SUBSETS]  # every sub-dataset the reference scores
    assert {test07.dataset(i) for i in range(6)} == {"gpqa_diamond"}
    assert accuracy.prompt_ids(0) != performance.prompt_ids(0)  # reasoning high vs low
    assert bench.load_dataset(folder).path == accuracy.path


def test_tiny_prompts_are_harmony_conversations_with_their_reasoning_effort(tiny):
    from tokenizers import Tokenizer

    model, folder = tiny
    tok = Tokenizer.from_file(str(model.path / "tokenizer.json"))
    text = tok.decode(load_set(folder, "performance").prompt_ids(0), skip_special_tokens=False)
    assert text.startswith("<|start|>system<|message|>") and "Reasoning: low" in text
    assert text.endswith("<|end|><|start|>assistant")
    assert tok.token_to_id("<|return|>") == model.end_ids[0] == model.vocab_size - 21 + 4


def test_the_same_seed_gives_the_same_bytes(tiny, tmp_path):
    model, folder = tiny
    again = make_tiny_gpt_oss(tmp_path / "model", seed=3)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (again.path / name).read_bytes() == (model.path / name).read_bytes()
    sets = make_tiny_sets(tmp_path / "data", again.path, rows=6, seed=3)
    assert (sets / "livecodebench/test6.jsonl").read_bytes() == (folder / "livecodebench/test6.jsonl").read_bytes()
    assert load_set(sets, "accuracy").token_ids == load_set(folder, "accuracy").token_ids


def test_the_sets_are_found_in_their_subfolders_or_flat_under_either_accuracy_name(tmp_path):
    frame = _frame()
    (tmp_path / "nested" / "acc").mkdir(parents=True)
    frame.to_pickle(tmp_path / "nested" / "acc" / "acc_eval_inputs.pkl")  # README.md's example name
    assert load_set(tmp_path / "nested", "accuracy").path.name == "acc_eval_inputs.pkl"
    (tmp_path / "flat").mkdir()
    # the files at the top, as published reproductions keep them
    frame.to_pickle(tmp_path / "flat" / "perf_eval_ref.pkl")
    frame.to_pickle(tmp_path / "flat" / "acc_eval_ref.pkl")
    assert load_set(tmp_path / "flat", "test09").path.name == "perf_eval_ref.pkl"
    assert load_set(tmp_path / "flat", "accuracy").path.name == "acc_eval_ref.pkl"
