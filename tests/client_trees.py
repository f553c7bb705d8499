"""A v6.1 closed submission tree of MLCommons' endpoint client's results ("Loadgen++"), made by hand.

Each scenario folder holds what the client writes to its report folder, laid out as the official
checker reads it (mlcommons/inference tools/submission/submission_checker/parsers/endpoints_parser.py):
config.yaml at the scenario's root, performance/result_summary.json, accuracy/accuracy_results.json,
with measurements.json and README.md beside them. The fields and their shapes are the client's
(mlcommons/endpoints: metrics/report.py, commands/benchmark/accuracy.py, config/schema.py); the numbers
are made up so that every rule passes: Qwen3-VL Offline and Interactive, gpt-oss-120b Offline and Server.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from tests.submission_trees import MEASUREMENTS, SUBMITTER, SYSTEM, SYSTEM_JSON

QWEN, GPT_OSS = "qwen3-vl-235b-a22b", "gpt-oss-120b"
SEEDS = {"scheduler_random_seed": 16159082839903944936, "dataloader_random_seed": 2747215439041700203}  # v6.1
MS, S = 1_000_000, 1_000_000_000


def _series(p99_ns: float, avg_ns: float) -> dict[str, Any]:
    """A latency block of result_summary.json: ns, its percentiles keyed "99.0", early-stopping estimates."""
    return {"total": avg_ns * 100, "min": avg_ns / 4, "max": p99_ns * 1.2, "median": avg_ns, "avg": avg_ns,
            "std_dev": avg_ns / 3, "percentiles": {"99.9": p99_ns * 1.1, "99.0": p99_ns * 0.98, "50.0": avg_ns},
            "early_stopping_percentiles": {"99.9": None, "99.0": p99_ns, "90.0": p99_ns * 0.8, "50.0": avg_ns * 1.01},
            "histogram": {"buckets": [[avg_ns / 4, p99_ns * 1.2]], "counts": [100]}}


def _lengths(avg: float) -> dict[str, Any]:
    return {"total": int(avg * 1000), "min": 3, "max": int(avg * 4), "median": avg, "avg": avg, "std_dev": avg / 2,
            "percentiles": {"99.0": avg * 3.5, "50.0": avg}, "histogram": {"buckets": [], "counts": []}}


def summary(issued: int, duration_s: float, *, latency_p99: float, ttft_p99: float | None = None,
            tpot_p99: float | None = None, osl: float = 40.0) -> dict[str, Any]:
    streaming = ttft_p99 is not None
    return {
        "version": "0.1.0", "git_sha": "ea33275", "test_started_at": 0,
        "n_samples_issued": issued, "n_samples_completed": issued, "n_samples_failed": 0,
        "duration_ns": int(duration_s * S), "state": "complete", "complete": True,
        "ttft": _series(ttft_p99, ttft_p99 / 2) if streaming else {},
        "tpot": _series(tpot_p99, tpot_p99 / 2) if streaming and tpot_p99 else {},
        "latency": _series(latency_p99, latency_p99 / 2),
        "output_sequence_lengths": _lengths(osl), "input_sequence_lengths": _lengths(300.0),
        "legacy_loadgen_window_duration_ns": None,
        "qps": issued / duration_s, "tps": issued * osl / duration_s,
        "finish_reason_counts": {"stop": issued, "length": 0, "tool_calls": 0, "content_filter": 0,
                                 "function_call": 0, "other": 0},
        "run_config": None,
    }


def config(model: str, test_type: str, load: dict[str, Any], streaming: str) -> dict[str, Any]:
    return {
        "name": f"{test_type}_benchmark", "version": "1.0", "type": test_type,
        "submission_ref": {"model": model, "ruleset": "mlperf-inference-v6.1"},
        "model_params": {"name": model, "streaming": streaming, "max_new_tokens": 1024},
        "datasets": [{"name": "perf", "type": "performance", "path": "/data/perf.jsonl"},
                     {"name": "acc", "type": "accuracy", "path": "/data/acc.jsonl"}],
        "settings": {"runtime": {"min_duration_ms": 600000, "max_duration_ms": 0, **SEEDS},
                     "load_pattern": load, "early_stopping": {"enabled": True}},
        "endpoint_config": {"endpoints": ["http://127.0.0.1:8000"], "api_type": "openai"},
    }


def accuracy(entries: list[tuple[str, float, int]]) -> dict[str, Any]:
    return {"average_accuracy": sum(e[1] for e in entries) / len(entries),
            "accuracy_scores": [{"dataset_name": name, "extractor": None, "ground_truth_column": "ground_truth",
                                 "score": score, "unit_samples": total, "num_repeats": 1, "total_samples": total,
                                 "duration_s": 812.402, "complete": True, "dataset_type": "accuracy",
                                 "response_counts": {"issued": total, "scored": total, "empty": 0, "missing": 0}}
                                for name, score, total in entries]}


GPT_OSS_ACCURACY = accuracy([("aime25", 0.86, 720), ("gpqa", 0.80, 1584), ("livecodebench", 0.84, 2091)])
RESULTS: dict[tuple[str, str], dict[str, Any]] = {
    (QWEN, "Offline"): {
        "config": config(QWEN, "offline", {"type": "max_throughput"}, "off"),
        "summary": summary(48289, 640.0, latency_p99=600 * S),
        "accuracy": accuracy([("shopify_catalogue", 0.7950, 48289)]),
    },
    (QWEN, "Interactive"): {
        "config": config(QWEN, "online", {"type": "concurrency", "target_concurrency": 24}, "off"),
        "summary": summary(12000, 610.0, latency_p99=1200 * MS),
        "accuracy": accuracy([("shopify_catalogue_8k", 0.7900, 8000)]),
    },
    (GPT_OSS, "Offline"): {
        "config": config(GPT_OSS, "offline", {"type": "max_throughput"}, "off"),
        "summary": summary(12792, 655.0, latency_p99=640 * S, osl=1278.0),
        "accuracy": GPT_OSS_ACCURACY,
    },
    (GPT_OSS, "Server"): {
        "config": config(GPT_OSS, "online", {"type": "poisson", "target_qps": 9.5}, "on"),
        "summary": summary(5800, 612.0, latency_p99=40 * S, ttft_p99=2500 * MS, tpot_p99=70 * MS, osl=1278.0),
        "accuracy": GPT_OSS_ACCURACY,
    },
}


def scenario_dir(root: Path, benchmark: str, scenario: str, *, division: str = "closed") -> Path:
    return root / division / SUBMITTER / "results" / SYSTEM / benchmark / scenario


def build_client_tree(root: Path, results: dict[tuple[str, str], dict[str, Any]] | None = None) -> Path:
    """The passing tree at `root` (or one holding `results`: (benchmark, scenario) -> config, summary, accuracy)."""
    sub = root / "closed" / SUBMITTER
    _json(sub / "systems" / f"{SYSTEM}.json", SYSTEM_JSON)
    _text(sub / "src" / "README.md", "The harness: MLCommons' endpoint client at ea33275, driven by cmx.\n")
    _text(sub / "documentation" / "calibration.md", "No calibration or quantization: bf16 weights as published.\n")
    for (bench, scenario), files in (results or RESULTS).items():
        add_client_result(root, bench, scenario, copy.deepcopy(files))
    return root


def add_client_result(root: Path, bench: str, scenario: str, files: dict[str, Any]) -> Path:
    folder = scenario_dir(root, bench, scenario)
    _text(folder / "config.yaml", yaml.safe_dump(files["config"], sort_keys=False))
    _json(folder / "performance" / "result_summary.json", files["summary"])
    _json(folder / "accuracy" / "accuracy_results.json", files["accuracy"])
    _json(folder / "measurements.json", {**MEASUREMENTS, "starting_weights_filename": bench})
    _text(folder / "README.md", f"# {bench} {scenario}\n\nMLCommons' endpoint client against vllm serve.\n")
    return folder


def edit_yaml(path: Path, dotted: str, value: Any) -> None:
    """Set (or, with value ..., delete) the key at a dotted path of a YAML or JSON file."""
    is_yaml = path.suffix in (".yaml", ".yml")
    data = yaml.safe_load(path.read_text()) if is_yaml else json.loads(path.read_text())
    *parents, last = dotted.split("/")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False) if is_yaml else json.dumps(data, indent=2))


def _json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
