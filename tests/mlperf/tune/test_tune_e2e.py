"""`cmx tune` end to end: the CLI on the tiny model with real vLLM (CPU) and real LoadGen, Server, `_short`.

Kept short (about a minute after the deps): it starts at 80 queries/s with a wide tolerance and at most 4
probes, so it shows the whole path (deps, one engine for the probes, the confirm run through FromConfig on the
same engine, the table, the inputs file, the results folder `cmx report` reads) without searching finely; the
search's precision is unit-tested in test_search.py and measured by bench/tune.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.report.collect import collect
from cmx.recipe.inputs_file import read_inputs_file
from tests.conftest import REPO, Home, needs_vllm

QUERY = "app mlperf inference llama2 _cpu _tiny _short"


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_tune_prints_a_confirmed_qps_and_its_probes_and_run_reads_the_inputs_file(home: Home, tmp_path: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    tuned = tmp_path / "tuned.yaml"
    proc = home.cmx("tune", QUERY, "--scenario", "Server", "--start", "80", "--tolerance", "0.2",
                    "--max-probes", "4", "--out", str(tuned), "--progress", "plain", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^probe\s+target qps\s+LoadGen\s+early stop", out, re.M), out
    probes = re.findall(r"^(\d+)\s+([\d.]+)\s+(VALID|INVALID)\s", out, re.M)
    assert 1 <= len(probes) <= 4 and probes[0][1] == "80", out
    found = re.search(r"^target_qps_server = ([\d.]+)$", out, re.M)
    assert found, out
    qps = float(found.group(1))
    assert re.search(rf"^confirm at {found.group(1)}/s \(on the probes' engine, [\d.]+ s\): VALID", out, re.M), out
    assert {k: float(v) for k, v in read_inputs_file(tuned).items()} == {"target_qps_server": qps}
    # the confirm run is LoadGen's with the app's user.conf, read once in its process: no second conf file
    # (a retry a step lower, when the first confirm run failed at the edge, reuses its settings: confirm-2/)
    tune_dir = next((home.root / "runs").glob("*/work/app-mlperf-inference-llama2/tune-server"))
    confirms = sorted(tune_dir.glob("confirm*"))
    run = read_loadgen_run(confirms[-1])
    assert run.results.validity == "VALID" and run.settings.target_qps == pytest.approx(qps)
    assert all(not read_loadgen_run(c).multiple_conf_files and read_loadgen_run(c).errors == () for c in confirms)
    assert "SHORT PROFILE" in (confirms[-1] / "user.conf").read_text()
    # the confirm run as the app's results tree, the probes beside it: what `cmx report` draws
    results = Path(re.search(r"^  report: cmx report (\S+)$", out, re.M).group(1))
    report = collect(results)
    assert [(t.mode, t.target_qps) for t in report.tests] == [("performance", qps)]
    assert [p.qps for p in report.tunes[0].probes] == [float(q) for _, q, _ in probes] and report.tunes[0].qps == qps
    # the live progress of each probe on the app step's line
    assert any("tune Server" in line and "TTFT p99" in line for line in proc.stderr.splitlines()), proc.stderr
    # the inputs file is what `cmx run` / `cmx plan` read
    plan = home.cmx_json("plan", f"{QUERY} _server", "--inputs-file", str(tuned))
    root = next(s for s in plan["steps"] if s["recipe"] == "app-mlperf-inference-llama2")
    assert root["inputs"]["target_qps_server"] == qps
