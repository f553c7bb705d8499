"""Package a cmx results tree as an MLPerf submission tree (`<out>/<division>/<submitter>/`), or refuse and say why.

The source is what `cmx.mlperf.app` writes: `<results>/<system>/<benchmark>/<Scenario>/` with
cmx_run.json, user.conf and the LoadGen logs of each test. Every reason not to package is
collected before anything is written (INVALID runs, errors in a log, seeds of another round,
short or tiny results or missed accuracy targets into closed, a missing scenario or test, an
incomplete system description, a run's lockfile missing or a recipe changed since it ran, a file the round wants
in accuracy/ that the accuracy run did not write: cmx.mlperf.submission.accuracy_files), so one
attempt shows the whole list. Nothing is invented: a
field no one supplied is a refusal, never a placeholder. The tree is built in a temporary
folder beside its destination and moved into place whole.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx.mlperf.loadgen.accuracy_log import truncate_accuracy_log
from cmx.mlperf.provenance import RunOrigin
from cmx.mlperf.rounds import Round, load_round
from cmx.mlperf.submission.accuracy_files import accuracy_files
from cmx.mlperf.submission.code import plan_code, write_code
from cmx.mlperf.submission.refusals import (
    UNQUANTIZED,
    calibration_refusals,
    precision_of,
    refusals,
)
from cmx.mlperf.submission.sources import (
    PACKAGE_DIVISIONS,
    SUBMITTER_NAME,
    PackageRequest,
    SourceResult,
    SubmissionRefused,
    chosen_scenarios,
    find_results,
)
from cmx.mlperf.submission.system_desc import (
    build_description,
    description_problems,
    detected_fields,
    endpoint_is_remote,
    read_user_file,
    served_by,
    served_software,
    write_description,
)
from cmx.mlperf.submission.tree import (
    ACCURACY_LOG,
    ACCURACY_TXT,
    CALIBRATION,
    PERFORMANCE_FILES,
    ResultPaths,
    system_json,
)
from cmx.secrets import environment_redactor


@dataclass(frozen=True)
class PackagedResult:
    name: str
    path: Path
    full_accuracy_log: Path   # kept outside the tree: the hash in accuracy.txt is all the tree keeps of it
    accuracy_log_sha256: str


@dataclass(frozen=True)
class Packaged:
    """What `package` wrote."""

    tree: Path                # <out>/<division>/<submitter>
    round: str
    division: str
    submitter: str
    results: list[PackagedResult]
    notes: list[str] = field(default_factory=list)   # what makes the results non-compliant (open only)
    tarball: Path | None = None


def package(request: PackageRequest) -> Packaged:
    """Build `<out>/<division>/<submitter>/` from `request.results_dir`, or raise SubmissionRefused with every
    reason."""
    _check_request(request)
    results = chosen_scenarios(find_results(request.results_dir), request.scenarios)
    round_ = load_round(request.round or _results_round(results))
    user = read_user_file(request.system_file, round_) if request.system_file else {}
    descriptions = {system: build_description(round_, detected=_detected(results, system),
                                              user=user, division=request.division, submitter=request.submitter)
                    for system in sorted({r.system for r in results})}
    reasons = refusals(request, round_, results)
    for system, desc in descriptions.items():
        reasons += [f"systems/{system}.json: {p}" for p in description_problems(desc, round_)]
    reasons += calibration_refusals(request, results)
    extras = {r.name: accuracy_files(r, round_) for r in results}  # the round's files in accuracy/ (wan's videos)
    reasons += [f"{name}: {why}" for name, found in extras.items() for why in found.refusals]
    code, code_reasons = plan_code(results)  # src/: the recipes that ran, as the runs' lockfiles pin them
    reasons += code_reasons
    measured = {r.name: measurements(r, request) for r in results}
    reasons += [f"{name}: measurements.json would have no {field}: the results do not record it (a cmx_run.json "
                "without 'origin' predates cmx recording the model); run them again with this cmx"
                for name, fields in measured.items() for field, value in fields.items() if not value]
    if reasons:
        raise SubmissionRefused(f"cannot package {request.results_dir} into the {request.division} division "
                                f"({len(reasons)} reason(s)):\n" + "\n".join(f"  - {r}" for r in reasons),
                                hint="docs/submission.md explains each refusal; nothing was written")
    dest = request.out_dir / request.division / request.submitter
    request.out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".cmx-package-", dir=request.out_dir))
    try:
        packaged = [_write_result(staging, round_, request, r, measured[r.name], extras[r.name].files)
                    for r in results]
        for system, desc in descriptions.items():
            write_description(desc, system_json(staging, system))
        write_code(staging / round_.layout.code_dir, code)
        if request.division == "closed" or request.calibration_file:
            _write_calibration(staging / "documentation" / CALIBRATION, request, results)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    notes = sorted({f"{r.name}: {n}" for r in results for n in r.facts.get("noncompliance") or []})
    tarball = write_tarball(request.out_dir, request.division, request.submitter) if request.tar else None
    return Packaged(dest, round_.name, request.division, request.submitter, packaged, notes, tarball)


def _check_request(request: PackageRequest) -> None:
    if request.division not in PACKAGE_DIVISIONS:
        raise SubmissionRefused(f"division {request.division!r} is not one cmx packages",
                                hint=f"use one of {', '.join(PACKAGE_DIVISIONS)}")
    if not SUBMITTER_NAME.match(request.submitter or ""):
        raise SubmissionRefused(f"submitter {request.submitter!r} is not a folder name",
                                hint="use your organisation's name in letters, digits, '.', '_' and '-' "
                                     "(it must match what MLCommons has registered)")
    dest = request.out_dir / request.division / request.submitter
    if dest.exists():
        raise SubmissionRefused(f"{dest} already exists", hint="remove it, or give another --input out_dir=DIR; "
                                                               "cmx never mixes two packagings in one tree")
    if request.out_dir.is_dir():
        strays = sorted(p.name for p in request.out_dir.iterdir() if p.name not in PACKAGE_DIVISIONS)
        if strays:
            raise SubmissionRefused(f"{request.out_dir} holds {', '.join(strays)}: the root of a submission tree "
                                    "may hold only division folders (closed, open)",
                                    hint="give an empty or new folder as --input out_dir=DIR")


def _results_round(results: Sequence[SourceResult]) -> str:
    rounds = sorted({str(r.facts.get("round") or "") for r in results} - {""})
    if len(rounds) != 1:
        raise SubmissionRefused(f"the results were run for {', '.join(rounds) or 'no recorded round'}",
                                hint="package one round at a time: give --input round=v6.0 (results of another "
                                     "round are refused)")
    return rounds[0]


def _detected(results: Sequence[SourceResult], system: str) -> dict[str, str]:
    """What the system's own run detected (the first of its results that recorded it)."""
    source = next((r for r in results if r.system == system and r.origin), None)
    if source is None:
        return {}
    # an endpoint run of the system says so, a remote one first: the description covers all its results
    backends = [r.facts.get("backend") or {} for r in results if r.system == system]
    endpoints = sorted((b for b in backends if b.get("kind") == "endpoint"),
                       key=lambda b: not endpoint_is_remote(str(b.get("url") or "")))
    return detected_fields(source.origin, str(source.facts.get("device") or ""),
                           endpoints[0] if endpoints else None)


