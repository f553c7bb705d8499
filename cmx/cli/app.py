"""The click application: a group whose subcommands are imported only when used."""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType

import click

# name -> (module under cmx.cli, one-line help); the module defines `command`
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "Resolve a query and run it: every step, in order, cached by content."),
    "plan": ("plan", "Show what a query would run, without running anything."),
    "lock": ("lock", "Pin every step of a plan and its packages into a lockfile (replay: run --locked)."),
    "find": ("find", "List recipes whose tags match a query."),
    "show": ("show", "Describe one recipe: tags, inputs, variations, deps, outputs."),
    "docker": ("docker", "Show the Dockerfile and the container's run command of `run --docker`."),
    "podman": ("podman", "The same for `run --container podman`: its Dockerfile and `podman run` command."),
    "deploy": ("deploy", "Render (and apply) Kubernetes manifests serving the plan's model, and a benchmark Job."),
    "jobs": ("jobs", "List the Slurm jobs cmx submitted: state and result folders."),
    "sweep": ("sweep", "Run a query once per value of one input and tabulate the results."),
    "tune": ("tune", "Find the highest target QPS that stays VALID (Offline: the throughput) and write it."),
    "pareto": ("pareto", "Draw an MLPerf Endpoints v1.0 Pareto curve of a served model (cmx's client)."),
    "check": ("check", "Check an MLPerf submission tree and say what to fix."),
    "report": ("report", "Write a benchmark's results as one HTML page, or compare two."),
    "results": ("results", "List a round's published MLPerf results per accelerator, or rank a run among them."),
    "cache": ("cache", "Inspect and clean the content-addressed cache."),
    "registry": ("registry", "List, add and pin recipe sources (the built-in recipes, folders, git repositories)."),
}

HELP = """cmx: reproducible ML benchmarks from declarative recipes.

A query names recipes by tags; `_x` picks variation x; `-tag` excludes:

\b
    cmx find get python
    cmx plan "app mlperf inference llama2 _rocm" -i target_qps_offline=40
    cmx run  "detect system" --json

Every step's output is cached under a key hashed from what made it (recipe
files, variations, inputs, context, deps), so a changed input never reuses a
stale entry. Settings: --registry / CMX_REGISTRY, CMX_CACHE, CMX_RUNS, CMX_HOME.
"""


class LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (or its help is shown)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"cmx.cli.{COMMANDS[name][0]}")
        return module.command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        """A mistyped verb gets click's did-you-mean, as a group's own subcommands do (`cmx cache lss`)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=2)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(repr(c) for c in close)}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the short help comes from the table, so `cmx --help` imports no subcommand
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from cmx import __version__

        click.echo(f"cmx {__version__} (python {sys.version.split()[0]})")
        ctx.exit()


@click.group(cls=LazyGroup, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--registry", metavar="FILE", envvar="CMX_REGISTRY",
              help="Registry file listing recipe sources (default: the cmx home's registry.yaml, else the one "
                   "cmx ships; `cmx registry ls` names it).")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Print the cmx version and exit.")
@click.pass_context
def cli(ctx: click.Context, registry: str | None, debug: bool) -> None:
    from cmx.cli.common import AppState

    ctx.obj = AppState(registry=registry, debug=debug)


class Interrupts:
    """SIGINT (Ctrl-C) and SIGTERM stop cmx the one way: a KeyboardInterrupt in the main thread, where a run
    stops every process its steps started (cmx.tools.procs) and records "interrupted". Only the first one: a
    signal that comes while cmx stops its children is ignored, so that the stopping (a few seconds at most:
    SIGKILL follows SIGTERM) is not cut short and leaves nothing behind. A signal cmx was started ignoring
    (`nohup`, a background job's SIGINT) stays ignored. The handlers are process-wide, so this object is made
    once, by `run_cli`, and `installed()` puts the previous handlers back."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupts]:
        before = {sig: signal.getsignal(sig) for sig in self.SIGNALS}
        try:
            for sig, handler in before.items():
                if handler is not signal.SIG_IGN:
                    signal.signal(sig, self)
        except ValueError:  # not the main thread (cmx called from a thread): only the main thread may set them
            before = {}
        try:
            yield self
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _exit_interrupted(signum: int | None) -> None:
    """Stop now, with 128 + the signal's number (130 for Ctrl-C). The run has stopped the processes its steps
    started and recorded "interrupted"; a step still running in a worker thread cannot be stopped, and the
    normal interpreter exit would wait for it."""
    import os

    sig = signum or signal.SIGINT
    click.echo("interrupted" if sig == signal.SIGINT else f"interrupted ({signal.Signals(sig).name})", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + sig)


def run_cli(args: list[str]) -> int:
    """Run the click app; errors are caught here, once, and printed as sentences."""
    debug = "--debug" in args
    with Interrupts().installed() as interrupts:
        try:
            code = cli.main(args=args, prog_name="cmx", standalone_mode=False)
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except click.ClickException as exc:
            exc.show()
            code = exc.exit_code
        except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            _exit_interrupted(interrupts.signum)
        except Exception as exc:  # noqa: BLE001 - the one place errors are turned into messages
            from cmx.cli.errors import report

            code = report(exc, debug)
    return code or 0
