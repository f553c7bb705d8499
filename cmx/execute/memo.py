"""The memo of a fully cached run: the same `cmx run` answered again without resolving, while
nothing it depended on has changed.

A run whose root step came from the cache leaves a memo, keyed by its request (the query, the
--input pairs, the working folder, the home). The memo lists what the answer depended on:
- the stamps (mtime, size) of the registry file, of every recipe.yaml, of every file of the
  plan's recipes, of the recipe folders, and of cmx's own resolution code;
- the environment variables that resolution read, each fingerprint's facts (programs on PATH,
  files, the machine), and each path input's (a folder's entries, one level down);
- the stamp of the root's cache entry.

It also holds the answer itself: the plan and the step results run.json records.

The next identical command (cmx.cli.main) checks all of it again: about 1,100 stat calls for
1,000 recipes, and each fingerprint and path input taken anew. When all of it matches, it writes
the run record and prints the answer that resolving would have given. This costs a few ms, where
importing and resolving costs ~90 ms. Any difference, or anything the memo cannot vouch for, falls through to
the full path, which writes a fresh memo.

What is never memoised: a run whose plan holds a secret or a URL with credentials (the memo is a file in the
cache), a run in a `cmx run --docker` container, and a run given --context, --inputs-file, --registry or --locked.

The answering half imports os, sys, marshal, zlib, time and _json (and cmx's home, rundir and
fingerprint, which import no more): typing, pathlib, json and re each cost more than the answer.
"""

from __future__ import annotations

import marshal
import os
import sys
import time
import zlib

from cmx import __version__
from cmx.home import locations

TYPE_CHECKING = False  # typing itself costs ~8 ms to import; type checkers read this name as typing's
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cmx.cache.store import Store
    from cmx.execute.result import RunResult
    from cmx.registry.index import RecipeIndex
    from cmx.resolve.read_environ import ReadEnviron

    # a fingerprint's (files, programs, env, machine), as `remember` records it for fingerprint.facts
    _Fields = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], bool]

FORMAT = 1
# cmx's own code that decides what a query resolves to, relative to the package; a change to any of it
# (an editable install being worked on) retires every memo
_CODE = ("", "recipe", "resolve", "registry", "cache", "execute")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CONTAINER_ENV = "CMX_CONTAINER_"  # set by `cmx run --docker` in its container (cmx.container)


class Replay:
    """A cached run answered from its memo: what `cmx run` prints, and the record it wrote."""

    __slots__ = ("label", "outputs", "query", "root", "run_dir", "seconds", "steps")

    def __init__(self, query: str, root: str, label: str, run_dir: str, seconds: float,
                 outputs: dict[str, Any], steps: dict[str, dict[str, Any]]) -> None:
        self.query = query
        self.root = root  # the root step's id
        self.label = label  # the root step as the plain progress display names it
        self.run_dir = run_dir
        self.seconds = seconds
        self.outputs = outputs
        self.steps = steps


# --- answering (the start-up path) ------------------------------------------------------------

def request(query: str, inputs: Mapping[str, str], registry: str, cache: str, runs: str) -> tuple[object, ...]:
    """What an answer may be reused for: the same words, --input pairs in order, folder and home."""
    # and the same cmx, Python and kernel, which run.json names
    return (query, tuple(inputs.items()), os.getcwd(), registry, cache, runs, __version__, sys.version,
            os.uname().release)


