"""One result folder: its files, measurements.json, the LoadGen logs, accuracy and TEST06, checked against the round."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cmx.errors import clip
from cmx.mlperf.loadgen.accuracy_log import TRUNCATED_SIZE
from cmx.mlperf.loadgen.log import LoadgenLogError, LoadgenRun, read_loadgen_run
from cmx.mlperf.loadgen.test06 import verify_accuracy_txt_passes
from cmx.mlperf.rounds import Round
from cmx.mlperf.scoring.accuracy_txt import (
    CHECKER_NAMES,
    meets_targets,
    parse_accuracy_txt,
)
from cmx.mlperf.submission.check.files import (
    FILE_SIZE_LIMIT,
    link_problem,
    one_finding_per_link,
    read_text,
    refused_link,
    regular_file,
    walk,
)
from cmx.mlperf.submission.check.layout import ResultFolder
from cmx.mlperf.submission.check.model import ERROR, WARNING, Problem, ResultRow
from cmx.mlperf.submission.tree import (
    ACCURACY_FILES,
    ACCURACY_LOG,
    ACCURACY_TXT,
    DETAIL_LOG,
    PERFORMANCE_FILES,
    README,
    SUMMARY_LOG,
    USER_CONF,
    VERIFY_TXT,
    ResultPaths,
    relative,
)

NETWORK_SUT = "Network SUT"  # constants.py NETWORK_MODE_REQUIRED_SUBSTRING_IN_SUT_NAME
MAX_ACCURACY_LOG_SIZE = 10 * 1024  # the checker's limit for the truncated accuracy log
PERFORMANCE_OPTIONAL = (ACCURACY_LOG, "mlperf_log_trace.json", "results.json", ".gitkeep")
# What to do about each LoadGen rule; the finding's own sentence says what was found.
LOADGEN_FIX = {
    "loadgen.error": "fix the cause and run the test again: any error line fails the check",
    "loadgen.logs-disagree": "copy both logs of the same run, unedited",
    "loadgen.seeds": "run with the LoadGen release the round pins (cmx installs it: get loadgen)",
    "loadgen.audit": "run the compliance test with its audit.config, and the others without one",
    "loadgen.invalid": "the official checker may let an INVALID run through; the review will not: run it again",
    "loadgen.early-stopping": "the checker fails it whatever else the log says: run longer (more queries tighten "
                              "the estimate's bound; in Server at the same target_qps, or at a lower target_qps so "
                              "fewer queries go over the limits)",
    "loadgen.tokens": "report n_tokens (all output tokens, >= 2) and first tokens from the SUT",
    "loadgen.latency-limit": "lower target_qps until the p99 latencies are within the scenario's limits",
    "loadgen.scenario": "put each run under the scenario folder it was run as",
    "loadgen.min-duration": "remove min_duration from user.conf (mlperf.conf sets the round's 600000 ms) and run "
                            "again",
    "loadgen.sample-count": "remove the sample-count overrides from user.conf and run again (a _short run never "
                            "passes this)",
    "loadgen.equal-issue": "leave sample_concatenate_permutation as mlperf.conf sets it",
    "loadgen.latency-setting": "use the scenario's LoadGen model name and leave the latency settings to mlperf.conf",
    "accuracy.coverage": "run the accuracy test over the whole dataset (no rows limit, no _tiny)",
}
_NUMPY_REPR = re.compile(r"np\.\w+\(")


def check_result(folder: ResultFolder, root: Path, round_: Round, system: dict[str, Any],
                 problems: list[Problem]) -> ResultRow:
    """Every rule for one result, appending to `problems`; the row the table and the CSV show."""
    sub, bench_name = folder.submitter, folder.official or folder.benchmark
    closed = sub.division != "open"
    paths = ResultPaths(sub.path, round_.layout, folder.system, folder.benchmark, folder.scenario)
    mine: list[Problem] = []
    _file_set(paths.performance, PERFORMANCE_FILES, PERFORMANCE_OPTIONAL, root, mine)
    power = paths.performance.parent / "power"
    if power.is_dir():
        mine.append(Problem(relative(power, root), "power.unchecked", "a power measurement, which cmx does not check",
                            "run the official checker for the power rules (cmx neither measures nor packages power)",
                            WARNING))
    _file_set(paths.accuracy, ACCURACY_FILES, (), root, mine)
    _accuracy_extras(paths, root, round_.benchmark(bench_name).accuracy_files, mine)
    measured = measurement_files(paths, root, round_, mine)
    perf = _loadgen(paths.performance, root, round_, bench_name, folder.scenario, mine)
    if perf is not None:
        _network_sut(perf, system, root, mine)
    _loadgen(paths.accuracy, root, round_, bench_name, folder.scenario, mine)
    accuracy = _accuracy(paths, root, round_, bench_name, closed, mine)
    for test in round_.benchmark(bench_name).compliance_tests:
        # closed needs each; open needs none, but one it holds must pass (the official checker skips it: a warning)
        if not closed and not paths.compliance(test).is_dir():
            continue
        found: list[Problem] = []
        if test == "TEST06":
            _test06(paths, root, found)
        else:
            _compliance_verdict(paths, root, found, test, bench_name, round_.benchmark(bench_name).accuracy.metrics)
        mine += found if closed else [replace(p, severity=WARNING) for p in found]
    mine = one_finding_per_link(mine)
    problems += mine
    metric, units = checker_metric(round_, bench_name, folder.scenario, perf)
    return ResultRow(division=sub.division, submitter=sub.name, system=folder.system, benchmark=folder.benchmark,
                     scenario=folder.scenario, path=relative(folder.path, root), metric=metric, units=units,
                     validity=perf.results.validity if perf else None, accuracy=accuracy,
                     problems=sum(1 for p in mine if p.severity == ERROR), system_facts=system,
                     weight_data_types=str(measured.get("weight_data_types") or ""))


def checker_metric(round_: Round, benchmark: str, scenario: str, perf: LoadgenRun | None) -> tuple[float | None, str]:
    """The checker's result and its units (constants.py RESULT_FIELD_NEW, RESULT_FIELD_BENCHMARK_OVERWRITE, UNIT_DICT
    and SPECIAL_UNIT_DICT; performance_check.py get_performance_metric_check): SingleStream's early-stopping
    estimate of its 90th percentile latency, in ms or in the unit the round gives (text-to-video's: s); tokens/s
    for the LLMs' other scenarios; samples/s (Offline) or completed queries/s for a benchmark without token
    latencies."""
    rules = round_.benchmark(benchmark).scenario(scenario)
    r = perf.results if perf else None
    if rules.latency_result:
        ns = r.early_stopping_latency_ns if r else None
        return (None if ns is None else rules.in_latency_unit(ns)), f"Latency ({rules.latency_unit or 'ms'})"
    if round_.benchmark(benchmark).token_latencies:
        return (r.tokens_per_second if r else None), "Tokens/s"
    return (r.samples_per_second if r else None), "Samples/s" if scenario == "Offline" else "Queries/s"


def _accuracy_extras(paths: ResultPaths, root: Path, required: Sequence[str], out: list[Problem]) -> None:
    """accuracy_check.py extra_files_check: the files the round wants in accuracy/ besides the logs (constants.py
    REQUIRED_ACC_BENCHMARK: the text-to-video benchmark's 10 videos), in every division."""
    for name in required:
        path = paths.accuracy / name
        if refused_link(path, root, out):
            continue
        if not regular_file(path):
            out.append(Problem(relative(path, root), "accuracy.extra-files", "missing",
                               "the checker wants it in accuracy/: cmx's packager copies it from the accuracy run's "
                               "folder (the benchmark's accuracy_files); package the results again"))


def _file_set(folder: Path, required: tuple[str, ...], optional: tuple[str, ...], root: Path,
              out: list[Problem]) -> None:
    where = relative(folder, root)
    if refused_link(folder, root, out):
        return
    if not folder.is_dir():
        out.append(Problem(where, "layout.missing-file", "the folder is missing",
                           f"it holds {', '.join(required)}"))
        return
    present = {p.name for p in folder.iterdir() if regular_file(p)}
    for name in required:
        if (folder / name).is_symlink():
            out.append(link_problem(folder / name, root, required=True))
        elif name not in present:
            out.append(Problem(f"{where}/{name}", "layout.missing-file", "missing", "copy it from the run's logs"))
        elif (folder / name).stat().st_size == 0:
            out.append(Problem(f"{where}/{name}", "layout.empty-file", "empty", "copy it again from the run"))
    for name in sorted(present - set(required) - set(optional)):
        out.append(Problem(f"{where}/{name}", "layout.file-list", "a file the checker does not expect here",
                           f"this folder holds exactly {', '.join(required)}: remove it"))


def measurement_files(paths: ResultPaths, root: Path, round_: Round, out: list[Problem], *,
                      user_conf: bool = True) -> dict[str, Any]:
    """user.conf (a LoadGen result's), README.md and the measurements JSON beside them; returns the JSON ({} when
    unusable)."""
    folder = paths.measurements_dir
    for name in (USER_CONF, README) if user_conf else (README,):
        path = folder / name
        if refused_link(path, root, out):
            continue
        if not path.is_file():
            out.append(Problem(relative(path, root), "layout.missing-file", "missing",
                               "user.conf: the one every test ran with; README.md: how to reproduce the result"))
        elif path.stat().st_size == 0:
            out.append(Problem(relative(path, root), "layout.empty-file", "empty",
                               f"the checker wants a non-empty {name}"))
    path = paths.measurements_json
    where = relative(path, root)
    if refused_link(path, root, out):
        return {}
    if not path.is_file():
        out.append(Problem(where, "measurements.missing", "missing",
                           f"write it with {', '.join(round_.submission.measurements_fields)}"))
        return {}
    data = json_object(path, where, "measurements.field", out)
    for name in round_.submission.measurements_fields:
        if name not in data:
            out.append(Problem(where, "measurements.field", f"field {name} is missing", "add it"))
        elif not data[name]:
            out.append(Problem(where, "measurements.field", f"field {name} is empty", "give it a meaningful value"))
    return data


def json_object(path: Path, where: str, rule: str, out: list[Problem]) -> dict[str, Any]:
    """The JSON object in `path`; {} after reporting under `rule` when it is not valid JSON or not an object, and
    {} with nothing said when it is a link or over the size limit (the walk reports those)."""
    text = read_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: an array nested 100,000 deep
        out.append(Problem(where, rule, f"not valid JSON ({clip(exc)})", "write a JSON object of field: value"))
        return {}
    if not isinstance(data, dict):
        out.append(Problem(where, rule, "not a JSON object", "write a JSON object of field: value"))
        return {}
    return data


def _loadgen(folder: Path, root: Path, round_: Round, benchmark: str, scenario: str,
             out: list[Problem]) -> LoadgenRun | None:
    detail = folder / DETAIL_LOG
    if refused_link(detail, root, out) or refused_link(folder / SUMMARY_LOG, root, out):
        return None
    if not regular_file(detail) or detail.stat().st_size > FILE_SIZE_LIMIT:
        return None  # reported as a missing file, or as over the size limit, and not read
    where = relative(detail, root)
    try:
        run = read_loadgen_run(folder)
    except LoadgenLogError as exc:
        out.append(Problem(where, "loadgen.unreadable", clip(exc.message), "copy the log again from the run"))
        return None
    for finding in run.findings(round_, benchmark, compliant=True, scenario=scenario):
        out.append(Problem(where, finding.rule, finding.text, LOADGEN_FIX.get(finding.rule, "")))
    return run


def _network_sut(perf: LoadgenRun, system: dict[str, Any], root: Path, out: list[Problem]) -> None:
    """The checker's rule for a network system: the SUT's name says it is one."""
    if str(system.get("is_network", "")).strip().lower() == "true" and NETWORK_SUT not in (perf.sut_name or ""):
        out.append(Problem(relative(perf.path, root) if perf.path else "", "system.network",
                           f"the SUT is named {perf.sut_name!r} in a network system's log",
                           f"a network SUT's name must contain {NETWORK_SUT!r} (the name given to LoadGen's "
                           "ConstructSUT)"))


def _accuracy(paths: ResultPaths, root: Path, round_: Round, benchmark: str, closed: bool,
              out: list[Problem]) -> dict[str, float]:
    txt, log = paths.accuracy / ACCURACY_TXT, paths.accuracy / ACCURACY_LOG
    if refused_link(paths.accuracy, root, out):
        return {}
    if regular_file(log) and log.stat().st_size > MAX_ACCURACY_LOG_SIZE:
        out.append(Problem(relative(log, root), "accuracy.truncation",
                           f"{log.stat().st_size} bytes: not truncated (the limit is {MAX_ACCURACY_LOG_SIZE})",
                           f"keep the first and last 4096 characters ({TRUNCATED_SIZE} bytes; cmx's packager does) "
                           "and the full log outside the tree"))
    text = read_text(txt)
    if text is None:
        return {}  # missing, a link or over the size limit: the file set and the walk say which
    where = relative(txt, root)
    values = parse_accuracy_txt(text)
    metrics = [(key, CHECKER_NAMES.get(key, key)) for key in round_.benchmark(benchmark).accuracy.metrics]
    found = {label: float(values[key]) for key, label in metrics if isinstance(values.get(key), (int, float))}
    missing = [label for key, label in metrics if label not in found]
    if missing:
        numpy = " (a numpy repr such as np.float64(...) hides them from the checker's patterns)" \
            if _NUMPY_REPR.search(text) else ""
        out.append(Problem(where, "accuracy.unreadable", f"the checker finds no {', '.join(missing)}{numpy}",
                           "print plain numbers: 'rouge1': 44.43 and 'tokens_per_sample': 294.4"))
    if "hash" not in values:
        out.append(Problem(where, "accuracy.hash", "no hash= line",
                           f"append hash=<sha256 of the full {ACCURACY_LOG}> (cmx's packager does)"))
    if closed and not missing:
        for shortfall in meets_targets(values, round_.benchmark(benchmark).accuracy):
            out.append(Problem(where, "accuracy.target", shortfall,
                               "closed needs the round's accuracy; submit to open or fix the model"))
    return found


def _compliance_verdict(paths: ResultPaths, root: Path, out: list[Problem], name: str, benchmark: str,
                        metrics: Sequence[str]) -> None:
    """TEST01, TEST04, TEST07, TEST09 as compliance_check.py checks them: the folder, its accuracy log (not TEST04's),
    the performance logs of a test that verifies performance (TEST01, TEST04), and the verdict of its verification
    files."""
    from cmx.mlperf.loadgen.compliance import compliance_test

    test, folder = compliance_test(name), paths.compliance(name)
    rule = name.lower()
    if _unreadable(folder, root, out):
        return
    if not folder.is_dir():
        out.append(Problem(relative(folder, root), f"{rule}.missing", f"no {name} folder",
                           f"the closed division needs {name} for this benchmark: run _compliance"))
        return
    log = folder / "accuracy" / ACCURACY_LOG
    if test.copies_accuracy_log and not log.is_file():
        out.append(Problem(relative(log, root), f"{rule}.missing", "missing",
                           f"copy the {name} run's mlperf_log_accuracy.json back (cmx's packager and the official "
                           "run_verification.py put it there)"))
    if "verify_performance.txt" in test.verify_files:
        run = folder / "performance" / "run_1"
        for logged in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
            if not (run / logged).is_file():
                out.append(Problem(relative(run / logged, root), f"{rule}.missing", "missing",
                                   f"copy the {name} run's LoadGen logs into performance/run_1 (cmx's packager and "
                                   "the official run_verification.py put them there)"))
    missing = [f for f in test.verify_files if not (folder / f).is_file()]
    for file in missing:
        out.append(Problem(relative(folder / file, root), f"{rule}.missing", "missing", f"run the {name} verification"))
    if missing:
        return
    for why in test.failures(folder, benchmark, metrics):
        out.append(Problem(relative(folder, root), f"{rule}.check", why,
                           f"the {name} run failed its check; see its verification files for the numbers"))


def _test06(paths: ResultPaths, root: Path, out: list[Problem], name: str = "TEST06") -> None:
    verify = paths.test06 / VERIFY_TXT
    if _unreadable(paths.test06, root, out):
        return
    if not paths.test06.is_dir():
        out.append(Problem(relative(paths.test06, root), "test06.missing", "no TEST06 folder",
                           "the closed division needs TEST06 for every LLM scenario: run _compliance"))
        return
    log = paths.test06 / "accuracy" / ACCURACY_LOG
    if not log.is_file():  # run_verification.py copies it there; the review re-verifies from it
        out.append(Problem(relative(log, root), "test06.missing", "missing",
                           "copy the TEST06 run's mlperf_log_accuracy.json back (cmx's packager and the official "
                           "run_verification.py put it there); it is what verify_accuracy.txt was computed from"))
    if not verify.is_file():
        out.append(Problem(relative(verify, root), "test06.missing", "missing", "run the TEST06 verification"))
        return
    text = read_text(verify) or ""
    if not verify_accuracy_txt_passes(text):
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        out.append(Problem(relative(verify, root), "test06.check",
                           f"the checks do not all pass ({clip('; '.join(lines)) or 'the file is empty'})",
                           "it needs 'First token check pass: True' (or Skipped), 'EOS check pass: True' and "
                           "'Sample length check pass: True'"))


def _unreadable(folder: Path, root: Path, out: list[Problem]) -> bool:
    """Whether compliance folder `folder` must not be judged: reached through a link, or holding a link (each is
    reported as one the checker needs: the verifications read its files) or a file over the size limit (the walk
    said so). Its verdict is then not read: a link out of the tree is never followed, a huge file never loaded."""
    if refused_link(folder, root, out):
        return True
    if folder.is_symlink() or not folder.is_dir():
        return False
    found = False
    for here in walk(folder, root, []):  # its depth and listing are the hygiene walk's findings
        for name in here.links:
            out.append(link_problem(here.path / name, root, required=True))
            found = True
        found = found or any((here.path / name).lstat().st_size > FILE_SIZE_LIMIT for name in here.files)
    return found
