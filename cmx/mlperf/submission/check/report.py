"""A CheckReport as people read it (a table, then one line per problem) and as the official checker's summary.csv."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path

from cmx.errors import CmxError, clip
from cmx.mlperf.submission.check.model import RULES, CheckReport, ResultRow


class UnknownRule(CmxError):
    """`--expect` names a rule id cmx check does not have (a typo would otherwise read as "not broken")."""

TABLE_HEADER = ("division", "submitter", "system", "benchmark", "scenario", "metric", "VALID", "accuracy",
                "compliant")
# the header of the official checker's summary.csv (v6.0), in its order
CSV_HEADER = ("Organization", "Availability", "Division", "SystemType", "SystemName", "Platform", "Model",
              "MlperfModel", "Scenario", "Result", "Accuracy", "number_of_nodes", "host_processor_model_name",
              "host_processors_per_node", "host_processor_core_count", "accelerator_model_name",
              "accelerators_per_node", "total_accelerators", "Location", "framework", "operating_system", "notes",
              "compliance", "errors", "version", "inferred", "has_power", "Units", "weight_data_types",
              "design_power_watts", "PrivateID")


def format_report(report: CheckReport) -> str:
    """The results table, then every problem as one line, then the verdict."""
    lines = [format_table(report.results), ""]
    if report.problems:
        lines.append(f"{len(report.errors)} error(s), {len(report.problems) - len(report.errors)} warning(s):")
        lines += [p.line() for p in report.problems]
        lines.append("")
    verdict = "PASS: no problem the official checker would fail on" if report.ok else \
        f"FAIL: {len(report.errors)} problem(s) would fail the official checker or the round's rules"
    lines.append(f"{verdict} ({report.round}, {report.root})")
    return "\n".join(lines)


def format_table(rows: Sequence[ResultRow]) -> str:
    if not rows:
        return "no results found"
    cells = [TABLE_HEADER, *(_cells(r) for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(TABLE_HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _cells(r: ResultRow) -> tuple[str, ...]:
    # a latency (SingleStream) may be a fraction of its unit: four significant digits, not one decimal
    digits = ".4g" if r.units.startswith("Latency") else ".1f"
    metric = "-" if r.metric is None else f"{r.metric:{digits}} {r.units}"
    accuracy = " ".join(f"{k}={v:g}" for k, v in r.accuracy.items()) or "-"
    compliant = "yes" if r.compliant else f"no ({r.problems} problem(s))"
    return (r.division, r.submitter, r.system, r.benchmark, r.scenario, metric, clip(r.validity or "-", 20),
            accuracy, compliant)


def summary_csv(report: CheckReport) -> str:
    """summary.csv as the official checker writes it: the header bare, every value of a row in quotes."""
    out = io.StringIO()
    out.write(",".join(CSV_HEADER) + "\n")
    for r in report.results:
        values = _csv_values(r, report.round)
        out.write(",".join(f'"{values[h]}"' for h in CSV_HEADER) + "\n")
    return out.getvalue()


def _csv_values(r: ResultRow, round_name: str) -> dict[str, str]:
    s = {k: "" if v is None else clip(v) for k, v in r.system_facts.items()}
    try:
        total = str(int(s.get("number_of_nodes", "")) * int(s.get("accelerators_per_node", "")))
    except ValueError:
        total = ""
    accuracy = json.dumps({k: f"{v:g}" for k, v in r.accuracy.items()}).replace(",", " ")
    for ch in '"{}':
        accuracy = accuracy.replace(ch, "")
    notes = ". ".join(n for n in (s.get("hw_notes", ""), s.get("sw_notes", "")) if n)
    return {
        "Organization": s.get("submitter", r.submitter), "Availability": s.get("status", ""),
        "Division": r.division, "SystemType": s.get("system_type", ""), "SystemName": s.get("system_name", ""),
        "Platform": r.system, "Model": r.benchmark, "MlperfModel": r.benchmark, "Scenario": r.scenario,
        "Result": "" if r.metric is None else str(r.metric), "Accuracy": accuracy,
        "number_of_nodes": s.get("number_of_nodes", ""),
        "host_processor_model_name": s.get("host_processor_model_name", ""),
        "host_processors_per_node": s.get("host_processors_per_node", ""),
        "host_processor_core_count": s.get("host_processor_core_count", ""),
        "accelerator_model_name": s.get("accelerator_model_name", ""),
        "accelerators_per_node": s.get("accelerators_per_node", ""), "total_accelerators": total,
        "Location": f"{r.path}/performance/run_1", "framework": s.get("framework", ""),
        "operating_system": s.get("operating_system", ""), "notes": notes, "compliance": r.division,
        "errors": str(r.problems), "version": round_name, "inferred": "0", "has_power": "False",
        "Units": r.units, "weight_data_types": clip(r.weight_data_types), "design_power_watts": "", "PrivateID": "",
    }


def write_csv(report: CheckReport, path: Path) -> Path:
    path.write_text(summary_csv(report), encoding="utf-8")
    return path


def expectation(report: CheckReport, expected: set[str]) -> tuple[bool, str]:
    """Whether the tree breaks exactly the `expected` rules (a smoke tree's known shortfalls), and the verdict line.

    The problems are all still reported; this only says whether they are the ones foreseen, so a
    short run's tree can be checked in CI without pretending it passes."""
    unknown = sorted(expected - RULES)
    if unknown:
        import difflib

        close = {r: difflib.get_close_matches(r, sorted(RULES), n=1) for r in unknown}
        said = "; ".join(f"{r!r}" + (f" (did you mean {c[0]}?)" if c else "") for r, c in close.items())
        raise UnknownRule(f"--expect names no rule cmx check applies: {said}",
                          hint="the rule ids are in docs/submission.md, section 6, and in brackets in cmx check's "
                               "report")
    broken = report.rules_broken()
    unexpected, unbroken = sorted(broken - expected), sorted(expected - broken)
    if not unexpected and not unbroken:
        return True, (f"AS EXPECTED: the tree breaks exactly {', '.join(sorted(expected)) or 'no rule'} and nothing "
                      "else (it is still not a passing submission)")
    parts = [f"breaks {', '.join(unexpected)}, which was not expected" if unexpected else "",
             f"does not break {', '.join(unbroken)}, which was expected" if unbroken else ""]
    return False, "NOT AS EXPECTED: the tree " + "; and ".join(p for p in parts if p)
