"""Every reason a results tree cannot go into the division asked for, collected before anything is written.

INVALID runs, errors in a log, seeds of another round, short or tiny results or missed accuracy
targets into closed, a missing scenario or test, quantized weights without their calibration,
an endpoint on another host into closed. Each reason is a sentence that says what to do.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cmx.errors import clip
from cmx.mlperf.app import MODE_FOLDERS
from cmx.mlperf.loadgen.compliance import compliance_test
from cmx.mlperf.loadgen.log import LoadgenLogError, read_loadgen_run
from cmx.mlperf.rounds import Round, RoundError
from cmx.mlperf.scoring.accuracy_txt import hash_lines, meets_targets, read_accuracy_txt
from cmx.mlperf.submission.sources import PackageRequest, SourceResult
from cmx.mlperf.submission.system_desc import (
    endpoint_is_remote,
)
from cmx.mlperf.submission.tree import (
    ACCURACY_LOG,
    ACCURACY_TXT,
)
from cmx.tools.fs import resolves_inside, sha256_file

UNQUANTIZED = ("bf16", "fp16", "")  # precisions that load the published weights as they are


def link_refusals(folder: Path) -> list[str]:
    """A symbolic link in a results folder that leaves it or points at nothing: the packager copies what a link
    points at, so a log linked to a file outside the run would go into the tree as the run's."""
    out = []
    for top, dirs, files in os.walk(folder):  # followlinks=False: a linked folder is listed, not entered
        for name in (*dirs, *files):
            path = Path(top, name)
            if path.is_symlink() and not (resolves_inside(path, folder) and path.exists()):
                where = "points at nothing" if resolves_inside(path, folder) else "leaves the results folder"
                out.append(f"{path.relative_to(folder)} is a symbolic link that {where} "
                           f"({clip(os.readlink(path))}): replace it with the run's own file, or run the test again")
    return out


def refusals(request: PackageRequest, round_: Round, results: Sequence[SourceResult]) -> list[str]:
    """Every reason these results cannot go into the requested division; [] when they can."""
    closed = request.division == "closed"
    reasons: list[str] = []
    for result in results:
        reasons += [f"{result.name}: {r}" for r in result_refusals(result, round_, closed=closed)]
    if closed:
        reasons += scenario_refusals(round_, results)
    return reasons


def result_refusals(result: SourceResult, round_: Round, *, closed: bool) -> list[str]:
    facts, out = result.facts, link_refusals(result.path)
    if facts.get("round") and facts["round"] != round_.name:
        out.append(f"it was run for {facts['round']}, not {round_.name}: its LoadGen seeds are that round's")
    try:
        bench = round_.benchmark(result.benchmark)
    except RoundError as exc:
        return [*out, exc.message]
    if result.scenario not in bench.scenario_names:
        return [*out, f"{result.benchmark} has no scenario {result.scenario} in {round_.name}"]
    if closed:
        out += closed_refusals(short=bool(facts.get("short")), tiny=bool(facts.get("tiny")), rows=facts.get("rows"),
                               dataset_size=bench.dataset_size)
        overrides = facts.get("sampling_overrides") or []
        if overrides:
            out.append(f"its sampling was overridden ({', '.join(overrides)}): the closed division generates as the "
                       "reference does; run without the override, or package it for open")
        backend = facts.get("backend") or {}
        if backend.get("kind") == "endpoint" and endpoint_is_remote(str(backend.get("url") or "")):
            out.append(f"its SUT sent the samples over HTTP to a server on another host ({backend.get('url')}): the "
                       "closed division measures the system described, with LoadGen on it, and cmx does not make "
                       "network-division results; package it for open")
        if backend.get("kind") == "endpoint" and backend.get("fixed_latent_sent") is False:
            out.append(f"its videos came from a server's {backend.get('video_route')} route, which carries no "
                       "initial latent: they did not start from the reference's fixed latent as far as cmx can tell; "
                       "package it for open")
    compliance = [compliance_test(t) for t in bench.compliance_tests] if closed else []
    modes = ("performance", "accuracy", *(t.mode for t in compliance))
    for mode in modes:
        if not result.has(mode):
            what = f"{mode.upper()} run (closed needs it for LLMs)" if mode.startswith("test") else f"{mode} run"
            out.append(f"there is no {what}: its {MODE_FOLDERS[mode]}/mlperf_log_detail.txt is missing")
    if not (result.path / "user.conf").is_file():
        out.append("there is no user.conf: the tree must hold the one the tests ran with")
    for mode in modes:
        if result.has(mode):
            out += _log_refusals(result, round_, mode, closed=closed)
    if result.has("accuracy"):
        out += _accuracy_refusals(result, round_, closed=closed)
    metrics = round_.benchmark(result.benchmark).accuracy.metrics if compliance else ()
    for test in compliance:
        if result.has(test.mode):
            folder = result.run_dir(test.mode)
            out += [f"{test.name} failed (in {folder}): {why}" for why in test.failures(folder, result.benchmark,
                                                                                      metrics)]
    return out


