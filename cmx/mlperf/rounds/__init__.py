"""MLPerf Inference rounds as data: the LoadGen pin and seeds, tree layout and benchmark rules of each round.

Each round is one YAML file beside this module (`v6.0.yaml`, ...), read with `yaml.safe_load`
and checked strictly: an unknown or missing key is an error that names the file. The files
say where each fact comes from. `load_round("v6.0")` returns a frozen `Round`;
`Round.benchmark("llama2-70b-99")` one of its `Benchmark`s; `latest_round()` names the newest, the default.
`endpoints_v1_benchmarks()` reads endpoints-v1.0.yaml, the benchmarks of MLPerf Endpoints v1.0 (`cmx pareto`'s).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from cmx.errors import CmxError

ROUNDS_DIR = Path(__file__).resolve().parent
ENDPOINTS_V1_FILE = ROUNDS_DIR / "endpoints-v1.0.yaml"  # not a round: `known_rounds` reads v*.yaml only
SCENARIOS = ("Offline", "Server", "Interactive", "SingleStream")
LOADGEN_SCENARIOS = ("Offline", "Server", "SingleStream")
# the units the checker reports a SingleStream result in: constants.py UNIT_DICT ("Latency (ms)") and, per benchmark,
# SPECIAL_UNIT_DICT (wan-2.2-t2v-a14b: "Latency (s)"); performance_check.py divides the nanoseconds to match
LATENCY_UNITS = {"ms": 1e6, "s": 1e9}
# the percentile a SingleStream result is, and early stopping estimates (mlperf.conf *.SingleStream.
# target_latency_percentile = 90; only pointpainting, an edge benchmark, says 99.9)
SINGLE_STREAM_PERCENTILE = 90


class RoundError(CmxError):
    """A round or benchmark is unknown, or a round's data file is malformed."""


@dataclass(frozen=True)
class Seeds:
    """LoadGen's RNG seeds; they live in the mlperf.conf compiled into LoadGen, so they fix the LoadGen release."""

    qsl_rng_seed: int
    sample_index_rng_seed: int
    schedule_rng_seed: int

    def as_dict(self) -> dict[str, int]:
        return {"qsl_rng_seed": self.qsl_rng_seed, "sample_index_rng_seed": self.sample_index_rng_seed,
                "schedule_rng_seed": self.schedule_rng_seed}


@dataclass(frozen=True)
class LatencyLimits:
    """The p99 limits a Server-like run must meet: time to first token and time per output token."""

    ttft_p99_ms: float
    tpot_p99_ms: float

    @property
    def ttft_p99_ns(self) -> int:
        return round(self.ttft_p99_ms * 1_000_000)

    @property
    def tpot_p99_ns(self) -> int:
        return round(self.tpot_p99_ms * 1_000_000)


@dataclass(frozen=True)
class AccuracyBound:
    """One bound on a value of accuracy.txt: `reference * factor`, computed as the checker computes it
    (`44.4312 * 0.99`), so a comparison here agrees with the checker's to the last bit."""

    metric: str       # the key in accuracy.txt: rouge1, tokens_per_sample, gen_len, ...
    reference: float
    factor: float

    @property
    def value(self) -> float:
        return self.reference * self.factor


