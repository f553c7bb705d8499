"""The user.conf keys LoadGen reads: their types, the scenarios each applies to, and which the rules let a
submitter set.

How LoadGen reads the file is in cmx.mlperf.loadgen.userconf's docstring; userconf.py writes the
file and userconf_check.py judges one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Value = int | float | bool
Mode = Literal["performance", "accuracy"]
ValueKind = Literal["int", "float", "bool"]
KeyClass = Literal["checked", "open-only", "mode"]
MODE_VALUES: dict[str, int] = {"accuracy": 1, "performance": 2}  # LoadGen: 0 submission, 3 find peak


@dataclass(frozen=True)
class ConfKey:
    """A key LoadGen reads from user.conf: its value type, the LoadGen scenarios it affects, and
    whether LoadGen's own comment puts it among the keys that make a result open-only."""

    name: str
    kind: ValueKind
    scenarios: frozenset[str]  # LoadGen scenarios whose run it changes
    klass: KeyClass
    unit: str = ""


_BOTH = frozenset({"Offline", "Server"})
_SERVER = frozenset({"Server"})
_ALL = frozenset({"Offline", "Server", "SingleStream", "MultiStream"})
# Every key FromConfig(conf_type=1) reads, in its order. "open-only": LoadGen's comment "keys
# that can be overriden in user.conf but will make the results eligible only for open
# submissions"; "checked": "keys that can be overriden in user.conf (the provided values still
# need to pass the submission checker rules)".
USER_CONF_KEYS: dict[str, ConfKey] = {k.name: k for k in (
    ConfKey("mode", "int", _ALL, "mode"),
    ConfKey("use_token_latencies", "bool", _ALL, "open-only"),
    ConfKey("ttft_latency", "int", _SERVER, "open-only", "ms"),
    ConfKey("tpot_latency", "int", _SERVER, "open-only", "ms"),
    ConfKey("infer_token_latencies", "bool", _ALL, "open-only"),
    ConfKey("token_latency_scaling_factor", "int", _ALL, "open-only"),
    ConfKey("target_latency_percentile", "float", frozenset({"Server", "SingleStream", "MultiStream"}), "open-only",
            "%"),
    ConfKey("samples_per_query", "int", frozenset({"MultiStream"}), "open-only"),
    # open-only for Server (read in that block); checked for SingleStream and MultiStream
    ConfKey("target_latency", "float", frozenset({"Server", "SingleStream", "MultiStream"}), "checked", "ms"),
    ConfKey("performance_issue_unique", "bool", _ALL, "checked"),
    ConfKey("performance_issue_same", "bool", _ALL, "checked"),
    ConfKey("performance_issue_same_index", "int", _ALL, "checked"),
    ConfKey("sample_concatenate_permutation", "bool", _ALL, "checked"),
    ConfKey("coalesce_queries", "bool", _SERVER, "checked"),
    ConfKey("max_async_queries", "int", _SERVER, "checked"),
    ConfKey("min_duration", "int", _ALL, "checked", "ms"),
    ConfKey("max_duration", "int", _ALL, "checked", "ms"),
    ConfKey("min_query_count", "int", _ALL, "checked"),
    ConfKey("max_query_count", "int", _ALL, "checked"),
    ConfKey("performance_sample_count_override", "int", _ALL, "checked"),
    ConfKey("accuracy_sample_count_override", "int", _ALL, "checked"),
    ConfKey("target_qps", "float", _BOTH, "checked"),
    ConfKey("print_timestamps", "bool", _ALL, "checked"),
    ConfKey("accuracy_log_rng_seed", "int", _ALL, "checked"),
    ConfKey("accuracy_log_sampling_target", "int", _ALL, "checked"),
)}
# Read only from LoadGen's built-in mlperf.conf (FromConfig with conf_type 0).
MLPERF_CONF_ONLY_KEYS = frozenset({
    "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed", "accuracy_log_probability",
    "test05", "test05_qsl_rng_seed", "test05_sample_index_rng_seed", "test05_schedule_rng_seed",
})
LOADGEN_SCENARIO_NAMES = frozenset({"SingleStream", "MultiStream", "Server", "Offline", "*"})
