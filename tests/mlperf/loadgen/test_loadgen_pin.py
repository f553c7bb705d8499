"""A round whose LoadGen the venv does not hold runs from the same venv: get-loadgen installs the real pinned wheel
from PyPI into a cache entry, and a real harness process (real LoadGen, real vLLM on the CPU, the tiny model) runs
on it, with that round's seeds in its detail log."""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path

import pytest

from cmx import api
from cmx.mlperf.loadgen.harness import run_tests
from cmx.mlperf.loadgen.harness_config import EngineSettings, HarnessConfig, LoadgenSource
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf
from cmx.mlperf.rounds import known_rounds, load_round
from cmx.mlperf.runtime import LOADGEN_ARTEFACT
from tests.conftest import Home

pytestmark = pytest.mark.e2e
LOG = logging.getLogger("test-loadgen-pin")


def test_a_round_whose_loadgen_the_venv_lacks_runs_on_its_cached_pin_with_its_seeds(builtin: Home, tmp_path: Path):
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama, make_tiny_openorca

    installed = version("mlcommons-loadgen")
    name = next(r for r in ("v6.0", *reversed(known_rounds())) if load_round(r).loadgen_version != installed)
    round_ = load_round(name)

    done = api.run("get loadgen", inputs={"round": name}, settings=builtin.settings)
    assert done.ok, done.error
    found = done.outputs
    assert found["version"] == round_.loadgen_version and found["built_now"]
    assert Path(found["path"]).is_relative_to(builtin.settings.cache / LOADGEN_ARTEFACT)
    assert version("mlcommons-loadgen") == installed  # nothing went into the venv
    assert api.run("get loadgen", inputs={"round": name}, settings=builtin.settings).outputs == {**found,
                                                                                                 "built_now": False}

    bench = next(b for b in ("llama2-70b-99", "llama2-70b-99.9") if b in round_.benchmark_names)
    model = make_tiny_llama(tmp_path / "model", seed=0).path
    dataset = make_tiny_openorca(tmp_path / "orca.pkl", model, rows=64, seed=0).path
    conf = user_conf(round_, bench, "Offline", target_qps=200,
                     short=ShortProfile(samples=32, min_duration_ms=1000, min_query_count=32))
    config = HarnessConfig(model=model, dataset=dataset, scenario="Offline", mode="performance",
                           user_conf=conf.write(tmp_path / "user.conf"), output=tmp_path / "run", round=name,
                           benchmark=bench, device="cpu", max_tokens=8, rows=64,
                           engine=EngineSettings(max_model_len=2048),
                           loadgen=LoadgenSource(found["version"], Path(found["path"])))
    result = run_tests([config], timeout=300, logger=LOG)[0]
    run = read_loadgen_run(config.output)
    assert run.loadgen_version == round_.loadgen_version != installed
    assert run.settings.seeds == round_.seeds
    assert not [f for f in run.findings(round_, bench, compliant=False) if f.rule == "loadgen.seeds"]
    assert result.completed_samples > 0 and run.errors == ()
