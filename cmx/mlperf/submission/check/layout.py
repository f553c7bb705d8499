"""The tree's shape: divisions at the root, submitters, their folders, file hygiene, and where the results are.

The rules are the official checker's (tools/submission/submission_checker and its older
single-file form): root holds division folders only; no hidden names, spaces, __pycache__,
empty folders, broken links or files over 50 MB; every system description has results; the
code folder exists; closed has calibration.md; open may map custom names in model_mapping.json.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import clip
from cmx.mlperf.loadgen.compliance import TESTS as COMPLIANCE_TESTS
from cmx.mlperf.rounds import Round
from cmx.mlperf.submission.check.files import (
    FILE_SIZE_LIMIT,
    link_problem,
    read_text,
    regular_file,
    walk,
)
from cmx.mlperf.submission.check.model import WARNING, Problem
from cmx.mlperf.submission.tree import (
    ACCURACY_LOG,
    CALIBRATION,
    DIVISIONS,
    MODEL_MAPPING,
    relative,
)

ROOT_FILE_SUFFIXES = (".md", ".pdf")
IGNORED_AT_ROOT = (".git", ".github", "assets")


@dataclass(frozen=True)
class Submitter:
    """One `<division>/<submitter>` folder."""

    division: str
    name: str
    path: Path
    model_mapping: dict[str, str]


@dataclass(frozen=True)
class ResultFolder:
    """One `results/<system>/<benchmark>/<scenario>` folder, with the official benchmark its name stands for."""

    submitter: Submitter
    system: str
    benchmark: str           # the folder's name
    official: str | None     # the round's benchmark it is (via model_mapping.json in open); None if unknown
    scenario: str
    path: Path


def submitters(root: Path, round_: Round, problems: list[Problem]) -> list[Submitter]:
    """The submitter folders under the division folders, reporting what else the root and divisions hold."""
    found: list[Submitter] = []
    if not root.is_dir():
        problems.append(Problem(str(root), "layout.root", "is not a folder", "give the folder that holds closed/ "
                                                                               "or open/"))
        return found
    for entry in sorted(root.iterdir()):
        if entry.name in IGNORED_AT_ROOT:
            continue
        if entry.is_symlink():  # never followed: `closed -> /` is a finding, not a division to walk
            problems.append(link_problem(entry, root))
            continue
        if entry.is_file():
            if not entry.name.endswith(ROOT_FILE_SUFFIXES):
                problems.append(Problem(entry.name, "layout.root", "a file at the root of the tree",
                                        "the root may hold only division folders (and .md or .pdf files)"))
            continue
        if entry.name not in DIVISIONS:
            close = difflib.get_close_matches(entry.name, DIVISIONS, n=1)
            guess = f" (did you mean {close[0]}?)" if close else ""
            problems.append(Problem(entry.name, "layout.root", f"the folder {entry.name!r} is not a division{guess}",
                                    f"the root may hold only {', '.join(DIVISIONS)}: move or remove it"))
            continue
        for sub in sorted(entry.iterdir()):
            if sub.is_symlink():
                problems.append(link_problem(sub, root))
            elif sub.is_file():
                problems.append(Problem(relative(sub, root), "layout.division-file",
                                        "a file directly in a division folder",
                                        "a division folder holds only submitter folders"))
            elif sub.is_dir():
                mapping = _model_mapping(sub, root, entry.name, round_, problems)
                found.append(Submitter(entry.name, sub.name, sub, mapping))
    if not found:
        problems.append(Problem(".", "layout.root", "no <division>/<submitter> folder",
                                "a tree is <division>/<submitter>/{systems,results,...}"))
    return found


def _model_mapping(sub: Path, root: Path, division: str, round_: Round, problems: list[Problem]) -> dict[str, str]:
    path = sub / MODEL_MAPPING
    example = f'write {{"your-name": "{round_.default_benchmark}"}}'  # an official name of the round
    if not regular_file(path):
        return {}  # a link there is the walk's finding
    where = relative(path, root)
    if division != "open":
        problems.append(Problem(where, "layout.model-mapping", f"{MODEL_MAPPING} in the {division} division",
                                "only the open division maps custom names; closed must use the official names",
                                WARNING))
        return {}
    text = read_text(path)
    if text is None:
        return {}  # over the size limit: the walk says so
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        problems.append(Problem(where, "layout.model-mapping", f"not valid JSON ({clip(exc)})", example))
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        problems.append(Problem(where, "layout.model-mapping", "not a mapping of names to names", example))
        return {}
    return data


def hygiene(sub: Submitter, root: Path, round_: Round, problems: list[Problem]) -> None:
    """Names git and the upload take badly, empty folders, symbolic links and oversized files."""
    for here, dirs, files, links in walk(sub.path, root, problems):
        for name in dirs + files + links:
            path = here / name
            where = relative(path, root)
            if name.startswith("."):
                problems.append(Problem(where, "layout.hygiene", "a hidden (dot) name", "rename or remove it"))
            if " " in name:
                problems.append(Problem(where, "layout.hygiene", "a name with spaces", "rename it without spaces"))
            if name == "__pycache__":
                problems.append(Problem(where, "layout.hygiene", "a __pycache__ folder", "remove it"))
        for name in links:
            problems.append(link_problem(here / name, root))
        for name in files:
            path = here / name
            size = path.lstat().st_size
            if size > FILE_SIZE_LIMIT:
                problems.append(Problem(relative(path, root), "layout.hygiene",
                                        f"{size / 2**20:.0f} MB, over the 50 MB limit; cmx did not read it",
                                        "keep large files (full accuracy logs, weights) outside the tree"))
        if not dirs and not files and not links and here != sub.path:
            problems.append(_empty_folder(here, sub, root, round_))


def _empty_folder(folder: Path, sub: Submitter, root: Path, round_: Round) -> Problem:
    """An empty folder: where the layout expects something there, say what (its own rule reports it missing);
    never advise removing a folder a rule requires."""
    belongs = _belongs_in(folder.relative_to(sub.path).parts, sub.division, round_)
    if belongs is None:
        return Problem(relative(folder, root), "layout.hygiene", "an empty folder", "remove it")
    return Problem(relative(folder, root), "layout.hygiene", f"an empty folder, where {belongs} should be",
                   "restore what belongs there (the problem above says how); an empty folder fails the upload")


def _belongs_in(parts: tuple[str, ...], division: str, round_: Round) -> str | None:
    """What the layout keeps in the folder at `parts` (relative to the submitter folder), or None."""
    name, depth = parts[-1], len(parts)
    if depth == 1:
        top = {"systems": "the system descriptions (systems/<system>.json)",
               "results": "the results (results/<system>/<benchmark>/<scenario>/)",
               round_.layout.code_dir: "the harness source (or a README pointing at a pinned commit of it)",
               "documentation": "calibration.md and other documents"}
        return top.get(name)
    if name in COMPLIANCE_TESTS:
        return f"the {name} verification and its accuracy/ log"
    if depth >= 2 and parts[-2] in COMPLIANCE_TESTS and name == "accuracy":
        return f"the {parts[-2]} run's {ACCURACY_LOG}"
    if name == "run_1":
        return "the performance run's LoadGen logs"
    if name == "performance":
        return "run_1/ with the performance run's LoadGen logs"
    if name == "accuracy":
        return "the accuracy run's logs and accuracy.txt"
    if parts[0] in ("results", round_.layout.compliance_dir, round_.layout.measurements_dir) and 2 <= depth <= 4:
        return ("the system's benchmark folders", "the benchmark's scenario folders",
                "the scenario's result files")[depth - 2]
    return None


def result_folders(sub: Submitter, root: Path, round_: Round, problems: list[Problem]) -> list[ResultFolder]:
    """Every results/<system>/<benchmark>/<scenario>, naming the benchmarks and scenarios the round does not know."""
    results = sub.path / "results"
    if not results.is_dir():
        problems.append(Problem(relative(results, root), "layout.missing-file", "no results folder",
                                "a submitter folder holds results/<system>/<benchmark>/<scenario>/"))
        return []
    if not any(_dirs(bench) for system in _dirs(results) for bench in _dirs(system)):
        problems.append(Problem(relative(results, root), "layout.no-results",
                                "no results: it holds no <system>/<benchmark>/<scenario>/ folder",
                                "put each run's logs in results/<system>/<benchmark>/<scenario>/ (cmx's packager does: "
                                "cmx run \"generate mlperf submission\" --input results_dir=...)"))
        return []
    out = []
    for system in _dirs(results):
        for bench in _dirs(system):
            official = _official(bench.name, sub, round_)
            if official is None:
                problems.append(_unknown_benchmark(bench, sub, root, round_))
                continue
            for scenario in _dirs(bench):
                if scenario.name not in round_.benchmark(official).scenario_names:
                    names = round_.benchmark(official).scenario_names
                    problems.append(Problem(relative(scenario, root), "layout.scenario",
                                            f"{scenario.name!r} is not a scenario of {official}",
                                            f"its scenarios are {', '.join(names)} (the case counts)"))
                    continue
                out.append(ResultFolder(sub, system.name, bench.name, official, scenario.name, scenario))
    return out


def _dirs(path: Path) -> list[Path]:
    """The folders in `path`, links left out (the walk reports them): the layout is never read through a link."""
    if path.is_symlink() or not path.is_dir():
        return []
    return [p for p in sorted(path.iterdir()) if p.is_dir() and not p.is_symlink()]


def _official(name: str, sub: Submitter, round_: Round) -> str | None:
    if name in round_.benchmark_names:
        return name
    mapped = sub.model_mapping.get(name) if sub.division == "open" else None
    return mapped if mapped in round_.benchmark_names else None


def _unknown_benchmark(bench: Path, sub: Submitter, root: Path, round_: Round) -> Problem:
    close = difflib.get_close_matches(bench.name, round_.benchmark_names, n=1, cutoff=0.5)
    guess = f"did you mean {close[0]!r}? " if close else ""
    mapping = (f"; in open, a custom name needs an entry in {MODEL_MAPPING}" if sub.division == "open" else "")
    return Problem(relative(bench, root), "layout.benchmark", f"{bench.name!r} is not a {round_.name} benchmark",
                   f"{guess}the official names are {', '.join(round_.benchmark_names)}{mapping}")


def submitter_files(sub: Submitter, root: Path, round_: Round, problems: list[Problem]) -> None:
    """The code folder, calibration.md (closed), and system descriptions that have no results."""
    code = sub.path / round_.layout.code_dir
    if not code.is_dir():
        problems.append(Problem(relative(code, root), "layout.src", f"no {round_.layout.code_dir}/ folder",
                                "put the harness source (or a README pointing at a pinned commit of it) there"))
    if sub.division != "open":
        candidates = (sub.path / "documentation" / CALIBRATION, sub.path / CALIBRATION)
        if not any(p.is_file() for p in candidates):
            problems.append(Problem(relative(candidates[0], root), "layout.calibration",
                                    "missing (cmx's rule: the official v6.1 checker no longer looks, its "
                                    "--skip-calibration-check is unused; the submission rules ask closed results to "
                                    "document calibration, and its older checker failed without the file)",
                                    "the closed division needs documentation/calibration.md: say what calibration "
                                    "or quantization was done, or that none was"))
    systems = sub.path / "systems"
    results = sub.path / "results"
    # with no results at all, that is said
    if systems.is_dir() and any(_dirs(bench) for system in _dirs(results) for bench in _dirs(system)):
        for desc in sorted(systems.glob("*.json")):
            if not (results / desc.stem).is_dir():
                problems.append(Problem(relative(desc, root), "system.orphan", "a system description with no results",
                                        f"add its results under results/{desc.stem}/, or remove it if that system is "
                                        "not part of this submission"))
    extra = sorted(p.name for p in sub.path.iterdir() if p.is_dir() and p.name not in _known_folders(round_))
    for name in extra:
        problems.append(Problem(relative(sub.path / name, root), "layout.submitter",
                                f"an unexpected folder {name!r} in the submitter folder",
                                f"{round_.name} expects only {', '.join(_known_folders(round_))}", WARNING))


def _known_folders(round_: Round) -> tuple[str, ...]:
    layout = round_.layout
    return tuple(dict.fromkeys(("systems", "results", "documentation", layout.code_dir, layout.measurements_dir,
                                layout.compliance_dir)))
