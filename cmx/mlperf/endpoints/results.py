"""One scenario folder of MLCommons' endpoint client, read field by field where the official checker reads it (v6.1).

The folder holds what the client writes to its report directory, laid out as the checker's
`parsers/endpoints_parser.py` reads it (mlcommons/inference at b66003e):

    config.yaml                          the resolved config (type, seeds, durations, load pattern)
    performance/result_summary.json      counts, duration, qps/tps, ttft/tpot/latency blocks
    accuracy/accuracy_results.json       accuracy_scores, one entry per evaluated dataset
    audit/audit_<test>.json              a compliance audit's verdict ({"test": ..., "passed": ...})

The checker builds two parsers per folder: a performance one over result_summary.json and config.yaml,
and an accuracy one over accuracy_results.json and config.yaml. Each looks a field up by its endpoints
name (constants.py ENDPOINTS_MAPPINGS) in the JSON first, at the dotted path and then at
ENDPOINTS_JSON_ALT_PATHS's, and only then in the YAML (ENDPOINTS_YAML_FIELD_MAP's path, then the dotted
path). `Fields.get` does the same and says which file and key answered, so that a finding names them.

Values are kept as found (a string stays a string: the checker compares them as written). The checker
treats an unreadable file as empty; here each one is recorded in `unreadable` so that `cmx check` can say
which file and why. A file over MAX_FILE_BYTES, or nested deeper than the parser can go, is unreadable,
never a crash: the client writes a few kilobytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from cmx.tools.fs import link_on_the_way, read_plain

CONFIG_NAMES = ("config.yaml", "config.yml")
SUMMARY = Path("performance") / "result_summary.json"
ACCURACY = Path("accuracy") / "accuracy_results.json"
AUDIT_DIR = "audit"
MAX_FILE_BYTES = 16 * 1024 * 1024   # cmx's bound: the client's files are kilobytes; a larger one is not its output
ECHO_CHARS = 60                     # the most of a value a finding repeats

# constants.py at b66003e: where config.yaml holds a field, and the JSON's second place for it
YAML_FIELD_MAP = {
    "effective_scenario": "type", "endpoints_version": "version", "streaming": "model_params.streaming",
    "load_pattern": "settings.load_pattern.type", "min_duration_ms": "settings.runtime.min_duration_ms",
    "max_duration_ms": "settings.runtime.max_duration_ms",
    "effective_sample_index_rng_seed": "settings.runtime.dataloader_random_seed",
    "effective_schedule_rng_seed": "settings.runtime.scheduler_random_seed",
    "target_qps": "settings.load_pattern.target_qps", "min_sample_count": "settings.runtime.n_samples_to_issue",
}
JSON_ALT_PATHS = {
    "result.total": "n_samples_completed", "result.failed": "n_samples_failed", "results.qps": "qps",
    "generated_query_count": "n_samples_issued", "generated_query_duration": "duration_ns",
    "test_datetime": "test_started_at", "endpoints_git_commit_hash": "git_sha",
    "n_samples_from_dataset": "n_samples_issued",
}


# the checker's endpoints names of the failed and completed counts (its num_errors and result_query_count)
FAILED, COMPLETED = "result.failed", "result.total"


class Found(NamedTuple):
    """A field's value as the checker resolves it, and where it was: the file and the key in it."""

    value: Any
    file: Path
    key: str


@dataclass(frozen=True)
class Fields:
    """One of the checker's two parsers: a JSON file (or none) before config.yaml."""

    json_file: Path | None
    json_data: dict[str, Any]
    yaml_file: Path
    yaml_data: dict[str, Any]

    def get(self, name: str) -> Found | None:
        """The field `name` (an ENDPOINTS_MAPPINGS key) as the checker's _resolve_value finds it, or None."""
        if self.json_file is not None:
            for key in (name, JSON_ALT_PATHS.get(name)):
                if key is not None:
                    value = nested(self.json_data, key)
                    if value is not None:
                        return Found(value, self.json_file, key)
        for key in (YAML_FIELD_MAP.get(name), name):
            if key is not None:
                value = nested(self.yaml_data, key)
                if value is not None:
                    return Found(value, self.yaml_file, key)
        return None


@dataclass(frozen=True)
class ClientResult:
    """A scenario folder of the endpoint client: its two parsers' fields, the accuracy entries, what was unreadable."""

    folder: Path
    config_file: Path | None
    performance: Fields              # result_summary.json, then config.yaml
    accuracy: Fields                 # accuracy_results.json, then config.yaml
    summary_read: bool               # result_summary.json was there and readable
    scores: tuple[Any, ...] | None   # accuracy_results.json's accuracy_scores as found; None when unreadable
    unreadable: tuple[tuple[Path, str], ...]   # (file, why): missing, not valid JSON or YAML, too large, ...

    def audit(self, name: str) -> Path:
        return self.folder / AUDIT_DIR / f"audit_{name}.json"


