"""`cmx pareto QUERY`: an MLPerf Endpoints v1.0 Pareto curve of a served model, its points as a table, its report."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cmx.cli.common import app, echo_json, join_query, parse_query, query_arg, query_options, registry_option

if TYPE_CHECKING:
    from cmx.api import ParetoRecord, ParetoResult


@click.command("pareto", help="""Draw an MLPerf Endpoints v1.0 Pareto curve of an app query's served model.

MLPerf Endpoints measures a deployed service as a curve: system tokens/s
against tokens/s per user (1000 / TPOT p90), one point per fixed concurrency.
cmx lays the points out as the v1.0 rules do: C_max (the Maximum Supported
Concurrency; --max-concurrency, or found by short probes where doubling the
concurrency stops gaining 10 % of throughput), C_min = 1, the regions between
them, and 1 + 3 + 3 points (ultra-low, low, medium, high, three more) plus an
Offline point. Each runs for its region's minimum (600 s or 1,200 s; with
_short, seconds) through the endpoint (_endpoint: cmx's vllm serve, or
--input endpoint_url=URL). The accuracy set runs at the four mandatory
points and the Offline point: a hard gate against the round's targets.

This is the Endpoints methodology run by cmx's client. A compliant Endpoints
submission needs MLCommons' client (inference-endpoint), unmodified: cmx
writes its YAML config for every point, and where that client is installed
it measures the points from those configs instead.

The curve goes to <results_dir>/<system>/<benchmark>/pareto/ (cmx_pareto.json,
a folder per point); `cmx report` draws it. --compare OTHER writes a page with
both curves overlaid.

\b
    cmx pareto "app mlperf inference llama3.1-8b _cpu _tiny _endpoint _short"
    cmx pareto "app mlperf inference llama3.1-8b _cuda _endpoint" --max-concurrency 512 \\
        --system-power system_power.json --cooling liquid
    cmx pareto "app mlperf inference llama3.1-8b _cuda _endpoint" --input endpoint_url=http://10.0.0.5:8000/v1 \\
        --compare results/other-system
""")
@query_arg
@query_options(input_help="An input of the root recipe.", context_help="A run-wide context value.")
@click.option("--max-concurrency", "max_concurrency", type=click.IntRange(min=33), default=None, metavar="N",
              help="C_max, the Maximum Supported Concurrency (above 32); default: found by probes.")
@click.option("--system-power", "system_power", type=click.Path(dir_okay=False, exists=True), default=None,
              metavar="FILE", help="The system's system_power.json (watts): adds tokens/s per kW to every point.")
@click.option("--cooling", type=click.Choice(["liquid", "air"]), default=None,
              help="The overhead on component power when the file gives none (0.30 liquid, 0.50 air).")
@click.option("--first-token-timeout", "first_token_timeout_s", type=click.FloatRange(min=0, min_open=True),
              default=None, metavar="SECONDS",
              help="Stop the curve when the server sends no token for this long while a request waits for its "
                   "first one (a server that accepts requests and stalls); default: 120.")
@click.option("--compare", "compare", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              metavar="OTHER", help="Another curve's results folder: write a report page with both overlaid.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Steps to run at once.")
@click.option("--progress", type=click.Choice(["auto", "live", "plain", "none"]), default="auto", show_default=True,
              help="Live display on a terminal, plain lines otherwise.")
@click.option("--json", "as_json", is_flag=True, help="Print the curve (cmx_pareto.json's content) as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], inputs_file: str | None,
            input_envs: tuple[str, ...], contexts: tuple[str, ...], jobs: int | None, progress: str, as_json: bool,
            compare: Path | None, **request: Any) -> None:
    from cmx import api
    from cmx.errors import CmxError

    text = join_query(query)
    state = app(ctx)
    try:
        q = parse_query(query, inputs, contexts, inputs_file, input_envs)
        asked = {k: v for k, v in request.items() if v is not None}  # what is not given: ParetoRequest's default
        result = api.pareto(q.query, inputs=q.inputs, context=q.context, **asked,
                            jobs=jobs or api.default_jobs(), settings=state.settings(),
                            reporter=api.reporter("none" if as_json else progress), argv=["cmx", *sys.argv[1:]],
                            invocation="cmx" + (f" --registry {shlex.quote(state.registry)}" if state.registry else ""))
        page = _report(result, compare)
    except CmxError as exc:
        if not as_json:
            raise
        echo_json({"ok": False, "query": text, "error": exc.render()})
        ctx.exit(exc.exit_code)
    if as_json:
        echo_json({**result.to_json(), "report": str(page) if page else None})
        ctx.exit(0 if result.ok else 1)
    if result.error is not None:
        raise result.error
    record = result.record
    assert record is not None, "a curve that did not fail has its record"
    for line in lines(record):
        click.echo(line)
    click.echo(f"curve: {result.outputs['record']}")
    if page is not None:
        click.echo(f"report: {page}")


def _report(result: ParetoResult, compare: Path | None) -> Path | None:
    if result.record is None:
        return None
    from cmx import api

    folder = Path(str(result.outputs["folder"]))
    return api.report(folder, folder / "report.html", other=compare)


HEADER = ("concurrency", "region", "system tok/s", "tok/s/user", "TTFT p90 ms", "TPOT p90 ms", "tok/s/kW", "window s",
          "accuracy")


def lines(r: ParetoRecord) -> list[str]:
    """The curve as the terminal shows it: what it is, how its points were laid out, a row per point, problems."""
    out = [r.label, f"{r.benchmark} on {r.system}: C_min {r.c_min}, C_max {r.c_max} ({r.c_max_source}); regions "
           + ", ".join(f"{name} {lo}-{hi}" for name, (lo, hi) in r.regions.items())]
    if r.probes:
        out.append("probes: " + ", ".join(f"{p.concurrency}: {p.system_tps:.0f} tok/s" for p in r.probes))
    if r.short:
        out.append("_short: seconds per point, not the rules' 600 s / 1,200 s: a smoke test of the method")
    rows = [HEADER]
    for p in (*r.steps, *((r.offline_point,) if r.offline_point else ())):
        gate = "-" if p.accuracy is None else "pass" if p.accuracy.passed else "FAIL"
        rows.append(("Offline" if p.offline else str(p.concurrency), p.region, _num(p.system_tps, 1),
                     _num(p.tps_per_user, 1), _num(p.ttft_p90_ms, 0), _num(p.tpot_p90_ms, 1),
                     _num(p.system_tps_per_kw, 1), f"{p.window_s:.1f}", gate))
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    passed = r.accuracy_passed
    out.append("accuracy gate: " + ("not run" if passed is None else "passed" if passed else "FAILED"))
    out += [f"  not per the rules: {p}" for p in r.problems]
    return out


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
