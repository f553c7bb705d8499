"""Benchmark facts live in the round files and the benchmark packages: the generic rooms (loadgen, submission,
pareto, backends) name no benchmark and branch on no model type, so a new benchmark is data there, not code."""

from __future__ import annotations

import re
from pathlib import Path

from cmx.mlperf.benchmarks import all_benchmarks
from cmx.mlperf.rounds import endpoints_v1_benchmarks, known_rounds, load_round
from tests.conftest import REPO

GENERIC = tuple(REPO / "cmx" / "mlperf" / room for room in ("loadgen", "submission", "pareto", "backends"))
# `config["model_type"] == "whisper"`, `model_type in (...)`: a branch on a checkpoint's model type
MODEL_TYPE_BRANCH = re.compile(r"""model_type["']?\]?\)?\s*(==|!=|\bin\b|\bnot in\b)""")


def known_names() -> set[str]:
    """Every benchmark name the registry and the rounds know, as they spell it: families, MLPerf names and the
    models LoadGen runs."""
    names: set[str] = set()
    for bench in all_benchmarks():
        names |= {bench.family, *bench.names, *bench.loadgen_models.values()}
    for name in known_rounds():
        round_ = load_round(name)
        names |= {round_.default_benchmark, *round_.endpoints_benchmarks}
        for bench in round_.benchmarks:
            names |= {bench.name, *(s.loadgen_model for s in bench.scenarios)}
    return names | set(endpoints_v1_benchmarks())


def findings(rooms: tuple[Path, ...], names: set[str]) -> list[str]:
    """`path:line: what` for each benchmark name and each model-type branch in the rooms' Python files."""
    out = []
    for room in rooms:
        for path in sorted(room.rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found = sorted(n for n in names if n in line)
                if MODEL_TYPE_BRANCH.search(line):
                    found.append("a branch on model_type")
                out += [f"{path.relative_to(room.parent)}:{number}: {what}" for what in found]
    return out


def test_the_registry_and_the_rounds_know_every_benchmark_the_generic_code_used_to_name() -> None:
    names = known_names()
    assert {"llama2-70b-99", "llama3.1-8b", "llama3_1-8b-interactive", "whisper", "qwen3-vl-235b-a22b",
            "gpt-oss-120b", "deepseek-r1", "mixtral-8x7b", "llama3.1-405b"} <= names


def test_no_benchmark_name_or_model_type_branch_in_loadgen_submission_pareto_or_backends() -> None:
    assert findings(GENERIC, known_names()) == []


def test_the_scan_finds_a_name_in_code_a_comment_and_a_model_type_branch(tmp_path: Path) -> None:
    room = tmp_path / "loadgen"
    (room / "deep").mkdir(parents=True)
    (room / "deep" / "sut.py").write_text('TARGETS = {"whisper": 4096}\n# llama3.1-8b answers slower\n'
                                          'if config.get("model_type") == "t5":\n    pass\n', encoding="utf-8")
    (room / "notes.txt").write_text("whisper\n", encoding="utf-8")  # data, not code
    assert findings((room,), {"whisper", "llama3.1-8b"}) == [
        "loadgen/deep/sut.py:1: whisper", "loadgen/deep/sut.py:2: llama3.1-8b",
        "loadgen/deep/sut.py:3: a branch on model_type"]


def test_the_facts_that_moved_keep_their_values() -> None:
    from cmx.mlperf.benchmarks import benchmark_for

    assert [b.names[0] for b in all_benchmarks() if b.test01_sampling_target] == ["whisper"]
    assert benchmark_for("whisper").test01_sampling_target == 4096
    assert endpoints_v1_benchmarks() == ("llama3.1-8b", "gpt-oss-120b", "deepseek-r1")
    assert {r: load_round(r).default_benchmark for r in known_rounds()} == {
        "v5.1": "llama2-70b-99", "v6.0": "llama2-70b-99", "v6.1": "llama2-70b-99.9"}
    checked = {r: [b.name for b in load_round(r).benchmarks if b.endpoints_accuracy_checked] for r in known_rounds()}
    assert checked == {"v5.1": [], "v6.0": ["qwen3-vl-235b-a22b"], "v6.1": ["qwen3-vl-235b-a22b"]}
