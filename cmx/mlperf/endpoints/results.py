"""One scenario folder of MLCommons' endpoint client, read as the official checker reads it (v6.1).

The folder holds what the client writes to its report directory, laid out as the checker's
`parsers/endpoints_parser.py` reads it (mlcommons/inference at b66003e):

    config.yaml                          the resolved config (type, seeds, durations, load pattern)
    performance/result_summary.json      counts, duration, qps/tps, ttft/tpot/latency blocks
    accuracy/accuracy_results.json       accuracy_scores, one entry per evaluated dataset
    audit/audit_<test>.json              a compliance audit's verdict ({"test": ..., "passed": ...})

Latency limits are judged on the early-stopping estimates (`early_stopping_percentiles`, whose
keys are "99.0" or "99"), in nanoseconds; a missing estimate (too few samples, or early stopping
off) is None. The checker treats an unreadable file as empty; here each one is recorded in
`unreadable` so that `cmx check` can say which file and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CONFIG_NAMES = ("config.yaml", "config.yml")
SUMMARY = Path("performance") / "result_summary.json"
ACCURACY = Path("accuracy") / "accuracy_results.json"
AUDIT_DIR = "audit"


@dataclass(frozen=True)
class ClientConfig:
    """The keys of config.yaml the checker reads."""

    test_type: str | None            # type: offline, online, submission (eval)
    streaming: str | None            # model_params.streaming: on, off, auto
    load_pattern: str | None         # settings.load_pattern.type: max_throughput, poisson, concurrency
    target_qps: float | None
    target_concurrency: int | None
    min_duration_ms: int | None      # settings.runtime.min_duration_ms (configured, not measured)
    n_samples_to_issue: int | None
    dataloader_seed: int | None      # settings.runtime.dataloader_random_seed: LoadGen's sample_index_rng_seed
    scheduler_seed: int | None       # settings.runtime.scheduler_random_seed: LoadGen's schedule_rng_seed
    early_stopping: bool             # settings.early_stopping.enabled (default on)


@dataclass(frozen=True)
class ClientSummary:
    """performance/result_summary.json: what the performance run measured."""

    client_version: str | None
    issued: int | None
    completed: int | None
    failed: int | None
    duration_ns: int | None
    state: str | None                # complete, interrupted
    qps: float | None                # completed samples/s
    tps: float | None                # output tokens/s
    latency_p99_ns: float | None     # early-stopping estimates
    ttft_p99_ns: float | None
    tpot_p99_ns: float | None
    mean_output_tokens: float | None

    @property
    def issued_per_second(self) -> float | None:
        """What the checker reports for Offline: samples issued over the run's duration."""
        if not self.issued or not self.duration_ns:
            return None
        return self.issued / (self.duration_ns / 1e9)


@dataclass(frozen=True)
class AccuracyScore:
    """One entry of accuracy_results.json's accuracy_scores."""

    dataset: str
    dataset_type: str | None         # accuracy, performance
    score: Any                       # a number, or a dict of them (rouge), or None
    total_samples: int | None


@dataclass(frozen=True)
class ClientResult:
    """A scenario folder of the endpoint client: its config, summary, accuracy scores, and what could not be read."""

    folder: Path
    config_file: Path | None
    config: ClientConfig
    summary: ClientSummary | None
    scores: tuple[AccuracyScore, ...] | None
    unreadable: tuple[tuple[Path, str], ...]   # (file, why): missing, not valid JSON or YAML, not a mapping

    @property
    def first_score(self) -> Any:
        """The score the checker judges: the first non-null one."""
        return next((s.score for s in self.scores or () if s.score is not None), None)

    @property
    def accuracy_samples(self) -> int | None:
        """Samples the accuracy run covered, as the checker counts them: the sum of total_samples over the
        accuracy datasets (with num_repeats in it)."""
        counts = [s.total_samples for s in self.scores or ()
                  if s.dataset_type in (None, "accuracy") and s.total_samples is not None]
        return sum(counts) if counts else None

    def audit(self, name: str) -> Path:
        return self.folder / AUDIT_DIR / f"audit_{name}.json"


