"""The published table read from summary.json and summary.csv as the checker writes them, per-accelerator figures,
and the filters of `cmx results`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx.mlperf.published.table import PublishedResultsError, RowFilter, read_table
from tests.published_tables import rows, write_summary


@pytest.fixture
def table(tmp_path: Path):
    return read_table(write_summary(tmp_path / "summary.json"))


def test_summary_json_and_summary_csv_give_the_same_rows(tmp_path: Path) -> None:
    from_json = read_table(write_summary(tmp_path / "summary.json"))
    from_csv = read_table(write_summary(tmp_path / "summary.csv"))
    assert len(from_json) == len(rows())
    assert from_json == from_csv


def test_a_row_keeps_the_columns_the_listing_shows(table) -> None:
    row = table[0]
    assert (row.organization, row.system, row.benchmark, row.scenario, row.units) == \
        ("AMD", "8xMI355X_2xEPYC_9575F", "llama2-70b-99.9", "Offline", "Tokens/s")
    assert (row.nodes, row.accelerator, row.total_accelerators, row.precision) == \
        (1, "AMD Instinct MI355X 288GB HBM3e", 8, "fp4")
    assert row.framework.startswith("vLLM 0.22.0")
    assert row.per_device == pytest.approx(106517.0 / 8)


def test_per_accelerator_divides_by_every_accelerator_of_every_node(table) -> None:
    nine_nodes = next(r for r in table if r.system == "9x8xMI355X_2xEPYC_9575F")
    assert (nine_nodes.nodes, nine_nodes.devices) == (9, 72)
    assert nine_nodes.per_device == pytest.approx(900000.0 / 72)


def test_a_cpu_only_row_is_divided_by_its_sockets(table) -> None:
    cpu = next(r for r in table if r.organization == "Intel" and r.benchmark == "llama2-70b-99.9")
    assert cpu.on_cpu and cpu.accelerator is None
    assert (cpu.device, cpu.devices, cpu.per_device) == ("Intel(R) Xeon(R) 6980P", 2, 600.0)


def test_a_lower_case_scenario_is_spelled_as_the_final_report_spells_it(table) -> None:
    assert {r.scenario for r in table if r.benchmark == "resnet"} == {"Offline"}


def test_the_filters_keep_one_benchmark_scenario_and_accelerator(table) -> None:
    kept = RowFilter(benchmark="llama2-70b-99.9", scenario="offline", accelerator="MI355X").apply(table)
    assert sorted(r.organization for r in kept) == ["AMD", "AMD", "HPE", "MangoBoost"]
    assert all(r.benchmark == "llama2-70b-99.9" and r.scenario == "Offline" for r in kept)


def test_division_framework_and_a_count_narrow_further(table) -> None:
    mi355x = RowFilter(benchmark="llama2-70b-99.9", scenario="Offline", accelerator="MI355X")
    assert [r.organization for r in RowFilter(**{**mi355x.__dict__, "division": "open"}).apply(table)] == \
        ["MangoBoost"]
    assert {r.organization for r in RowFilter(framework="VLLM").apply(table)} == {"AMD", "HPE", "MangoBoost", "Dell"}
    assert [r.devices for r in RowFilter(accelerator="4x MI355X").apply(table)] == [4]


def test_a_benchmark_prefix_finds_both_accuracy_targets_and_a_submitters_spelling_is_found(table) -> None:
    assert {r.benchmark for r in RowFilter(benchmark="llama2-70b").apply(table)} == {"llama2-70b-99",
                                                                                     "llama2-70b-99.9"}
    assert [r.submitted_as for r in RowFilter(benchmark="llama3.1-8b").apply(table)] == ["llama3_1-8b"]
    assert [r.benchmark for r in RowFilter(benchmark="resnet50").apply(table)] == ["resnet"]


def test_cpu_asks_for_the_systems_without_accelerators(table) -> None:
    assert {r.organization for r in RowFilter(accelerator="cpu").apply(table)} == {"Intel"}


def test_a_power_row_is_never_listed_as_a_result(table) -> None:
    assert any(r.is_power for r in table)
    assert not any(r.is_power for r in RowFilter().apply(table))
    dell = RowFilter(accelerator="MI300X").apply(table)
    assert [r.units for r in dell] == ["Tokens/s"]


def test_a_file_that_is_not_the_checkers_summary_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    bad = tmp_path / "summary.json"
    bad.write_text('{"0": {"Organization": "AMD"}}', encoding="utf-8")
    with pytest.raises(PublishedResultsError, match="lacks the column") as err:
        read_table(bad)
    assert "inference_results" in (err.value.hint or "")
    cut = tmp_path / "cut.json"
    cut.write_text(write_summary(tmp_path / "whole.json").read_text()[:500], encoding="utf-8")
    with pytest.raises(PublishedResultsError, match="not valid JSON"):
        read_table(cut)