def closed_refusals(*, short: bool, tiny: bool, rows: int | None, dataset_size: int) -> list[str]:
    """What keeps a run out of the closed division whatever its logs say (the app checks it before running)."""
    out = []
    if short:
        out.append("a _short run (cmx's smoke profile) cannot go into the closed division; run without _short")
    if tiny:
        out.append("a _tiny run (random weights, generated data) cannot go into the closed division")
    if rows is not None:
        out.append(f"only {rows} dataset rows were used; the closed division needs all {dataset_size}")
    return out


def _log_refusals(result: SourceResult, round_: Round, mode: str, *, closed: bool) -> list[str]:
    try:
        run = read_loadgen_run(result.run_dir(mode))
    except LoadgenLogError as exc:
        return [f"{mode}: {exc}"]
    test = mode.upper() if mode.startswith("test") else None
    found = run.findings(round_, result.benchmark, compliant=closed and test is None, scenario=result.scenario,
                         compliance_test=test)
    label = test or mode
    return [f"{label}: {f.text}" for f in found]


def _accuracy_refusals(result: SourceResult, round_: Round, *, closed: bool) -> list[str]:
    folder = result.run_dir("accuracy")
    txt, log = folder / ACCURACY_TXT, folder / ACCURACY_LOG
    if not txt.is_file():
        return [f"accuracy: there is no {ACCURACY_TXT}: the accuracy run was not scored"]
    values = read_accuracy_txt(txt)
    out = []
    if not log.is_file():
        out.append(f"accuracy: the full {ACCURACY_LOG} is missing, so accuracy.txt cannot be checked against it")
    elif sha256_file(log) not in hash_lines(txt.read_text(encoding="utf-8")):
        out.append(f"accuracy: the hash in {ACCURACY_TXT} is not the sha256 of {ACCURACY_LOG}: the log changed "
                   "after it was scored; score it again")
    if closed:
        out += [f"accuracy: {s} (closed needs the round's targets)"
                for s in meets_targets(values, round_.benchmark(result.benchmark).accuracy)]
    return out


def scenario_refusals(round_: Round, results: Sequence[SourceResult]) -> list[str]:
    """Closed: each system's benchmark needs the round's required scenarios."""
    present: dict[tuple[str, str], set[str]] = {}
    for r in results:
        present.setdefault((r.system, r.benchmark), set()).add(r.scenario)
    out = []
    for (system, benchmark), scenarios in sorted(present.items()):
        try:
            missing = round_.benchmark(benchmark).missing_scenarios(scenarios)
        except RoundError:
            continue  # reported per result
        out += [f"{system}/{benchmark}: the closed division needs a result for {m}; run it (_all-scenarios runs "
                f"every scenario)" for m in missing]
    return out


def calibration_refusals(request: PackageRequest, results: Sequence[SourceResult]) -> list[str]:
    if request.calibration_file and not request.calibration_file.is_file():
        return [f"the calibration file {request.calibration_file} does not exist"]
    if request.division != "closed" or request.calibration_file:
        return []
    return [f"{r.name}: it ran quantized weights ({precision_of(r)}); give --input calibration_file=FILE saying how "
            "they were calibrated (it becomes documentation/calibration.md)"
            for r in results if precision_of(r) not in UNQUANTIZED]


def precision_of(result: SourceResult) -> str:
    return str((result.facts.get("engine") or {}).get("precision") or "")
