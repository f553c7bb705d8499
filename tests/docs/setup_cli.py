"""Set-ups of docs/cli.md: the packaged submission tree its `cmx check` examples check."""

from __future__ import annotations

import json
import shutil

from tests.conftest import DATA
from tests.docs.console import Session
from tests.submission_trees import MEASUREMENTS, REFERENCE, build_tree, result_dir

SHORT_LOGS = DATA / "loadgen"


def short_submission(session: Session) -> None:
    """`submission/` in the current folder: an open-division tree holding one Offline result of a short run.

    Its LoadGen logs are real ones of the short profile (tests/data/loadgen: `offline-perf`, a 2 s Offline
    test, and `accuracy`, 16 samples); accuracy.txt holds the round's reference scores, as
    tests/submission_trees.py writes them, since the tiny SUT's tokens score nothing."""
    from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt
    from cmx.tools.fs import sha256_file

    root = build_tree(session.cwd / "submission", division="open", scenarios=())
    folder = result_dir(root, "Offline", division="open")
    shutil.copytree(SHORT_LOGS / "offline-perf", folder / "performance" / "run_1",
                    ignore=shutil.ignore_patterns("user.conf", "mlperf_log_accuracy.json"))
    shutil.copytree(SHORT_LOGS / "accuracy", folder / "accuracy", ignore=shutil.ignore_patterns("user.conf"))
    log = folder / "accuracy" / "mlperf_log_accuracy.json"
    (folder / "accuracy" / "accuracy.txt").write_text(format_accuracy_txt(REFERENCE, sha256_file(log)),
                                                      encoding="utf-8")
    shutil.copyfile(SHORT_LOGS / "offline-perf" / "user.conf", folder / "user.conf")
    (folder / "measurements.json").write_text(json.dumps(MEASUREMENTS, indent=4) + "\n", encoding="utf-8")
    (folder / "README.md").write_text("# llama2-70b-99 Offline\n\nA short run's LoadGen logs.\n", encoding="utf-8")


SETUPS = {"short-submission": short_submission}
