"""A tiny product catalogue in the real format: Parquet files of a train and a test split, as the Hub serves
Shopify/product-catalogue, with the same columns and types (the image as Hugging Face's Image struct of
`bytes` and `path`), images drawn with Pillow (JPEG and PNG, as the catalogue's are), and category paths
of two to four levels from a generated taxonomy, the true one among each row's candidates."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.qwen3_vl.dataset import COLUMNS

_WORDS = ("amber", "brisk", "cedar", "dune", "ember", "fjord", "grove", "harbor", "indigo", "juniper", "kelp",
          "lumen", "maple", "nimbus", "onyx", "pebble", "quartz", "russet", "sable", "thistle", "umber", "vale")
_TOP = ("Apparel & Accessories", "Home & Garden", "Electronics", "Sporting Goods", "Toys & Games", "Health & Beauty")
CANDIDATES = 8  # the real rows have 8 or 9


@dataclass(frozen=True)
class TinyCatalogue:
    path: Path
    rows: int


def _taxonomy(rng: random.Random, size: int = 60) -> list[str]:
    paths: set[str] = set()
    while len(paths) < size:
        levels = [rng.choice(_TOP)] + [rng.choice(_WORDS).title() for _ in range(rng.randint(1, 3))]
        paths.add(" > ".join(levels))
    return sorted(paths)


def _image(rng: random.Random, fmt: str) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (rng.randint(24, 64), rng.randint(24, 64)), tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(img)
    for _ in range(3):
        x, y = rng.randrange(img.width), rng.randrange(img.height)
        draw.rectangle((x, y, x + 8, y + 8), fill=tuple(rng.randrange(256) for _ in range(3)))
    out = io.BytesIO()
    img.save(out, format=fmt)
    return out.getvalue()


def make_tiny_catalogue(dest: Path, rows: int = 64, seed: int = 0) -> TinyCatalogue:
    """`rows` generated products in `dest`/data: three quarters in the train split, the rest in the test split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows < 2:
        raise ValueError(f"a tiny catalogue needs at least 2 rows (one per split), not {rows}")
    rng = random.Random(seed)
    taxonomy = _taxonomy(rng)
    records = []
    for i in range(rows):
        truth = rng.choice(taxonomy)
        others = rng.sample([t for t in taxonomy if t != truth], CANDIDATES - 1)
        candidates = [*others[:rng.randint(0, CANDIDATES - 1)], truth]
        candidates += [t for t in others if t not in candidates][:CANDIDATES - len(candidates)]
        brand = rng.choice(_WORDS).title() + " Co"
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 24)))
        description = f"<div class=\"desc\"><p>{words}</p></div>" if i % 3 == 0 else words
        fmt = "PNG" if i % 4 == 3 else "JPEG"
        records.append({
            "product_title": f"{brand} {rng.choice(_WORDS)} {rng.choice(_WORDS)}",
            "product_description": description,
            "product_image": {"bytes": _image(rng, fmt), "path": f"{i}.{fmt.lower()}"},
            "potential_product_categories": candidates,
            "ground_truth_category": truth,
            "ground_truth_brand": brand,
            "ground_truth_is_secondhand": rng.random() < 0.2,
        })
    schema = pa.schema([("product_title", pa.string()), ("product_description", pa.string()),
                        ("product_image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                        ("potential_product_categories", pa.list_(pa.string())),
                        ("ground_truth_category", pa.string()), ("ground_truth_brand", pa.string()),
                        ("ground_truth_is_secondhand", pa.bool_())])
    assert tuple(schema.names) == COLUMNS
    data = Path(dest) / "data"
    data.mkdir(parents=True, exist_ok=True)
    cut = max(1, min(rows - 1, rows * 3 // 4))
    for split, part in (("train", records[:cut]), ("test", records[cut:])):
        pq.write_table(pa.Table.from_pylist(part, schema=schema), data / f"{split}-00000-of-00001.parquet")
    return TinyCatalogue(Path(dest), rows)


def tiny_dataset(dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> TinyCatalogue:
    """BENCHMARK.make_tiny_dataset: the products are text and images, so the tokenizer is not needed."""
    del tokenizer_dir
    return make_tiny_catalogue(dest, rows, seed)


__all__ = ["CANDIDATES", "TinyCatalogue", "make_tiny_catalogue", "tiny_dataset"]
