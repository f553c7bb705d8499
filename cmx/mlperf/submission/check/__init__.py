"""`cmx check`: check a submission tree (made by cmx or by anyone) against a round's rules, and say what to fix.

The official MLCommons checker is the judge of record; this one applies the same rules (see
docs/submission.md for the list and where each comes from) and adds the ones the round's
rules state but the official checker does not look at: an INVALID LoadGen result, the
Interactive latency limits, and a folder at the root that is not a division. Every problem
is one line: the path, the rule, what was found, what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cmx.errors import CmxError, clip
from cmx.mlperf.rounds import Round, load_round
from cmx.mlperf.submission.check.endpoints import check_client_result, is_client_folder
from cmx.mlperf.submission.check.files import one_finding_per_link, refused_link
from cmx.mlperf.submission.check.layout import (
    ResultFolder,
    Submitter,
    hygiene,
    result_folders,
    submitter_files,
    submitters,
)
from cmx.mlperf.submission.check.model import (
    ERROR,
    WARNING,
    CheckReport,
    Problem,
    ResultRow,
)
from cmx.mlperf.submission.check.result import check_result, json_object
from cmx.mlperf.submission.system_desc import description_problems
from cmx.mlperf.submission.tree import relative, system_json

__all__ = ["NotASubmissionTree", "check_tree", "round_of_tree"]

DIVISIONS = ("closed", "open", "network")


class NotASubmissionTree(CmxError):
    """`cmx check` was given the results folder of a run, which is packaged into a tree first."""


def refuse_results_folder(root: Path) -> None:
    """A folder of `cmx run`'s results (`<system>/<benchmark>/<Scenario>/cmx_run.json`, no division) is not what
    the checker reads: say so, and how to package it, rather than list its layout's problems."""
    if any((root / d).is_dir() for d in DIVISIONS) or not any(root.glob("*/*/*/cmx_run.json")):
        return
    raise NotASubmissionTree(
        f"{root} is the results folder of a run, not a submission tree: package it first, then check the tree",
        hint=f'cmx run "generate mlperf submission" --input results_dir={root} --input out_dir=SUBMISSION '
             "--input submitter=YOUR_ORG --input system_file=system.yaml (docs/submission.md), then "
             "cmx check SUBMISSION")

def round_of_tree(root: Path | str) -> str | None:
    """The round whose RNG seeds the tree's first performance log carries (each round's mlperf.conf has its own):
    what `cmx check` judges a tree by when no round is named. None: no readable log, or seeds of no round cmx
    knows (the newest round is then the default, and its seeds rule names the difference)."""
    from cmx.mlperf.loadgen.log import read_loadgen_run
    from cmx.mlperf.rounds import round_for_seeds
    from cmx.mlperf.submission.check.files import FILE_SIZE_LIMIT, regular_file
    from cmx.tools.fs import link_on_the_way

    root = Path(root)
    for detail in sorted(root.glob("*/*/results/*/*/*/performance/run_1/mlperf_log_detail.txt")):
        if link_on_the_way(detail, root) or not regular_file(detail) or detail.stat().st_size > FILE_SIZE_LIMIT:
            continue  # the check itself reports a link or an oversized log
        seeds = read_loadgen_run(detail.parent).settings.seeds
        found = round_for_seeds(seeds) if seeds is not None else None
        if found is not None:
            return found.name
    return None


_FIELD_RULES = {"status": "system.status", "system_type": "system.type", "division": "system.division",
                "submitter": "system.submitter", "is_network": "system.network",
                "sw_notes": "system.endpoint"}


def check_tree(root: Path | str, round_name: str) -> CheckReport:
    """Every problem of the tree at `root` under `round_name`'s rules, and a row per result found (no default here:
    `cmx check` and cmx.api.check choose the round of the tree's logs, else the newest; packaging, the round the
    results were run for)."""
    root = Path(root)
    refuse_results_folder(root)
    round_ = load_round(round_name)
    problems: list[Problem] = []
    rows: list[ResultRow] = []
    for sub in submitters(root, round_, problems):
        hygiene(sub, root, round_, problems)
        submitter_files(sub, root, round_, problems)
        folders = result_folders(sub, root, round_, problems)
        systems = {name: _system(sub, name, root, round_, problems) for name in sorted({f.system for f in folders})}
        for f in folders:
            check = check_client_result if is_client_folder(f.path) else check_result
            rows.append(check(f, root, round_, systems[f.system], problems))
        if sub.division != "open":
            problems += _scenario_problems(sub, folders, root, round_)
    # stable: errors first, each group in the tree's order; within them, what is missing comes before the
    # cleanup of what its absence left behind (an empty folder), so the first line is the one to act on
    problems = one_finding_per_link(problems)
    problems.sort(key=lambda p: (p.severity != ERROR, p.rule == "layout.hygiene"))
    return CheckReport(str(root), round_.name, rows, problems)


def _system(sub: Submitter, name: str, root: Path, round_: Round, problems: list[Problem]) -> dict[str, Any]:
    path = system_json(sub.path, name)
    where = relative(path, root)
    if refused_link(path, root, problems):
        return {}
    if not path.is_file():
        problems.append(Problem(where, "system.missing-json", "missing",
                                "describe the system: cmx writes it when it packages "
                                f"({len(round_.submission.system_fields)} "
                                "fields, from detection and --input system_file=FILE)"))
        return {}
    desc = json_object(path, where, "system.field", problems)
    if not desc:
        return {}
    for p in description_problems(desc, round_, division=sub.division, submitter=sub.name):
        problems.append(Problem(where, _FIELD_RULES.get(p.field, "system.field"), f"{clip(p.field)}: {clip(p.found)}",
                                p.fix))
    known = set(round_.submission.system_fields) | {"is_network"}
    for extra in sorted(set(desc) - known):
        problems.append(Problem(where, "system.unknown-field", f"{clip(extra)} is not a field of {round_.name}",
                                "a typo? the checker ignores it", WARNING))
    return desc


def _scenario_problems(sub: Submitter, folders: list[ResultFolder], root: Path, round_: Round) -> list[Problem]:
    present: dict[tuple[str, str], set[str]] = {}
    for f in folders:
        present.setdefault((f.system, f.official or f.benchmark), set()).add(f.scenario)
    out = []
    for (system, bench), scenarios in sorted(present.items()):
        for missing in round_.benchmark(bench).missing_scenarios(scenarios):
            where = relative(sub.path / "results" / system / bench, root)
            out.append(Problem(where, "scenarios.required", f"no {missing} result",
                               f"the {sub.division} division needs it for {bench}: run it, or submit to open"))
    return out
