"""What the packager reads: a results tree's results (one per system, benchmark and scenario, with cmx_run.json)
and the request."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.app import CMX_RUN_JSON, MODE_FOLDERS, is_set_aside
from cmx.mlperf.provenance import RunOrigin

PACKAGE_DIVISIONS = ("closed", "open")
SUBMITTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# A file of one of these names at the top of a results folder says the batch job that wrote it ended without
# completing (cmx.slurm writes it, named after the job's final state): nothing in the folder is a result
NOT_A_RESULT_MARKERS = ("CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
                        "DEADLINE", "REVOKED", "SPECIAL_EXIT")


class SubmissionRefused(CmxError):
    """The results cannot be packaged as asked; the message lists every reason."""


@dataclass(frozen=True)
class PackageRequest:
    """What to package, where, and as whom."""

    results_dir: Path
    out_dir: Path
    submitter: str
    division: str
    round: str | None = None            # default: the round the results were run for
    system_file: Path | None = None     # the fields detection cannot fill (status, cooling, ...)
    calibration_file: Path | None = None  # closed, quantized weights: what calibration was done
    tar: bool = False
    scenarios: tuple[str, ...] = ()     # only these scenarios' results (default: every one found)


@dataclass(frozen=True)
class SourceResult:
    """One scenario folder of a cmx results tree and the facts cmx_run.json holds about it."""

    path: Path
    system: str
    benchmark: str
    scenario: str
    facts: Mapping[str, Any]

    @property
    def origin(self) -> RunOrigin | None:
        data = self.facts.get("origin")
        return RunOrigin.from_json(data) if isinstance(data, Mapping) else None

    @property
    def name(self) -> str:
        return f"{self.system}/{self.benchmark}/{self.scenario}"

    @property
    def lock_file(self) -> Path | None:
        """The lockfile the run that made these results left beside its run.json (None when it left none)."""
        origin = self.origin
        if origin is None or not origin.run_record:
            return None
        path = Path(origin.run_record).parent / "cmx.lock"
        return path if path.is_file() else None

    @property
    def lock_in_src(self) -> str | None:
        """Where the packaged tree's code folder keeps that lockfile: locks/<run record folder>.lock."""
        lock = self.lock_file
        return None if lock is None else f"locks/{lock.parent.name}.lock"

    def run_dir(self, mode: str) -> Path:
        return self.path / MODE_FOLDERS[mode]

    def has(self, mode: str) -> bool:
        return (self.run_dir(mode) / "mlperf_log_detail.txt").is_file()


def find_results(results_dir: Path) -> list[SourceResult]:
    """Every `<system>/<benchmark>/<Scenario>/cmx_run.json` under `results_dir`, in name order (not those of a
    failed attempt a re-run set aside as `<Scenario>.failed-<time>`)."""
    if not results_dir.is_dir():
        raise SubmissionRefused(f"{results_dir} is not a folder",
                                hint="give --input results_dir=DIR: the results_dir of a `cmx run \"app mlperf "
                                     "inference ...\"`")
    marked = [m for m in NOT_A_RESULT_MARKERS if (results_dir / m).is_file()]
    if marked:
        reason = (results_dir / marked[0]).read_text(encoding="utf-8", errors="replace").strip()
        raise SubmissionRefused(f"{results_dir} is marked {marked[0]}: {reason}",
                                hint="re-run the benchmark to completion; a folder a job left behind is never packaged")
    found = []
    for facts_path in sorted(results_dir.glob(f"*/*/*/{CMX_RUN_JSON}")):
        folder = facts_path.parent
        if is_set_aside(folder):  # a failed attempt its re-run moved aside: kept for its logs, never a result
            continue
        try:
            facts = json.loads(facts_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SubmissionRefused(f"cannot read {facts_path}: {exc}",
                                    hint="the file is written by cmx at the end of each scenario; re-run it") from None
        found.append(SourceResult(folder, folder.parent.parent.name, folder.parent.name, folder.name, facts))
    if not found:
        raise SubmissionRefused(f"no cmx results under {results_dir} (no <system>/<benchmark>/<Scenario>/"
                                f"{CMX_RUN_JSON})", hint="point results_dir at the folder an app run wrote")
    return found


def chosen_scenarios(results: list[SourceResult], scenarios: tuple[str, ...]) -> list[SourceResult]:
    """The results of the scenarios asked for (all of them when none is): a submitter leaves out one that came out
    INVALID. A scenario asked for that no result has is refused, with those there are."""
    if not scenarios:
        return results
    there = sorted({r.scenario for r in results})
    wanted = {s.strip().lower(): s.strip() for s in scenarios if s.strip()}
    missing = [name for key, name in wanted.items() if key not in {t.lower() for t in there}]
    if missing:
        raise SubmissionRefused(f"no result of scenario {', '.join(missing)} under the results_dir",
                                hint=f"the scenarios there are {', '.join(there)}; name some of them in --input "
                                     "scenarios=..., or leave it out to package every one")
    return [r for r in results if r.scenario.lower() in wanted]
