"""A cmx results folder ranked among the published rows of its benchmark, scenario and accelerator model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx.mlperf.published.answer import CostAsk, Source, answer, to_json
from cmx.mlperf.published.compare import place, read_runs
from cmx.mlperf.published.table import PublishedResultsError, RowFilter, read_table
from cmx.mlperf.published.text import format_answer
from tests.published_tables import row, rows, write_summary
from tests.submission_trees import cmx_results


def mi300x_run(tmp_path: Path, tokens_per_second: float = 16000.0) -> Path:
    """The generated results tree (8 MI300X, rocm, bf16) as a llama2-70b-99.9 Offline run of `tokens_per_second`."""
    root = cmx_results(tmp_path / "results", scenarios=("Offline",), benchmark="llama2-70b-99.9")
    record = root / "box" / "llama2-70b-99" / "Offline" / "cmx_run.json"
    facts = json.loads(record.read_text())
    for run in facts["runs"]:
        run["tokens_per_second"] = tokens_per_second
    record.write_text(json.dumps(facts))
    return root


def mi300x_table(tmp_path: Path) -> Path:
    """rows() (Dell's MI300X at 24,000 tokens/s, and its power row) and three more MI300X rows."""
    return write_summary(tmp_path / "summary.json", [*rows(),
        row("Supermicro", "AS-8125GS", "llama2-70b-99.9", "Offline", 20000.0, "MI300X", 8, precision="bf16",
            framework="vLLM 0.9.2, ROCm 6.4"),
        row("Quanta", "2-node MI300X", "llama2-70b-99.9", "Offline", 32000.0, "AMD Instinct MI300X", 8, nodes=2,
            precision="fp8"),
        row("Lenovo", "SR685a", "llama2-70b-99.9", "Server", 40000.0, "AMD Instinct MI300X", 8),  # another scenario
    ])


def test_the_run_is_ranked_by_its_figure_per_accelerator_among_the_same_model(tmp_path: Path) -> None:
    (run,) = read_runs(mi300x_run(tmp_path))
    assert (run.benchmark, run.scenario, run.device, run.devices, run.on_cpu) == \
        ("llama2-70b-99.9", "Offline", "AMD Instinct MI300X", 8, False)
    p = place(run, read_table(mi300x_table(tmp_path)))
    # per accelerator: Dell 3,000, Supermicro 2,500, the run 2,000, Quanta 2,000 (32,000 / 16), the power row left out
    assert [peer.row.organization for peer in p.peers] == ["Dell", "Supermicro", "Quanta"]
    assert p.run_per_device == 2000.0
    assert (p.rank, p.of, p.best, p.median) == (3, 4, 3000.0, 2500.0)
    assert p.to_best == pytest.approx(2 / 3) and p.to_median == pytest.approx(0.8)


def test_what_differs_is_said_where_the_table_tells(tmp_path: Path) -> None:
    (run,) = read_runs(mi300x_run(tmp_path))
    differs = {peer.row.organization: peer.differs for peer in place(run, read_table(mi300x_table(tmp_path))).peers}
    assert differs["Dell"] == ("precision fp8 (the run: bf16)",)
    assert differs["Supermicro"] == ()
    assert differs["Quanta"] == ("precision fp8 (the run: bf16)",
                                 "framework TensorRT 10.14, CUDA 13.1 (the run: vLLM 0.9.2)", "2 nodes (the run: 1)")


def test_a_run_with_no_published_peer_says_there_are_none(tmp_path: Path) -> None:
    no_mi300x = [r for r in rows() if "MI300X" not in str(r["accelerator_model_name"])]
    source = Source(path=write_summary(tmp_path / "summary.json", no_mi300x), round="v6.1")
    found = answer(source, RowFilter(), compare=mi300x_run(tmp_path))
    ((p, _, _),) = found.placements
    assert p.peers == () and p.rank is None
    assert "no published AMD Instinct MI300X rows of llama2-70b-99.9 Offline in v6.1" in format_answer(found)


def test_a_cpu_run_is_ranked_among_the_cpu_only_rows_per_socket(tmp_path: Path) -> None:
    root = mi300x_run(tmp_path, tokens_per_second=900.0)
    record = root / "box" / "llama2-70b-99" / "Offline" / "cmx_run.json"
    facts = json.loads(record.read_text())
    facts["device"], facts["origin"]["system"]["gpus"] = "cpu", []  # 2 sockets of an EPYC
    record.write_text(json.dumps(facts))
    (run,) = read_runs(root)
    p = place(run, read_table(write_summary(tmp_path / "summary.json")))
    assert (run.on_cpu, run.devices, p.run_per_device) == (True, 2, 450.0)
    assert [(peer.row.organization, peer.per_device) for peer in p.peers] == [("Intel", 600.0)]
    assert p.rank == 2


def test_the_answer_as_json_carries_rank_ratios_peers_and_costs(tmp_path: Path) -> None:
    source = Source(path=mi300x_table(tmp_path), round="v6.1", commit="e" * 40)
    found = to_json(answer(source, RowFilter(), compare=mi300x_run(tmp_path), cost=CostAsk(3.6, 10, 100.0)))
    (run,) = found["runs"]
    assert (run["rank"], run["of"], run["per_device"]) == (3, 4, 2000.0)
    assert run["cost"] == {"amount": pytest.approx(0.5), "per": 1_000_000, "unit": "tokens"}
    assert run["users_cost"]["devices"] == 1  # 10 x 100 tokens/s on 2,000 per accelerator
    assert [p["organization"] for p in run["peers"]] == ["Dell", "Supermicro", "Quanta"]
    json.dumps(found)  # all of it JSON


def test_a_folder_without_a_performance_test_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(PublishedResultsError, match="no performance test"):
        read_runs(tmp_path / "empty")
