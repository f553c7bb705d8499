"""Every benchmark package keeps the Benchmark protocol's promises: its names and LoadGen models are the
round's, its tiny generator writes what its own loader reads, and its scorer gives every value the
round's accuracy targets name, in a form accuracy.txt carries to the checker."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks import UnknownBenchmark, all_benchmarks, benchmark_for
from cmx.mlperf.benchmarks.base import Benchmark
from cmx.mlperf.rounds import load_round
from cmx.mlperf.scoring.accuracy_txt import (
    format_accuracy_txt,
    meets_targets,
    parse_accuracy_txt,
)

BENCHMARKS = all_benchmarks()
IDS = [b.family for b in BENCHMARKS]


def test_the_benchmarks_are_found_by_family_and_by_mlperf_name():
    assert IDS == ["deepseek-r1", "gpt-oss-120b", "llama2-70b", "llama3.1-405b", "llama3.1-8b", "mixtral-8x7b"]
    assert benchmark_for("llama2-70b-99.9").family == "llama2-70b"
    assert benchmark_for("llama3.1-8b").names == ("llama3.1-8b",)
    with pytest.raises(UnknownBenchmark, match="no benchmark is called 'llama3-8b'") as info:
        benchmark_for("llama3-8b")
    assert "llama3.1-8b" in (info.value.hint or "")


@pytest.mark.parametrize("bench", BENCHMARKS, ids=IDS)
def test_names_and_loadgen_models_are_the_rounds(bench: Benchmark):
    v60 = load_round("v6.0")
    for name in bench.names:
        rules = v60.benchmark(name)
        assert {s.name: s.loadgen_model for s in rules.scenarios} == dict(bench.loadgen_models)
    assert bench.generation.max_tokens >= bench.generation.min_tokens >= 2


@pytest.fixture(scope="module", params=BENCHMARKS, ids=IDS)
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Benchmark, Path, Path]:
    bench: Benchmark = request.param
    folder = tmp_path_factory.mktemp(bench.family)
    model = bench.make_tiny_model(folder / "model", seed=0)
    dataset = bench.make_tiny_dataset(folder / "dataset", model, rows=6, seed=0)
    return bench, model, dataset


def test_the_tiny_dataset_is_what_the_loader_reads(tiny: tuple[Benchmark, Path, Path]):
    bench, _, path = tiny
    data = bench.load_dataset(path)
    assert len(data) == 6 and len(data.limit(4)) == 4
    for i in range(len(data)):
        assert data.prompt_ids(i) and all(isinstance(t, int) for t in data.prompt_ids(i))
        assert isinstance(data.reference(i), str) and data.reference(i)


def test_the_scorer_gives_every_value_the_round_checks(tiny: tuple[Benchmark, Path, Path], tmp_path: Path):
    bench, model, path = tiny
    data = bench.load_dataset(path)
    # each sample "answers" with the first ids of its own prompt: real ids of the tokenizer
    records = [{"seq_id": i, "qsl_idx": i, "data": array("i", data.prompt_ids(i)[1:9]).tobytes().hex()}
               for i in range(len(data))]
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps(records))
    values = bench.score(log, data, model)
    targets = load_round("v6.0").benchmark(bench.names[0]).accuracy
    assert set(targets.metrics) <= set(values)
    assert all(type(v) in (int, float) for v in values.values())  # plain numbers: the checker's patterns read them
    parsed = parse_accuracy_txt(format_accuracy_txt(values, "0" * 64))
    assert not [s for s in meets_targets(parsed, targets) if "missing" in s]
