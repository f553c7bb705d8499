"""Every benchmark package passes by existing: the kit test, run over all_benchmarks().

A package found by the registry keeps the Benchmark Protocol's promises with no test of its own:
its names and LoadGen models are the rounds' (cmx/mlperf/rounds), its tiny model comes out of the
model recipe's sequence (kit.model_recipe's make_tiny) with the outputs its get-ml-model recipe
declares, its tiny dataset is what its own loader reads, its scorer writes the accuracy.txt the
checker reads every target's value from, and its model side refuses what a recipe must refuse.
One tiny model and dataset per benchmark, made once for the module (a few seconds each).
"""

from __future__ import annotations

import json
import logging
import re
from array import array
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.backends.base import GenResult
from cmx.mlperf.benchmarks import UnknownBenchmark, all_benchmarks, benchmark_for, dataset_for_test
from cmx.mlperf.benchmarks.base import Benchmark
from cmx.mlperf.benchmarks.kit.model import ModelError, ModelFolder
from cmx.mlperf.loadgen.harness import evaluate_accuracy
from cmx.mlperf.loadgen.run_record import ACCURACY_LOG
from cmx.mlperf.rounds import known_rounds, load_round
from cmx.mlperf.scoring.accuracy_txt import CHECKER_NAMES, meets_targets, read_accuracy_txt
from cmx.recipe.load import load_recipe
from cmx.recipe.model import Recipe
from tests.conftest import REPO

BENCHMARKS = all_benchmarks()
IDS = [b.family for b in BENCHMARKS]
ROWS = 6


def model_recipe(bench: Benchmark) -> Recipe:
    """The get-ml-model recipe that carries the benchmark's family as a tag (as Kubernetes finds it), merged onto
    the get-ml-model base it extends (the outputs every model recipe reports are declared there)."""
    found = [recipe for path in sorted((REPO / "recipes").glob("get-ml-model-*/recipe.yaml"))
             if bench.family in (recipe := load_recipe(path.parent)[0]).tags]
    assert len(found) == 1, f"{bench.family}: {len(found)} model recipes"
    return found[0]


def default_precision(recipe: Recipe) -> str | None:
    return next((v.name for v in recipe.groups.get("precision", ()) if v.default), None)


@pytest.fixture(scope="module", params=BENCHMARKS, ids=IDS)
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Benchmark, ModelFolder,
                                                                                              Path]:
    """The benchmark, its tiny model as its recipe makes it (no input given), and a tiny dataset of ROWS rows."""
    bench: Benchmark = request.param
    folder = tmp_path_factory.mktemp(bench.family)
    model = bench.make_tiny(folder / "model", default_precision(model_recipe(bench)), {},
                            log=logging.getLogger("test-kit"))
    dataset = bench.make_tiny_dataset(folder / "dataset", model.path, rows=ROWS, seed=0)
    return bench, model, dataset


def test_the_benchmarks_are_found_by_family_and_by_mlperf_name():
    assert IDS == ["deepseek-r1", "gpt-oss-120b", "llama2-70b", "llama3.1-405b", "llama3.1-8b", "mixtral-8x7b",
                   "qwen3-vl-235b-a22b", "wan-2.2-t2v-a14b", "whisper"]
    assert benchmark_for("llama2-70b-99.9").family == "llama2-70b"
    assert benchmark_for("llama3.1-8b").names == ("llama3.1-8b",)
    with pytest.raises(UnknownBenchmark, match="no benchmark is called 'llama3-8b'") as info:
        benchmark_for("llama3-8b")
    assert "llama3.1-8b" in (info.value.hint or "")


@pytest.mark.parametrize("bench", BENCHMARKS, ids=IDS)
def test_its_names_and_loadgen_models_are_in_the_rounds(bench: Benchmark):
    rounds = [r for r in map(load_round, known_rounds()) if set(bench.names) <= set(r.benchmark_names)]
    assert rounds, f"no round lists {bench.names}"
    for round_ in rounds:  # an older round may lack a scenario (deepseek-r1's Interactive came in v6.0)
        for name in bench.names:
            rules = round_.benchmark(name)
            ran = {s.name: s.loadgen_model for s in rules.scenarios if not s.endpoints_only}  # LoadGen runs these
            assert ran.items() <= dict(bench.loadgen_models).items()
            assert rules.accuracy.metrics
    newest = rounds[-1].benchmark(bench.names[0])
    assert {s.name: s.loadgen_model for s in newest.scenarios if not s.endpoints_only} == dict(bench.loadgen_models)
    assert bench.generation.max_tokens >= bench.generation.min_tokens >= 2