@dataclass(frozen=True)
class AccuracyTargets:
    """Closed-division accuracy: the checker's accuracy-target minimums and accuracy-upper-limit maximums.
    `cmx.mlperf.scoring.accuracy_txt.meets_targets` reads them."""

    minimums: tuple[AccuracyBound, ...]
    maximums: tuple[AccuracyBound, ...] = ()

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric with a bound, in the order the round lists them."""
        return tuple(dict.fromkeys(b.metric for b in (*self.minimums, *self.maximums)))

    def minimum(self, metric: str) -> float | None:
        return next((b.value for b in self.minimums if b.metric == metric), None)

    def maximum(self, metric: str) -> float | None:
        return next((b.value for b in self.maximums if b.metric == metric), None)


@dataclass(frozen=True)
class ScenarioRules:
    """One scenario of a benchmark: what LoadGen calls it, how long it must run, its latency limits."""

    name: str               # Offline, Server, Interactive, SingleStream (the folder name in the tree)
    loadgen_model: str      # the model name LoadGen's mlperf.conf and user.conf use
    loadgen_scenario: str   # Offline, Server or SingleStream (Interactive is a Server run)
    min_duration_ms: int
    min_query_count: int | None  # Offline: samples in the one query; None where early stopping decides
    latency: LatencyLimits | None  # None for Offline, and for a Server judged on whole answers
    # the checker's latency-constraint: the most LoadGen's target_latency may be set to (Server-like runs)
    target_latency_max_ms: float | None = None
    # mlperf.conf's target_latency, the p99 end-to-end limit of a Server-like run of a benchmark without token
    # latencies (Qwen3-VL: 12 s); None where TTFT and TPOT judge instead
    target_latency_ms: float | None = None
    # a scenario only MLCommons' endpoint client measures (v6.1 Qwen3-VL Interactive: mlperf.conf has no
    # -interactive model, so LoadGen cannot run it); cmx checks such results and refuses to run them
    endpoints_only: bool = False
    # where the scenario has its own accuracy set (v6.1 Qwen3-VL Interactive: 8,000 rows, F1 >= 0.7878 x 0.99)
    accuracy_sample_count: int | None = None
    accuracy: AccuracyTargets | None = None
    # a SingleStream result is LoadGen's early-stopping estimate of its 90th percentile latency, reported in this
    # unit (a key of LATENCY_UNITS: ms, or s where the checker says so); None for the throughput scenarios
    latency_unit: str | None = None
    # compliance/TEST04/audit.config's `<model>.<scenario>.min_query_count` for this benchmark (wan-2.2-t2v-a14b: 20),
    # which cmx's audit.config writes and its harness applies; None: the run's own count
    test04_min_query_count: int | None = None

    @property
    def latency_result(self) -> bool:
        """Whether the result is a latency (SingleStream) rather than a throughput."""
        return self.loadgen_scenario == "SingleStream"

    def in_latency_unit(self, ns: float) -> float:
        """A latency in nanoseconds in this scenario's reporting unit (ms unless the round says s)."""
        return ns / LATENCY_UNITS[self.latency_unit or "ms"]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of a round (`llama2-70b-99`): dataset, scenarios, required scenarios, accuracy, compliance."""

    name: str
    dataset_size: int
    performance_sample_count: int
    equal_issue: bool        # sample_concatenate_permutation = 1 in mlperf.conf
    token_latencies: bool    # use_token_latencies = 1 in mlperf.conf
    scenarios: tuple[ScenarioRules, ...]
    required_scenarios: tuple[str, ...]            # datacenter, closed
    one_of_scenarios: tuple[tuple[str, ...], ...]  # datacenter, closed: at least one of each group
    compliance_tests: tuple[str, ...]
    accuracy: AccuracyTargets
    # samples an accuracy run covers: constants.py accuracy-sample-count where the benchmark has its own
    # accuracy set (gpt-oss-120b: 4395), else the dataset size (the checker's get_accuracy_sample_count)
    accuracy_sample_count: int = 0
    # the official checker compares an endpoint-client result's accuracy score with the target (closed); it
    # compares no other benchmark's, whose client scale is not accuracy.txt's
    endpoints_accuracy_checked: bool = False
    # constants.py REQUIRED_ACC_BENCHMARK: files the checker wants in the accuracy folder besides the logs, relative
    # to it (wan-2.2-t2v-a14b's 10 videos, videos/130.mp4 ...); the benchmark's accuracy_files says where each is from
    accuracy_files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.accuracy_sample_count:
            object.__setattr__(self, "accuracy_sample_count", self.dataset_size)

    @property
    def scenario_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.scenarios)

    @property
    def loadgen_scenario_names(self) -> tuple[str, ...]:
        """The scenarios LoadGen can run (all but the endpoint client's own)."""
        return tuple(s.name for s in self.scenarios if not s.endpoints_only)

    def accuracy_for(self, scenario: str) -> AccuracyTargets:
        """The accuracy targets of one scenario: its own where it has its own accuracy set, else the benchmark's."""
        return self.scenario(scenario).accuracy or self.accuracy

    def accuracy_samples_for(self, scenario: str) -> int:
        """Samples an accuracy run of `scenario` covers."""
        return self.scenario(scenario).accuracy_sample_count or self.accuracy_sample_count

    def scenario(self, name: str) -> ScenarioRules:
        for rules in self.scenarios:
            if rules.name == name:
                return rules
        raise RoundError(f"benchmark {self.name} has no scenario {name!r}",
                         hint=f"its scenarios are {', '.join(self.scenario_names)}")

    def missing_scenarios(self, present: set[str] | frozenset[str]) -> list[str]:
        """What a closed datacenter submission of this benchmark lacks, given the scenarios it has."""
        missing = [s for s in self.required_scenarios if s not in present]
        missing += [" or ".join(group) for group in self.one_of_scenarios if not present & set(group)]
        return missing


@dataclass(frozen=True)
class Layout:
    """Where a round's tree keeps the harness code, the compliance results and measurements.json."""

    code_dir: str           # <division>/<submitter>/<code_dir>: src (v6.0), code (v5.1)
    compliance_dir: str     # <division>/<submitter>/<compliance_dir>/<system>/<benchmark>/<scenario>/TEST06
    measurements_dir: str   # <division>/<submitter>/<measurements_dir>/<system>/<benchmark>/<scenario>/
    measurements_file: str  # its name there: measurements.json (v6.0), {system}_{scenario}.json (v5.1)


@dataclass(frozen=True)
class SubmissionRules:
    """What a round's checker wants of a tree beyond the logs: the system description and measurements fields."""

    system_fields: tuple[str, ...]              # every field systems/<system>.json must have
    system_fields_may_be_empty: tuple[str, ...]  # the rest need a meaningful (non-empty, non-0) value
    status_values: tuple[str, ...]
    system_types: tuple[str, ...]
    measurements_fields: tuple[str, ...]        # measurements.json: each must be non-empty


@dataclass(frozen=True)
class Round:
    """One MLPerf Inference round: the LoadGen release it needs, its seeds, layout and benchmarks."""

    name: str
    loadgen_version: str            # the release cmx installs (mlcommons-loadgen==<this>)
    loadgen_seed_versions: tuple[str, ...]  # releases checked to carry this round's seeds
    seeds: Seeds
    layout: Layout
    submission: SubmissionRules
    benchmarks: tuple[Benchmark, ...]
    # benchmarks whose results MLCommons' endpoint client may make (constants.py ENDPOINTS_ALLOWED_MODELS, v6.1)
    endpoints_benchmarks: tuple[str, ...] = ()
    # what a harness config or an accuracy evaluation runs when it names no benchmark (cmx's first example's)
    default_benchmark: str = ""

    @property
    def loadgen_requirement(self) -> str:
        return f"mlcommons-loadgen=={self.loadgen_version}"

    @property
    def benchmark_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.benchmarks)

    def benchmark(self, name: str) -> Benchmark:
        for bench in self.benchmarks:
            if bench.name == name:
                return bench
        elsewhere = [r for r in known_rounds() if r != self.name and name in load_round(r).benchmark_names]
        close = difflib.get_close_matches(name, self.benchmark_names, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        also = f" ({name} is in {', '.join(elsewhere)})" if elsewhere else ""
        raise RoundError(f"round {self.name} has no benchmark {name!r}{also}",
                         hint=f"{guess}its benchmarks are {', '.join(self.benchmark_names)}")


def known_rounds() -> list[str]:
    """Names of the rounds that have a data file, oldest first (v5.1, v6.0, v6.1)."""
    return sorted((p.stem for p in ROUNDS_DIR.glob("v*.yaml")), key=_version_key)


def latest_round() -> str:
    """The newest round cmx has a data file for: the default wherever a round is chosen for the user (the apps'
    `round` input, `cmx check`; tests/mlperf/test_round_default.py holds the recipes' literal defaults to it)."""
    return known_rounds()[-1]


def load_round(name: str) -> Round:
    """The round called `name` ("v6.0"); a RoundError that lists the known rounds when there is none."""
    path = ROUNDS_DIR / f"{name}.yaml"
    if "/" in name or not path.is_file():
        raise RoundError(f"unknown MLPerf round {name!r}",
                         hint=f"known rounds: {', '.join(known_rounds())}")
    return read_round_file(path)


@cache
def endpoints_v1_benchmarks() -> tuple[str, ...]:
    """The benchmarks of MLPerf Endpoints v1.0, in its rules' order: each a benchmark of a known round."""
    with ENDPOINTS_V1_FILE.open(encoding="utf-8") as fh:
        top = _Reader(yaml.safe_load(fh), str(ENDPOINTS_V1_FILE), "")
    names = tuple(str(b) for b in top.get("benchmarks", list))
    top.done()
    known = {b for r in known_rounds() for b in load_round(r).benchmark_names}
    if set(names) - known:
        raise RoundError(f"benchmarks names benchmarks no round has: {sorted(set(names) - known)}",
                         where=str(ENDPOINTS_V1_FILE))
    return names


def round_for_seeds(seeds: Seeds) -> Round | None:
    """The known round whose LoadGen carries these seeds, if any (to explain a wrong-seed log)."""
    for name in known_rounds():
        candidate = load_round(name)
        if candidate.seeds == seeds:
            return candidate
    return None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in name.lstrip("v").split("."))


