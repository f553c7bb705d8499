"""Write LoadGen's user.conf for a benchmark and scenario, and say which of its lines break a round's rules.

What LoadGen does with the file (`TestSettings::FromConfig` in loadgen/test_settings_internal.cc,
mlcommons-loadgen 6.0.15; 6.0.16/6.0.17 are identical there):

- Each line is `model.scenario.key = value`; `model` or `scenario` may be `*`. For a run of
  (model, scenario) LoadGen takes the first of `model.scenario.key`, `*.scenario.key`,
  `model.*.key`, `*.*.key` that exists; a later line with the same key replaces an earlier one.
- A value is one token that parses whole as an integer (base prefixes allowed, so `010` is 8)
  or a double. A line whose first token is `#` is a comment; anything else after a value, an
  inline `# comment` included, makes LoadGen reject the whole file with an `error_invalid_config`.
- Some keys are looked up under a fixed scenario whatever the run is: `target_qps` under both
  Offline and Server, `ttft_latency`/`tpot_latency`/`coalesce_queries`/`max_async_queries`
  under Server. An Interactive run is a Server run of the model `llama2-70b-interactive`.
- user.conf cannot change the seeds: LoadGen reads `*_rng_seed`, `accuracy_log_probability`
  and the `test05*` keys only from the mlperf.conf compiled into it, and silently ignores them
  in user.conf. cmx refuses to write them.
- The audit.config of a compliance test is read the same way with the model `*`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cmx.errors import CmxError
from cmx.mlperf.rounds import Benchmark, Round, ScenarioRules

Value = int | float | bool
Mode = Literal["performance", "accuracy"]
ValueKind = Literal["int", "float", "bool"]
KeyClass = Literal["checked", "open-only", "mode"]

MODE_VALUES: dict[str, int] = {"accuracy": 1, "performance": 2}  # LoadGen: 0 submission, 3 find peak


class UserConfError(CmxError):
    """A user.conf cannot be written as asked: an unknown key, a seed, a value LoadGen would misread."""


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


@dataclass(frozen=True)
class ShortProfile:
    """A smoke run of a few seconds. Far below every minimum of the rules, so never compliant.

    `samples` is the performance sample count the harness loads (its QSL should hold at
    least that many). LoadGen pads an equal-issue run to a multiple of it. A Server run
    is VALID only if it issues at least 459 queries with none over the latency limits
    (early stopping at p99 with 99% confidence), so ask for `target_qps * min_duration`
    above that when a VALID smoke run matters. `max_query_count` is a guard that does
    not bind in a healthy run; LoadGen logs an error when it does.
    """

    min_duration_ms: int = 2000
    samples: int = 32
    min_query_count: int = 32
    max_query_count: int = 10_000


@dataclass(frozen=True)
class ConfLine:
    """One `model.scenario.key = value` line of a user.conf."""

    model: str
    scenario: str
    key: str
    value: Value

    def render(self) -> str:
        return f"{self.model}.{self.scenario}.{self.key} = {render_value(self.value)}"


@dataclass(frozen=True)
class NonCompliance:
    """Why a user.conf (one of its lines, or a value it leaves in force) breaks a round's rules."""

    key: str
    value: str | None
    line_no: int | None  # 1-based line of the user.conf, None when the reason is not one line
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line_no}: " if self.line_no else ""
        return f"{where}{self.reason}"


@dataclass(frozen=True)
class UserConf:
    """A generated user.conf: its lines, the header comment, and whether the round would accept it."""

    model: str               # LoadGen model name (llama2-70b, llama2-70b-interactive)
    scenario: str            # LoadGen scenario (Offline, Server)
    lines: tuple[ConfLine, ...]
    comments: tuple[str, ...]
    noncompliance: tuple[NonCompliance, ...]

    @property
    def compliant(self) -> bool:
        return not self.noncompliance

    @property
    def text(self) -> str:
        head = [f"# {c}" if c else "#" for c in self.comments]
        return "\n".join(head + [line.render() for line in self.lines]) + "\n"

    def write(self, path: Path | str) -> Path:
        path = Path(path)
        path.write_text(self.text, encoding="utf-8")
        return path


