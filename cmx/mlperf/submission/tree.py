"""The submission tree's layout: where each file of one result goes in a round's tree.

The packager writes to these paths and the checker reads from them, so the two cannot
disagree about where a file belongs. v6.0 keeps everything of a result in its scenario
folder; v5.1 puts measurements and TEST06 in their own top-level folders (`Layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.rounds import Layout

DIVISIONS = ("closed", "open", "network")
SUBMITTER_FOLDERS = ("systems", "results", "documentation", "src", "code", "measurements", "compliance")
DETAIL_LOG = "mlperf_log_detail.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
VERIFY_TXT = "verify_accuracy.txt"
PERFORMANCE_FILES = (DETAIL_LOG, SUMMARY_LOG)
ACCURACY_FILES = (DETAIL_LOG, SUMMARY_LOG, ACCURACY_LOG, ACCURACY_TXT)
USER_CONF = "user.conf"
README = "README.md"
MODEL_MAPPING = "model_mapping.json"
CALIBRATION = "calibration.md"


@dataclass(frozen=True)
class ResultPaths:
    """Where one result (system, benchmark, scenario) lives under `<division>/<submitter>`."""

    submitter_dir: Path
    layout: Layout
    system: str
    benchmark: str
    scenario: str

    def _under(self, top: str) -> Path:
        return self.submitter_dir / top / self.system / self.benchmark / self.scenario

    @property
    def result_dir(self) -> Path:
        return self._under("results")

    @property
    def performance(self) -> Path:
        return self.result_dir / "performance" / "run_1"

    @property
    def accuracy(self) -> Path:
        return self.result_dir / "accuracy"

    @property
    def test06(self) -> Path:
        return self.compliance("TEST06")

    def compliance(self, test: str) -> Path:
        """A compliance test's folder (TEST06, TEST07, TEST09)."""
        return self._under(self.layout.compliance_dir) / test

    @property
    def measurements_dir(self) -> Path:
        return self._under(self.layout.measurements_dir)

    @property
    def measurements_json(self) -> Path:
        name = self.layout.measurements_file.format(system=self.system, scenario=self.scenario)
        return self.measurements_dir / name

    @property
    def user_conf(self) -> Path:
        return self.measurements_dir / USER_CONF

    @property
    def readme(self) -> Path:
        return self.measurements_dir / README


def system_json(submitter_dir: Path, system: str) -> Path:
    return submitter_dir / "systems" / f"{system}.json"


def relative(path: Path, root: Path) -> str:
    """`path` as the tree names it (relative to the tree's root), for messages."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
