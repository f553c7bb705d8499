"""cmx.extras: the one table of which extra brings which module, and the one-line refusal built from it."""

from __future__ import annotations

import re

import pytest

from cmx import extras
from cmx.errors import CmxError
from tests.conftest import REPO


def test_a_missing_module_of_an_extra_refuses_the_verb_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRAS, "report", ("json", "cmx_no_such_module_here"))
    with pytest.raises(extras.MissingExtra) as caught:
        extras.require_extra("report", "cmx report")
    assert isinstance(caught.value, CmxError)
    assert caught.value.render() == "cmx report needs the report extra: pip install 'cmx-bench[report]'"


def test_only_the_modules_a_verb_names_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRAS, "scale", ("json", "cmx_no_such_module_here"))
    extras.require_extra("scale", "cmx deploy", "json")  # the missing one is another verb's
    with pytest.raises(extras.MissingExtra):
        extras.require_extra("scale", "cmx deploy --apply", "cmx_no_such_module_here")


def test_every_extra_of_the_table_is_one_of_pyproject() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    declared = set(re.findall(r"^([a-z][a-z0-9_-]*) = \[", section, re.MULTILINE))
    assert set(extras.EXTRAS) <= declared
