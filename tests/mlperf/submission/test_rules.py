"""cmx check's rule ids are one catalog (check.model.RULES): every id a check emits is in it, every id in it is in
docs/submission.md's section 6, and `--expect` refuses an id that is not."""

from __future__ import annotations

import re

import pytest

from cmx.mlperf.submission.check.model import RULES, CheckReport
from cmx.mlperf.submission.check.report import UnknownRule, expectation
from tests.conftest import REPO

CHECKS = REPO / "cmx" / "mlperf" / "submission" / "check"
RULE = re.compile(r"""["']([a-z]+[0-9]*\.[a-z][a-z0-9-]*)["']""")
NOT_RULES = re.compile(r"\.(txt|json|yaml|conf|md|py|csv|log)$|^v\d")


def test_every_rule_a_check_emits_is_in_the_catalog() -> None:
    emitted = {m for path in CHECKS.glob("*.py") for m in RULE.findall(path.read_text(encoding="utf-8"))
               if not NOT_RULES.search(m)}
    assert emitted and emitted <= RULES, sorted(emitted - RULES)


def test_every_rule_of_the_catalog_is_documented() -> None:
    text = (REPO / "docs" / "submission.md").read_text(encoding="utf-8")
    section = text[text.index("## 6. Every rule"):text.index("## 7.")]
    assert not [r for r in sorted(RULES) if f"`{r}`" not in section]


def test_expect_refuses_a_rule_id_no_check_has() -> None:
    report = CheckReport("tree", "v6.0", [], [])
    with pytest.raises(UnknownRule, match=r"'loadgen.min-duraton' \(did you mean loadgen.min-duration\?\)"):
        expectation(report, {"loadgen.min-duraton"})
    assert expectation(report, set())[0] is True
