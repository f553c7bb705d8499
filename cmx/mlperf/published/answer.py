"""`cmx results`'s answer: the published rows a filter keeps with their per-accelerator figures and costs, or a
results folder's runs placed among their peers; as data, as JSON, and (text.py) as a terminal table."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.published.compare import Placement, place, read_runs
from cmx.mlperf.published.cost import UnitCost, UsersCost, unit_cost, users_cost
from cmx.mlperf.published.table import PublishedResultsError, PublishedRow, RowFilter, read_table


@dataclass(frozen=True)
class CostAsk:
    """The user's price of one accelerator for one hour (a CPU socket's, for a CPU row), and optionally a load
    of `users` at `tokens_per_user` tokens/s each to price."""

    price: float
    users: int | None = None
    tokens_per_user: float | None = None

    def __post_init__(self) -> None:
        if self.price <= 0:
            raise PublishedResultsError(f"a price of {self.price} per accelerator-hour prices nothing",
                                        hint="give what one accelerator costs you an hour, above 0")
        if (self.users is None) != (self.tokens_per_user is None):
            raise PublishedResultsError("--users and --tokens-per-user go together",
                                        hint="give both: --users 100 --tokens-per-user 20")


@dataclass(frozen=True)
class Costed:
    """A figure per device with what it costs at the asked price (None without a price, or for a latency)."""

    per_device: float | None
    unit: UnitCost | None = None
    users: UsersCost | None = None

    @classmethod
    def of(cls, per_device: float | None, units: str, ask: CostAsk | None) -> Costed:
        if ask is None or per_device is None:
            return cls(per_device)
        users = None
        if ask.users is not None and ask.tokens_per_user is not None:
            users = users_cost(per_device, units, ask.price, ask.users, ask.tokens_per_user)
        return cls(per_device, unit_cost(per_device, units, ask.price), users)


@dataclass(frozen=True)
class Source:
    """Where the table came from: the file read, the round, the commit and URL (empty for a local copy), its
    sha256 and whether that was checked against a pinned one."""

    path: Path
    round: str
    commit: str = ""
    url: str = ""
    sha256: str = ""
    verified: bool = False


@dataclass(frozen=True)
class ResultsAnswer:
    source: Source
    filter: RowFilter
    rows: tuple[tuple[PublishedRow, Costed], ...]
    placements: tuple[tuple[Placement, Costed, tuple[Costed, ...]], ...] = ()
    compared: Path | None = None
    cost: CostAsk | None = None


def answer(source: Source, row_filter: RowFilter, *, compare: Path | None = None,
           cost: CostAsk | None = None) -> ResultsAnswer:
    """The rows of `source`'s table `row_filter` keeps, best per device first; with `compare`, each of that
    folder's performance tests among its peers (the filter's division and framework narrow them)."""
    table = read_table(source.path)
    if compare is not None:
        narrowed = RowFilter(division=row_filter.division, framework=row_filter.framework).apply(table)
        placed = []
        for run in read_runs(compare):
            p = place(run, narrowed)
            placed.append((p, Costed.of(p.run_per_device, p.units, cost),
                           tuple(Costed.of(peer.per_device, p.units, cost) for peer in p.peers)))
        return ResultsAnswer(source, row_filter, (), tuple(placed), Path(compare), cost)
    kept = sorted(row_filter.apply(table), key=lambda r: (r.benchmark, r.scenario, r.units,
                                                          -(r.per_device or 0.0), r.organization, r.system))
    return ResultsAnswer(source, row_filter, tuple((r, Costed.of(r.per_device, r.units, cost)) for r in kept),
                         cost=cost)


def _row_json(row: PublishedRow, costed: Costed) -> dict[str, Any]:
    return {**asdict(row), "device": row.device, "devices": row.devices, "per_device": row.per_device,
            **_cost_json(costed)}


def _cost_json(costed: Costed) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if costed.unit is not None:
        out["cost"] = {"amount": costed.unit.amount, "per": costed.unit.per, "unit": costed.unit.unit}
    if costed.users is not None:
        out["users_cost"] = asdict(costed.users)
    return out


def to_json(a: ResultsAnswer) -> dict[str, Any]:
    """What `cmx results --json` prints."""
    out: dict[str, Any] = {
        "source": {**asdict(a.source), "path": str(a.source.path)},
        "filter": asdict(a.filter),
        "price_per_accelerator_hour": a.cost.price if a.cost else None,
    }
    if a.compared is None:
        out["rows"] = [_row_json(r, c) for r, c in a.rows]
        return out
    out["compare"] = str(a.compared)
    out["runs"] = []
    for p, mine, peers in a.placements:
        run = {**asdict(p.run), "folder": str(p.run.folder)}
        out["runs"].append({
            "run": run, "units": p.units, "per_device": p.run_per_device, **_cost_json(mine),
            "peers_label": p.peers_label, "rank": p.rank, "of": p.of if p.peers else None, "best": p.best,
            "median": p.median, "to_best": p.to_best, "to_median": p.to_median,
            "peers": [{**_row_json(peer.row, c), "differs": list(peer.differs)}
                      for peer, c in zip(p.peers, peers, strict=True)],
        })
    return out


@dataclass(frozen=True)
class Yardstick:
    """What `cmx report` places a results folder's runs against: a published table, and the user's price."""

    source: Source
    rows: tuple[PublishedRow, ...]
    cost: CostAsk | None = None

    @classmethod
    def read(cls, source: Source, cost: CostAsk | None = None) -> Yardstick:
        return cls(source, read_table(source.path), cost)
