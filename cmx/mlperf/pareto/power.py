"""A system's provisioned power from its `system_power.json`, as MLPerf Endpoints v1.0 computes it (§4.5).

The total, in watts, is the first that applies of: `provisioned_power_w` (or `provisioned_power_watts`),
a declared total; `rack_power_w` x `submitted_nodes` / `rack_nodes`; else the CPUs, accelerators and
scale-up switches (`cpu: {num_cpu, tdp_per_cpu}`, `accelerator: {num_accelerator, tdp_per_accelerator}`,
`scale_up_network: {num_switches, tdp_per_switch}`, or a group's generic `count` and `tdp_per_unit`; a
`compute` group replaces cpu and accelerator) times 1 + `overhead_fraction`, which defaults to the
cooling's: 0.30 liquid, 0.50 air. Every point's tokens/s per kW divides by the same total.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.errors import CmxError

OVERHEAD = {"liquid": 0.30, "water": 0.30, "immersion": 0.30, "air": 0.50}
_GROUPS = {"cpu": ("num_cpu", "tdp_per_cpu"), "accelerator": ("num_accelerator", "tdp_per_accelerator"),
           "scale_up_network": ("num_switches", "tdp_per_switch"), "compute": ("count", "tdp_per_unit")}


class PowerError(CmxError):
    """A system_power file gives no total the rules can derive."""


@dataclass(frozen=True)
class ProvisionedPower:
    watts: float
    method: str          # declared total, rack scaling, components x overhead
    path: str

    @property
    def kw(self) -> float:
        return self.watts / 1000


def read_system_power(path: Path, cooling: str | None = None) -> ProvisionedPower:
    """The provisioned power `path` declares; `cooling` (liquid, air) picks the overhead when the file has none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PowerError(f"cannot read the system_power file {path}: {exc}",
                         hint="give a JSON object: provisioned_power_w, or cpu/accelerator/scale_up_network groups "
                              "(docs/pareto.md)") from None
    if not isinstance(data, dict):
        raise PowerError(f"{path} is not a JSON object", hint="see docs/pareto.md for its fields")
    declared = data.get("provisioned_power_w", data.get("provisioned_power_watts"))
    if declared is not None:
        return ProvisionedPower(_positive(declared, "provisioned_power_w", path), "declared total", str(path))
    rack = [data.get(k) for k in ("rack_power_w", "rack_nodes", "submitted_nodes")]
    if all(v is not None for v in rack):
        power, nodes, submitted = (_positive(v, k, path) for v, k in zip(rack, ("rack_power_w", "rack_nodes",
                                                                                 "submitted_nodes"), strict=True))
        return ProvisionedPower(power * submitted / nodes, "rack scaling", str(path))
    groups = ("compute", "scale_up_network") if "compute" in data else ("cpu", "accelerator", "scale_up_network")
    major = sum(_group(data.get(g), g, path) for g in groups)
    if major <= 0:
        raise PowerError(f"{path} gives no total: no provisioned_power_w, no rack scaling and no component groups",
                         hint="give provisioned_power_w (watts), or cpu/accelerator groups with counts and TDPs")
    overhead = data.get("overhead_fraction")
    if overhead is None:
        overhead = OVERHEAD.get((cooling or "").strip().lower())
    if overhead is None:
        raise PowerError(f"{path} has no overhead_fraction and the cooling is {cooling or 'not given'}",
                         hint="give overhead_fraction, or --input cooling=liquid|air (0.30 or 0.50)")
    return ProvisionedPower(major * (1 + float(overhead)), f"components x {1 + float(overhead):g}", str(path))


def _group(group: Any, name: str, path: Path) -> float:
    if group is None:
        return 0.0
    if not isinstance(group, dict):
        raise PowerError(f"{path}: {name} must be an object with a count and watts per unit")
    count_key, watts_key = _GROUPS[name]
    count = group.get(count_key, group.get("count"))
    watts = group.get(watts_key, group.get("tdp_per_unit"))
    if count is None or watts is None:
        raise PowerError(f"{path}: {name} needs {count_key} and {watts_key}")
    return _positive(count, f"{name}.{count_key}", path) * _positive(watts, f"{name}.{watts_key}", path)


def _positive(value: Any, key: str, path: Path) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PowerError(f"{path}: {key} must be a number, not {value!r}") from None
    if number <= 0:
        raise PowerError(f"{path}: {key} must be above 0, not {value!r}")
    return number
