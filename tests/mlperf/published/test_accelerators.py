"""Accelerator names as submitters write them: whole-word matching, the model, and a count set apart."""

from __future__ import annotations

import pytest

from cmx.mlperf.published.accelerators import AcceleratorName, name_matches, same_model

# names as they stand in v6.1's accelerator_model_name and SystemName columns, and as nvidia-smi / amd-smi say them
PUBLISHED = ("NVIDIA H200-SXM-141GB", "H200", "NVIDIA H200", "NVIDIA GH200-144GB_aarch64", "NVIDIA H100-SXM-80GB",
             "NVIDIA H100 80GB HBM3", "NVIDIA B200-SXM-180GB", "NVIDIA GB200", "NVIDIA B300-SXM-270GB",
             "AMD Instinct MI355X 288GB HBM3e", "MI355X", "AMD MI355X", "AMD Instinct MI350X 288GB HBM3e",
             "AMD Instinct MI300X-NPS1-SPX-192GB-750W", "AMD Instinct MI325X", "NVIDIA L40S", "NVIDIA L40",
             "NVIDIA RTX PRO 4500 Blackwell-PCIe-32GB", "Intel(R) Xeon(R) 6980P", "AMD Radeon 8060S Graphics")


def matching(query: str) -> list[str]:
    return [name for name in PUBLISHED if name_matches(query, name)]


@pytest.mark.parametrize(("query", "expected"), [
    ("H200", ["NVIDIA H200-SXM-141GB", "H200", "NVIDIA H200"]),
    ("h200", ["NVIDIA H200-SXM-141GB", "H200", "NVIDIA H200"]),
    ("NVIDIA H200-SXM-141GB", ["NVIDIA H200-SXM-141GB"]),
    ("H200-SXM-141GB", ["NVIDIA H200-SXM-141GB"]),
    ("GH200", ["NVIDIA GH200-144GB_aarch64"]),
    ("B200", ["NVIDIA B200-SXM-180GB"]),
    ("GB200", ["NVIDIA GB200"]),
    ("MI355X", ["AMD Instinct MI355X 288GB HBM3e", "MI355X", "AMD MI355X"]),
    ("AMD Instinct MI355X", ["AMD Instinct MI355X 288GB HBM3e", "MI355X", "AMD MI355X"]),
    ("MI300X", ["AMD Instinct MI300X-NPS1-SPX-192GB-750W"]),
    ("L40", ["NVIDIA L40"]),
    ("L40S", ["NVIDIA L40S"]),
    ("RTX PRO 4500", ["NVIDIA RTX PRO 4500 Blackwell-PCIe-32GB"]),
    ("8x H200", ["NVIDIA H200-SXM-141GB", "H200", "NVIDIA H200"]),
    ("Xeon 6980P", ["Intel(R) Xeon(R) 6980P"]),
    ("H300", []),
])
def test_a_query_matches_the_names_that_hold_each_of_its_words_whole(query: str, expected: list[str]) -> None:
    assert matching(query) == expected


def test_a_name_one_model_inside_another_is_never_matched_by_part() -> None:
    assert not name_matches("H200", "NVIDIA GH200-144GB_aarch64")
    assert not name_matches("B200", "NVIDIA GB200")
    assert not name_matches("MI300X", "AMD Instinct MI325X")
    assert not name_matches("H200", None)


@pytest.mark.parametrize(("name", "model", "count"), [
    ("NVIDIA H200-SXM-141GB", "h200", None),
    ("8x H200", "h200", 8),
    ("8xMI350X", "mi350x", 8),
    ("H200x8", "h200", 8),
    ("MI300X x8", "mi300x", 8),
    ("MI355X", "mi355x", None),  # an x that ends the model is no count
    ("AMD Instinct MI300X-NPS1-SPX-192GB-750W", "mi300x", None),
    ("NVIDIA RTX PRO 4500 Blackwell-PCIe-32GB", "rtx pro 4500 blackwell", None),
    ("Intel(R) Xeon(R) 6980P", "xeon 6980p", None),
])
def test_a_name_is_reduced_to_its_model_and_the_count_it_carries(name: str, model: str, count: int | None) -> None:
    parsed = AcceleratorName.parse(name)
    assert (parsed.model, parsed.count) == (model, count)


def test_detected_and_published_names_of_one_gpu_are_the_same_model() -> None:
    assert same_model("NVIDIA H200", "NVIDIA H200-SXM-141GB")
    assert same_model("NVIDIA H100 80GB HBM3", "NVIDIA H100-SXM-80GB")
    assert same_model("AMD Instinct MI300X", "AMD Instinct MI300X-NPS1-SPX-192GB-750W")
    assert not same_model("NVIDIA H200", "NVIDIA GH200-144GB_aarch64")
    assert not same_model("AMD Instinct MI355X", "AMD Instinct MI350X 288GB HBM3e")
    assert not same_model(None, "H200")
