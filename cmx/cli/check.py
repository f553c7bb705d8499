"""`cmx check PATH`: check an MLPerf submission tree against a round's rules."""

from __future__ import annotations

from pathlib import Path

import click

from cmx.cli.common import echo_json


@click.command("check", help="""Check an MLPerf submission tree and say what to fix.

PATH is the folder that holds the division folders (closed/, open/), made by
cmx or by anyone. cmx checks what the official MLCommons checker checks
(layout, required files, systems/*.json, measurements.json, LoadGen logs:
seeds, errors, durations, sample counts, token latencies; accuracy.txt,
truncation and hash, dataset coverage; the round's compliance tests; required scenarios) and what
the round's rules say but that checker misses (INVALID results, the
Interactive 450/40 ms limits). It prints a table of results, then one line per
problem: path, [rule], what was found, what to do.

Without --round, the round is the one whose RNG seeds the tree's LoadGen
logs carry (each round's mlperf.conf has its own), else the newest cmx knows.
Under v6.1, a scenario folder without LoadGen logs is read as a result
of MLCommons' endpoint client ("Loadgen++": config.yaml,
performance/result_summary.json, accuracy/accuracy_results.json), as the
official checker reads it, and stricter where the rules ask more (measured
duration, failed samples, the Offline query size); docs/submission.md lists
its rules.

Exit status: 0 when nothing would fail, 1 when a problem would (warnings
do not count). With --expect, 0 when the rules broken are exactly the ones
listed (how CI checks a smoke run's tree: `make demo` expects the three rules
a _short run breaks by design), 1 otherwise; every problem is still printed.

\b
    cmx check submission/
    cmx check submission/ --round v6.0
    cmx check submission/ --json
    cmx check submission/ --csv summary.csv
    cmx check demo/ --expect loadgen.min-duration,loadgen.sample-count
""")
@click.argument("path", type=click.Path(path_type=Path, file_okay=False))
@click.option("--round", "round_name", default=None, metavar="ROUND",
              help="The MLPerf Inference round whose rules apply (v5.1, v6.0, ...; default: the round of the tree's "
                   "logs, else the newest cmx knows).")
@click.option("--json", "as_json", is_flag=True, help="Print the results and problems as JSON.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Also write the official checker's summary.csv columns to FILE.")
@click.option("--expect", "expected", multiple=True, metavar="RULES",
              help="Comma-separated rule ids the tree is known to break; exit 0 only if it breaks exactly these.")
@click.pass_context
def command(ctx: click.Context, path: Path, round_name: str | None, as_json: bool, csv_path: Path | None,
            expected: tuple[str, ...]) -> None:
    from cmx import api

    report = api.check(path, round_name=round_name)
    if csv_path is not None:
        api.write_check_csv(report, csv_path)
    ok, verdict = report.ok, None
    if expected:
        ok, verdict = api.check_expectation(report, {r.strip() for item in expected for r in item.split(",")
                                                     if r.strip()})
    if as_json:
        echo_json({**report.to_json(), **({"expected": ok, "expectation": verdict} if expected else {})})
    else:
        click.echo(api.check_text(report))
        if verdict:
            click.echo(verdict)
    if not ok:
        ctx.exit(1)