@dataclass(frozen=True)
class ConfEntry:
    """A line of a user.conf as LoadGen's parser sees it."""

    line_no: int
    model: str
    scenario: str
    key: str
    raw: str


@dataclass(frozen=True)
class ParsedConf:
    """The lines LoadGen keeps, and the ones that make it reject the whole file."""

    entries: tuple[ConfEntry, ...]
    errors: tuple[NonCompliance, ...] = field(default=())

    def lookup(self, model: str, scenario: str, key: str) -> ConfEntry | None:
        """The line LoadGen uses for (model, scenario, key): exact, *.scenario, model.*, *.*; the last of equals."""
        last: dict[tuple[str, str, str], ConfEntry] = {}
        for entry in self.entries:
            last[(entry.model, entry.scenario, entry.key)] = entry
        for m, s in ((model, scenario), ("*", scenario), (model, "*"), ("*", "*")):
            if (m, s, key) in last:
                return last[(m, s, key)]
        return None


# --- writing ------------------------------------------------------------------------------

def user_conf(round_: Round, benchmark: Benchmark | str, scenario: str, *,
              target_qps: float | None = None, target_latency_ms: float | None = None,
              mode: Mode | None = None, overrides: Mapping[str, Value] | None = None,
              short: ShortProfile | None = None) -> UserConf:
    """The user.conf for one scenario of a benchmark in a round.

    `target_qps` is what LoadGen plans with (Offline: samples in the query; Server: the
    schedule) and is required for Offline, Server and Interactive. `mode`, when given, pins the
    test mode in the file (LoadGen's `mode` key); otherwise the harness sets it. `short` adds
    a smoke-test profile; `overrides` (bare key -> value) come last and win. Seeds and keys
    LoadGen does not read from user.conf are refused with a UserConfError.
    """
    bench = round_.benchmark(benchmark) if isinstance(benchmark, str) else benchmark
    rules = bench.scenario(scenario)
    model, lg_scenario = rules.loadgen_model, rules.loadgen_scenario
    values: dict[str, Value] = {}
    if target_qps is None:
        raise UserConfError(f"{bench.name} {scenario}: target_qps is required",
                            hint="LoadGen sizes the Offline query and schedules Server queries from it; "
                                 "give the throughput you expect (samples/s)")
    values["target_qps"] = _checked_value("target_qps", target_qps, round_)
    if target_latency_ms is not None:
        values["target_latency"] = _checked_value("target_latency", target_latency_ms, round_)
    if mode is not None:
        if mode not in MODE_VALUES:
            raise UserConfError(f"unknown mode {mode!r}", hint="performance or accuracy")
        values["mode"] = MODE_VALUES[mode]
    if short is not None:
        values.update(_short_values(short))
    for key, value in (overrides or {}).items():
        values[key] = _checked_value(key, value, round_)
    for key in values:
        _require_applies(key, lg_scenario, bench.name, scenario)
    lines = tuple(ConfLine(model, lg_scenario, key, value) for key, value in values.items())
    text = "\n".join(line.render() for line in lines)
    findings = tuple(noncompliant_keys(text, round_, bench, scenario))
    comments = _header(round_, bench, rules, short is not None, findings)
    return UserConf(model, lg_scenario, lines, comments, findings)


# compliance/TEST06/audit.config: keys LoadGen reads with the model "*" in the audit run.
TEST06_AUDIT: dict[str, int] = {
    "mode": 2,
    "accuracy_log_rng_seed": 720381539243781796,
    "accuracy_log_sampling_target": 100,
    "min_query_count": 100,
    "min_duration": 0,
    "sample_concatenate_permutation": 0,
}


