"""A round's published results table in the real format, generated: summary.json as pandas writes the checker's
CSV (`to_json(orient="index", indent=4)`: an object keyed "0", "1", ..., '/' escaped as '\\/', empty cells null),
or summary.csv as the checker writes it (tools/submission/submission_checker/results.py: every cell quoted, None
and False as text). The rows are made up; the names are written the ways submitters write them. And a static
server on 127.0.0.1 for GitHub's raw-file layout, `/mlcommons/inference_results_<round>/<commit>/<file>`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

COMMIT = "e777c7be4514bc1e28f657ad7c30167167fb7c41"  # the recipe's pin for v6.1
# the checker's columns, in its order (ResultExporter.head)
COLUMNS = ("Organization", "Availability", "Division", "SystemType", "SystemName", "Platform", "Model", "MlperfModel",
           "Scenario", "Result", "Accuracy", "number_of_nodes", "host_processor_model_name", "host_processors_per_node",
           "host_processor_core_count", "accelerator_model_name", "accelerators_per_node", "total_accelerators",
           "Location", "framework", "operating_system", "notes", "compliance", "errors", "version", "inferred",
           "has_power", "Units", "weight_data_types", "design_power_watts", "PrivateID")

ROCM = "vLLM 0.22.0, PyTorch 2.10.0, ROCm 7.2.2"
TRT = "TensorRT 10.14, CUDA 13.1"


def row(org: str, system: str, model: str, scenario: str, result: float, accelerator: str | None, per_node: int,
        *, nodes: int = 1, division: str = "closed", framework: str = TRT, precision: str = "fp4",
        units: str = "Tokens/s", inferred: int = 0, mlperf_model: str | None = None, cpu: str = "AMD EPYC 9575F",
        cpus: int = 2, power: bool = False) -> dict[str, Any]:
    """One result as the checker exports it (total_accelerators = nodes x per node, as it computes it)."""
    platform = system.replace(" ", "_")
    return {"Organization": org, "Availability": "available", "Division": division, "SystemType": "datacenter",
            "SystemName": system, "Platform": platform, "Model": model, "MlperfModel": mlperf_model or model,
            "Scenario": scenario, "Result": result, "Accuracy": "ROUGE1: 44.5  ROUGE2: 22.1  ROUGEL: 28.9",
            "number_of_nodes": nodes, "host_processor_model_name": cpu, "host_processors_per_node": cpus,
            "host_processor_core_count": "64", "accelerator_model_name": accelerator,
            "accelerators_per_node": per_node, "total_accelerators": nodes * per_node,
            "Location": f"./{division}/{org}/results/{platform}/{model}/{scenario}/performance/run_1",
            "framework": framework, "operating_system": "Ubuntu 22.04.5 LTS", "notes": None, "compliance": division,
            "errors": 0, "version": "v6.1", "inferred": inferred, "has_power": power, "Units": units,
            "weight_data_types": precision, "design_power_watts": None, "PrivateID": None}


def rows() -> list[dict[str, Any]]:
    """A small round: llama2-70b-99.9 on MI355X (three ways of naming it), H200 and GH200 and B200 and GB200 (names
    that contain one another), a CPU-only system, an inferred Interactive row, a power row, and a submitter's own
    spelling of a benchmark."""
    mi355x = "AMD Instinct MI355X 288GB HBM3e"
    return [
        row("AMD", "8xMI355X_2xEPYC_9575F", "llama2-70b-99.9", "Offline", 106517.0, mi355x, 8, framework=ROCM),
        row("AMD", "8xMI355X_2xEPYC_9575F", "llama2-70b-99.9", "Server", 103275.0, mi355x, 8, framework=ROCM),
        row("AMD", "8xMI355X_2xEPYC_9575F", "llama2-70b-99.9", "Interactive", 73191.5, mi355x, 8, framework=ROCM,
            inferred=1),
        row("AMD", "9x8xMI355X_2xEPYC_9575F", "llama2-70b-99.9", "Offline", 900000.0, mi355x, 8, nodes=9,
            framework="vLLM 0.22.1.dev0, PyTorch 2.10.0, ROCm 7.2.2", precision="mxfp4"),
        row("HPE", "HPE ProLiant Compute XD685 (8x AMD MI355X-288GB, vLLM)", "llama2-70b-99.9", "Offline", 98000.0,
            "MI355X", 8, framework=ROCM, precision="fp8"),
        row("MangoBoost", "MangoBoost 4x MI355X", "llama2-70b-99.9", "Offline", 50000.0, "AMD MI355X", 4,
            division="open", framework=ROCM),
        row("Krai", "HPE Cray XD670 (8x H200-SXM-141GB)", "llama2-70b-99.9", "Offline", 34000.0,
            "NVIDIA H200-SXM-141GB", 8, framework="TensorRT-LLM 0.19", precision="fp8"),
        row("Lambda", "Lambda 8x H200", "llama2-70b-99.9", "Offline", 32000.0, "H200", 8, precision="fp8"),
        row("NVIDIA", "GH200-144GB_aarch64x1_TRT", "llama2-70b-99.9", "Offline", 5000.0,
            "NVIDIA GH200-144GB_aarch64", 1, precision="fp8"),
        row("ASUSTeK", "XA NB3I-E12", "llama2-70b-99.9", "Offline", 113007.0, "NVIDIA B300-SXM-270GB", 8),
        row("Lambda", "B200-SXM-180GBx8_TRT", "llama2-70b-99.9", "Offline", 100000.0, "NVIDIA B200-SXM-180GB", 8),
        row("Azure", "Azure GB200 NVL72 (72x GB200-186GB_aarch64, TensorRT)", "llama2-70b-99.9", "Offline",
            900000.0, "NVIDIA GB200", 4, nodes=18),
        row("Intel", "1-node-2S-GNR_128C", "llama2-70b-99.9", "Offline", 1200.0, None, 0, framework="PyTorch",
            precision="INT8", cpu="Intel(R) Xeon(R) 6980P"),
        row("Intel", "1-node-2S-GNR_128C", "llama3_1-8b", "Offline", 1916.74, None, 0, framework="PyTorch",
            precision="INT8", cpu="Intel(R) Xeon(R) 6980P", mlperf_model="llama3.1-8b"),
        row("AMD", "8xMI355X_2xEPYC_9575F", "llama2-70b-99", "Offline", 110000.0, mi355x, 8, framework=ROCM),
        row("Dell", "PowerEdge XE9680 (8x MI300X)", "llama2-70b-99.9", "Offline", 24000.0,
            "AMD Instinct MI300X-NPS1-SPX-192GB-750W", 8, framework=ROCM, precision="fp8", power=True),
        {**row("Dell", "PowerEdge XE9680 (8x MI300X)", "llama2-70b-99.9", "Offline", 9500.0,
               "AMD Instinct MI300X-NPS1-SPX-192GB-750W", 8, framework=ROCM, precision="fp8", power=True),
         "Units": "Watts"},
        row("AMD", "8xMI355X_2xEPYC_9575F", "resnet50", "offline", 500000.0, mi355x, 8, units="Samples/s",
            mlperf_model="resnet", precision="int8"),
    ]


def summary_json(table: list[dict[str, Any]]) -> str:
    """As pandas writes it: keyed by index, indent 4, '/' escaped."""
    text = json.dumps({str(i): {c: r.get(c) for c in COLUMNS} for i, r in enumerate(table)}, indent=4)
    return text.replace("/", "\\/").replace('": ', '":')


def summary_csv(table: list[dict[str, Any]]) -> str:
    """As the checker writes it: a plain header, every cell quoted, Python's str() of each value."""
    lines = [",".join(COLUMNS)]
    lines += [",".join(f'"{"" if r.get(c) is None and c in ("notes", "PrivateID") else r.get(c)}"' for c in COLUMNS)
              for r in table]
    return "\n".join(lines) + "\n"


def write_summary(path: Path, table: list[dict[str, Any]] | None = None) -> Path:
    """summary.json or summary.csv (by the name's suffix) of `table` (default: rows())."""
    table = rows() if table is None else table
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(summary_csv(table) if path.suffix == ".csv" else summary_json(table), encoding="utf-8")
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class RawSite:
    """Files served at their path, and every path asked for."""

    files: dict[str, bytes]
    seen: list[str] = field(default_factory=list)
    url: str = ""


@contextmanager
def raw_server(files: dict[str, bytes]) -> Iterator[RawSite]:
    """A static server on 127.0.0.1 (404 for anything else) for as long as the block runs."""
    site = RawSite(files)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            site.seen.append(self.path)
            data = site.files.get(self.path)
            self.send_response(200 if data is not None else 404)
            self.send_header("Content-Length", str(len(data or b"")))
            self.end_headers()
            self.wfile.write(data or b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def raw_path(name: str = "summary.json", round_name: str = "v6.1", commit: str = COMMIT) -> str:
    return f"/mlcommons/inference_results_{round_name}/{commit}/{name}"
