"""`cmx report RESULTS [OTHER] [--out FILE]`: a benchmark's results as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import click

from cmx.cli.common import echo_json


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

The page needs no network to view: its plots are inline SVG drawn with
matplotlib (`pip install 'cmx-bench[report]'`), its styles in the page.

\b
    cmx report results/demo
    cmx report results/demo --out /tmp/demo.html
    cmx report results/run-a results/run-b --out compare.html
    cmx report results/pareto/my-box/llama3.1-8b/pareto
""")
@click.argument("results", type=click.Path(path_type=Path, file_okay=False))
@click.argument("other", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Where the page goes (default: RESULTS/report.html).")
@click.option("--json", "as_json", is_flag=True, help="Print the page's path as JSON.")
def command(results: Path, other: Path | None, out: Path | None, as_json: bool) -> None:
    from cmx import api

    page = api.report(results, out, other=other)
    if as_json:
        echo_json({"report": str(page)})
    else:
        click.echo(f"report: {page}")
