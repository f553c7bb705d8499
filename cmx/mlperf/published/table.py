"""A round's published results table (the `summary.json` or `summary.csv` of mlcommons/inference_results_vX.Y)
read into PublishedRow values, and the filters `cmx results` applies to them.

The table is the submission checker's CSV (tools/submission/submission_checker/results.py in
mlcommons/inference, `ResultExporter`), one row per result, and summary.json is that CSV as pandas writes
it (`to_json(orient="index")`: an object keyed "0", "1", ... of the same columns; numbers as numbers, an
empty cell as null). Its columns: Organization, Availability, Division, SystemType, SystemName, Platform,
Model (the submitter's name of the benchmark, "llama3_1-8b"), MlperfModel (MLCommons' name, "llama3.1-8b"),
Scenario (as the submitter's folder says it: "Offline" or "offline"), Result and Units (the metric: Tokens/s,
Samples/s, Queries/s, Latency (ms), and for a power result, a second row in Watts or millijoules),
Accuracy (the metrics as one string), number_of_nodes, host_processor_model_name, host_processors_per_node,
host_processor_core_count, accelerator_model_name (null for a CPU-only system), accelerators_per_node,
total_accelerators (nodes x accelerators per node), Location (the result's folder), framework,
operating_system, notes, compliance, errors, version ("v6.1"), inferred (1 when the result was inferred
from another scenario's run: an Interactive result from a Server run is not), has_power,
weight_data_types, design_power_watts and PrivateID. The checker writes the CSV with every cell quoted, so
there "None", "False" and "" stand for null, false and nothing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.published.accelerators import AcceleratorName, name_matches


class PublishedResultsError(CmxError):
    """A published results table cannot be read, fetched, or compared as asked."""


# the columns a row cannot do without (the others are read when present)
REQUIRED = ("Organization", "Division", "SystemName", "Model", "Scenario", "Result", "Units", "number_of_nodes",
            "accelerator_model_name", "total_accelerators")
# generate_final_report.py's scenario_map: the checker keeps the folder's spelling ("offline", "multistream")
_SCENARIOS = {"singlestream": "SingleStream", "multistream": "MultiStream", "server": "Server",
              "interactive": "Interactive", "offline": "Offline"}
# a throughput divides among the devices that made it; a latency or a power figure does not
THROUGHPUT_UNITS = ("Tokens/s", "Samples/s", "Queries/s")


@dataclass(frozen=True)
class PublishedRow:
    """One published result. `accelerator` is None for a CPU-only system, whose devices are its host sockets."""

    organization: str
    division: str
    system_type: str
    system: str
    platform: str
    benchmark: str            # MlperfModel, MLCommons' name ("llama3.1-8b"); Model when the table has none
    submitted_as: str         # Model, the submitter's name of it ("llama3_1-8b")
    scenario: str
    result: float
    units: str
    accuracy: str
    nodes: int
    host_processor: str
    host_processors_per_node: int
    accelerator: str | None
    accelerators_per_node: int
    total_accelerators: int
    framework: str
    precision: str            # weight_data_types
    inferred: bool
    has_power: bool
    availability: str = ""
    location: str = ""
    notes: str = ""
    version: str = ""

    @property
    def is_power(self) -> bool:
        """A power row (Watts, millijoules): the checker writes it beside the performance row of the same run."""
        return "watt" in self.units.lower() or "joule" in self.units.lower()

    @property
    def on_cpu(self) -> bool:
        return not self.accelerator or self.total_accelerators <= 0

    @property
    def device(self) -> str:
        """What the result is divided among: the accelerator, or for a CPU-only system its host processor."""
        return self.host_processor if self.on_cpu else (self.accelerator or "")

    @property
    def devices(self) -> int:
        """How many: total_accelerators, or for a CPU-only system its sockets (nodes x processors per node)."""
        return self.nodes * self.host_processors_per_node if self.on_cpu else self.total_accelerators

    @property
    def per_device(self) -> float | None:
        """Result / devices for a throughput (per accelerator; per socket on a CPU-only system); None for a
        latency or power figure, or when the table gives no device count."""
        if self.units not in THROUGHPUT_UNITS or self.devices <= 0:
            return None
        return self.result / self.devices


@dataclass(frozen=True)
class RowFilter:
    """What `cmx results` keeps; None keeps every value. `accelerator` is matched by name_matches, and a count it
    carries ("8x H200") must be the row's accelerators per node."""

    benchmark: str | None = None
    scenario: str | None = None
    accelerator: str | None = None
    division: str | None = None
    framework: str | None = None

    def keep(self, row: PublishedRow) -> bool:
        if row.is_power:
            return False
        if self.benchmark is not None and not benchmark_matches(self.benchmark, row):
            return False
        if self.scenario is not None and row.scenario.lower() != self.scenario.lower():
            return False
        if self.division is not None and row.division.lower() != self.division.lower():
            return False
        if self.framework is not None and self.framework.lower() not in row.framework.lower():
            return False
        if self.accelerator is not None:
            return _device_matches(self.accelerator, row)
        return True

    def apply(self, rows: Iterable[PublishedRow]) -> tuple[PublishedRow, ...]:
        return tuple(r for r in rows if self.keep(r))