def read_client_result(folder: Path) -> ClientResult:
    """The endpoint client's result in `folder` (a results/<system>/<benchmark>/<scenario> folder)."""
    unreadable: list[tuple[Path, str]] = []
    config_file = next((folder / n for n in CONFIG_NAMES if (folder / n).is_file()), None)
    raw_config = _mapping(config_file or folder / CONFIG_NAMES[0], unreadable, yaml_file=True)
    raw_summary = _mapping(folder / SUMMARY, unreadable)
    raw_accuracy = _mapping(folder / ACCURACY, unreadable)
    return ClientResult(folder=folder, config_file=config_file, config=_config(raw_config or {}),
                        summary=_summary(raw_summary) if raw_summary is not None else None,
                        scores=_scores(raw_accuracy) if raw_accuracy is not None else None,
                        unreadable=tuple(unreadable))


def _mapping(path: Path, unreadable: list[tuple[Path, str]], *, yaml_file: bool = False) -> dict[str, Any] | None:
    if not path.is_file():
        unreadable.append((path, "missing"))
        return None
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text) if yaml_file else json.loads(text)
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as exc:
        kind = "YAML" if yaml_file else "JSON"
        unreadable.append((path, f"not valid {kind} ({str(exc).splitlines()[0]})"))
        return None
    if not isinstance(data, dict):
        unreadable.append((path, "not a mapping of keys to values"))
        return None
    return data


def nested(data: Any, dotted: str) -> Any:
    """The value at a dotted path, matching the longest key first so that "99.9" is one key; an integer key "99"
    answers for "99.0". Empty mappings and lists count as missing, as the checker's _get_nested has it."""
    parts, current, i = dotted.split("."), data, 0
    while i < len(parts):
        if not isinstance(current, dict):
            return None
        for j in range(len(parts), i, -1):
            candidate = ".".join(parts[i:j])
            if candidate in current:
                current, i = current[candidate], j
                break
            if candidate.endswith(".0") and candidate[:-2] in current and j == len(parts):
                current, i = current[candidate[:-2]], j
                break
        else:
            return None
    return None if isinstance(current, (dict, list)) and not current else current


def _int(value: Any) -> int | None:
    """A whole number (a seed keeps all its digits); None as _float has it."""
    if _float(value) is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return int(float(value))


def _float(value: Any) -> float | None:
    """A number of a JSON or YAML file; None for a missing, boolean or non-numeric value."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _config(raw: dict[str, Any]) -> ClientConfig:
    early = nested(raw, "settings.early_stopping.enabled")
    return ClientConfig(
        test_type=_str(raw.get("type")),
        streaming=_str(nested(raw, "model_params.streaming")),
        load_pattern=_str(nested(raw, "settings.load_pattern.type")),
        target_qps=_float(nested(raw, "settings.load_pattern.target_qps")),
        target_concurrency=_int(nested(raw, "settings.load_pattern.target_concurrency")),
        min_duration_ms=_int(nested(raw, "settings.runtime.min_duration_ms")),
        n_samples_to_issue=_int(nested(raw, "settings.runtime.n_samples_to_issue")),
        dataloader_seed=_int(nested(raw, "settings.runtime.dataloader_random_seed")),
        scheduler_seed=_int(nested(raw, "settings.runtime.scheduler_random_seed")),
        early_stopping=early is not False,
    )


def _summary(raw: dict[str, Any]) -> ClientSummary:
    return ClientSummary(
        client_version=_str(raw.get("version")),
        issued=_int(raw.get("n_samples_issued")),
        completed=_int(raw.get("n_samples_completed")),
        failed=_int(raw.get("n_samples_failed")),
        duration_ns=_int(raw.get("duration_ns")),
        state=_str(raw.get("state")),
        qps=_float(raw.get("qps")),
        tps=_float(raw.get("tps")),
        latency_p99_ns=_float(nested(raw, "latency.early_stopping_percentiles.99.0")),
        ttft_p99_ns=_float(nested(raw, "ttft.early_stopping_percentiles.99.0")),
        tpot_p99_ns=_float(nested(raw, "tpot.early_stopping_percentiles.99.0")),
        mean_output_tokens=_float(nested(raw, "output_sequence_lengths.avg")),
    )


def _scores(raw: dict[str, Any]) -> tuple[AccuracyScore, ...]:
    entries = raw.get("accuracy_scores")
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        total = entry.get("total_samples")
        if total is None:
            total = nested(entry, "response_counts.issued")
        out.append(AccuracyScore(dataset=str(entry.get("dataset_name", "")),
                                 dataset_type=_str(entry.get("dataset_type")), score=entry.get("score"),
                                 total_samples=_int(total)))
    return tuple(out)
