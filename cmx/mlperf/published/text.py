"""`cmx results` on a terminal: the kept rows as a table (inferred rows marked), or each run of a results folder
with its rank, its ratio to the best and the median of its peers, and the peers around it."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

from cmx.mlperf.published.answer import Costed, ResultsAnswer, Source
from cmx.mlperf.published.compare import Placement
from cmx.mlperf.published.table import PublishedRow

INFERRED = "*"
_WIDTH = {"system": 44, "framework": 28, "accelerators": 40, "precision": 12}


def format_answer(a: ResultsAnswer) -> str:
    lines = [_source_line(a)]
    if a.compared is None:
        lines += _rows_text(a)
    else:
        for placement, mine, peers in a.placements:
            lines += ["", *_placement_text(placement, mine, peers, a)]
    if a.cost is not None:
        lines += ["", f"cost at {_money(a.cost.price)} per accelerator-hour (per socket-hour for a CPU row), "
                      "the price you gave: price / (per-accelerator rate x 3600) x 1,000,000 tokens "
                      "(1,000 samples); see docs/results.md"]
    return "\n".join(lines) + "\n"


def _source_line(a: ResultsAnswer) -> str:
    s = a.source
    copy = unquote(urlsplit(s.url).path) if s.url.startswith("file:") else s.url
    where = f"{s.path.name} at {s.commit[:12]}" if s.commit else f"your copy {copy or s.path}"
    check = "sha256 verified" if s.verified else f"sha256 {s.sha256[:12]}... not verified" if s.sha256 else \
        "not verified"
    asked = [f"{k} {v}" for k, v in (("benchmark", a.filter.benchmark), ("scenario", a.filter.scenario),
                                     ("accelerator", a.filter.accelerator), ("division", a.filter.division),
                                     ("framework", a.filter.framework)) if v is not None]
    return f"MLPerf Inference {s.round} published results ({where}, {check})" + \
        (f": {', '.join(asked)}" if asked else "")


def table_read(s: Source) -> str:
    """Which table a report read, in one line: its round, its commit (or the local copy), its sha256's start and
    whether that was checked against a pinned one."""
    copy = unquote(urlsplit(s.url).path) if s.url.startswith("file:") else s.url
    where = f"{s.path.name} at commit {s.commit[:12]}" if s.commit else f"your copy {copy or s.path}"
    sha = f"sha256 {s.sha256[:12]}" if s.sha256 else "no sha256"
    return (f"published results: MLPerf Inference {s.round}'s table ({where}, {sha}, "
            f"{'verified' if s.verified else 'not verified'})")


def table_missing(round_name: str, results: str) -> str:
    """What a report says when the round's table is not in the cache: how to add it (nothing was fetched)."""
    return (f"published results: MLPerf Inference {round_name}'s table is not in the cmx cache, so none is shown; "
            f"add it with `cmx results --round {round_name}` once, or `cmx report {results} --published`")


def _rows_text(a: ResultsAnswer) -> list[str]:
    if not a.rows:
        return ["no published row matches; `cmx results --round ROUND` lists them all, and the accelerator is "
                "matched by whole words of its name (MI355X, H200, \"H200-SXM-141GB\", \"8x H200\", cpu)"]
    header = ["benchmark", "scenario", "division", "organization", "system", "nodes", "accelerators", "framework",
              "precision", "result", "per accel."]
    if a.cost is not None:
        header.append("cost")
    body = [_row_cells(row, costed, a.cost is not None) for row, costed in a.rows]
    lines = _table(header, body)
    lines.append(f"{len(a.rows)} row(s); per accel. = Result / total accelerators (per socket on a CPU-only system); "
                 f"{INFERRED} inferred from another scenario's run")
    lines += _users_lines([(f"{r.organization} {r.system}", c) for r, c in a.rows])
    return lines


def _row_cells(row: PublishedRow, costed: Costed, with_cost: bool) -> list[str]:
    mark = INFERRED if row.inferred else ""
    cells = [row.benchmark, row.scenario, row.division, row.organization, _cut(row.system, "system"),
             str(row.nodes), _cut(_devices(row), "accelerators"), _cut(row.framework, "framework"),
             _cut(row.precision, "precision"), f"{_num(row.result)} {row.units}{mark}",
             _num(costed.per_device) if costed.per_device is not None else "-"]
    if with_cost:
        cells.append(_unit_cost(costed))
    return cells


