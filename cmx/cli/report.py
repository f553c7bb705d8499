"""`cmx report RESULTS [OTHER] [--out FILE]`: a benchmark's results as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import click

from cmx.cli.common import app, echo_json, registry_option


@click.command("report", help="""Write a benchmark's results as one HTML page, or compare two.

RESULTS is the results_dir of an `app mlperf inference ...` run, the one a
`cmx tune` wrote (it prints it: its confirm run, and its probes), or the one a
`cmx pareto` wrote (its <system>/<benchmark>/pareto/cmx_pareto.json curves), or
a pareto folder itself. The page has
one row per LoadGen test (validity; tokens/s and samples/s; TTFT and TPOT
p50/p90/p99 against the round's limits, or the end-to-end latency for a
benchmark judged on whole answers; accuracy against the closed
division's targets; whether the run was short, tiny, compliant), plots of
every sample's token latencies and of throughput over time (from the
harness's cmx_samples.csv), and how the run was made: the command, cmx,
vLLM, torch and LoadGen versions, the system. A tune's probes are plotted
against their target QPS and listed, the chosen QPS marked. A Pareto curve
(MLPerf Endpoints v1.0 methodology) is drawn as a step function of system
tokens/s against tokens/s per user, with its label (run by cmx's client, not a
compliant Endpoints submission), its regions, C_min/C_max, power, accuracy gate
and a row per point. With OTHER, the page holds both and a table of each metric
of B against A with the ratio B/A; when both hold curves, one chart overlays them.

Each performance test is placed among the round's published MLPerf results
of its benchmark and scenario (the table `cmx results` reads) when that table
is in the cmx cache already: the page and the terminal say which table it read
(round, commit, sha256, verified or not). When it is not, nothing is fetched:
they say how to add it (`cmx results --round R` once, or --published, which
fetches it, as --summary FILE and a price do); --no-published leaves it out.
The section holds a strip chart of every published result per accelerator,
the run's accelerator highlighted and the run a star; its rank and ratio to
the best and the median of that accelerator; the rows around it and what
differs (precision, framework, nodes). --price-per-accelerator-hour P (your
price) adds what a million tokens cost on the run, and --users N
--tokens-per-user U what serving N users costs (docs/results.md).

The page needs no network to view: its plots are inline SVG drawn with
matplotlib (`pip install 'cmx-bench[report]'`), its styles in the page.

\b
    cmx report results/demo
    cmx report results/demo --out /tmp/demo.html
    cmx report results/run-a results/run-b --out compare.html
    cmx report results/pareto/my-box/llama3.1-8b/pareto
    cmx report results/demo --published --price-per-accelerator-hour 2.50
""")
@click.argument("results", type=click.Path(path_type=Path, file_okay=False))
@click.argument("other", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Where the page goes (default: RESULTS/report.html).")
@click.option("--published/--no-published", default=None,
              help="Place each performance test among the round's published results, fetching the table when "
                   "it is not cached (default: only when it is), or leave them out.")
@click.option("--round", "round_name", default="v6.1", show_default=True, metavar="ROUND",
              help="The round whose published results to use.")
@click.option("--summary", type=click.Path(path_type=Path, dir_okay=False, exists=True), metavar="FILE",
              help="A local copy of the round's summary.json or summary.csv (implies --published).")
@click.option("--mirror", metavar="URL", envvar="CMX_MLPERF_RESULTS_MIRROR",
              help="A mirror of GitHub's raw files to fetch the published table from.")
@click.option("--price-per-accelerator-hour", "price", type=float, metavar="P",
              help="Your price of one accelerator for an hour: the run's cost per million tokens "
                   "(implies --published).")
@click.option("--users", type=click.IntRange(min=1), metavar="N", help="With a price: price serving N users.")
@click.option("--tokens-per-user", type=click.FloatRange(min=0, min_open=True), metavar="U",
              help="With --users: the tokens/s each user gets.")
@click.option("--json", "as_json", is_flag=True, help="Print the page's path as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, results: Path, other: Path | None, out: Path | None, published: bool | None,
            round_name: str, summary: Path | None, mirror: str | None, price: float | None, users: int | None,
            tokens_per_user: float | None, as_json: bool) -> None:
    from cmx import api

    page = api.report(results, out, other=other, published=published, round_name=round_name, summary=summary,
                      mirror=mirror, price=price, users=users, tokens_per_user=tokens_per_user,
                      settings=app(ctx).settings(),
                      emit=None if as_json else lambda line: click.echo(line, err=True))
    if as_json:
        echo_json({"report": str(page)})
    else:
        click.echo(f"report: {page}")