@cache
def read_round_file(path: Path) -> Round:
    """The Round a data file describes; its `round:` key must equal the file's stem."""
    with path.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    parsed = _parse_round(_Reader(data, str(path), ""))
    if parsed.name != path.stem:
        raise RoundError(f"round: {parsed.name!r} does not match the file name {path.name}", where=str(path))
    return parsed


class _Reader:
    """Strict access to one mapping of a round file: every key read is recorded, and
    `done()` refuses the keys nobody read, so a typo is an error and not a silent default."""

    def __init__(self, data: Any, path: str, where: str) -> None:
        if not isinstance(data, dict):
            raise RoundError(f"expected a mapping at {where or 'the top level'}", where=path)
        self.data, self.path, self.where = data, path, where
        self.seen: set[str] = set()

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self.seen.add(key)
        if key not in self.data:
            if default is ...:
                close = difflib.get_close_matches(key, [str(k) for k in self.data], n=1)
                typo = f" ({self._at(close[0])} is not a key: a typo?)" if close else ""
                raise RoundError(f"missing key {self._at(key)}{typo}", where=self.path)
            return default
        value = self.data[key]
        if isinstance(value, bool) and kind is not bool and bool not in _as_tuple(kind):
            raise RoundError(f"{self._at(key)} must be {_kind_name(kind)}, not a boolean", where=self.path)
        if not isinstance(value, kind):
            raise RoundError(f"{self._at(key)} must be {_kind_name(kind)}, not {type(value).__name__}",
                             where=self.path)
        return value

    def sub(self, key: str) -> _Reader:
        return _Reader(self.get(key, dict), self.path, self._at(key))

    def items(self) -> list[tuple[str, _Reader]]:
        self.seen.update(self.data)
        return [(str(k), _Reader(v, self.path, self._at(str(k)))) for k, v in self.data.items()]

    def done(self) -> None:
        unknown = sorted(set(map(str, self.data)) - self.seen)
        if unknown:
            raise RoundError(f"unknown key(s) {', '.join(self._at(k) for k in unknown)}", where=self.path)


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _as_tuple(kind))


