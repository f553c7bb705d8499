"""cmx.mlperf.benchmarks.llama2_70b.dataset: loading the OpenOrca pickle, and the errors for files that are not it."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pandas as pd
import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.llama2_70b.dataset import OpenOrca, load_openorca
from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama, make_tiny_openorca


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("orca")
    model = make_tiny_llama(root / "model", seed=0)
    return make_tiny_openorca(root / "orca.pkl", model.path, rows=48, seed=0).path


def frame(**changes: object) -> pd.DataFrame:
    """A small, valid OpenOrca-shaped frame; `changes` replace or (with None) drop columns."""
    data: dict[str, object] = {
        "input": pd.Series(["<s>[INST] a [/INST]", "<s>[INST] b c [/INST]"], dtype=object),
        "tok_input": pd.Series([[1, 1, 518, 29871], [1, 1, 518, 7, 29871]], dtype=object),
        "output": pd.Series(["answer a", "answer b"], dtype=object),
        "tok_input_length": pd.Series([4, 5], dtype="int64"),
        "tok_output_length": pd.Series([3, 3], dtype="int64"),
    }
    for name, value in changes.items():
        if value is None:
            data.pop(name)
        else:
            data[name] = value
    return pd.DataFrame(data)


def write(tmp_path: Path, value: object, name: str = "data.pkl") -> Path:
    path = tmp_path / name
    pd.to_pickle(value, path)
    return path


def test_a_generated_pickle_loads_with_prompts_references_and_lengths(generated: Path) -> None:
    data = load_openorca(generated)
    raw = pd.read_pickle(generated)
    assert isinstance(data, OpenOrca) and len(data) == 48 and data.path == generated
    assert data.prompt_ids(5) == list(raw["tok_input"].iat[5])
    assert all(type(t) is int for t in data.prompt_ids(5))
    assert data.prompt_text(5) == raw["input"].iat[5] and data.prompt_text(5).startswith("<s>[INST] ")
    assert data.reference(47) == raw["output"].iat[47]
    assert data.input_lengths == tuple(raw["tok_input_length"])
    assert data.dataframe.index.tolist() == list(range(48))


def test_limit_keeps_the_first_samples_and_refuses_impossible_counts(generated: Path) -> None:
    data = load_openorca(generated)
    few = data.limit(3)
    assert len(few) == 3 and len(data) == 48
    assert [few.prompt_ids(i) for i in range(3)] == [data.prompt_ids(i) for i in range(3)]
    assert few.input_lengths == data.input_lengths[:3]
    for n in (0, 49):
        with pytest.raises(DatasetError, match=f"cannot keep {n} samples .* it has 48"):
            data.limit(n)


def test_a_frame_like_the_reference_one_is_accepted(tmp_path: Path) -> None:
    data = load_openorca(write(tmp_path, frame()))
    assert data.prompt_ids(1) == [1, 1, 518, 7, 29871] and data.reference(0) == "answer a"


def test_a_missing_column_is_named_with_the_columns_found(tmp_path: Path) -> None:
    path = write(tmp_path, frame(tok_input=None, output=None))
    with pytest.raises(DatasetError) as info:
        load_openorca(path)
    message = str(info.value)
    assert f"{path} has no columns 'output', 'tok_input'" in message
    assert "its columns are 'input', 'tok_input_length', 'tok_output_length'" in message
    assert "open_orca_gpt4_tokenized_llama.sampled_24576.pkl" in (info.value.hint or "")


def test_lengths_that_are_not_integers_are_refused_with_the_dtype(tmp_path: Path) -> None:
    path = write(tmp_path, frame(tok_input_length=pd.Series([4.0, 5.0])))
    with pytest.raises(DatasetError, match="column 'tok_input_length' has dtype float64, not integers"):
        load_openorca(path)


def test_token_ids_stored_as_text_are_refused_with_the_row(tmp_path: Path) -> None:
    path = write(tmp_path, frame(tok_input=pd.Series(["[1, 1, 518, 29871]", "[1, 2]"], dtype=object)))
    with pytest.raises(DatasetError, match=r"row 0: 'tok_input' is a str \(.*\), not a list of token ids"):
        load_openorca(path)


def test_a_reference_that_is_not_text_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, frame(output=pd.Series(["fine", 3], dtype=object)))
    with pytest.raises(DatasetError, match=r"row 1: 'output' is a int \(3\), not text"):
        load_openorca(path)


def test_negative_or_fractional_token_ids_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, frame(tok_input=pd.Series([[1, -4, 2, 3], [1, 1, 518, 7, 29871]], dtype=object)))
    with pytest.raises(DatasetError, match="row 0: 'tok_input' holds -4, not a token id"):
        load_openorca(path)


def test_lengths_that_disagree_with_the_token_lists_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, frame(tok_input_length=pd.Series([4, 9], dtype="int64")))
    with pytest.raises(DatasetError, match="row 1 has 5 ids in tok_input but tok_input_length 9"):
        load_openorca(path)


def test_a_file_that_is_not_a_pickle_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "data.pkl"
    path.write_text("input,output\nhello,world\n")
    with pytest.raises(DatasetError, match=f"{path} is not a pandas pickle: UnpicklingError"):
        load_openorca(path)


def test_a_gzip_saved_under_a_pkl_name_says_to_decompress(tmp_path: Path) -> None:
    path = tmp_path / "data.pkl"
    path.write_bytes(gzip.compress(pickle.dumps(frame())))
    with pytest.raises(DatasetError, match="is not a pandas pickle") as info:
        load_openorca(path)
    assert "gunzip" in (info.value.hint or "")


def test_a_pickle_of_something_else_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"input": ["a"]})
    with pytest.raises(DatasetError, match="holds a dict, not a pandas DataFrame"):
        load_openorca(path)


def test_an_empty_frame_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, frame().iloc[:0])
    with pytest.raises(DatasetError, match="holds no samples"):
        load_openorca(path)


def test_a_missing_file_names_the_path_and_how_to_get_the_dataset(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"no dataset file at .*nowhere.pkl") as info:
        load_openorca(tmp_path / "nowhere.pkl")
    assert isinstance(info.value, CmxError)
    assert 'cmx run "get dataset openorca"' in (info.value.hint or "")
