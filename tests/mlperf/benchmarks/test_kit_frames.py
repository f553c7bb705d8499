"""cmx.mlperf.benchmarks.kit.frames and kit.samples: the one frame reader and writer, the column, text and token-id
checks every benchmark's loader makes, each error naming the file, and the samples' shared `limit`."""

from __future__ import annotations

import gzip
import pickle
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.frames import (
    INT32_MAX,
    check_lengths,
    kind,
    read_frame,
    require_columns,
    texts,
    token_array,
    token_arrays,
    write_frame,
)
from cmx.mlperf.benchmarks.kit.samples import TinyDataset, TokenSamples, check_tiny_rows

HINT = "it is not the test set"


def read(path: Path) -> pd.DataFrame:
    return read_frame(path, hint=HINT, get="get dataset test")


def frame() -> pd.DataFrame:
    return pd.DataFrame({"text": ["a", "b"], "tok": [[1, 2], [3]], "n": [2, 1]})


# --- reading and writing ---------------------------------------------------------------------------

def test_a_written_frame_reads_back_and_has_the_bytes_to_pickle_gives(tmp_path: Path) -> None:
    path = write_frame(frame(), tmp_path / "deep" / "set.pkl", protocol=4)
    frame().to_pickle(tmp_path / "plain.pkl", protocol=4)
    assert path.read_bytes() == (tmp_path / "plain.pkl").read_bytes()
    assert read(path).equals(frame())
    assert [p.name for p in path.parent.iterdir()] == ["set.pkl"]  # no temporary file left


def test_a_missing_file_or_a_folder_is_named_with_the_query_that_gets_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=f"no dataset file at {tmp_path / 'none.pkl'}") as info:
        read(tmp_path / "none.pkl")
    assert info.value.hint == 'check the path, or get the dataset with `cmx run "get dataset test"`'
    with pytest.raises(DatasetError, match=f"{tmp_path} is not a file"):
        read(tmp_path)


def test_a_truncated_pickle_is_named_and_said_to_be_downloaded_again(tmp_path: Path) -> None:
    path = tmp_path / "cut.pkl"
    path.write_bytes(pickle.dumps(frame())[:100])
    with pytest.raises(DatasetError, match=f"{path} is not a pandas pickle: ") as info:
        read(path)
    assert "download it again" in (info.value.hint or "")


def test_a_gzipped_pickle_is_said_to_need_gunzip(tmp_path: Path) -> None:
    path = tmp_path / "set.pkl"
    path.write_bytes(gzip.compress(pickle.dumps(frame())))
    with pytest.raises(DatasetError, match=f"{path} is not a pandas pickle") as info:
        read(path)
    assert "gunzip" in (info.value.hint or "")


def test_a_pickle_of_something_else_is_named_with_the_benchmarks_hint(tmp_path: Path) -> None:
    path = tmp_path / "set.pkl"
    path.write_bytes(pickle.dumps({"text": ["a"]}))
    with pytest.raises(DatasetError, match=f"{path} holds a dict, not a pandas DataFrame") as info:
        read(path)
    assert info.value.hint == HINT


def test_a_parquet_file_is_read_by_its_suffix_and_a_bad_one_named(tmp_path: Path) -> None:
    path = tmp_path / "set.parquet"
    path.write_bytes(b"PAR1 not really")
    try:
        import pyarrow  # noqa: F401  # only whether it is installed
    except ImportError:  # the error then says what to install
        with pytest.raises(DatasetError, match=f"cannot read {path}") as info:
            read(path)
        assert info.value.hint == "pip install pyarrow"
        return
    with pytest.raises(DatasetError, match=f"{path} is not a Parquet file"):
        read(path)
    frame().to_parquet(path)
    assert read(path)["text"].tolist() == ["a", "b"]


# --- columns and text ------------------------------------------------------------------------------

def test_the_column_found_is_returned_and_the_first_alternative_wins() -> None:
    data = pd.DataFrame({"b": [1], "a": [2], "c": [3]})
    assert require_columns(data, Path("f.pkl"), ("c", ("a", "b")), hint=HINT) == ("c", "a")


def test_missing_columns_are_named_with_the_columns_there_are() -> None:
    with pytest.raises(DatasetError) as info:
        require_columns(frame(), Path("f.pkl"), ("text", "gt", ("ids", "tok_ids")), hint=HINT)
    assert str(info.value).startswith("f.pkl has no columns 'gt', 'ids' or 'tok_ids'; its columns are 'text', 'tok', "
                                      "'n'")
    assert info.value.hint == HINT
    with pytest.raises(DatasetError, match=r"f.pkl has no column 'gt';"):
        require_columns(frame(), Path("f.pkl"), ("gt",), hint=HINT)


def test_a_frame_without_rows_is_refused() -> None:
    with pytest.raises(DatasetError, match=r"f.pkl holds no samples"):
        require_columns(frame().iloc[:0], Path("f.pkl"), ("text",), hint=HINT)


def test_a_value_that_is_not_text_is_named_by_row_and_column() -> None:
    data = pd.DataFrame({"text": ["a", None, 3]})
    with pytest.raises(DatasetError, match=r"f.pkl: row 1: 'text' is null, not text"):
        texts(data, "text", Path("f.pkl"), hint=HINT)
    assert texts(data.iloc[:1], "text", Path("f.pkl"), hint=HINT) == ["a"]
    assert kind(float("nan")) == "null" and kind(3) == "a int (3)"