def test_its_tiny_model_has_the_outputs_its_model_recipe_declares(tiny: tuple[Benchmark, ModelFolder, Path]):
    bench, model, _ = tiny
    outputs = model.outputs()
    assert set(outputs) == set(model_recipe(bench).outputs)
    assert model.is_tiny and model.revision == "" and outputs["tokenizer_path"] == model.path
    assert model.eos_token_id in model.eos_token_ids or not model.eos_token_ids
    # what a download must hold, the tiny folder holds
    bench.require_model_files([str(p.relative_to(model.path)) for p in model.path.rglob("*") if p.is_file()],
                              "tiny", "")
    assert bench.describe(model.path, "mine", "", model.precision, is_tiny=False).outputs() == \
        {**outputs, "name": "mine", "is_tiny": False}


def test_its_tiny_dataset_is_what_its_loader_reads(tiny: tuple[Benchmark, ModelFolder, Path]):
    bench, model, path = tiny
    for mode in ("performance", "accuracy"):
        data = dataset_for_test(bench, path, mode)
        assert len(data) == ROWS and len(data.limit(4)) == 4
        # what the QSL reads: the dataset, Whisper's clips, Qwen3-VL's conversations, or Wan's video prompts
        prompts: Any = bench.prompt_source(data, model.path)
        assert len(prompts) == ROWS
        for i in range(len(data)):
            if bench.chat:
                assert prompts.chat(i).messages
            elif bench.generation.video is not None:
                assert prompts.video(i).text and prompts.video(i).file_name.endswith(".mp4")
            else:
                assert prompts.prompt_ids(i) and all(isinstance(t, int) for t in prompts.prompt_ids(i))
            assert isinstance(data.reference(i), str) and data.reference(i)


def test_its_scorer_writes_the_accuracy_txt_the_checker_reads(tiny: tuple[Benchmark, ModelFolder, Path],
                                                              tmp_path: Path):
    bench, model, path = tiny
    if bench.generation.video is not None:
        pytest.skip("a video's scorer is VBench in its own environment, on the videos a run wrote: the benchmark's "
                    "own scoring tests run it")
    data = bench.load_dataset(path)
    prompts: Any = bench.prompt_source(data, model.path)
    encode = bench.response_encoder(model.path)

    def answer(i: int) -> GenResult:
        """Sample i "answers" with the first ids of its own prompt (real ids of the tokenizer), or, for a chat
        benchmark, with a reply naming its true category."""
        if bench.chat:
            reply = json.dumps({"category": data.reference(i), "brand": "b", "is_secondhand": False})
            return GenResult(i, [], text=reply, count=9)
        return GenResult(i, prompts.prompt_ids(i)[1:9])

    # a tiny run's accuracy log, answered as the benchmark answers LoadGen (int32 ids, Whisper's labels, text)
    records = [{"seq_id": i, "qsl_idx": i,
                "data": (encode(result) if encode else array("i", result.token_ids)).tobytes().hex()}
               for i in range(len(data)) for result in [answer(i)]]
    (tmp_path / ACCURACY_LOG).write_text(json.dumps(records))
    values = read_accuracy_txt(evaluate_accuracy(tmp_path, path, model.path, benchmark=bench.names[0]))
    for name in bench.names:
        newest = [r for r in map(load_round, known_rounds()) if name in r.benchmark_names][-1]
        targets = newest.benchmark(name).accuracy
        assert not [s for s in meets_targets(values, targets) if "missing" in s]
        # the checker's patterns read plain numbers under their own labels (ROUGE1 for rouge1)
        assert all(type(values[k]) in (int, float) for k in targets.metrics), {k: values[k] for k in targets.metrics}
        assert all(CHECKER_NAMES.get(k, k) for k in targets.metrics)
    assert isinstance(values.get("hash"), str) and len(str(values["hash"])) == 64


@pytest.mark.parametrize("bench", BENCHMARKS, ids=IDS)
def test_its_model_side_refuses_what_a_model_recipe_must(bench: Benchmark, tmp_path: Path):
    with pytest.raises(ModelError, match=r"^layers applies to the tiny model only"):
        bench.refuse_tiny_inputs({"layers": 4, "model_path": None})
    bench.refuse_tiny_inputs({name: None for name in ("seed", "layers", "heads", "hidden_size", "model_path")})
    with pytest.raises(ModelError, match="model_path and _tiny exclude each other"):
        bench.make_tiny(tmp_path / "m", None, {"model_path": tmp_path})
    # the file that makes a folder the model (config.json; a diffusers pipeline's model_index.json), and the files
    # beside it (the tokenizer; a pipeline's parts)
    files = bench.model.files  # type: ignore[attr-defined]  # ModelDefaults's, which every BENCHMARK is
    with pytest.raises(ModelError, match=re.escape(f"has no {files.index} among the files chosen")):
        bench.require_model_files(["tokenizer.json", "model.safetensors"], "org/name", "c" * 40)
    with pytest.raises(ModelError, match=re.escape(f"has no {files.missing([])}")):
        bench.require_model_files([files.index, "model.safetensors"], "org/name", "c" * 40)
    assert bench.model_size >= 10**9  # the real checkpoint: what a Kubernetes model cache is sized for