def audit_conf_test06() -> str:
    """The audit.config of compliance TEST06, as compliance/TEST06/audit.config has it.

    LoadGen reads `audit.config` from the working directory of the run (the file name is the
    last argument of StartTestWithLogSettings) with the model `*`; this run does not count as
    a second conf file."""
    lines = [
        "# The format of this config file is 'key = value'.",
        "# The key has the format 'model.scenario.key'. Value is mostly int64_t.",
        "# Model maybe '*' as wildcard. In that case the value applies to all models.",
        "# All times are in milli seconds",
        "",
        "# mode dictionary (0 = submission, 1 = accuracy, 2 = performance, 3 = find peak perf)",
    ]
    for key, value in TEST06_AUDIT.items():
        if key == "sample_concatenate_permutation":
            lines.append("# Turn off equal issue mode for TEST06")
        lines.append(f"*.*.{key} = {value}")
    return "\n".join(lines) + "\n"


def render_value(value: Value) -> str:
    """A value as LoadGen parses it: integers in decimal, booleans as 1/0, doubles round-tripping."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _short_values(short: ShortProfile) -> dict[str, Value]:
    return {
        "min_duration": short.min_duration_ms,
        "min_query_count": short.min_query_count,
        "max_query_count": short.max_query_count,
        "performance_sample_count_override": short.samples,
    }


def _checked_value(key: str, value: Value, round_: Round) -> Value:
    if key in MLPERF_CONF_ONLY_KEYS:
        raise UserConfError(
            f"{key} cannot be set in user.conf: LoadGen reads it only from its built-in mlperf.conf",
            hint=f"the seeds come with the LoadGen release; for {round_.name} install {round_.loadgen_requirement}")
    spec = USER_CONF_KEYS.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, list(USER_CONF_KEYS), n=1)
        raise UserConfError(f"LoadGen does not read {key!r} from user.conf",
                            hint=f"did you mean {close[0]!r}?" if close else
                            f"keys it reads: {', '.join(sorted(USER_CONF_KEYS))}")
    if not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise UserConfError(f"{key} = {value!r}: LoadGen reads only numbers")
    if value < 0:
        raise UserConfError(f"{key} = {value!r}: LoadGen reads it as an unsigned number, so it cannot be negative")
    if spec.kind == "int" and not float(value).is_integer():
        raise UserConfError(f"{key} = {value!r}: LoadGen reads {key} as a whole number and would drop the fraction",
                            hint=f"give a whole number{' of ' + spec.unit if spec.unit else ''}")
    if spec.kind == "int" and not isinstance(value, bool):
        return int(value)
    if spec.kind == "bool":
        if value not in (0, 1):
            raise UserConfError(f"{key} = {value!r}: a switch, 0 or 1")
        return bool(value)
    return value


def _require_applies(key: str, lg_scenario: str, bench: str, scenario: str) -> None:
    if lg_scenario not in USER_CONF_KEYS[key].scenarios:
        runs = ", ".join(sorted(USER_CONF_KEYS[key].scenarios))
        raise UserConfError(f"{key} has no effect on a {bench} {scenario} run",
                            hint=f"LoadGen reads {key} for {runs} runs only")


def _header(round_: Round, bench: Benchmark, rules: ScenarioRules, short: bool,
            findings: tuple[NonCompliance, ...]) -> tuple[str, ...]:
    head = [f"user.conf for MLPerf Inference {round_.name} {bench.name} {rules.name}, written by cmx.",
            (f"LoadGen reads it with model {rules.loadgen_model!r}, scenario {rules.loadgen_scenario!r}; "
             f"seeds come from {round_.loadgen_requirement}.")]
    if short:
        head.append("SHORT PROFILE: a smoke test, NOT a compliant run.")
    if findings:
        head.append(f"Not compliant with {round_.name} (open division at most):")
        head += [f"  - {f.reason}" for f in findings]
    return tuple(head)


# --- reading and judging ------------------------------------------------------------------

def parse_user_conf(text: str) -> ParsedConf:
    """The lines of a user.conf as LoadGen's parser reads them; lines it would reject become errors."""
    entries: list[ConfEntry] = []
    errors: list[NonCompliance] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        tokens = line.split()
        if not tokens or tokens[0] == "#":
            continue
        key = tokens[0]
        if len(tokens) < 3 or tokens[1] != "=":
            errors.append(NonCompliance(key, None, line_no,
                                        f"{line.strip()!r} is not 'key = value' (spaces around '=' are needed): "
                                        "LoadGen rejects the whole file"))
            continue
        if len(tokens) > 3 or not _is_number(tokens[2]):
            errors.append(NonCompliance(key, " ".join(tokens[2:]), line_no,
                                        f"{key}: the value must be one number with nothing after it (no inline "
                                        "comments): LoadGen rejects the whole file"))
            continue
        parts = key.split(".")
        if len(parts) < 3:
            errors.append(NonCompliance(key, tokens[2], line_no,
                                        f"{key} is not model.scenario.key: LoadGen never reads it"))
            continue
        # the model may itself hold dots (llama3.1-8b); the scenario and key never do
        entries.append(ConfEntry(line_no, ".".join(parts[:-2]), parts[-2], parts[-1], tokens[2]))
    return ParsedConf(tuple(entries), tuple(errors))


