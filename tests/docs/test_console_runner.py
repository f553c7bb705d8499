"""The console-example runner (tests/docs/console.py) catches drift and forgives only what two runs may differ in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs.console import Block, Directive, Session, compare, items, run_page

PAGE = """# A page

Some prose.

<!-- console: skip needs a GPU -->
```
$ cmx run "app mlperf inference llama2 _rocm"
```

<!-- console: file /tmp/x/recipe.yaml -->
```yaml
name: x
```

<!-- console: sh
mkdir -p /tmp/made
-->

    $ echo indented \\
        and continued
    indented and continued

- a list item, with its example:

  ```
  $ echo in a list
  in a list
  ```
"""


def test_a_page_reads_as_its_blocks_and_directives_in_order() -> None:
    found = items(PAGE)
    kinds = [type(i).__name__ for i in found]
    assert kinds == ["Directive", "Block", "Directive", "Block", "Directive", "Block", "Block"]
    skip, console = found[0], found[1]
    assert isinstance(skip, Directive) and (skip.name, skip.argument) == ("skip", "needs a GPU")
    assert isinstance(console, Block) and console.is_console and console.line == 7
    hidden = found[4]
    assert isinstance(hidden, Directive) and hidden.argument == "mkdir -p /tmp/made"
    indented = found[5]
    assert isinstance(indented, Block) and indented.is_console
    [example] = indented.examples()
    assert example.command == "echo indented and continued" and example.expected == "indented and continued"
    listing = found[6]
    assert isinstance(listing, Block)
    [listed] = listing.examples()
    assert (listed.command, listed.expected) == ("echo in a list", "in a list")


@pytest.mark.parametrize("expected, actual", [
    ("ok: detect-python in 0.05s (1 ran); record: /work/main/runs/20261122-120321-detect-python/run.json",
     "ok: detect-python in 1.25s (1 ran); record: /work/main/runs/20261128-020000-detect-python-2/run.json"),
    ("get-text-sample  6f28b8b93aea    2026-11-22T12:04:10+00:00  40 B",
     "get-text-sample  0b858da53fb9  2026-11-28T02:32:49+00:00  40 B"),
    ('  "seconds": 0.045,', '  "seconds": 12.5,'),
    ("first\n...\nlast", "first\nanything\nat all\nlast"),
    ("log: ... (hint: check it)", "log: /var/log/x.log (hint: check it)"),
])
def test_what_two_honest_runs_print_differently_is_forgiven(expected: str, actual: str) -> None:
    assert compare(expected, actual).matched


@pytest.mark.parametrize("expected, actual", [
    ("4 step(s): 1 cached, 2 to build, 1 to run", "4 step(s): 3 cached, 0 to build, 1 to run"),
    ("error: no recipe matches 'x'", "error: no recipe matches 'y'"),
    ("NAME  TAGS\na  b", "NAME  TAGS\na  b\nc  d"),                      # a line more
    ("218.0 Tokens/s", "301.5 Tokens/s"),                                # a figure, unless measured
    ("record: /work/main/runs/20261122-120321-detect-python/run.json",
     "record: /work/main/runs/20261122-120321-get-cuda/run.json"),          # a run folder of another recipe
])
def test_drift_is_caught(expected: str, actual: str) -> None:
    assert not compare(expected, actual).matched


def test_a_measured_block_forgives_its_figures_only() -> None:
    assert compare("Offline  218.0 Tokens/s  VALID", "Offline  301.5 Tokens/s  VALID", measured=True).matched
    assert not compare("Offline  218.0 Tokens/s  VALID", "Offline  301.5 Tokens/s  INVALID", measured=True).matched


def test_a_key_the_page_showed_is_learned_for_later_commands(tmp_path: Path) -> None:
    outcome = compare("entry 08ba9b1c2d3e", "entry 5f00aa11bb22")
    assert outcome.keys == {"08ba9b1c2d3e": "5f00aa11bb22"}
    session = Session.fresh(REPO, tmp_path)
    session.keys.update(outcome.keys)
    assert session.local("cmx cache show 08ba") == "cmx cache show 5f00"


def test_the_pages_paths_point_at_the_sessions_folders_and_back(tmp_path: Path) -> None:
    session = Session.fresh(REPO, tmp_path)
    local = session.local("ls /tmp/tutorial /work/main/recipes")
    assert local == f"ls {tmp_path}/tutorial {tmp_path}/work-main/recipes"
    assert session.as_page(f"{tmp_path}/work-main/runs and {tmp_path}/tutorial") == "/work/main/runs and /tmp/tutorial"


def test_a_page_runs_in_its_session_and_reports_each_mismatch_with_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- console: sh\nexport GREETING=hello\n-->\n\n```\n$ echo $GREETING\nhello\n$ false\n"
                    "$ echo $?\n1\n$ echo drifted\nas the page says\n```\n", encoding="utf-8")
    result = run_page(page, "page.md", Session.fresh(REPO, tmp_path / "s"), {})
    assert result.ran == 4
    [mismatch] = result.mismatches
    assert mismatch.line == 11 and mismatch.command == "echo drifted"
    assert "-as the page says" in str(mismatch) and "+drifted" in str(mismatch)


def test_a_skip_needs_a_reason_and_a_setup_must_exist(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- console: skip -->\n```\n$ true\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs a reason"):
        run_page(page, "page.md", Session.fresh(REPO, tmp_path / "a"), {})
    page.write_text("<!-- console: setup nowhere -->\n", encoding="utf-8")
    with pytest.raises(KeyError, match="no set-up named 'nowhere'"):
        run_page(page, "page.md", Session.fresh(REPO, tmp_path / "b"), {})


def test_a_command_past_the_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    import subprocess

    session = Session.fresh(REPO, tmp_path)
    session.timeout = 0.5
    marker = f"sleep 31.{tmp_path.stat().st_ino % 1000}"    # a command line of this test's own
    with pytest.raises(subprocess.TimeoutExpired):
        session.shell(f"{marker} & {marker}")
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == ""
