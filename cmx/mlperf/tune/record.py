"""A tune's results folder: its last confirm run as the app's results tree, with the probes in cmx_tune.json beside it.

`cmx tune` writes into the app's `results_dir` (the folder `cmx run` would write: the app step's
`results/`, or `--input results_dir=DIR`) what `cmx report` reads:

    <system>/<benchmark>/<Scenario>/
        cmx_tune.json        the tune: every probe, every confirm run, the answer, the limits, the command
        user.conf            the user.conf of the last confirm run (the app's, at its target)
        performance/run_1/   the last confirm run's LoadGen logs and per-sample times (copied from the tune folder)
        cmx_run.json         that run's facts, written as the app writes them (not compliant: no accuracy run)
    summary.txt

The confirm run is a real performance test at the app's user.conf, judged as the harness judges
one, so the page shows it as a row with its plots; the probes are not, and live only in
cmx_tune.json. With no confirm run (no probe passed, or --no-confirm) only cmx_tune.json is written.
The packager copies the files it names and nothing else, so cmx_tune.json never reaches a
submission tree.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

CMX_TUNE_JSON = "cmx_tune.json"


def write_tune_results(config: Any, scenario: str, record: dict[str, Any], last_confirm: Any | None,
                       confirm_dir: Path | None) -> Path:
    """Write the results folder of a tune (`config`: the app's AppConfig; `record`: the tune's outputs, as
    cmx_tune.json keeps them; `last_confirm`: the last confirm run's HarnessResult at `record['confirms'][-1]`'s
    QPS, with its logs in `confirm_dir`); return the results folder."""
    from cmx.mlperf.app import SUMMARY_TXT, sampling_notes, scenario_user_conf, score, write_cmx_run
    from cmx.mlperf.rounds import load_round
    from cmx.mlperf.run_summary import format_table

    folder = config.scenario_dir(scenario)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CMX_TUNE_JSON).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if last_confirm is None or confirm_dir is None:
        return config.results_dir
    qps = record["confirms"][-1]["qps"]
    # the app's config at the confirmed target: its user.conf and cmx_run.json are what `cmx run` would write
    at = replace(config, scenarios=(scenario,), modes=("performance",), target_qps={**config.target_qps, scenario: qps})
    round_ = load_round(at.round)
    conf = scenario_user_conf(at, round_, scenario)
    conf.write(folder / "user.conf")
    run_dir = at.run_dir(scenario, "performance")
    shutil.copytree(confirm_dir, run_dir)
    summary = score(at, round_, last_confirm, run_dir)
    write_cmx_run(at, round_, scenario, conf, [summary])
    table = format_table([summary], short=at.short or at.tiny, notes=sampling_notes(at))
    (at.results_dir / SUMMARY_TXT).write_text(table + "\n", encoding="utf-8")
    return at.results_dir
