"""`cmx results`: a round's published MLPerf Inference results, filtered, per accelerator, priced, or a run ranked
among them."""

from __future__ import annotations

from pathlib import Path

import click

from cmx.cli.common import app, echo_json, registry_option


@click.command("results", help="""List a round's published MLPerf Inference results, per accelerator, or
rank your run among them.

The table is the round's summary.json in mlcommons/inference_results_vX.Y
(every result of every submitter), fetched once by the recipe
get-mlperf-results at a pinned commit and cached; --summary FILE reads a copy
you have, --mirror URL fetches from a mirror of GitHub's raw files (or set
CMX_MLPERF_RESULTS_MIRROR), for a node with no internet.

Each row shows the system, nodes, accelerators, framework, precision, the
result and the result per accelerator (Result / total accelerators; per
socket for a CPU-only system); * marks a result inferred from another
scenario's run. --accelerator matches whole words of the submitter's name,
so MI355X finds "AMD Instinct MI355X 288GB HBM3e" and H200 finds
"NVIDIA H200-SXM-141GB" but not GH200; "8x H200" also asks 8 per node; cpu
asks for CPU-only systems. --benchmark llama2-70b finds -99 and -99.9.

--compare RESULTS_DIR ranks each performance test of a cmx results folder
among the published rows of its benchmark, scenario and accelerator model
(a CPU run: among the CPU-only rows), with the ratio to the best and the
median and what differs (precision, framework, nodes), or says there are
none. --price-per-accelerator-hour P (your price: cmx assumes none) adds
the cost per million tokens (per thousand samples) of each row and of your
run; --users N --tokens-per-user U prices serving N users at U tokens/s.
The formulas are in docs/results.md.

\b
    cmx results --round v6.1 --benchmark llama2-70b-99.9 --scenario Offline --accelerator MI355X
    cmx results --benchmark llama2-70b --accelerator H200 --division closed --json
    cmx results --compare results/demo
    cmx results --benchmark llama3.1-8b --scenario Server --accelerator H200 \\
        --price-per-accelerator-hour 3.50 --users 100 --tokens-per-user 20
    cmx results --summary ./summary.json --accelerator cpu
""")
@click.option("--round", "round_name", default="v6.1", show_default=True, metavar="ROUND",
              help="The MLPerf Inference round whose results to read (v6.1; v5.1 and v6.0 need --commit).")
@click.option("--benchmark", metavar="NAME",
              help="Keep one benchmark (MLCommons' name; a prefix finds its -99/-99.9).")
@click.option("--scenario", metavar="NAME", help="Keep one scenario: Offline, Server, Interactive, SingleStream...")
@click.option("--accelerator", metavar="NAME",
              help="Keep one accelerator (whole words of its name; cpu: no accelerator).")
@click.option("--division", metavar="NAME", help="Keep one division: closed, open, network.")
@click.option("--framework", metavar="TEXT", help="Keep rows whose framework mentions TEXT (vLLM, TensorRT, SGLang).")
@click.option("--compare", "compare", type=click.Path(path_type=Path, file_okay=False), metavar="RESULTS_DIR",
              help="Rank the runs of a cmx results folder among the published rows of their kind.")
@click.option("--price-per-accelerator-hour", "price", type=float, metavar="P",
              help="Your price of one accelerator for an hour: adds the cost per million tokens (thousand samples).")
@click.option("--users", type=click.IntRange(min=1), metavar="N", help="With a price: price serving N users.")
@click.option("--tokens-per-user", type=click.FloatRange(min=0, min_open=True), metavar="U",
              help="With --users: the tokens/s each user gets.")
@click.option("--summary", type=click.Path(path_type=Path, dir_okay=False, exists=True), metavar="FILE",
              help="A local copy of the round's summary.json or summary.csv, instead of a download.")
@click.option("--commit", metavar="SHA", help="The commit of mlcommons/inference_results_ROUND to read the table at.")
@click.option("--sha256", metavar="HEX", help="The table's expected sha256; without it the download is not verified.")
@click.option("--mirror", metavar="URL", envvar="CMX_MLPERF_RESULTS_MIRROR",
              help="A base URL serving <URL>/mlcommons/inference_results_ROUND/COMMIT/summary.json "
                   "(default: https://raw.githubusercontent.com).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, round_name: str, benchmark: str | None, scenario: str | None,
            accelerator: str | None, division: str | None, framework: str | None, compare: Path | None,
            price: float | None, users: int | None, tokens_per_user: float | None, summary: Path | None,
            commit: str | None, sha256: str | None, mirror: str | None, as_json: bool) -> None:
    from cmx import api

    found = api.results(round_name=round_name, summary=summary, commit=commit, sha256=sha256, mirror=mirror,
                        benchmark=benchmark, scenario=scenario, accelerator=accelerator, division=division,
                        framework=framework, compare=compare, price=price, users=users,
                        tokens_per_user=tokens_per_user, settings=app(ctx).settings())
    if as_json:
        echo_json(api.results_json(found))
        return
    if not found.source.verified:
        click.echo(f"note: the table's sha256 {found.source.sha256} was not checked against a pinned one "
                   f"(pin it: --sha256 {found.source.sha256})", err=True)
    click.echo(api.results_text(found), nl=False)