def read_client_result(folder: Path) -> ClientResult:
    """The endpoint client's result in `folder` (a results/<system>/<benchmark>/<scenario> folder)."""
    unreadable: list[tuple[Path, str]] = []
    config_file = next((folder / n for n in CONFIG_NAMES if (folder / n).is_file()), None)
    raw_config = read_mapping(config_file or folder / CONFIG_NAMES[0], unreadable, yaml_file=True, below=folder)
    raw_summary = read_mapping(folder / SUMMARY, unreadable, below=folder)
    raw_accuracy = read_mapping(folder / ACCURACY, unreadable, below=folder)
    yaml_file = config_file or folder / CONFIG_NAMES[0]
    entries = (raw_accuracy or {}).get("accuracy_scores")
    return ClientResult(
        folder=folder, config_file=config_file,
        performance=Fields(folder / SUMMARY, raw_summary or {}, yaml_file, raw_config or {}),
        accuracy=Fields(folder / ACCURACY, raw_accuracy or {}, yaml_file, raw_config or {}),
        summary_read=raw_summary is not None,
        scores=None if raw_accuracy is None else tuple(entries) if isinstance(entries, list) else (),
        unreadable=tuple(unreadable))


def read_mapping(path: Path, unreadable: list[tuple[Path, str]], *, yaml_file: bool = False,
                 below: Path | None = None) -> dict[str, Any] | None:
    """A JSON (or YAML) file's top-level mapping, or None with the reason appended to `unreadable`. NaN and
    Infinity load as the checker's json.load loads them; they are judged where a field is read. No symbolic link is
    followed: not the file itself, nor a folder on the way down from `below` (a result folder of a tree)."""
    kind = "YAML" if yaml_file else "JSON"
    link = link_on_the_way(path, below) if below is not None else None
    if link is not None or path.is_symlink():
        unreadable.append((path, f"reached through the symbolic link {link or path}; cmx reads no file through a link"))
        return None
    try:
        if not path.is_file():
            unreadable.append((path, "missing"))
            return None
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            unreadable.append((path, f"{size:,} bytes, over cmx's {MAX_FILE_BYTES // 2**20} MiB limit for this file "
                                     "(the client writes a few kilobytes)"))
            return None
        raw = read_plain(path, MAX_FILE_BYTES)  # None: a link or a larger file put in its place since the checks
        if raw is None:
            unreadable.append((path, "replaced while cmx read it; cmx reads no file through a link"))
            return None
        text = raw.decode("utf-8")
        data = yaml.safe_load(text) if yaml_file else json.loads(text)
    except RecursionError:
        unreadable.append((path, f"not valid {kind}: nested deeper than the parser goes"))
        return None
    except (ValueError, yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        unreadable.append((path, f"not valid {kind} ({echo(str(exc).splitlines()[0] if str(exc) else exc)})"))
        return None
    if not isinstance(data, dict):
        unreadable.append((path, "not a mapping of keys to values"))
        return None
    return data


def nested(data: Any, dotted: str) -> Any:
    """The value at a dotted path, as the checker's _get_nested finds it: the longest key first at each level
    (so "99.9" is one key), a trailing ".0" consumed by a scalar (an integer key "99" answers for "99.0"), and
    empty mappings and lists count as missing."""
    if not isinstance(data, dict):
        return None
    parts, current, i = dotted.split("."), data, 0
    while i < len(parts):
        if not isinstance(current, dict):
            return current if parts[i:] == ["0"] and not isinstance(current, list) else None
        for j in range(len(parts), i, -1):
            candidate = ".".join(parts[i:j])
            if candidate in current:
                current, i = current[candidate], j
                break
        else:
            return None
    return None if isinstance(current, (dict, list)) and not current else current


def echo(value: Any) -> str:
    """A value as a finding repeats it: its repr, cut to ECHO_CHARS."""
    if isinstance(value, (dict, list)):
        text = f"a {'mapping' if isinstance(value, dict) else 'list'} of {len(value)}"
    else:
        text = repr(value) if not isinstance(value, str) or len(value) <= ECHO_CHARS else repr(value[:ECHO_CHARS])
    return text if len(text) <= ECHO_CHARS + 2 else text[:ECHO_CHARS] + "..."


def number(value: Any) -> float | None:
    """A JSON or YAML number (not a boolean, not a string), finite; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        result = float(value)
    except OverflowError:   # an integer of 400 digits
        return None
    return result if math.isfinite(result) else None


def whole(value: Any) -> int | None:
    """A count as the checker's int() takes it (an int, a float cut to an int, a string of digits); None where
    int() raises, which stops the checker."""
    if isinstance(value, str) and len(value) > 40:
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None
