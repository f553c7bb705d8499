"""Set-ups of docs/results.md: a generated v6.1 table and a cmx results folder to compare with it."""

from __future__ import annotations

import json

from tests.docs.console import Session
from tests.published_tables import row, rows, write_summary
from tests.submission_trees import cmx_results


def published_results(session: Session) -> None:
    """`summary.json` in the current folder, tests/published_tables.py's generated round with three more MI300X
    rows, and `results/`, a llama2-70b-99.9 Offline run on 8 MI300X at 16,000 tokens/s (2,000 per GPU)."""
    write_summary(session.cwd / "summary.json", [
        *rows(),
        row("Supermicro", "AS-8125GS", "llama2-70b-99.9", "Offline", 20000.0, "MI300X", 8, precision="bf16",
            framework="vLLM 0.9.2, ROCm 6.4"),
        row("Quanta", "2-node MI300X", "llama2-70b-99.9", "Offline", 32000.0, "AMD Instinct MI300X", 8, nodes=2,
            precision="fp8"),
    ])
    root = cmx_results(session.cwd / "results", scenarios=("Offline",), benchmark="llama2-70b-99.9")
    record = root / "box" / "llama2-70b-99" / "Offline" / "cmx_run.json"
    facts = json.loads(record.read_text(encoding="utf-8"))
    for run in facts["runs"]:
        run["tokens_per_second"] = 16000.0
    record.write_text(json.dumps(facts, indent=4) + "\n", encoding="utf-8")


SETUPS = {"published-results": published_results}
