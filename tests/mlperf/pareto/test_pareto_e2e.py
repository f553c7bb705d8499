"""`cmx pareto` end to end: the tiny Llama 3.1 8B behind the vllm serve cmx starts (CPU build), probes for C_max,
the 1 + 3 + 3 points and the Offline point, the accuracy gate, the clients' configs, and the report page in a real
browser."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from cmx.mlperf.pareto.record import LABEL, read_record
from cmx.mlperf.pareto.regions import regions, structure_problems
from tests.conftest import REPO, Home, needs_vllm
from tests.mlperf.report.test_report import _NO_BROWSER, CHROMIUM


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_a_short_curve_of_the_tiny_model_has_the_rules_structure_and_its_page_renders(home: Home, tmp_path: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    results = tmp_path / "results"
    proc = home.cmx("pareto", "app mlperf inference llama3.1-8b _cpu _tiny _endpoint _short", "--input", "rows=16",
                    "--input", f"results_dir={results}", "--input", "system_name=cpu-box", "--json", timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    record = read_record(Path(out["record"]))
    assert record.label == LABEL and record.client == "cmx" and record.short
    assert record.c_max_source == "probes" and record.c_max >= 64 and [p.concurrency for p in record.probes][:2] == \
        [32, 64]
    steps = record.steps
    assert len(steps) == 7 and record.offline_point is not None and record.offline_point.concurrency == 16
    assert structure_problems(regions(record.c_max, record.c_min), [p.concurrency for p in steps], offline=True) == []
    assert all(p.system_tps and p.tps_per_user and p.ttft_p90_ms and p.failed == 0 for p in steps)
    gated = [p for p in record.points if p.accuracy is not None]
    assert [p.concurrency for p in gated] == [p.concurrency for p in steps if p.role == "mandatory"] + [16]
    assert record.accuracy_passed is False  # a random model: the gate is run, and says so
    folder = Path(out["folder"])
    assert (folder / "r1" / "requests.jsonl").is_file() and (folder / "r1" / "client_config.yaml").is_file()
    assert (folder / "offline" / "client_config.yaml").is_file()
    page = Path(out["report"])
    assert html.escape(LABEL) in page.read_text()
    if _NO_BROWSER:
        pytest.skip(_NO_BROWSER)
    from playwright import sync_api

    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(page.as_uri())
            shown = tab.locator("section.pareto .label-note").is_visible()
            box = tab.locator("#pareto-steps-0").bounding_box()
        finally:
            browser.close()
    assert errors == [] and shown and box and box["width"] > 100
