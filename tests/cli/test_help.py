"""`--help` teaches, and the pre-rendered top-level help never drifts from click's."""

import os
import subprocess
import sys

import pytest

from cmx.cli.app import COMMANDS
from cmx.cli.help_text import TOP_HELP, render
from tests.conftest import REPO


def _click_help(*args: str) -> str:
    """Help as click itself prints it (through the app, not the fast path)."""
    code = "import sys; from cmx.cli.app import run_cli; sys.exit(run_cli(sys.argv[1:]))"
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return proc.stdout


def test_pre_rendered_top_help_equals_clicks_rendering() -> None:
    assert render() == _click_help("--help")
    assert render() == TOP_HELP, "cmx --help drifted: run `python -m cmx.cli.help_text --write`"


def test_cmx_help_fast_path_prints_the_pre_rendered_text() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-m", "cmx", "--help"], capture_output=True, text=True, env=env,
                          cwd=REPO, check=True)
    assert proc.stdout == TOP_HELP


@pytest.mark.parametrize("verb", list(COMMANDS))
def test_every_verb_help_has_usage_and_an_example(verb: str) -> None:
    text = _click_help(verb, "--help")
    assert text.startswith(f"Usage: cmx {verb}")
    assert "cmx " in text.split("\n", 2)[2], "the help shows at least one example command"
    assert "\\b" not in text, "a literal \\b: click's no-rewrap mark is the character \\b, not a backslash and b"


@pytest.mark.parametrize("args", [["find"], ["find", "detect"], ["find", "detect", "--json"],
                                  ["find", "nothing-has-this"], ["find", "get", "_rocm"], ["find", "Bad_Word"]])
def test_find_fast_path_prints_exactly_what_the_click_command_prints(home, args: list[str]) -> None:
    home.recipe("detect-thing", "name: detect-thing\nsummary: finds\ntags: [detect, thing]\n")
    home.recipe("get-thing", "name: get-thing\ntags: [get, thing]\nvariations:\n  device:\n    rocm: {}\n")
    via_click = "import sys; from cmx.cli.app import run_cli; sys.exit(run_cli(sys.argv[1:]))"
    fast = subprocess.run([sys.executable, "-m", "cmx", *args], env=home.env, capture_output=True, text=True)
    slow = subprocess.run([sys.executable, "-c", via_click, *args], env=home.env, capture_output=True, text=True)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)


HEAVY = ("click", "yaml", "jinja2", "rich", "filelock", "git", "requests", "logging", "subprocess", "difflib",
         "concurrent", "dataclasses")


def test_find_and_help_import_none_of_the_heavy_modules(home) -> None:
    """The start-up budgets hold only while these stay off the path (bench/plan_speed.py measures them)."""
    home.recipe("detect-thing", "name: detect-thing\ntags: [detect]\n")
    for args in (["find", "detect"], ["--help"]):
        home.cmx(*args, check=True)  # builds the index first
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "cmx", *args], env=home.env,
                              capture_output=True, text=True, check=True)
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
        assert not sorted(m for m in imported if m.split(".")[0] in HEAVY), f"cmx {' '.join(args)} imports them"
