"""cmx.mlperf.benchmarks.llama3_1_405b.dataset on the real pickle's columns, and on each malformed field."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.llama3_1_405b.dataset import REQUIRED_COLUMNS, load_llama405b


def _frame(**changes) -> pd.DataFrame:
    data = {"input": ["Summarize: a b", "Find the uuid"], "tok_input": [[128000, 5, 6], [128000, 7]],
            "tok_input_len": [3, 2], "gt_output": ["a b", "abcdef12-3456-7890-abcd-ef1234567890"],
            "metric": ["rouge", "niah_em"], "dataset": ["x", "y"]}
    data.update(changes)
    return pd.DataFrame(data)


def _write(tmp_path: Path, frame: pd.DataFrame) -> Path:
    path = tmp_path / "d.pkl"
    frame.to_pickle(path)
    return path


def test_the_reference_columns_are_read(tmp_path: Path):
    data = load_llama405b(_write(tmp_path, _frame()))
    assert len(data) == 2 and data.prompt_ids(0) == [128000, 5, 6] and data.reference(1).startswith("abcdef12")
    assert data.metric(1) == "niah_em" and data.input_lengths == (3, 2)
    assert len(data.limit(1)) == 1
    with pytest.raises(DatasetError, match="cannot keep 3"):
        data.limit(3)


def test_numpy_token_arrays_are_accepted(tmp_path: Path):
    import numpy as np

    frame = _frame(tok_input=[np.array([128000, 5, 6], dtype=np.int64), np.array([128000, 7], dtype=np.int32)])
    assert load_llama405b(_write(tmp_path, frame)).prompt_ids(1) == [128000, 7]


@pytest.mark.parametrize("column", REQUIRED_COLUMNS)
def test_a_missing_column_is_named(tmp_path: Path, column: str):
    with pytest.raises(DatasetError, match=f"no column '{column}'"):
        load_llama405b(_write(tmp_path, _frame().drop(columns=[column])))


@pytest.mark.parametrize(("changes", "message"), [
    ({"metric": ["rouge", "bleu"]}, "row 1: metric 'bleu'"),
    ({"gt_output": ["a", 3]}, "row 1: 'gt_output' is a int"),
    ({"tok_input": [[128000, 5, 6], []]}, "row 1: 'tok_input' is empty"),
    ({"tok_input": [[128000, 5, 6], [1.5, 2.0]]}, "not a token id"),
    ({"tok_input": [[128000, 5, 6], [-1, 2]]}, "holds -1"),
    ({"tok_input_len": [3, 5]}, "row 1 has 2 ids in tok_input but tok_input_len 5"),
])
def test_malformed_values_are_refused_with_the_row(tmp_path: Path, changes: dict, message: str):
    with pytest.raises(DatasetError, match=message):
        load_llama405b(_write(tmp_path, _frame(**changes)))


def test_not_a_pickle_or_missing(tmp_path: Path):
    (tmp_path / "bad.pkl").write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="not a pandas pickle"):
        load_llama405b(tmp_path / "bad.pkl")
    with pytest.raises(DatasetError, match="no dataset file"):
        load_llama405b(tmp_path / "none.pkl")
