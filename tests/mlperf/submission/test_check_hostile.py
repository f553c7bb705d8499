"""`cmx check` on a hostile tree: it follows no symbolic link (every link is a finding, an error when it leaves the tree
or stands where a file is read), walks no loop, reads no file over 50 MB, echoes no value whole, and a folder nested
1,200 deep is one finding: one line each, exit 1, bounded memory and output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.files import MAX_DEPTH
from cmx.mlperf.submission.check.report import format_report
from tests.conftest import REPO, Home
from tests.submission_trees import SUBMITTER, build_tree, result_dir

OFFLINE = f"closed/{SUBMITTER}/results/box/llama2-70b-99/Offline"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "submission")


def found(root: Path) -> list[tuple[str, str, str, str]]:
    report = check_tree(root, "v6.0")
    return [(p.path, p.rule, p.severity, p.found) for p in report.problems]


def offline_row(root: Path):
    return next(r for r in check_tree(root, "v6.0").results if r.scenario == "Offline")


def test_a_required_file_linked_out_of_the_tree_is_an_error_naming_the_link_and_is_not_read(tree: Path) -> None:
    txt = result_dir(tree, "Offline") / "accuracy" / "accuracy.txt"
    txt.unlink()
    os.symlink("/etc/passwd", txt)
    assert found(tree) == [(f"{OFFLINE}/accuracy/accuracy.txt", "layout.link", "error",
                            "a symbolic link to '/etc/passwd', outside the tree; cmx did not follow it")]
    assert offline_row(tree).accuracy == {}  # /etc/passwd was not judged as the accuracy


def test_a_log_linked_to_a_good_copy_outside_the_tree_is_not_read(tree: Path, tmp_path: Path) -> None:
    detail = result_dir(tree, "Offline") / "performance" / "run_1" / "mlperf_log_detail.txt"
    outside = tmp_path / "elsewhere.txt"
    detail.rename(outside)
    os.symlink(outside, detail)
    assert found(tree) == [(f"{OFFLINE}/performance/run_1/mlperf_log_detail.txt", "layout.link", "error",
                            f"a symbolic link to {str(outside)!r}, outside the tree; cmx did not follow it")]
    row = offline_row(tree)
    assert (row.validity, row.metric, row.compliant) == (None, None, False)


def test_a_required_file_linked_inside_the_tree_is_an_error_too(tree: Path) -> None:
    conf = result_dir(tree, "Offline") / "user.conf"
    conf.rename(conf.with_name("kept.conf"))
    os.symlink("kept.conf", conf)
    problems = found(tree)
    assert (f"{OFFLINE}/user.conf", "layout.link", "error",
            "a symbolic link (to 'kept.conf') where the checker reads a file; cmx reads none through a link") \
        in problems
    assert [p for p in problems if p[1] == "layout.link"] == [problems[0]]  # one finding for the link, not two


def test_links_in_the_results_are_findings_and_no_walk_follows_or_loops_on_them(tree: Path) -> None:
    offline = result_dir(tree, "Offline")
    os.symlink("/etc", offline / "etc")
    os.symlink("/", offline / "root")
    os.symlink(".", offline / "loop")
    os.symlink("/", tree / "closed" / "everything")
    os.symlink("/", tree / "open")
    os.symlink("nothing-here", offline / "broken")
    problems = found(tree)
    assert sorted(p[:3] for p in problems) == sorted([
        ("open", "layout.link", "error"),
        ("closed/everything", "layout.link", "error"),
        (f"{OFFLINE}/broken", "layout.link", "error"),
        (f"{OFFLINE}/etc", "layout.link", "error"),
        (f"{OFFLINE}/root", "layout.link", "error"),
        (f"{OFFLINE}/loop", "layout.link", "warning"),
    ])
    said = {p[0]: p[3] for p in problems}
    assert said[f"{OFFLINE}/broken"] == "a broken symbolic link (to 'nothing-here')"
    assert said[f"{OFFLINE}/loop"] == "a symbolic link (to '.')"
    assert problems[-1][2] == "warning"  # errors first


def test_a_link_that_stays_inside_and_is_not_read_is_a_warning_only(tree: Path) -> None:
    docs = tree / "closed" / SUBMITTER / "documentation"
    os.symlink("calibration.md", docs / "calibration-copy.md")
    report = check_tree(tree, "v6.0")
    assert [(p.rule, p.severity) for p in report.problems] == [("layout.link", "warning")]
    assert report.ok


def test_a_compliance_folder_holding_a_link_is_not_judged(tree: Path, tmp_path: Path) -> None:
    test06 = tree / "closed" / SUBMITTER / "compliance" / "box" / "llama2-70b-99" / "Offline" / "TEST06"
    if not test06.is_dir():  # the v6.0 layout keeps compliance beside the results
        test06 = result_dir(tree, "Offline") / "TEST06"
    verify = test06 / "verify_accuracy.txt"
    (tmp_path / "pass.txt").write_text(verify.read_text())
    verify.unlink()
    os.symlink(tmp_path / "pass.txt", verify)
    problems = found(tree)
    assert [p[:3] for p in problems] == [(str(verify.relative_to(tree)), "layout.link", "error")]


def _nested(top: Path, depth: int) -> None:
    """`depth` folders one in another, made relative to an open folder (a path that long is past what one call
    takes, and os.makedirs recurses)."""
    top.mkdir(exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


def _unnested(top: Path, depth: int) -> None:
    """Remove what _nested made, innermost first (pytest's clean-up, shutil.rmtree, recurses: it would fail)."""
    fds = [os.open(top, os.O_RDONLY)]
    for _ in range(depth - 1):
        fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
    while fds:
        fd = fds.pop()
        os.rmdir("d", dir_fd=fd)
        os.close(fd)
    top.rmdir()


@pytest.fixture
def deep(tree: Path):
    top = tree / "closed" / SUBMITTER / "documentation" / "deep"
    _nested(top, 1200)
    yield top
    _unnested(top, 1200)


def test_a_folder_nested_1200_deep_is_one_finding_not_a_crash(home: Home, tree: Path, deep: Path) -> None:
    proc = home.cmx("check", str(tree), "--round", "v6.0")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "[layout." in line]
    assert len(lines) == 1
    assert f"[layout.hygiene] folders nested more than {MAX_DEPTH} deep; cmx looked no further" in lines[0]