def _devices(row: PublishedRow) -> str:
    return f"{row.devices}x {row.device} (sockets)" if row.on_cpu else f"{row.devices}x {row.device}"


def _placement_text(p: Placement, mine: Costed, peers: Sequence[Costed], a: ResultsAnswer) -> list[str]:
    run = p.run
    tags = [t for t, on in (("short", run.short), ("tiny", run.tiny)) if on]
    head = (f"{run.benchmark} {run.scenario} on {run.device_label}: {_num(p.run_per_device)} {p.units} per "
            f"{'socket' if run.on_cpu else 'accelerator'}" + (f" ({', '.join(tags)} run: not a result)" if tags else "")
            + f", {run.validity or 'no validity'}")
    if not p.peers:
        return [head, "  " + standing(p, a.source.round)
                      + (" (after the --division/--framework filter)" if a.filter.division or a.filter.framework
                         else "")]
    lines = [head, "  " + standing(p, a.source.round)]
    lines += ["  " + line for line in cost_lines("the run", mine)]
    header = ["", "organization", "system", "nodes", "accelerators", "framework", "precision", "per accel."]
    if a.cost is not None:
        header.append("cost")
    body = []
    shown_run = False
    for peer, costed in zip(p.peers, peers, strict=True):
        if not shown_run and p.run_per_device is not None and p.run_per_device >= peer.per_device:
            body.append(_run_cells(p, mine, a.cost is not None))
            shown_run = True
        mark = INFERRED if peer.row.inferred else ""
        cells = ["", peer.row.organization, _cut(peer.row.system, "system"), str(peer.row.nodes),
                 _cut(_devices(peer.row), "accelerators"), _cut(peer.row.framework, "framework"),
                 _cut(peer.row.precision, "precision"), f"{_num(peer.per_device)}{mark}"]
        if a.cost is not None:
            cells.append(_unit_cost(costed))
        body.append(cells)
    if not shown_run:
        body.append(_run_cells(p, mine, a.cost is not None))
    lines += ["  " + line for line in _table(header, body)]
    differ = [(peer.row, peer.differs) for peer in p.peers if peer.differs]
    if differ:
        lines.append("  what differs from the run:")
        lines += [f"    {row.organization} {row.system}: {'; '.join(d)}" for row, d in differ]
    return lines


def standing(p: Placement, round_name: str) -> str:
    """Where the run stands, in one sentence: its rank and ratios, or that it has no peer."""
    if not p.peers:
        return f"no {p.peers_label} in {round_name} to rank it among"
    return (f"rank {p.rank} of {p.of} among the {p.peers_label}; {_ratio(p.to_best)} of the best "
            f"({_num(p.best)}), {_ratio(p.to_median)} of the median ({_num(p.median)})")


def cost_lines(label: str, costed: Costed) -> list[str]:
    """What `label` costs at the asked price: per million tokens (thousand samples), and the users asked for."""
    lines = [f"{label}: {_unit_cost(costed)}"] if costed.unit is not None else []
    return lines + [line.strip() for line in _users_lines([(label, costed)])]


def _run_cells(p: Placement, mine: Costed, with_cost: bool) -> list[str]:
    run = p.run
    cells = [">", "this run", _cut(run.system, "system"), str(run.nodes), _cut(run.device_label, "accelerators"),
             _cut(run.framework, "framework"), run.precision,
             _num(p.run_per_device) if p.run_per_device is not None else "-"]
    if with_cost:
        cells.append(_unit_cost(mine))
    return cells


def _users_lines(items: Sequence[tuple[str, Costed]]) -> list[str]:
    out = []
    for label, costed in items:
        u = costed.users
        if u is not None:
            out.append(f"  {label}: {u.users} users at {_num(u.tokens_per_user)} tokens/s each need {u.devices} "
                       f"accelerator(s): {_money(u.per_hour)} an hour, {_money(u.per_user_hour)} per user-hour")
    return out


def _unit_cost(costed: Costed) -> str:
    return "-" if costed.unit is None else f"{_money(costed.unit.amount)} {costed.unit.label}"


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]


def _cut(text: str, column: str) -> str:
    width = _WIDTH[column]
    return text if len(text) <= width else text[:width - 3] + "..."


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}" if value >= 0.01 else f"{value:.2%}"


def _money(value: float) -> str:
    return f"{value:,.2f}" if value >= 1 else f"{value:.3g}"
