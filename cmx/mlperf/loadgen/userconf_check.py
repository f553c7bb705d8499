"""Read a user.conf as LoadGen reads it, and say which of its lines break a round's rules or are silently ignored."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from cmx.mlperf.loadgen.userconf_keys import (
    LOADGEN_SCENARIO_NAMES,
    MLPERF_CONF_ONLY_KEYS,
    USER_CONF_KEYS,
)
from cmx.mlperf.rounds import SINGLE_STREAM_PERCENTILE, Benchmark, Round, ScenarioRules


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
        # the model may itself hold dots (a version in its name); the scenario and key never do
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
    if key == "accuracy_sample_count_override" and value and value != bench.accuracy_sample_count:
        return (f"accuracy_sample_count_override = {value:g}: the accuracy run must cover all "
                f"{bench.accuracy_sample_count} samples")
    if key == "sample_concatenate_permutation" and bench.equal_issue and value != 1:
        return f"sample_concatenate_permutation = {value:g}: {bench.name} runs in equal-issue mode (1)"
    if key in ("performance_issue_unique", "performance_issue_same") and value:
        return f"{key} = {value:g} is a compliance-test setting, not for a submission run"
    if key == "use_token_latencies" and value != (1 if bench.token_latencies else 0):
        wanted = "must measure token latencies (1)" if bench.token_latencies else "is judged on whole answers (0)"
        return f"use_token_latencies = {value:g}: {bench.name} {wanted}"
    if key in ("infer_token_latencies", "token_latency_scaling_factor"):
        return f"{key} is open-only (LoadGen infers token latencies only for gptj)"
    if key == "ttft_latency" and latency and value != latency.ttft_p99_ms:
        return f"ttft_latency = {value:g} ms changes the {r} TTFT limit of {latency.ttft_p99_ms:g} ms for {name}"
    if key == "tpot_latency" and latency and value != latency.tpot_p99_ms:
        return f"tpot_latency = {value:g} ms changes the {r} TPOT limit of {latency.tpot_p99_ms:g} ms for {name}"
    if key == "target_latency" and rules.loadgen_scenario == "Server" and bench.token_latencies and value != 0:
        return (f"target_latency = {value:g} ms: {bench.name} is judged on TTFT and TPOT (mlperf.conf sets 0); "
                "the Server target_latency is open-only")
    if key == "target_latency" and rules.target_latency_ms is not None and value > rules.target_latency_ms:
        return (f"target_latency = {value:g} ms is over the {r} limit of {rules.target_latency_ms:g} ms for {name} "
                "(end to end, p99)")
    if key == "target_latency_percentile" and rules.loadgen_scenario == "Server" and value != 99:
        return f"target_latency_percentile = {value:g}: the Server percentile is 99 (open-only key)"
    if key == "target_latency_percentile" and rules.latency_result and value != SINGLE_STREAM_PERCENTILE:
        return (f"target_latency_percentile = {value:g}: a SingleStream result is the {SINGLE_STREAM_PERCENTILE}th "
                "percentile latency (open-only key)")
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
