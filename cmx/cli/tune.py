"""`cmx tune QUERY --scenario Server`: the highest QPS that stays VALID, its probes as a table, the inputs file."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cmx.cli.common import app, echo_json, join_query, parse_query, query_arg, query_options, registry_option
from cmx.cli.docker_options import (
    container_of,
    container_option,
    docker_options,
    docker_options_of,
    refuse_without_docker,
)

if TYPE_CHECKING:
    from cmx.api import Confirm, TuneAnswer


@click.command("tune", help="""Find the target QPS of an MLPerf app query's scenario.

Server and Interactive: the highest target QPS that LoadGen judges VALID under the
round's latency limits (TTFT and TPOT p99, early stopping). One engine serves every
probe: short LoadGen tests whose QPS the search picks from what the last ones
measured (a bracket, then the QPS the measured capacity and latencies predict,
bisecting when they cannot), until the bracket is narrower than --tolerance. Then
one run of the query's full length (the _short profile's with _short) confirms it.
Offline: the measured samples/s (LoadGen's own 10 % margin covers the rest).

The answer goes into an inputs file (NAME: VALUE YAML; merged into --out when it
exists) that `cmx run` and `cmx plan` read with --inputs-file; the last confirm
run and the probes (cmx_tune.json) into the app's results_dir, which
`cmx report` draws. The query must name
its device (_cpu, _cuda, _rocm). Probes are not submission runs: only the confirm
run reads a user.conf, exactly as `cmx run` would.

With --docker (or --container podman) the tune runs in the image `cmx run QUERY
--docker` builds (the same plan, the same options), with the cache, run records and
the --out file at their host paths; what the tune would refuse is refused before
the build.

\b
    cmx tune "app mlperf inference llama2 _cpu _tiny _short" --scenario Server
    cmx tune "app mlperf inference llama2 _rocm" --scenario Interactive --start 20 \\
        --input model_path=/models/Llama-2-70b-chat-hf --out tuned.yaml
    cmx run "app mlperf inference llama2 _rocm _interactive" --inputs-file tuned.yaml
    cmx tune "app mlperf inference llama2 _rocm _fp8" --scenario Server --docker --out mi300x.yaml
""")
@query_arg
@click.option("--scenario", "-s", required=True, type=click.Choice(["Offline", "Server", "Interactive"],
                                                                   case_sensitive=False),
              help="The scenario to tune.")
@query_options(input_help="An input of the root recipe.", context_help="A run-wide context value.")
@click.option("--start", "start_qps", type=click.FloatRange(min=0, min_open=True), default=None, metavar="QPS",
              help="The first probe's QPS (default: the query's target_qps_<scenario> input; with neither, a "
                   "Server-like search starts from the engine's Offline rate, measured first on the same engine).")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), metavar="FILE",
              help="The inputs file to write or update (default: tuned.yaml in the tune's folder).")
@click.option("--tolerance", type=click.FloatRange(min=0.005, max=0.5), default=0.04, show_default=True,
              help="Stop when the bracket is narrower than this fraction of its lower end.")
@click.option("--max-probes", type=click.IntRange(min=1), default=10, show_default=True, help="The most probes.")
@click.option("--probe-seconds", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="Each probe's minimum duration when the query runs the round's full length (with _short, "
                   "probes are as long as the short profile).")
@click.option("--no-confirm", "no_confirm", is_flag=True, help="Skip the confirm run (the answer is then a guess).")
@click.option("--confirm-tries", type=click.IntRange(min=1), default=4, show_default=True,
              help="The most confirm runs: while they fail, each steps down toward the rate the last one completed, "
                   "to a floor of a quarter of the probes' answer.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Steps to run at once.")
@click.option("--progress", type=click.Choice(["auto", "live", "plain", "none"]), default="auto", show_default=True,
              help="Live display on a terminal, plain lines otherwise.")
@click.option("--json", "as_json", is_flag=True, help="Print the probes, the confirm runs and the answer as JSON.")
@click.option("--docker", "in_docker", is_flag=True, help="Tune in the container `cmx run --docker` would use.")
@container_option
@click.option("--rebuild", is_flag=True, help="In a container: build the image even if an identical one exists.")
@click.option("--keep", is_flag=True, help="In a container: keep the container and the build context.")
@docker_options
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], scenario: str, inputs: tuple[str, ...],
            inputs_file: str | None, input_envs: tuple[str, ...], contexts: tuple[str, ...], jobs: int | None,
            progress: str, as_json: bool, no_confirm: bool, in_docker: bool, container: str | None, rebuild: bool,
            keep: bool, base_image: str | None, gpus: str | None,
            ca_bundle: Path | None, wheelhouse: Path | None, cmx_wheel: Path | None, **search: Any) -> None:
    """`search`: the TuneRequest's options by their own names (start_qps, out, tolerance, max_probes,
    probe_seconds, confirm_tries)."""
    from cmx import api
    from cmx.errors import CmxError

    text = join_query(query)
    state = app(ctx)
    engine = container_of(in_docker, container)
    docker = docker_options_of(base_image=base_image, gpus=gpus, ca_bundle=ca_bundle, wheelhouse=wheelhouse,
                               cmx_wheel=cmx_wheel, rebuild=rebuild, keep=keep, container=engine)
    if engine:
        if as_json:
            raise click.UsageError("--json does not go with --docker or --container: the tune inside prints its "
                                   "table; read its run.json (the path is printed at the end)")
        q = parse_query(query, inputs, contexts, inputs_file, input_envs)
        code = api.tune_docker(q.query, scenario=scenario.capitalize(), inputs=q.inputs, context=q.context,
                               options=docker, confirm=not no_confirm, **search, jobs=jobs,
                               argv=["cmx", *sys.argv[1:]], settings=state.settings(), emit=click.echo)
        if code != 0:
            click.echo(f"error: the tune in the container exited with status {code} (its error is above)", err=True)
            ctx.exit(code)
        return
    refuse_without_docker(rebuild, keep, base_image, gpus, ca_bundle, wheelhouse, cmx_wheel)
    try:  # a bad inputs file is answered as JSON too under --json
        q = parse_query(query, inputs, contexts, inputs_file, input_envs)
        result = api.tune(q.query, scenario=scenario.capitalize(), inputs=q.inputs, context=q.context,
                          confirm=not no_confirm, **search,
                          jobs=jobs or api.default_jobs(), settings=state.settings(),
                          reporter=api.reporter("none" if as_json else progress), argv=["cmx", *sys.argv[1:]],
                          invocation="cmx" + (f" --registry {shlex.quote(state.registry)}" if state.registry else ""))
    except CmxError as exc:
        if not as_json:
            raise
        echo_json({"ok": False, "query": text, "error": exc.render()})  # a script reads stdout either way
        ctx.exit(exc.exit_code)
    if as_json:
        echo_json(result.to_json())
        ctx.exit(0 if result.ok else 1)
    if result.error is not None:
        raise result.error
    a = result.answer
    assert a is not None, "a tune that did not fail has run its step to the end"
    click.echo(heading(a))
    for line in table(a):
        click.echo(line)
    click.echo("")
    for row in a.confirms:
        click.echo(confirm_line(row))
    if a.confirm_why:
        click.echo(confirms_line(a))
    if a.qps is None:
        raise click.ClickException(no_target(a))
    click.echo(f"{a.input} = {a.qps:g}" + ("" if a.confirmed else "  (NOT confirmed: --no-confirm)"))
    click.echo(f"inputs file: {a.tuned_file}")
    use = scenario_query(text, a.scenario)
    click.echo(f"  use it: cmx run {shlex.quote(use)} --inputs-file {shlex.quote(str(a.tuned_file))}")
    click.echo(f"record: {result.run_dir}/run.json; probes' logs: {a.tune_dir}")
    click.echo(f"results (the confirm run, the probes in cmx_tune.json): {a.results_dir}")
    click.echo(f"  report: cmx report {shlex.quote(a.results_dir)}")


def heading(a: TuneAnswer) -> str:
    against = (f"TTFT p99 < {a.limits.ttft_p99_ms:g} ms, TPOT p99 < {a.limits.tpot_p99_ms:g} ms"
               if a.limits else "no latency limits: the target is the measured throughput")
    length = "the _short profile (probes as long as the confirm run)" if a.short else "the round's full length"
    return (f"tune {a.benchmark} {a.scenario} ({against}); confirm at {length}; engine started once in "
            f"{a.engine_start_s:.0f} s, {len(a.probes)} probe(s) and {len(a.confirms)} confirm run(s) in "
            f"{a.seconds:.0f} s")


HEADER = ("probe", "target qps", "LoadGen", "early stop", "TTFT p99 ms", "TPOT p99 ms", "completed/s", "seconds",
          "verdict")


def table(a: TuneAnswer) -> list[str]:
    rows = [HEADER]
    for n, p in enumerate(a.probes, start=1):
        verdict = "pass" if p.passed else f"FAIL: {p.reason}" if p.reason else "FAIL"
        rows.append((str(n), f"{p.qps:g}", p.validity or "-", _yes(p.early_stopping_met),
                     _num(p.ttft_p99_ms, 0), _num(p.tpot_p99_ms, 1), _num(p.completed_qps, 1),
                     f"{p.seconds:.1f}", verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    return ["  ".join(c.rjust(w) if 0 < i < len(widths) and i != 2 else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths, strict=False))) + "  " + r[-1] for r in rows]


def confirm_line(c: Confirm) -> str:
    where = "on the probes' engine" if c.same_engine else "in a fresh harness process"
    head = f"confirm at {c.qps:g}/s ({where}, {c.seconds:.1f} s): {c.validity or 'no result'}"
    if c.ttft_p99_ms is not None:
        head += f", TTFT p99 {c.ttft_p99_ms:.0f} ms, TPOT p99 {c.tpot_p99_ms:.1f} ms"
    if c.samples_per_second is not None:
        head += f", {c.samples_per_second:.1f} samples/s"
    return head + ("" if c.ok else "; FAILED: " + "; ".join(c.problems))


def confirms_line(a: TuneAnswer) -> str:
    """How many confirm runs it took, at which rates, and why they stopped."""
    rates = ", ".join(f"{q:g}" for q in a.confirm_rates)
    return f"{a.confirm_count} confirm run(s), at {rates}/s: {a.confirm_why}"


def no_target(a: TuneAnswer) -> str:
    """Why a tune wrote no target: no probe passed, or no confirm run did down to where they stopped."""
    found = a.found_qps
    why = ("no probe passed" if found is None else
           f"the probes passed up to {found:g}, but no confirm run did: {a.confirm_why or 'none ran'}")
    return (f"no target QPS for {a.scenario}: {why} (logs in {a.tune_dir}; the probes drawn: "
            f"cmx report {shlex.quote(a.results_dir)})")


def scenario_query(query: str, scenario: str) -> str:
    """The query with the tuned scenario's variation, as `cmx run` needs it to run that scenario."""
    words = [w for w in query.split() if w not in ("_offline", "_server", "_interactive", "_all-scenarios")]
    return " ".join([*words, f"_{scenario.lower()}"])


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO"


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