def _write_result(root: Path, round_: Round, request: PackageRequest, source: SourceResult,
                  measured: Mapping[str, str], accuracy_extras: Mapping[str, Path]) -> PackagedResult:
    paths = ResultPaths(root, round_.layout, source.system, source.benchmark, source.scenario)
    _copy_files(source.run_dir("performance"), paths.performance, PERFORMANCE_FILES)
    acc = source.run_dir("accuracy")
    _copy_files(acc, paths.accuracy, ("mlperf_log_detail.txt", "mlperf_log_summary.txt", ACCURACY_TXT))
    for inside, src in accuracy_extras.items():  # accuracy/videos/130.mp4 ...: checked to exist before writing
        (paths.accuracy / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, paths.accuracy / inside)
    digest = truncate_accuracy_log(acc / ACCURACY_LOG, paths.accuracy / ACCURACY_LOG)
    for name in round_.benchmark(source.benchmark).compliance_tests:  # closed needs them; open keeps those run
        if request.division == "closed" or source.has(name.lower()):
            _copy_compliance(source, paths, name)
    paths.measurements_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source.path / "user.conf", paths.user_conf)
    paths.measurements_json.write_text(json.dumps(dict(measured), indent=4) + "\n", encoding="utf-8")
    # the command and the server's words, from cmx_run.json: one an older cmx wrote may hold a secret
    paths.readme.write_text(environment_redactor().redact(render_readme(source, round_, request, digest)),
                            encoding="utf-8")
    return PackagedResult(source.name, paths.result_dir, acc / ACCURACY_LOG, digest)


