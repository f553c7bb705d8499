"""What `cmx check` finds: problems (path, rule, what was found, what to do) and one row per result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cmx.errors import clip

FINDING_LIMIT = 2000  # characters of a finding's path, found or fix; a value it quotes is cut shorter (errors.clip)
ERROR = "error"      # the official checker fails on it, or the round's rules forbid it where the checker does not look
WARNING = "warning"  # worth fixing; fails nothing


# every rule id a problem can carry (docs/submission.md, section 6, says what each checks): `--expect` names
# only these, and tests/mlperf/submission/test_rules.py holds them equal to what the checks emit and the docs
RULES = frozenset({
    *(f"accuracy.{r}" for r in ("coverage", "extra-files", "hash", "target", "truncation", "unchecked", "unreadable")),
    *(f"endpoints.{r}" for r in ("audit", "duration", "incomplete", "latency-limit", "min-duration", "model",
                                 "result", "sample-count", "scenario", "seeds", "unreadable")),
    *(f"layout.{r}" for r in ("benchmark", "calibration", "division-file", "empty-file", "file-list", "hygiene",
                              "link", "missing-file", "model-mapping", "no-results", "root", "scenario", "src",
                              "submitter")),
    *(f"loadgen.{r}" for r in ("audit", "early-stopping", "equal-issue", "error", "invalid", "latency-limit",
                               "latency-setting", "logs-disagree", "min-duration", "sample-count", "scenario", "seeds",
                               "tokens", "unreadable")),
    "measurements.field", "measurements.missing", "power.unchecked", "scenarios.required",
    *(f"system.{r}" for r in ("division", "endpoint", "field", "missing-json", "network", "orphan", "status",
                              "submitter", "type", "unknown-field")),
    *(f"{test}.{r}" for test in ("test01", "test04", "test06", "test07", "test09") for r in ("check", "missing")),
})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a tree, located and explained."""

    path: str        # relative to the tree's root: closed/cmx/results/box/<benchmark>/Offline/user.conf
    rule: str        # a stable id: layout.missing-file, loadgen.seeds, accuracy.hash, ...
    found: str
    fix: str
    severity: str = ERROR

    def __post_init__(self) -> None:
        # the last guard of bounded output: a finding that quotes a hostile file is cut, wherever it was made
        for name in ("path", "found", "fix"):
            object.__setattr__(self, name, clip(getattr(self, name), FINDING_LIMIT))

    def line(self) -> str:
        fix = f"; {self.fix}" if self.fix else ""
        mark = "" if self.severity == ERROR else f" ({self.severity})"
        found = self.found.rstrip(".") if fix else self.found
        return f"{self.path}: [{self.rule}]{mark} {found}{fix}"


@dataclass(frozen=True)
class ResultRow:
    """One result of the tree, as the table and the CSV show it."""

    division: str
    submitter: str
    system: str
    benchmark: str
    scenario: str
    path: str
    metric: float | None            # the checker's result in `units`: tokens/s, samples/s, queries/s, a latency
    units: str
    validity: str | None            # LoadGen's VALID / INVALID (see harness)
    accuracy: dict[str, float]      # ROUGE1, ROUGE2, ROUGEL, TOKENS_PER_SAMPLE as found
    problems: int                   # errors located in this result's folders
    weight_data_types: str = ""     # from measurements.json
    system_facts: dict[str, Any] = field(default_factory=dict)
    # what made the result: LoadGen, or MLCommons' endpoint client (v6.1), whose VALID is cmx's verdict on its
    # performance rules (duration, completion, latency limits), as the client writes none
    harness: str = "loadgen"

    @property
    def compliant(self) -> bool:
        return self.problems == 0 and self.validity == "VALID"


@dataclass(frozen=True)
class CheckReport:
    """Everything `check_tree` found: the results and the problems (errors first, each in the tree's order)."""

    root: str
    round: str
    results: list[ResultRow]
    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors

    def rules_broken(self) -> set[str]:
        return {p.rule for p in self.errors}

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "round": self.round, "ok": self.ok,
                "results": [{**asdict(r), "compliant": r.compliant} for r in self.results],
                "problems": [asdict(p) for p in self.problems]}
