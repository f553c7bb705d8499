"""The `cmx` command line. `main` is the console entry point."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    code = _fast_path(args)
    if code is None:
        from cmx.cli.app import run_cli

        code = run_cli(args)
    sys.exit(code)


def _fast_path(args: list[str]) -> int | None:
    """Answer the commands people type most often without importing click (~35 ms, more than
    the rest of any of them): `cmx --help`, `cmx find WORDS [--json]`, and a `cmx run` whose
    answer is all in the cache (cmx.execute.memo). Anything else, an option, or an error, returns
    None and goes through click as usual. Tests keep the output of both paths identical."""
    if args in (["--help"], ["-h"]):
        if not _fits_pre_rendered_help():
            return None
        from cmx.cli.help_text import TOP_HELP  # rendered by click, checked by a test

        sys.stdout.write(TOP_HELP)
        return 0
    if args[:1] == ["find"] and all(a == "--json" or not a.startswith("-") for a in args[1:]):
        from cmx import api
        from cmx.cli.render import found_report
        from cmx.errors import CmxError

        words = [a for a in args[1:] if a != "--json"]
        try:
            found = api.find(" ".join(words) or None)
        except CmxError:
            return None  # click's path reports it, exactly as for any other command
        out, err, code = found_report(found, "--json" in args[1:])
        sys.stdout.write(out)
        sys.stderr.write(err)
        return code
    if args[:1] == ["run"]:
        return _cached_run(args)
    return None


_PROGRESS = ("auto", "live", "plain", "none")


def _cached_run(args: list[str]) -> int | None:
    """`cmx run WORDS [--input NAME=VALUE]... [--json] [--progress MODE] [--jobs N]`, answered from the
    memo its last fully cached run left. This is the one import below the API layer the CLI makes: the
    API itself costs more to import (typing, pathlib) than the whole answer."""
    words: list[str] = []
    inputs: dict[str, str] = {}
    progress, as_json = "auto", False
    rest = args[1:]
    while rest:
        arg = rest.pop(0)
        if arg in ("--input", "-i") and rest:
            name, sep, value = rest.pop(0).partition("=")
            if not sep or not name.strip():
                return None  # click says what is wrong with it
            inputs[name.strip()] = value
        elif arg == "--progress" and rest and rest[0] in _PROGRESS:
            progress = rest.pop(0)
        elif arg in ("--jobs", "-j") and rest and rest[0].isdigit() and int(rest[0]) >= 1:
            rest.pop(0)  # a cached run runs nothing
        elif arg == "--json":
            as_json = True
        elif arg.startswith("-"):
            return None
        else:
            words.append(arg)
    if not words:
        return None
    from cmx.execute.memo import answer

    replay = answer(" ".join(words), inputs, ["cmx", *args])
    if replay is None:
        return None
    from cmx.cli.run_output import done_lines, json_text, result_json

    if as_json:
        sys.stdout.write(json_text(result_json(ok=True, query=replay.query, root=replay.root, run_dir=replay.run_dir,
                                               seconds=replay.seconds, outputs=replay.outputs, steps=replay.steps,
                                               error=None)))
        return 0
    if progress == "plain" or (progress == "auto" and not sys.stderr.isatty()):
        sys.stderr.write(f"  cached {replay.label}\n")  # what the plain display says of a cache hit
    lines = done_lines(replay.root, replay.seconds, replay.steps, replay.run_dir, replay.outputs)
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 0


def _fits_pre_rendered_help() -> bool:
    """The text is rendered 80 columns wide, as click does on a wide terminal or a pipe."""
    import os

    if not sys.stdout.isatty():
        return "COLUMNS" not in os.environ or os.environ["COLUMNS"] == "80"
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns >= 80
    except OSError:
        return False