# --- token ids -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("ids", "message"), [
    ("1 2 3", "is a str ('1 2 3'), not a list of token ids"),
    (None, "is null, not a list of token ids"),
    ([], "is empty"),
    (np.array([], dtype=np.int64), "is empty"),
    ([1, 2.0], "holds 2.0, not a token id (an integer)"),
    ([1, True], "holds True, not a token id (an integer)"),
    ([1, "2"], "holds '2', not a token id (an integer)"),
    ([[1, 2]], "holds [1, 2], not a token id (an integer)"),
    (np.array([1.0, 2.0]), "holds 1.0, not a token id (an integer)"),
    (np.array([True]), "holds True, not a token id"),
    (np.array([[1, 2]]), "is not a flat list of token ids"),
    ([5, -1], "holds -1, not a token id (0 to 2147483647)"),
    ([2**31], "holds 2147483648, not a token id (0 to 2147483647)"),
    ([2**70], f"holds {2**70}, not a token id"),
    (np.array([7, 2**40]), f"holds {2**40}, not a token id"),
])
def test_what_is_not_a_list_of_token_ids_is_refused_naming_where(ids: object, message: str) -> None:
    with pytest.raises(DatasetError) as info:
        token_array(ids, "f.pkl: row 3: 'tok'", hint=HINT)
    assert str(info.value).startswith(f"f.pkl: row 3: 'tok' {message}")
    assert info.value.hint == HINT


def test_ids_from_the_vocabulary_on_are_refused_when_it_is_known() -> None:
    assert token_array([0, 99], "w", hint=HINT, vocab_size=100).tolist() == [0, 99]
    with pytest.raises(DatasetError, match=r"w holds 100, not a token id \(0 to 99: the vocabulary has 100\)"):
        token_array([0, 100], "w", hint=HINT, vocab_size=100)


@pytest.mark.parametrize("ids", [[1, 2, INT32_MAX], (1, 2, INT32_MAX), [np.int64(1), 2, np.uint16(INT32_MAX % 65536)],
                                 np.array([1, 2, INT32_MAX]), np.array([1, 2], dtype=np.uint8),
                                 np.array([1, 2], dtype=object)])
def test_lists_tuples_and_integer_arrays_become_int32_arrays(ids: object) -> None:
    got = token_array(ids, "w", hint=HINT)
    assert isinstance(got, array) and got.typecode == "i" and got.tolist() == [int(t) for t in ids]  # type: ignore[attr-defined]  # the array's own typecode


def test_a_column_is_checked_at_once_and_its_first_bad_row_named() -> None:
    rows = [[1, 2], np.array([3]), (4, 5, 6)]
    assert [a.tolist() for a in token_arrays(rows, Path("f.pkl"), "tok", hint=HINT)] == [[1, 2], [3], [4, 5, 6]]
    plain = [[1, 2], [3], [4, 5, 6]]
    assert [a.tolist() for a in token_arrays(plain, Path("f.pkl"), "tok", hint=HINT)] == plain
    arrays = [np.array(r) for r in plain]
    assert [a.tolist() for a in token_arrays(arrays, Path("f.pkl"), "tok", hint=HINT)] == plain
    for bad, message in (([[1], [2], []], "f.pkl: row 2: 'tok' is empty"),
                         ([[1], [2, -7], [3]], "f.pkl: row 1: 'tok' holds -7"),
                         ([np.array([1]), np.array([2.5])], "f.pkl: row 1: 'tok' holds 2.5"),
                         ([[1], [True]], "f.pkl: row 1: 'tok' holds True")):
        with pytest.raises(DatasetError, match=message):
            token_arrays(bad, Path("f.pkl"), "tok", hint=HINT)
    with pytest.raises(DatasetError, match="row 0: 'tok' holds 9"):
        token_arrays([[9]], Path("f.pkl"), "tok", hint=HINT, vocab_size=9)


def test_a_length_column_must_count_the_ids_of_its_row() -> None:
    ids = [[1, 2], [3]]
    check_lengths(ids, [2, np.int64(1)], Path("f.pkl"), column="tok", length_column="n")
    for lengths, shown in (([2, 5], "5"), ([2, 1.0], "1.0"), ([2, True], "True")):
        with pytest.raises(DatasetError, match=f"f.pkl: row 1 has 1 ids in tok but n {shown}") as info:
            check_lengths(ids, lengths, Path("f.pkl"), column="tok", length_column="n")
        assert "download it again" in (info.value.hint or "")


# --- samples ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Samples(TokenSamples):
    token_ids: tuple[array, ...]
    answers: tuple[str, ...]
    path: Path


def samples() -> Samples:
    return Samples((array("i", [1, 2]), array("i", [3]), array("i", [4, 5, 6])), ("a", "b", "c"), Path("f.pkl"))


def test_samples_give_their_length_prompt_ids_and_input_lengths() -> None:
    data = samples()
    assert len(data) == 3 and data.prompt_ids(2) == [4, 5, 6] and data.input_lengths == (2, 1, 3)


def test_limit_keeps_the_first_samples_of_every_field_and_refuses_impossible_counts() -> None:
    few = samples().limit(2)
    assert isinstance(few, Samples) and few.answers == ("a", "b") and few.input_lengths == (2, 1)
    assert few.path == Path("f.pkl")
    for n in (0, 4):
        with pytest.raises(DatasetError, match=f"cannot keep {n} samples of f.pkl: it has 3") as info:
            samples().limit(n)
        assert info.value.hint == "give a number from 1 to 3"


def test_a_tiny_dataset_needs_a_row() -> None:
    check_tiny_rows(1)
    with pytest.raises(CmxError, match="a dataset needs at least one row, not 0"):
        check_tiny_rows(0)
    assert TinyDataset(Path("d.pkl"), 3, 0).rows == 3
