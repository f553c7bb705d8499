"""One point measured by MLCommons' endpoint client: run its config, read the report it writes.

`inference-endpoint benchmark from-config --config FILE` writes `performance/result_summary.json` under
the config's report_dir (mlcommons/endpoints metrics/report.py). A point's figures are read from it as
the MLPerf Endpoints checker derives them: system tokens/s = output_sequence_lengths.total over
duration_ns, TPOT and TTFT p90 from the plain `percentiles` (keys "90.0" or "90"), in nanoseconds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.endpoints.results import nested
from cmx.mlperf.pareto.metrics import PointFigures

SUMMARY = Path("performance") / "result_summary.json"


class ClientRunFailed(CmxError):
    """MLCommons' client did not finish a point, or left no report."""


def run_client(command: str, config: Path, report_dir: Path, *, timeout_s: float | None = None) -> PointFigures:
    """Run the client on `config` and read its report; a ClientRunFailed names the log when it fails."""
    log = config.with_name("client.log")
    with log.open("w", encoding="utf-8") as out:
        try:
            proc = subprocess.run([command, "benchmark", "from-config", "--config", str(config)], stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ClientRunFailed(f"MLCommons' client ran past {timeout_s:.0f} s on {config}",
                                  hint=f"see {log}") from None
    if proc.returncode != 0:
        raise ClientRunFailed(f"MLCommons' client exited with status {proc.returncode} on {config}",
                              hint=f"its output is in {log}")
    return client_figures(report_dir)


def client_figures(report_dir: Path) -> PointFigures:
    path = report_dir / SUMMARY
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ClientRunFailed(f"no readable report from MLCommons' client at {path}: {exc}",
                              hint="see client.log beside the point's config") from None
    duration_ns = data.get("duration_ns") or 0
    seconds = duration_ns / 1e9
    tokens = nested(data, "output_sequence_lengths.total")
    tpot = nested(data, "tpot.percentiles.90.0")
    ttft = nested(data, "ttft.percentiles.90.0")
    tps = float(tokens) / seconds if tokens is not None and seconds > 0 else None
    issued, completed = int(data.get("n_samples_issued") or 0), int(data.get("n_samples_completed") or 0)
    return PointFigures(system_tps=tps, tps_per_user=1e9 / float(tpot) if tpot else None,
                        ttft_p90_ms=float(ttft) / 1e6 if ttft is not None else None,
                        tpot_p90_ms=float(tpot) / 1e6 if tpot is not None else None,
                        issued=issued, completed=completed, failed=int(data.get("n_samples_failed") or 0),
                        output_tokens=int(tokens or 0), window_s=seconds, duration_s=seconds, whole_run_tps=tps)
