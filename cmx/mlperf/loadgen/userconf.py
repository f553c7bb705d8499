"""Write LoadGen's user.conf for a benchmark and scenario, with what in it breaks a round's rules (userconf_check.py).

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
  under Server. An Interactive run is a Server run of the model `<model>-interactive`.
- user.conf cannot change the seeds: LoadGen reads `*_rng_seed`, `accuracy_log_probability`
  and the `test05*` keys only from the mlperf.conf compiled into it, and silently ignores them
  in user.conf. cmx refuses to write them.
- The audit.config of a compliance test is read the same way with the model `*`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.loadgen.userconf_check import NonCompliance, noncompliant_keys
from cmx.mlperf.loadgen.userconf_keys import (
    MLPERF_CONF_ONLY_KEYS,
    MODE_VALUES,
    USER_CONF_KEYS,
    Mode,
    Value,
)
from cmx.mlperf.rounds import Benchmark, Round, ScenarioRules


class UserConfError(CmxError):
    """A user.conf cannot be written as asked: an unknown key, a seed, a value LoadGen would misread."""


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
class UserConf:
    """A generated user.conf: its lines, the header comment, and whether the round would accept it."""

    model: str               # LoadGen model name (the round's loadgen_model)
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


def user_conf(round_: Round, benchmark: Benchmark | str, scenario: str, *,
              target_qps: float | None = None, target_latency_ms: float | None = None,
              mode: Mode | None = None, overrides: Mapping[str, Value] | None = None,
              short: ShortProfile | None = None) -> UserConf:
    """The user.conf for one scenario of a benchmark in a round.

    `target_qps` is what LoadGen plans with (Offline: samples in the query; Server: the
    schedule) and is required for Offline, Server and Interactive. SingleStream has no target_qps
    (LoadGen issues the next query when the last one completes): `target_latency_ms` is there the
    latency you expect, from which LoadGen pre-generates enough queries for min_duration (none:
    mlperf.conf's *.SingleStream.target_latency, 10 ms, which over-generates for a slower SUT and
    costs nothing else). `mode`, when given, pins the
    test mode in the file (LoadGen's `mode` key); otherwise the harness sets it. `short` adds
    a smoke-test profile; `overrides` (bare key -> value) come last and win. Seeds and keys
    LoadGen does not read from user.conf are refused with a UserConfError.
    """
    bench = round_.benchmark(benchmark) if isinstance(benchmark, str) else benchmark
    rules = bench.scenario(scenario)
    model, lg_scenario = rules.loadgen_model, rules.loadgen_scenario
    values: dict[str, Value] = {}
    if target_qps is None and not rules.latency_result:
        raise UserConfError(f"{bench.name} {scenario}: target_qps is required",
                            hint="LoadGen sizes the Offline query and schedules Server queries from it; "
                                 "give the throughput you expect (samples/s)")
    if target_qps is not None:
        values["target_qps"] = _checked_value("target_qps", target_qps, round_)
    if target_latency_ms is not None:
        values["target_latency"] = _checked_value("target_latency", target_latency_ms, round_)
    if mode is not None:
        if mode not in MODE_VALUES:
            raise UserConfError(f"unknown mode {mode!r}", hint="performance or accuracy")
        values["mode"] = MODE_VALUES[mode]
    if rules.min_query_count and short is None:
        # the round's minimum Offline query: LoadGen sizes the query from target_qps x min_duration, which on
        # a small system falls below it (where mlperf.conf sets none and the checker wants one)
        values["min_query_count"] = rules.min_query_count
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
