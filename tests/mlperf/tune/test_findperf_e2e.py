"""find-performance end to end: `cmx run` of the tiny llama2, `_short`, Offline and Server, with no Server target
(`_tiny` fixes none): the run measures it first (the Offline rate on the tune's engine, then the tune's search from
it), then runs both scenarios VALID at the targets it found, and records how (cmx_run.json, the summary table).

Real vLLM (CPU) and LoadGen; about two minutes after the deps. Judged on latency (the Server runs), so serial.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO, Home, needs_vllm

QUERY = "app mlperf inference llama2 _cpu _tiny _short"


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_a_run_without_a_server_target_measures_one_then_runs_valid_at_it(home: Home, tmp_path: Path) -> None:
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    results = tmp_path / "results"
    proc = home.cmx("run", QUERY, "--input", "round=v6.0", "--input", "scenarios=Offline,Server", "--input",
                    "modes=performance", "--input", f"results_dir={results}", "--progress", "plain", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # it said what it did, as it did it, and what it found
    assert "find-performance Server" in proc.stderr, proc.stderr
    line = re.search(r"FIND-PERFORMANCE Server: target_qps_server = ([\d.]+) \(the tune's search; measured "
                     r"([\d.]+)/s, margin 20%; (\d+) probe\(s\)", proc.stdout)
    assert line, proc.stdout
    target, measured = float(line.group(1)), float(line.group(2))
    assert target == pytest.approx(0.8 * measured, rel=0.01)
    facts = {s: json.loads(next(results.glob(f"*/*/{s}/cmx_run.json")).read_text()) for s in ("Offline", "Server")}
    server = facts["Server"]
    assert server["ok"] and server["validity"]["performance"] == "VALID"
    assert server["target_qps"] == target and server["find_performance"]["qps"] == target
    assert server["find_performance"]["search_qps"] >= measured
    # Offline's target was given (_tiny's 600): no probe for it, and the record says so
    assert facts["Offline"]["target_qps"] == 600.0 and facts["Offline"]["find_performance"] is None
    assert facts["Offline"]["validity"]["performance"] == "VALID"
    # a probe is never a result: its logs are beside the results tree, not in it
    probes = server["find_performance"]["folder"]
    assert "find-performance" in probes and not probes.startswith(str(results))
    assert list((tmp_path / "results").rglob("probe-*")) == []
    assert any(p.name.startswith("probe-") for p in Path(probes).iterdir())