def noncompliant_keys(text: str, round_: Round, benchmark: Benchmark | str, scenario: str) -> list[NonCompliance]:
    """The lines and values of a user.conf that make a run of (benchmark, scenario) break `round_`'s rules.

    Judged on what LoadGen would take for that run (the lookup order, wildcards, the last of
    duplicate lines), against the round's minimums and mlperf.conf's fixed values. An empty
    list means the file leaves the run compliant."""
    bench = round_.benchmark(benchmark) if isinstance(benchmark, str) else benchmark
    rules = bench.scenario(scenario)
    parsed = parse_user_conf(text)
    findings = list(parsed.errors)
    findings += _mlperf_conf_only_lines(parsed, rules, round_)
    findings += _unread_lines(parsed, rules)
    for key, spec in USER_CONF_KEYS.items():
        if rules.loadgen_scenario not in spec.scenarios:
            continue
        entry = parsed.lookup(rules.loadgen_model, rules.loadgen_scenario, key)
        if entry is None:
            continue
        reason = _judge(key, _number(entry.raw), round_, bench, rules)
        if reason:
            findings.append(NonCompliance(key, entry.raw, entry.line_no, reason))
    return sorted(findings, key=lambda f: (f.line_no or 0, f.key))


def _mlperf_conf_only_lines(parsed: ParsedConf, rules: ScenarioRules, round_: Round) -> list[NonCompliance]:
    out = []
    for entry in parsed.entries:
        applies = entry.model in (rules.loadgen_model, "*") and entry.scenario in (rules.loadgen_scenario, "*")
        if entry.key in MLPERF_CONF_ONLY_KEYS and applies:
            out.append(NonCompliance(entry.key, entry.raw, entry.line_no,
                                     f"{entry.key} is ignored in user.conf (LoadGen takes it from its built-in "
                                     f"mlperf.conf): remove the line; {round_.name} needs "
                                     f"{round_.loadgen_requirement}"))
    return out