def _parse_round(top: _Reader) -> Round:
    loadgen, seeds, layout, sub = top.sub("loadgen"), top.sub("seeds"), top.sub("layout"), top.sub("submission")
    parsed = Round(
        name=top.get("round", str),
        loadgen_version=loadgen.get("version", str),
        loadgen_seed_versions=tuple(loadgen.get("seed_versions", list)),
        seeds=Seeds(**{k: seeds.get(k, int) for k in ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")}),
        layout=Layout(**{k: layout.get(k, str) for k in ("code_dir", "compliance_dir", "measurements_dir",
                                                       "measurements_file")}),
        submission=SubmissionRules(**{k: tuple(str(v) for v in sub.get(k, list)) for k in (
            "system_fields", "system_fields_may_be_empty", "status_values", "system_types", "measurements_fields")}),
        benchmarks=tuple(_parse_benchmark(name, reader) for name, reader in top.sub("benchmarks").items()),
        endpoints_benchmarks=tuple(str(b) for b in top.get("endpoints_benchmarks", list, [])),
        default_benchmark=top.get("default_benchmark", str),
    )
    unknown = set(parsed.endpoints_benchmarks) - set(parsed.benchmark_names)
    if unknown:
        raise RoundError(f"endpoints_benchmarks names benchmarks the round does not have: {sorted(unknown)}",
                         where=top.path)
    if parsed.default_benchmark not in parsed.benchmark_names:
        raise RoundError(f"default_benchmark {parsed.default_benchmark!r} is not a benchmark of the round",
                         where=top.path)
    for reader in (loadgen, seeds, layout, sub, top):
        reader.done()
    return parsed


def _parse_benchmark(name: str, b: _Reader) -> Benchmark:
    datacenter, acc = b.sub("datacenter"), b.sub("accuracy")
    factor = b.get("accuracy_factor", float)
    scenarios = tuple(_parse_scenario(s_name, s, factor) for s_name, s in b.sub("scenarios").items())
    bench = Benchmark(
        name=name,
        dataset_size=b.get("dataset_size", int),
        performance_sample_count=b.get("performance_sample_count", int),
        equal_issue=b.get("equal_issue", bool),
        token_latencies=b.get("token_latencies", bool),
        scenarios=scenarios,
        required_scenarios=tuple(datacenter.get("required", list)),
        one_of_scenarios=tuple(tuple(group) for group in datacenter.get("one_of", list, [])),
        compliance_tests=tuple(b.get("compliance", list, [])),
        accuracy=_parse_accuracy(acc, factor),
        accuracy_sample_count=b.get("accuracy_sample_count", int, 0),
        endpoints_accuracy_checked=b.get("endpoints_accuracy_checked", bool, False),
        accuracy_files=tuple(str(f) for f in b.get("accuracy_files", list, [])),
    )
    outside = [f for f in bench.accuracy_files if f.startswith("/") or ".." in f.split("/") or "\\" in f]
    if outside:
        raise RoundError(f"{name}: accuracy_files must be paths inside the accuracy folder: {outside}",
                         where=b.path)
    for reader in (datacenter, acc, b):
        reader.done()
    names = set(bench.scenario_names)
    listed = set(bench.required_scenarios) | {s for group in bench.one_of_scenarios for s in group}
    if listed - names:
        raise RoundError(f"benchmarks.{name} requires scenario(s) it does not define: {sorted(listed - names)}",
                         where=b.path)
    return bench


def _parse_scenario(name: str, s: _Reader, factor: float) -> ScenarioRules:
    if name not in SCENARIOS:
        raise RoundError(f"{s.where}: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})", where=s.path)
    ttft, tpot = s.get("ttft_p99_ms", (int, float), None), s.get("tpot_p99_ms", (int, float), None)
    rules = ScenarioRules(
        name=name,
        loadgen_model=s.get("loadgen_model", str),
        loadgen_scenario=s.get("loadgen_scenario", str),
        min_duration_ms=s.get("min_duration_ms", int),
        min_query_count=s.get("min_query_count", int, None),
        latency=LatencyLimits(ttft, tpot) if ttft is not None and tpot is not None else None,
        target_latency_max_ms=s.get("target_latency_max_ms", (int, float), None),
        target_latency_ms=s.get("target_latency_ms", (int, float), None),
        endpoints_only=s.get("endpoints_only", bool, False),
        accuracy_sample_count=s.get("accuracy_sample_count", int, None),
        accuracy=AccuracyTargets(minimums=_bounds(s.sub("accuracy_minimums"), factor))
        if "accuracy_minimums" in s.data else None,
        latency_unit=s.get("latency_unit", str, None),
        test04_min_query_count=s.get("test04_min_query_count", int, None),
    )
    s.done()
    if rules.loadgen_scenario not in LOADGEN_SCENARIOS:
        raise RoundError(f"{s.where}.loadgen_scenario must be one of {', '.join(LOADGEN_SCENARIOS)}", where=s.path)
    if rules.latency_result:
        _check_single_stream(rules, s)
    elif rules.latency_unit is not None:
        raise RoundError(f"{s.where}.latency_unit: only a SingleStream result is a latency", where=s.path)
    limits = (rules.latency is not None) + (rules.target_latency_ms is not None)
    if limits != (rules.loadgen_scenario == "Server"):
        raise RoundError(f"{s.where}: a Server-like scenario needs either ttft_p99_ms and tpot_p99_ms or "
                         "target_latency_ms (judged on whole answers), Offline none of them", where=s.path)
    return rules


def _check_single_stream(rules: ScenarioRules, s: _Reader) -> None:
    """A SingleStream scenario: judged by LoadGen's early stopping at its 90th percentile (mlperf.conf), so no
    minimum query count (the checker's min_query_count_check skips the early-stopping scenarios), and reported in
    ms or s."""
    if rules.min_query_count is not None:
        raise RoundError(f"{s.where}.min_query_count: a SingleStream run's count is early stopping's to decide",
                         where=s.path)
    if (rules.latency_unit or "ms") not in LATENCY_UNITS:
        raise RoundError(f"{s.where}.latency_unit must be one of {', '.join(LATENCY_UNITS)}", where=s.path)


def _parse_accuracy(a: _Reader, factor: float) -> AccuracyTargets:
    """`minimums` and `maximums` map an accuracy.txt key to its reference value (times the benchmark's
    accuracy_factor), or to {value, factor} where the checker uses a factor of its own."""
    return AccuracyTargets(minimums=_bounds(a.sub("minimums"), factor),
                           maximums=_bounds(a.sub("maximums"), None) if "maximums" in a.data else ())


def _bounds(r: _Reader, factor: float | None) -> tuple[AccuracyBound, ...]:
    bounds = []
    for metric, value in r.data.items():
        r.seen.add(metric)
        if isinstance(value, dict):
            own = _Reader(value, r.path, f"{r.where}.{metric}")
            bound = AccuracyBound(str(metric), float(own.get("value", (int, float))),
                                  float(own.get("factor", (int, float))))
            own.done()
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and factor is not None:
            bound = AccuracyBound(str(metric), float(value), factor)
        else:
            need = "a number (times accuracy_factor) or {value, factor}" if factor is not None else "{value, factor}"
            raise RoundError(f"{r.where}.{metric} must be {need}", where=r.path)
        bounds.append(bound)
    return tuple(bounds)
