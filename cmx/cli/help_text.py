"""The pre-rendered `cmx --help` (see cmx.cli.main). Regenerate: python -m cmx.cli.help_text --write"""

TOP_HELP = (
    'Usage: cmx [OPTIONS] COMMAND [ARGS]...\n'
    '\n'
    '  cmx: reproducible ML benchmarks from declarative recipes.\n'
    '\n'
    '  A query names recipes by tags; `_x` picks variation x; `-tag` excludes:\n'
    '\n'
    '      cmx find get python\n'
    '      cmx plan "app mlperf inference llama2 _rocm" -i target_qps_offline=40\n'
    '      cmx run  "detect system" --json\n'
    '\n'
    "  Every step's output is cached under a key hashed from what made it (recipe\n"
    '  files, variations, inputs, context, deps), so a changed input never reuses a\n'
    '  stale entry. Settings: --registry / CMX_REGISTRY, CMX_CACHE, CMX_RUNS,\n'
    '  CMX_HOME.\n'
    '\n'
    'Options:\n'
    '  --registry FILE  Registry file listing recipe sources (default: the cmx\n'
    "                   home's registry.yaml, else the one cmx ships; `cmx registry\n"
    '                   ls` names it).\n'
    '  --debug          Show Python tracebacks for errors.\n'
    '  --version        Print the cmx version and exit.\n'
    '  -h, --help       Show this message and exit.\n'
    '\n'
    'Commands:\n'
    '  run       Resolve a query and run it: every step, in order, cached by\n'
    '            content.\n'
    '  plan      Show what a query would run, without running anything.\n'
    '  lock      Pin every step of a plan and its packages into a lockfile (replay:\n'
    '            run --locked).\n'
    '  find      List recipes whose tags match a query.\n'
    '  show      Describe one recipe: tags, inputs, variations, deps, outputs.\n'
    "  docker    Show the Dockerfile and the container's run command of `run\n"
    '            --docker`.\n'
    '  podman    The same for `run --container podman`: its Dockerfile and `podman\n'
    '            run` command.\n'
    "  deploy    Render (and apply) Kubernetes manifests serving the plan's model,\n"
    '            and a benchmark Job.\n'
    '  jobs      List the Slurm jobs cmx submitted: state and result folders.\n'
    '  sweep     Run a query once per value of one input and tabulate the results.\n'
    '  tune      Find the highest target QPS that stays VALID (Offline: the\n'
    '            throughput) and write it.\n'
    '  pareto    Draw an MLPerf Endpoints v1.0 Pareto curve of a served model\n'
    "            (cmx's client).\n"
    '  check     Check an MLPerf submission tree and say what to fix.\n'
    "  report    Write a benchmark's results as one HTML page, or compare two.\n"
    "  results   List a round's published MLPerf results per accelerator, or rank a\n"
    '            run among them.\n'
    '  cache     Inspect and clean the content-addressed cache.\n'
    '  registry  List, add and pin recipe sources (the built-in recipes, folders,\n'
    '            git repositories).\n'
)


def source(text: str) -> str:
    """`text` as this module's TOP_HELP assignment: one literal a line of help, to stay within the line length."""
    lines = "".join(f"    {line!r}\n" for line in text.splitlines(keepends=True))
    return f"TOP_HELP = (\n{lines})\n"


def render() -> str:
    """What click prints for `cmx --help` at 80 columns (click wraps at width - 2)."""
    import click

    from cmx.cli.app import cli

    with click.Context(cli, info_name="cmx", terminal_width=78, **cli.context_settings) as ctx:
        return cli.get_help(ctx) + "\n"


if __name__ == "__main__":
    import re
    import sys
    from pathlib import Path

    if sys.argv[1:] != ["--write"]:
        sys.stdout.write(render())
        raise SystemExit(0)
    path = Path(__file__)
    text = path.read_text(encoding="utf-8")
    new = re.sub(r'TOP_HELP = .*?\n\n\n', lambda _: source(render()) + "\n\n", text, count=1, flags=re.S)
    path.write_text(new, encoding="utf-8")
    print(f"wrote {path}")
