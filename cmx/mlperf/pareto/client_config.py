"""The YAML config of MLCommons' endpoint client (`inference-endpoint`) for one point of a curve.

A compliant MLPerf Endpoints result needs that client, unmodified, configured only through its YAML
(endpoints_rules.md §2.1.1). So that the same `cmx pareto` gives the submittable form, cmx writes one
config per point from its plan: the load pattern (`concurrency` at the point's level; the Offline point
`type: offline`, whose pattern is `max_throughput`), the rules' minimum duration for the point's region,
streaming on, the endpoint, the model, the prompts, and a report folder inside the point's folder. Where
the client is installed (`inference-endpoint` on PATH), `cmx pareto` runs each config with
`inference-endpoint benchmark from-config --config FILE` and reads the report it writes; elsewhere the
configs are left beside cmx's own measurement, to run by hand.

The prompts are the curve's own rows, decoded with the model's tokenizer into a JSONL file
(`{"prompt": ...}`) sent to the client's `openai_completions` route, as cmx sends token ids to
/v1/completions. A submission names the benchmark's official dataset instead; the file says so.
The seed set a submission binds to (the rules' set "A") is MLCommons'; cmx leaves the client's seeds and
says where they go.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CLIENT_COMMAND = "inference-endpoint"
CONFIG_NAME = "client_config.yaml"
REPORT_DIR = "client_report"
HEADER = """\
# MLCommons endpoint client (inference-endpoint) config for one point of a cmx pareto curve.
# Run it unmodified: inference-endpoint benchmark from-config --config {config}
# For a submission: point datasets at the benchmark's official dataset, add the seed set's values
# (settings.runtime.scheduler_random_seed, dataloader_random_seed) and a point.yaml (docs/pareto.md).
"""


@dataclass(frozen=True)
class ClientPoint:
    concurrency: int | None        # None: the Offline point
    min_duration_ms: int
    url: str                       # the server's base URL (http://127.0.0.1:8000)
    model: str                     # the served model name
    max_new_tokens: int
    prompts: Path                  # the JSONL of prompts
    folder: Path                   # the point's folder; the client's report goes under it


def client_config(point: ClientPoint) -> dict[str, Any]:
    """The config as a mapping (the client's BenchmarkConfig schema: mlcommons/endpoints config/schema.py)."""
    offline = point.concurrency is None
    settings: dict[str, Any] = {"runtime": {"min_duration_ms": point.min_duration_ms}}
    if not offline:
        settings["load_pattern"] = {"type": "concurrency", "target_concurrency": point.concurrency}
    base = point.url.rstrip("/")
    return {
        "name": "pareto_offline" if offline else f"pareto_c{point.concurrency}",
        "type": "offline" if offline else "online",
        "model_params": {"name": point.model, "max_new_tokens": point.max_new_tokens,
                         "streaming": "off" if offline else "on"},
        "datasets": [{"name": "perf", "type": "performance", "path": str(point.prompts),
                      "parser": {"prompt": "prompt"}}],
        "settings": settings,
        "endpoint_config": {"endpoints": [base.removesuffix("/v1")], "api_type": "openai_completions"},
        "report_dir": str(point.folder / REPORT_DIR),
    }


def write_client_config(point: ClientPoint) -> Path:
    path = point.folder / CONFIG_NAME
    point.folder.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER.format(config=path) + yaml.safe_dump(client_config(point), sort_keys=False),
                    encoding="utf-8")
    return path


def write_prompts(path: Path, rows: int, prompt_ids: Callable[[int], Sequence[int]],
                  decode: Callable[[Sequence[int]], str]) -> Path:
    """The curve's prompts as the client reads them: one JSON object per line with its text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row in range(rows):
            out.write(json.dumps({"prompt": decode(list(prompt_ids(row)))}) + "\n")
    return path


def client_command() -> str | None:
    """The installed client's command, or None."""
    return shutil.which(CLIENT_COMMAND)