def _copy_compliance(source: SourceResult, paths: ResultPaths, name: str) -> None:
    """A compliance run's folder as its run_verification.py lays it out: the verification files, the accuracy log
    in accuracy/ (with TEST01's Part III scores where its outputs differed; TEST04 has none), and (TEST01, TEST04,
    TEST07, TEST09) the run's summary and detail in performance/run_1."""
    from cmx.mlperf.loadgen.compliance import compliance_test

    test = compliance_test(name)
    run = source.run_dir(test.mode)
    _copy_files(run, paths.compliance(name), test.verify_files)
    if test.copies_accuracy_log:
        _copy_files(run, paths.compliance(name) / "accuracy",
                    (ACCURACY_LOG, *(f for f in test.accuracy_files if (run / f).is_file())))
    if test.copies_performance:
        _copy_files(run, paths.compliance(name) / "performance" / "run_1",
                    ("mlperf_log_summary.txt", "mlperf_log_detail.txt"))


def _copy_files(src: Path, dest: Path, names: Iterable[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(src / name, dest / name)


def measurements(source: SourceResult, request: PackageRequest) -> dict[str, str]:
    """measurements.json from what the run recorded of its model and precision."""
    origin = source.origin
    model = dict(origin.model) if origin else {}
    precision = precision_of(source) or str(model.get("precision") or "")
    # A checkpoint published quantized (MXFP4 experts, say) and loaded as it is (the run's precision
    # an unquantized one): its weights are of the checkpoint's type, and nothing transformed them.
    published = str(model.get("precision") or "")
    as_published = precision in UNQUANTIZED and published not in UNQUANTIZED and not model.get("is_tiny")
    name = str(model.get("name") or "")
    if name and model.get("revision"):
        name = f"{name} (revision {model['revision']})"
    if name and model.get("is_tiny"):
        name = f"{name} (random weights generated by cmx: not a result)"
    if as_published:
        precision, transformations = published, f"none (the checkpoint as published, {published} weights)"
    elif precision and precision in UNQUANTIZED:
        transformations = f"none (weights loaded as {model.get('dtype') or precision})"
    elif request.calibration_file:
        transformations = f"quantization to {precision} (see documentation/calibration.md)"
    else:
        transformations = f"quantization to {precision}" if precision else ""
    return {"input_data_types": "int32 (token ids)", "retraining": "No",
            "starting_weights_filename": name, "weight_data_types": precision,
            "weight_transformations": transformations}


def engine_line(backend: Mapping[str, Any], origin: RunOrigin | None, runs: Sequence[Mapping[str, Any]]) -> str:
    """The vLLM that LoadGen drove without HTTP, with its version: in the harness process, or in replicas on Ray
    (each replica's own version, as it reported it; the driving node's for a run that recorded none)."""
    version = (origin.software.get("vllm") if origin else None) or "(version not recorded)"
    if backend.get("transport") != "ray":
        return f"vLLM {version} in the harness process"
    n = int(backend.get("replicas") or 1)
    where = f"at `{backend['ray_address']}`" if backend.get("ray_address") else "started in the harness process"
    on_ray = f"in {n} engine replica{'' if n == 1 else 's'} on Ray, as actors of the Ray cluster {where}"
    replicas: dict[str, set[int]] = {}
    for run in runs:
        for r in (run.get("details") or {}).get("replicas") or []:
            if r.get("vllm"):
                replicas.setdefault(str(r["vllm"]), set()).add(int(r["index"]))
    if not replicas:
        return f"vLLM {version} (the driving node's; the replicas' own were not recorded) {on_ray}"
    if len(replicas) == 1:
        return f"vLLM {next(iter(replicas))} {on_ray}"
    each = "; ".join(f"vLLM {v} on replica{'s' if len(i) > 1 else ''} {', '.join(map(str, sorted(i)))}"
                     for v, i in sorted(replicas.items()))
    return f"{n} engine replicas on Ray, as actors of the Ray cluster {where}, **not one vLLM**: {each}"


def render_readme(source: SourceResult, round_: Round, request: PackageRequest, digest: str) -> str:
    from cmx.templates import render

    origin = source.origin
    backend = source.facts.get("backend") or {"kind": "vllm"}
    runs = source.facts.get("runs") or []
    engine = None if backend.get("kind") == "endpoint" else engine_line(backend, origin, runs)
    if backend.get("kind") == "endpoint":
        # the vLLM that ran is the server's, as it reported it; the one beside the harness (its client) served nothing
        software, version = served_software(backend)
        backend = {**backend, "server_software": software or None, "server_version": version or None}
        if origin is not None:
            origin = replace(origin, software={k: v for k, v in origin.software.items() if k != "vllm"})
    return render("submission/README.md.j2", source=source, origin=origin, round=round_.name,
                  engine=engine, code_dir=round_.layout.code_dir, lock=source.lock_in_src,
                  division=request.division, submitter=request.submitter, accuracy_sha256=digest, runs=runs,
                  noncompliance=source.facts.get("noncompliance") or [],
                  backend=backend, stack=served_by(backend), sampling=source.facts.get("sampling"),
                  reference_sampling=source.facts.get("reference_sampling") or source.facts.get("sampling"),
                  overrides=source.facts.get("sampling_overrides") or [])


def _write_calibration(path: Path, request: PackageRequest, results: Sequence[SourceResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if request.calibration_file:
        shutil.copyfile(request.calibration_file, path)
        return
    from cmx.templates import render

    precisions = sorted({precision_of(r) for r in results} - {""}) or ["the checkpoint's own dtype"]
    path.write_text(render("submission/calibration.md.j2", precisions=precisions), encoding="utf-8")


def write_tarball(out_dir: Path, division: str, submitter: str) -> Path:
    """`<out>.tar.gz` beside the tree, holding `<division>/<submitter>/...` (what submitters upload)."""
    tarball = out_dir.parent / f"{out_dir.name}.tar.gz"
    tmp = tarball.with_name(f".{tarball.name}.tmp")

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(out_dir / division / submitter, arcname=f"{division}/{submitter}", filter=clean)
    os.replace(tmp, tarball)
    return tarball


def package_and_check(request: PackageRequest, log: logging.Logger) -> dict[str, Any]:
    """`package`, then `cmx check` of the tree: what the generate-mlperf-submission recipe returns."""
    from cmx.mlperf.submission.check import check_tree
    from cmx.mlperf.submission.check.report import format_report

    packaged = package(request)
    log.info("packaged %d result(s) into %s", len(packaged.results), packaged.tree)
    for note in packaged.notes:
        log.warning("not compliant: %s", note)
    report = check_tree(request.out_dir, packaged.round)
    log.info("cmx check %s --round %s:\n%s", request.out_dir, packaged.round, format_report(report))
    return {"tree": packaged.tree, "tarball": str(packaged.tarball or ""),
            "results": [r.name for r in packaged.results], "check_ok": report.ok,
            "check_problems": [p.line() for p in report.problems], "notes": packaged.notes}