def answer(query: str, inputs: Mapping[str, str], argv: list[str],
           environ: Mapping[str, str] | None = None) -> Replay | None:
    """The cached run of `query` with `inputs`, replayed from its memo with a fresh run record; None when
    there is no memo or anything it depends on changed (then resolve and run as usual)."""
    started = time.monotonic()
    env = os.environ if environ is None else environ
    if any(name.startswith(_CONTAINER_ENV) for name in env):
        return None  # run.json records the container's facts: the full path writes them
    registry, cache, runs = locations(None, env)
    req = request(query, inputs, registry, cache, runs)
    memo = _read(_memo_path(cache, req))
    if memo is None or memo.get("format") != FORMAT or memo.get("request") != req:
        return None
    if not _unchanged(memo["stamps"]) or not _same_environ(memo["environ"], env) \
            or not _same_facts(memo["fingerprints"], memo["paths"], env):
        return None
    from cmx.execute.rundir import new_run_dir

    run_dir = ""
    try:
        run_dir, begun = new_run_dir(runs, memo["root_name"])
        record = _fill(memo["record"], argv=argv, started=begun, seconds=round(time.monotonic() - started, 3))
        tmp = os.path.join(run_dir, "run.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(record)
        os.replace(tmp, os.path.join(run_dir, "run.json"))
    except OSError:  # the full path says what is wrong with the runs folder
        if run_dir:
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
        return None
    return Replay(memo["query"], memo["root"], memo["label"], run_dir, time.monotonic() - started,
                  memo["outputs"], memo["steps"])


def _unchanged(stamps: list[tuple[str, int, int]]) -> bool:
    stat = os.stat
    for path, mtime, size in stamps:
        try:
            st = stat(path)
        except OSError:
            if size != -1:
                return False
            continue
        if st.st_mtime_ns != mtime or st.st_size != size:
            return False
    return True


def _same_environ(read: dict[str, str | None], env: Mapping[str, str]) -> bool:
    return all(env.get(name) == value for name, value in read.items())


def _same_facts(fingerprints: list[tuple[_Fields, dict[str, Any]]], paths: list[tuple[str, list[Any]]],
                env: Mapping[str, str]) -> bool:
    """Each fingerprint, and each path input (a folder with its entries), taken again: as keys take them."""
    if not fingerprints and not paths:
        return True
    from cmx.resolve.fingerprint import facts, path_facts

    return all(facts(*fields, env) == taken for fields, taken in fingerprints) and \
        all(path_facts(path) == taken for path, taken in paths)


# run.json is kept in the memo as text, with these in place of what differs from run to run: json.dumps
# with an indent runs its pure-Python encoder (~4 ms for a 25-step plan), and importing json costs ~8 ms
_BLANKS = {"argv": "\0cmx-memo:argv\0", "started": "\0cmx-memo:started\0", "seconds": "\0cmx-memo:seconds\0"}


def _fill(template: str, *, argv: list[str], started: str, seconds: float) -> str:
    """run.json from its template: the values as json.dumps(record, indent=2) would write them."""
    try:
        from _json import encode_basestring_ascii as text  # what json.dumps uses (ensure_ascii)
    except ImportError:  # an interpreter without json's C speed-ups
        from json import dumps as text
    items = ",\n    ".join(text(arg) for arg in argv)
    values = {"argv": f"[\n    {items}\n  ]" if argv else "[]",  # a list one level down
              "started": text(started), "seconds": repr(seconds)}
    for name, blank in _BLANKS.items():
        template = template.replace(text(blank), values[name])
    return template


def _record_template(plan: dict[str, Any], results: dict[str, Any]) -> str | None:
    """The run.json of a replayed run (as RunRecord writes it) as text, with a blank for each value `_fill`
    puts in; None when a blank would be ambiguous (a recorded value holds one)."""
    import json

    from cmx.execute.rundir import header

    data = {**header(_BLANKS["argv"], _BLANKS["started"], None),  # type: ignore[arg-type]
            "plan": plan, "status": "ok", "seconds": _BLANKS["seconds"], "error": None, "results": results}
    text = json.dumps(data, indent=2)
    return text if all(text.count(json.dumps(blank)) == 1 for blank in _BLANKS.values()) else None


def _memo_path(cache: str, req: tuple[object, ...]) -> str:
    # crc32 only names the file: the request inside is compared whole
    return os.path.join(cache, ".index", "memo", f"{zlib.crc32(repr(req).encode()):08x}.marshal")


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            data = marshal.loads(f.read())  # marshal.load(f) reads in small pieces: ~10 times slower
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


# --- remembering (after a full run) -----------------------------------------------------------

def remember(query: str, inputs: Mapping[str, Any], result: RunResult, index: RecipeIndex, store: Store,
             environ: ReadEnviron) -> bool:
    """Write the memo of `result` when it can be answered again from one: the run succeeded, its root
    came from the cache, its inputs are --input text, no secret is in the plan, resolution did not list
    the environment, and it ran outside a container. True when a memo was written."""
    from cmx.secrets import Secret, public_value

    plan = result.plan
    root = plan.root_step
    env = environ.source
    if result.error is not None or result.steps[plan.root].status != "cached" or environ.listed \
            or not all(isinstance(v, str) for v in inputs.values()) \
            or any(name.startswith(_CONTAINER_ENV) for name in env) \
            or any(isinstance(v, Secret) for step in plan for v in step.inputs.values()) \
            or any(isinstance(v, str) and public_value(v) != v  # a URL's credentials: as secret as a Secret
                   for v in (*inputs.values(), *(v for step in plan for v in step.inputs.values()))):
        return False
    registry, cache, runs = locations(None, env)
    if (str(index.registry), str(store.root)) != (registry, cache):
        return False  # the run was given other settings than a command line can repeat
    from cmx.cache.store import META
    from cmx.execute.result import recorded_results
    from cmx.recipe.types import to_json
    from cmx.resolve.fingerprint import facts, path_facts

    steps = result.steps_json()
    record = _record_template(plan.to_json(), recorded_results(steps))
    if record is None:
        return False
    entry_meta = os.path.join(str(store.entry_dir(root.name, root.key)), META)
    fingerprints = []
    for step in plan:
        fp = step.recipe.cache.fingerprint
        if fp is not None:
            fields = (tuple(fp.files), tuple(fp.programs), tuple(fp.env), bool(fp.machine))
            fingerprints.append((fields, facts(*fields, environ)))
    paths = sorted({str(value) for step in plan for name, value in step.inputs.items()
                    if value is not None and step.recipe.inputs[name].type == "path"})
    req = request(query, inputs, registry, cache, runs)
    memo = {
        "format": FORMAT, "request": req,
        # what the answer depends on
        "stamps": index.stamps({step.name for step in plan}) + _code_stamps() + [_stamp(entry_meta)],
        "environ": dict(environ.read), "fingerprints": fingerprints,
        "paths": [(path, path_facts(path)) for path in paths],
        # the answer
        "query": plan.query, "root": plan.root, "root_name": root.name,
        "label": " ".join([root.id, *(f"_{v}" for v in root.variations)]),  # as the plain display names it
        "record": record, "outputs": to_json(result.outputs), "steps": steps,
    }
    try:
        data = marshal.dumps(memo)
    except ValueError:  # an output marshal cannot hold: no memo, the full path stays right
        return False
    path = _memo_path(cache, req)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        return False  # a read-only cache still works, only slower
    return True


def _stamp(path: str) -> tuple[str, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (path, 0, -1)
    return (path, st.st_mtime_ns, st.st_size)


def _code_stamps() -> list[tuple[str, int, int]]:
    out = []
    for sub in _CODE:
        folder = os.path.join(_PACKAGE, sub) if sub else _PACKAGE
        out.append(_stamp(folder))  # a module added or removed
        with os.scandir(folder) as it:
            out += [_stamp(e.path) for e in sorted(it, key=lambda e: e.name) if e.name.endswith(".py")]
    return out
