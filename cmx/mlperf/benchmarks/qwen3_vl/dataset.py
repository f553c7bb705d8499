"""Qwen3-VL's dataset: Shopify's product catalogue (the Hugging Face dataset Shopify/product-catalogue), its
train split then its test split, 48,289 rows, read as multimodal/qwen3-vl's reference reads it
(`load_dataset(..., split="train+test")`).

The repository holds Parquet files, one or more per split, named `<split>-NNNNN-of-NNNNN.parquet` (under
`data/` in the Hub's layout; any folder is searched). A row's columns, as the reference uses them:
`product_title` and `product_description` (text, into the prompt as they are), `product_image` (Hugging
Face's Image: a struct of the file's `bytes` and its `path`), `potential_product_categories` (the
candidate category paths), and the truths the evaluator reads: `ground_truth_category` (the scored one),
`ground_truth_brand`, `ground_truth_is_secondhand`.

The files are memory-mapped: the images (about 6.4 GB for the whole set) are read when a sample is
loaded, not when the dataset is opened. A row without image bytes is refused when the dataset is
opened, naming it (the reference stops while loading that sample); an image that does not decode is
refused when its sample is loaded (prompts.image_data_url). pyarrow reads Parquet: a missing pyarrow
is one clear error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.samples import check_limit

ROWS = 48289  # constants.py dataset-size; mlperf.conf performance_sample_count_override and Offline min_query_count
SPLITS = ("train", "test")  # the reference's split="train+test", in that order
COLUMNS = ("product_title", "product_description", "product_image", "potential_product_categories",
           "ground_truth_category", "ground_truth_brand", "ground_truth_is_secondhand")
# the Hub's repository at its pinned commit (the recipe's repo and revision), into a folder of this name
FACTS = DatasetFacts(ROWS, what="product-catalogue-format", default_name="product-catalogue", hub=True, tiny_rows=64)
_SHARD = re.compile(r"^(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet$")
_HINT = "it is not Shopify/product-catalogue as the Hub serves it (Parquet files of its train and test splits)"


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError("reading the product catalogue's Parquet files needs pyarrow, which is not installed",
                           hint="pip install pyarrow (cmx's cpu and mlperf extras have it)") from None
    return pq


def split_files(folder: Path) -> list[Path]:
    """The Parquet files of the train split, then the test split's, each split's in shard order; refused unless
    both splits are there, each shard of each."""
    shards: dict[str, list[tuple[int, int, Path]]] = {s: [] for s in SPLITS}
    for path in sorted(Path(folder).rglob("*.parquet")):
        m = _SHARD.match(path.name)
        if m and m["split"] in shards:
            shards[m["split"]].append((int(m["index"]), int(m["count"]), path))
    out = []
    for split, found in shards.items():
        if not found:
            raise DatasetError(f"{folder} has no Parquet file of the {split} split ({split}-NNNNN-of-NNNNN.parquet)",
                               hint=_HINT)
        count = found[0][1]
        if sorted(i for i, _, _ in found) != list(range(count)) or any(c != count for _, c, _ in found):
            raise DatasetError(f"{folder} holds {len(found)} of the {count} shards of the {split} split",
                               hint="download the dataset again: a shard is missing")
        out += [p for _, _, p in sorted(found)]
    return out


@dataclass(frozen=True)
class Product:
    """One row's prompt fields and truths (the image stays in the file until `image` reads it)."""

    title: str
    description: str
    categories: tuple[str, ...]
    category: str
    brand: str
    is_secondhand: bool


class ProductCatalogue:
    """The rows of the train then test splits, as one table; `path` is the dataset folder."""

    def __init__(self, path: Path, table: Any, rows: int | None = None) -> None:
        self.path = Path(path)
        self._table = table
        self._rows = table.num_rows if rows is None else rows
        self._text = {c: table.column(c) for c in COLUMNS if c != "product_image"}

    def __len__(self) -> int:
        return self._rows

    def _at(self, column: str, i: int) -> Any:
        return self._text[column][i].as_py()

    def product(self, i: int) -> Product:
        self._check(i)
        return Product(self._at("product_title", i), self._at("product_description", i),
                       tuple(self._at("potential_product_categories", i)), self._at("ground_truth_category", i),
                       self._at("ground_truth_brand", i), bool(self._at("ground_truth_is_secondhand", i)))

    def image(self, i: int) -> bytes:
        """Row i's image file, as stored."""
        self._check(i)
        value = self._table.column("product_image")[i].as_py()
        return (value or {}).get("bytes") or b""

    def reference(self, i: int) -> str:
        """The true category of row i, which the evaluator compares the reply's with."""
        self._check(i)
        return str(self._at("ground_truth_category", i))

    def limit(self, n: int) -> ProductCatalogue:
        check_limit(n, self._rows, self.path)
        return ProductCatalogue(self.path, self._table, n)

    def _check(self, i: int) -> None:
        if not 0 <= i < self._rows:
            raise IndexError(f"row {i} of {self._rows}")


def load_catalogue(path: Path) -> ProductCatalogue:
    """The catalogue in the folder `path` (the dataset repository's files), its train rows then its test rows.
    Refused, naming what is wrong: no pyarrow, a missing split or shard, a missing column, a row without an
    image."""
    pq = _pyarrow()
    import pyarrow as pa

    tables = []
    for file in split_files(Path(path)):
        try:
            table = pq.read_table(file, memory_map=True)
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{file} is not a readable Parquet file: {exc}", hint=_HINT) from None
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise DatasetError(f"{file} has no column {', '.join(missing)}", hint=_HINT)
        tables.append(table.select(list(COLUMNS)))
    table = pa.concat_tables(tables)
    no_image = rows_without_image(table.column("product_image"))
    if no_image:
        raise DatasetError(f"{len(no_image)} row(s) of {path} have no image (the first: row {no_image[0]})",
                           hint="every row of the catalogue has its product_image; download the dataset again")
    return ProductCatalogue(Path(path), table)


def rows_without_image(images: Any) -> list[int]:
    """The rows whose image struct (or its bytes) is null or empty, found column-wise: one pass over 48,289 rows."""
    import pyarrow.compute as pc

    empty = pc.fill_null(pc.equal(pc.binary_length(pc.struct_field(images, "bytes")), 0), True)
    rows: list[int] = pc.indices_nonzero(empty).to_pylist()
    return rows


def row_counts(paths: Sequence[Path]) -> int:
    """The rows of Parquet files, from their footers (no data read)."""
    pq = _pyarrow()
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


__all__ = ["COLUMNS", "FACTS", "ROWS", "SPLITS", "Product", "ProductCatalogue", "load_catalogue", "row_counts",
           "rows_without_image", "split_files"]