def test_deeply_nested_json_is_not_valid_json_not_a_crash(tree: Path) -> None:
    measurements = next((tree / "closed" / SUBMITTER).rglob("*.json"))
    measurements.write_text("[" * 100_000 + "]" * 100_000)
    problems = found(tree)
    assert problems and all("not valid JSON" in p[3] or "not a JSON object" in p[3]
                            for p in problems if p[0] == str(measurements.relative_to(tree)))


# a child process measures its own peak memory: what check_tree costs on the tree, not what the test wrote.
# VmHWM, not getrusage's ru_maxrss: Linux keeps ru_maxrss across execve, so a child forked from a large pytest
# worker would report the worker's size
_MEASURE = """
import re, sys
from pathlib import Path
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
out = format_report(check_tree(sys.argv[1], "v6.0"))
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) // 1024)
print(out)
"""


def _check_in_a_child(root: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(root)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=True)
    peak, _, out = proc.stdout.partition("\n")
    return int(peak), out


def _long_value(detail: Path, key: str, size: int) -> None:
    """Give `key` of a detail log a string value of `size` characters (written in pieces: the test stays small)."""
    text = detail.read_text()
    match = re.search(rf'"key": "{key}", "value": ("[^"]*")', text)
    assert match is not None, key
    with open(detail, "w") as f:
        f.write(text[:match.start(1)] + '"')
        chunk = "x" * 2**20
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write('"' + text[match.end(1):])


def test_a_200_mb_log_is_said_once_and_never_read(tree: Path) -> None:
    detail = result_dir(tree, "Offline") / "performance" / "run_1" / "mlperf_log_detail.txt"
    _long_value(detail, "result_validity", 200 * 2**20)
    peak, out = _check_in_a_child(tree)
    assert 10 < peak < 250, f"{peak} MB"  # the file alone is 200 MB; under 10 MB would be no measurement
    assert len(out) < 5_000
    assert out.count("mlperf_log_detail.txt") == 1
    assert "Offline/performance/run_1/mlperf_log_detail.txt: [layout.hygiene] 200 MB, over the 50 MB limit; " \
           "cmx did not read it" in out


def test_a_long_value_under_the_limit_is_echoed_cut_short(tree: Path) -> None:
    detail = result_dir(tree, "Offline") / "performance" / "run_1" / "mlperf_log_detail.txt"
    _long_value(detail, "result_validity", 20 * 2**20)
    _long_value(detail, "effective_scenario", 10 * 2**20)
    peak, out = _check_in_a_child(tree)
    assert len(out) < 10_000, out[:2000]
    assert "more characters)" in out
    assert peak < 400, f"{peak} MB"


def test_cmx_check_of_a_hostile_tree_exits_1_with_short_json(home: Home, tree: Path) -> None:
    os.symlink("/", result_dir(tree, "Offline") / "root")
    proc = home.cmx("check", str(tree), "--round", "v6.0", "--json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert [(p["path"], p["rule"]) for p in data["problems"]] == [(f"{OFFLINE}/root", "layout.link")]
    assert format_report  # the text report is the same findings (the tests above)