def _device_matches(asked: str, row: PublishedRow) -> bool:
    if asked.strip().lower() == "cpu":
        return row.on_cpu
    count = AcceleratorName.parse(asked).count
    if count is not None and count != (row.host_processors_per_node if row.on_cpu else row.accelerators_per_node):
        return False
    return name_matches(asked, row.device)


def normal_benchmark(name: str) -> str:
    """A benchmark name as compared: lower case, '_' as '.' ("llama3_1-8b" is "llama3.1-8b")."""
    return name.strip().lower().replace("_", ".")


def benchmark_matches(asked: str, row: PublishedRow) -> bool:
    """The row's MLCommons or submitter's name is `asked`, or `asked` and a suffix ("llama2-70b" finds
    llama2-70b-99 and llama2-70b-99.9)."""
    want = normal_benchmark(asked)
    return any(name == want or name.startswith(want + "-")
               for name in (normal_benchmark(row.benchmark), normal_benchmark(row.submitted_as)))


def read_table(path: Path) -> tuple[PublishedRow, ...]:
    """Every row of a summary.json (an object of rows keyed by index, or a list of rows) or summary.csv."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise PublishedResultsError(f"cannot read the published results table {path}: {err.strerror or err}",
                                    hint="give a summary.json or summary.csv of mlcommons/inference_results_vX.Y, "
                                         "or let `get-mlperf-results` fetch one") from None
    return parse_table(text, str(path))


def parse_table(text: str, where: str) -> tuple[PublishedRow, ...]:
    records = _records(text, where)
    missing = sorted({c for r in records for c in REQUIRED if c not in r})
    if missing:
        raise PublishedResultsError(f"{where} lacks the column(s) {', '.join(missing)} of the checker's summary",
                                    hint="give the summary.json or summary.csv at the top of a round's "
                                         "mlcommons/inference_results_vX.Y repository")
    rows = []
    for n, record in enumerate(records):
        try:
            rows.append(_row(record))
        except (TypeError, ValueError) as err:
            raise PublishedResultsError(f"{where}: row {n} ({record.get('SystemName')!r}, {record.get('Model')!r}) "
                                        f"has a value cmx cannot read: {err}",
                                        hint="the file is not the checker's summary as published; fetch it again "
                                             "(`cmx cache rm get-mlperf-results`)") from None
    return tuple(rows)


def _records(text: str, where: str) -> list[Mapping[str, Any]]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError as err:
            raise PublishedResultsError(f"{where} is not valid JSON ({err})",
                                        hint="a download cut short? fetch it again") from None
        records = list(data.values()) if isinstance(data, dict) else data
    else:
        records = list(csv.DictReader(io.StringIO(text)))
    if not records or not all(isinstance(r, dict) for r in records):
        raise PublishedResultsError(f"{where} holds no result rows",
                                    hint="give the round's summary.json (an object of rows) or summary.csv")
    return records


def _row(r: Mapping[str, Any]) -> PublishedRow:
    nodes = _int(r.get("number_of_nodes")) or 1
    per_node = _int(r.get("accelerators_per_node"))
    total = _int(r.get("total_accelerators")) if _text(r.get("total_accelerators")) else nodes * per_node
    scenario = _text(r.get("Scenario"))
    return PublishedRow(
        organization=_text(r.get("Organization")), division=_text(r.get("Division")),
        system_type=_text(r.get("SystemType")), system=_text(r.get("SystemName")), platform=_text(r.get("Platform")),
        benchmark=_text(r.get("MlperfModel")) or _text(r.get("Model")), submitted_as=_text(r.get("Model")),
        scenario=_SCENARIOS.get(scenario.lower(), scenario), result=float(_text(r.get("Result")) or "nan"),
        units=_text(r.get("Units")), accuracy=_text(r.get("Accuracy")), nodes=nodes,
        host_processor=_text(r.get("host_processor_model_name")),
        host_processors_per_node=_int(r.get("host_processors_per_node")) or 1,
        accelerator=_text(r.get("accelerator_model_name")) or None, accelerators_per_node=per_node,
        total_accelerators=total, framework=_text(r.get("framework")), precision=_text(r.get("weight_data_types")),
        inferred=_bool(r.get("inferred")), has_power=_bool(r.get("has_power")),
        availability=_text(r.get("Availability")), location=_text(r.get("Location")), notes=_text(r.get("notes")),
        version=_text(r.get("version")))


def _text(value: Any) -> str:
    """A cell as text: JSON's null and the CSV's "None" are ""."""
    if value is None:
        return ""
    text = str(value).strip()
    return "" if text in ("None", "nan", "NaN", "-") else text


def _int(value: Any) -> int:
    text = _text(value)
    return int(float(text)) if text else 0


def _bool(value: Any) -> bool:
    return _text(value).lower() in ("1", "true", "yes", "1.0")
