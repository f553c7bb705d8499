"""Qwen3-VL's dataset: Shopify's product catalogue as Parquet files of its train and test splits, read in the
reference's order (train then test), its images left in the files until a sample is loaded; the tiny catalogue
in the same format; what is refused (a missing split or shard, a missing column, a row without an image)."""

from __future__ import annotations

from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from cmx.mlperf.benchmarks.base import DatasetError  # noqa: E402
from cmx.mlperf.benchmarks.qwen3_vl.dataset import COLUMNS, load_catalogue, row_counts, split_files  # noqa: E402
from cmx.mlperf.benchmarks.qwen3_vl.prompts import chat_messages, image_data_url  # noqa: E402
from cmx.mlperf.benchmarks.qwen3_vl.tiny import CANDIDATES, make_tiny_catalogue  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_catalogue(tmp_path_factory.mktemp("catalogue"), rows=12).path


def test_the_catalogue_is_the_train_split_then_the_test_split(tiny: Path):
    files = split_files(tiny)
    assert [f.name for f in files] == ["train-00000-of-00001.parquet", "test-00000-of-00001.parquet"]
    data = load_catalogue(tiny)
    train = pq.read_table(files[0]).to_pylist()
    test = pq.read_table(files[1]).to_pylist()
    assert len(data) == 12 == row_counts(files) and len(train) == 9
    assert data.product(0).title == train[0]["product_title"]
    assert data.product(9).title == test[0]["product_title"] and data.reference(9) == test[0]["ground_truth_category"]
    assert data.image(9) == test[0]["product_image"]["bytes"]
    assert len(data.limit(4)) == 4
    with pytest.raises(IndexError):
        data.limit(4).product(4)


def test_a_tiny_row_is_a_real_rows_shape_and_builds_the_references_request(tiny: Path):
    data = load_catalogue(tiny)
    for i in range(len(data)):
        row = data.product(i)
        assert row.category in row.categories and len(row.categories) == CANDIDATES
        assert 2 <= len(row.category.split(" > ")) <= 4 and isinstance(row.is_secondhand, bool)
    messages = chat_messages(row.title, row.description, row.categories, image_data_url(data.image(3), "row 3"))
    assert messages[1]["content"][1]["image_url"]["url"].startswith("data:image/PNG;base64,")  # row 3 is a PNG
    assert list(pq.read_schema(split_files(tiny)[0]).names) == list(COLUMNS)


def _write(folder: Path, rows: list[dict], name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / name)


def test_a_missing_split_or_shard_or_column_or_image_is_refused(tiny: Path, tmp_path: Path):
    rows = pq.read_table(split_files(tiny)[0]).to_pylist()
    _write(tmp_path / "a", rows, "train-00000-of-00001.parquet")
    with pytest.raises(DatasetError, match="no Parquet file of the test split"):
        load_catalogue(tmp_path / "a")
    _write(tmp_path / "b", rows, "train-00001-of-00002.parquet")
    _write(tmp_path / "b", rows, "test-00000-of-00001.parquet")
    with pytest.raises(DatasetError, match="holds 1 of the 2 shards of the train split"):
        load_catalogue(tmp_path / "b")
    _write(tmp_path / "c", [{k: v for k, v in r.items() if k != "ground_truth_brand"} for r in rows],
           "train-00000-of-00001.parquet")
    _write(tmp_path / "c", rows, "test-00000-of-00001.parquet")
    with pytest.raises(DatasetError, match="has no column ground_truth_brand"):
        load_catalogue(tmp_path / "c")
    no_image = [dict(r) for r in rows]
    no_image[5]["product_image"] = {"bytes": b"", "path": "5.jpeg"}
    table = pa.Table.from_pylist(no_image, schema=pq.read_schema(split_files(tiny)[0]))
    (tmp_path / "d").mkdir()
    pq.write_table(table, tmp_path / "d" / "train-00000-of-00001.parquet")
    _write(tmp_path / "d", rows, "test-00000-of-00001.parquet")
    with pytest.raises(DatasetError, match=r"1 row\(s\) of .* have no image \(the first: row 5\)"):
        load_catalogue(tmp_path / "d")
