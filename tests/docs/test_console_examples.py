"""The console examples of the README and docs/ print what the pages say they print (tests/docs/console.py).

A page's named set-ups (`<!-- console: setup NAME -->`: a server, fake vendor tools) live in
tests/docs/setup_*.py, each module's `SETUPS`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs.console import Session, Setup, console_pages, run_page


def named_setups() -> dict[str, Setup]:
    setups: dict[str, Setup] = {}
    for module in sorted((Path(__file__).parent).glob("setup_*.py")):
        for name, setup in importlib.import_module(f"tests.docs.{module.stem}").SETUPS.items():
            assert name not in setups, f"set-up {name!r} is named twice ({module.name})"
            setups[name] = setup
    return setups


@pytest.mark.e2e
@pytest.mark.parametrize("page", [p.relative_to(REPO).as_posix() for p in console_pages(REPO)])
def test_the_pages_console_examples_print_what_the_page_shows(page: str, tmp_path: Path) -> None:
    result = run_page(REPO / page, page, Session.fresh(REPO, tmp_path), named_setups())
    assert result.ran or result.skipped, f"{page}: no console example was found"
    assert not result.mismatches, (f"{len(result.mismatches)} of {result.ran} examples differ from the page "
                                   "(fix the page or the code):\n\n" + "\n\n".join(map(str, result.mismatches)))