def _unread_lines(parsed: ParsedConf, rules: ScenarioRules) -> list[NonCompliance]:
    """Lines for this model that LoadGen never reads: a scenario or a key it does not know."""
    out = []
    for entry in parsed.entries:
        if entry.model not in (rules.loadgen_model, "*") or entry.key in MLPERF_CONF_ONLY_KEYS:
            continue
        if entry.scenario not in LOADGEN_SCENARIO_NAMES:
            hint = f" ({rules.name} runs read {rules.loadgen_model}.{rules.loadgen_scenario}.*)" \
                if entry.scenario == rules.name else ""
            out.append(NonCompliance(entry.key, entry.raw, entry.line_no,
                                     f"LoadGen has no scenario {entry.scenario!r} and never reads this line{hint}"))
        elif entry.key not in USER_CONF_KEYS:
            close = difflib.get_close_matches(entry.key, list(USER_CONF_KEYS), n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            out.append(NonCompliance(entry.key, entry.raw, entry.line_no,
                                     f"LoadGen does not read {entry.key!r} from user.conf{guess}"))
    return out


def _judge(key: str, value: float, round_: Round, bench: Benchmark, rules: ScenarioRules) -> str | None:
    """Why this effective value breaks the round's rules for the run, or None."""
    r, name = round_.name, f"{bench.name} {rules.name}"
    latency = rules.latency
    if key == "mode" and value not in (1, 2):
        return f"mode = {value:g}: write 1 (accuracy) or 2 (performance); 0 and 3 mix or search runs"
    if key == "min_duration" and value < rules.min_duration_ms:
        return f"min_duration = {value:g} ms is below the {r} minimum of {rules.min_duration_ms} ms for {name}"
    if key == "min_query_count" and rules.min_query_count and value < rules.min_query_count:
        return f"min_query_count = {value:g} is below the {r} minimum of {rules.min_query_count} for {name}"
    if key == "max_duration" and value and value < rules.min_duration_ms:
        return f"max_duration = {value:g} ms ends the run before the {rules.min_duration_ms} ms minimum"
    if key == "max_query_count" and value and rules.loadgen_scenario == "Server":
        return f"max_query_count = {value:g} bounds the run; LoadGen logs an error when it reaches it"
    if key == "performance_sample_count_override" and value and value < bench.performance_sample_count:
        return (f"performance_sample_count_override = {value:g} is below {bench.performance_sample_count}, "
                f"the {r} count for {bench.name}")
    if key == "accuracy_sample_count_override" and value and value != bench.dataset_size:
        return (f"accuracy_sample_count_override = {value:g}: the accuracy run must cover all "
                f"{bench.dataset_size} samples")
    if key == "sample_concatenate_permutation" and bench.equal_issue and value != 1:
        return f"sample_concatenate_permutation = {value:g}: {bench.name} runs in equal-issue mode (1)"
    if key in ("performance_issue_unique", "performance_issue_same") and value:
        return f"{key} = {value:g} is a compliance-test setting, not for a submission run"
    if key == "use_token_latencies" and value != (1 if bench.token_latencies else 0):
        return f"use_token_latencies = {value:g}: {bench.name} must measure token latencies (1)"
    if key in ("infer_token_latencies", "token_latency_scaling_factor"):
        return f"{key} is open-only (LoadGen infers token latencies only for gptj)"
    if key == "ttft_latency" and latency and value != latency.ttft_p99_ms:
        return f"ttft_latency = {value:g} ms changes the {r} TTFT limit of {latency.ttft_p99_ms:g} ms for {name}"
    if key == "tpot_latency" and latency and value != latency.tpot_p99_ms:
        return f"tpot_latency = {value:g} ms changes the {r} TPOT limit of {latency.tpot_p99_ms:g} ms for {name}"
    if key == "target_latency" and rules.loadgen_scenario == "Server" and bench.token_latencies and value != 0:
        return (f"target_latency = {value:g} ms: {bench.name} is judged on TTFT and TPOT (mlperf.conf sets 0); "
                "the Server target_latency is open-only")
    if key == "target_latency_percentile" and rules.loadgen_scenario == "Server" and value != 99:
        return f"target_latency_percentile = {value:g}: the Server percentile is 99 (open-only key)"
    return None


def _is_number(token: str) -> bool:
    try:
        _number(token)
    except ValueError:
        return False
    return True


def _number(token: str) -> float:
    """A value token as LoadGen reads it: strtoul with base 0 (0x.., 0.. octal), else strtod."""
    body = token[1:] if token[:1] in "+-" else token
    sign = -1 if token[:1] == "-" else 1
    if body.isdigit() or body.lower().startswith("0x"):
        base = 16 if body.lower().startswith("0x") else 8 if len(body) > 1 and body.startswith("0") else 10
        try:
            return float(sign * int(body, base))
        except ValueError:  # 09: not octal; strtod reads it
            pass
    return float(token)
