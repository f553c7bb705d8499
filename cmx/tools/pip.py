"""Check a Python package in the interpreter that will use it; install it with pip only when allowed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.errors import CommandFailed, StepError

if TYPE_CHECKING:
    from filelock import FileLock
    from packaging.requirements import Requirement

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]
"""Runs argv and returns the CompletedProcess with the output in `.stdout`; raises CommandFailed
(with the last lines of output in `.tail`) when the command fails. `ctx.run_cmd` is one."""

TAIL_LINES = 20
_MARK = "CMX-PIP-PROBE "

# Runs as a script in the TARGET interpreter (any Python 3.8+, stdlib only). It first drops its
# own folder from sys.path, so nothing beside it can answer for a package. The marker-environment
# and Requires-Dist are sent only when extras need them, to keep the step log short. Given the
# fingerprint of the environment where the import last worked (`known`, "" for none), it imports
# only when the environment's fingerprint differs: the interpreter, sys.path, LD_LIBRARY_PATH and
# LD_PRELOAD, and each sys.path folder's entries with their mtimes (pip adds, removes or rewrites
# one for every install), compiled-bytecode folders left out.
_PROBE = r"""
import sys
del sys.path[0]
import importlib, importlib.metadata as md, importlib.util, json, os, platform
names, import_name, with_extras, known = json.loads(sys.argv[1])
def dist(name):
    for candidate in (name, name.replace("-", "_").replace(".", "_")):
        try:
            d = md.distribution(candidate)
        except md.PackageNotFoundError:
            continue
        return {"name": d.metadata.get("Name") or name, "version": d.version, "location": str(d.locate_file("")),
                "requires": (d.requires or []) if with_extras else []}
    return None
def ver(v):
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    return s if v.releaselevel == "final" else s + v.releaselevel[0] + str(v.serial)
def fingerprint():
    import hashlib
    h = hashlib.sha256(json.dumps([os.path.realpath(sys.executable), sys.version, sys.path,
                                   os.environ.get("LD_LIBRARY_PATH"), os.environ.get("LD_PRELOAD")]).encode())
    for entry in sys.path:
        try:
            with os.scandir(entry) as it:
                listing = sorted((e.name, e.stat(follow_symlinks=False).st_mtime_ns) for e in it
                                 if e.name != "__pycache__")
        except OSError:
            listing = None
        h.update(json.dumps([entry, listing]).encode())
    return h.hexdigest()
found = {n: dist(n) for n in names}
import_error = None
environment = None
if import_name and found[names[0]] is not None:
    environment = fingerprint() if known is not None else None
    if environment is None or environment != known:
        try:
            importlib.import_module(import_name)
        except BaseException as e:
            import_error = "%s: %s" % (type(e).__name__, e)
        environment = fingerprint() if known is not None else None
env = {}
if with_extras:
    env = {"implementation_name": sys.implementation.name, "implementation_version": ver(sys.implementation.version),
           "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
           "platform_system": platform.system(), "platform_version": platform.version(),
           "python_full_version": platform.python_version(),
           "platform_python_implementation": platform.python_implementation(),
           "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}
print(@MARK@ + json.dumps({"dists": found, "import_error": import_error, "env": env, "environment": environment,
                           "pip": importlib.util.find_spec("pip") is not None, "prefix": sys.prefix}))
""".replace("@MARK@", repr(_MARK))


class BadRequirement(StepError):
    """The requirement text is not PEP 508, or uses a form cmx does not check (markers, URLs)."""


class PackageMissing(StepError):
    """The package is absent or at a version the requirement refuses, and installing was not allowed."""


class PackageNotImportable(StepError):
    """The distribution is installed at a good version, but its module does not import."""


class PipInstallFailed(CommandFailed):
    """`python -m pip install` failed, or the interpreter has no pip; `.tail` holds pip's last lines."""


@dataclass(frozen=True)
class PackageInfo:
    """An installed distribution that satisfies the requirement, in the target interpreter."""

    name: str
    version: str
    location: Path
    installed_now: bool


@dataclass(frozen=True)
class _Dist:
    name: str
    version: str
    location: str
    requires: tuple[str, ...]


@dataclass(frozen=True)
class _Probe:
    """What the target interpreter said about itself and the distributions asked for."""

    dists: dict[str, _Dist | None]
    import_error: str | None
    env: dict[str, str]
    has_pip: bool
    prefix: str  # the target's sys.prefix: one per environment, so one install lock per environment
    environment: str | None = None  # the environment's fingerprint, when an import was to be remembered


@dataclass(frozen=True)
class _Unmet:
    """One requirement the environment does not meet, with what it has instead."""

    wanted: str
    name: str
    found: str | None  # the installed version, or None when absent

    def describe(self) -> str:
        if self.found is None:
            return f"{self.name} is not installed"
        return f"{self.name} {self.found} is installed but {self.wanted} is wanted"


def run_subprocess(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The default Runner: run argv, capture stdout and stderr together, raise CommandFailed on failure."""
    shown = shlex.join(_abbreviate(a) for a in argv)
    try:
        done = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              text=True, errors="replace", check=False)
    except OSError as exc:
        raise CommandFailed(f"cannot start `{shown}`: {exc.strerror or exc}", tail=[],
                            hint=f"is {argv[0]!r} installed and on PATH?") from None
    if done.returncode != 0:
        raise CommandFailed(f"`{shown}` exited with status {done.returncode}",
                            tail=done.stdout.splitlines()[-TAIL_LINES:])
    return done


def ensure(requirement: str, *, python: str = sys.executable, install: bool, run: Runner = run_subprocess,
           extra_args: Sequence[str] = (), import_name: str | None = None,
           remember_import: bool = False) -> PackageInfo:
    """Make sure `requirement` (PEP 508: `numpy`, `numpy>=1.26`, `transformers[torch]==4.46.3`) is
    met by the interpreter `python`, the one that will run the benchmark, not the one running cmx.

    Met means: the distribution is installed at a version the specifiers accept (pre-releases
    included, as pip counts an installed one), the distributions its requested extras add are
    installed at accepted versions too (one level down; the full tree is `pip check`'s job), and,
    when `import_name` is given, `import <import_name>` succeeds in that interpreter.

    With `remember_import` (for a package whose import takes seconds, like vllm), a successful import
    is remembered for the environment (`import_memo`), and the next check imports only when the
    environment changed since (a pip install or uninstall there, another sys.path or library path).

    When it is met, nothing is installed. When not, and `install` is false, raise PackageMissing
    whose hint is the exact pip command; when `install` is true, run
    `python -m pip install --no-input EXTRA_ARGS REQUIREMENT` through `run`, then check again.
    """
    req = parse_requirement(requirement)
    text = requirement.strip()
    if shutil.which(python) is None:
        raise StepError(f"no Python interpreter at {python!r}",
                        hint="give the path (or the name on PATH) of the interpreter that will run the benchmark")
    memo = import_memo(python, import_name) if remember_import and import_name else None
    probe, unmet = _check(req, python, import_name, run, memo)
    if not unmet:
        return _info(probe, req, installed_now=False)
    if not install:
        raise PackageMissing(_describe(unmet, req, probe),
                             hint=f"run `{shlex.join(install_command(text, python, extra_args))}`, "
                                  "or re-run with --install-missing")
    with _install_lock(probe.prefix):
        probe, unmet = _check(req, python, import_name, run, memo)  # another step may have installed it meanwhile
        if not unmet:
            return _info(probe, req, installed_now=False)
        _pip_install(text, python, extra_args, probe, run)
        probe, unmet = _check(req, python, import_name, run, memo)
    if unmet:
        raise PackageMissing(f"after pip install, {_describe(unmet, req, probe)}",
                             hint="pip put it where this interpreter does not look (a --target or --user "
                                  "option in pip_args or pip's config?), or another copy shadows it; "
                                  f"see `{shlex.join([python, '-m', 'pip', 'list', '-v'])}`")
    return _info(probe, req, installed_now=True)


def installed_versions(names: Sequence[str], *, python: str = sys.executable,
                       run: Runner = run_subprocess) -> dict[str, str | None]:
    """The installed version of each distribution in the interpreter `python` (None where it is absent)."""
    probe = _probe(python, list(names), None, False, run)
    return {name: d.version if d else None for name, d in probe.dists.items()}


def parse_requirement(text: str) -> Requirement:
    """The requirement as packaging reads it; refuse what ensure() cannot check honestly."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text.strip())
    except InvalidRequirement as exc:
        raise BadRequirement(f"{text!r} is not a valid requirement: {_first_line(str(exc))}",
                             hint="write it as pip does (PEP 508): numpy, 'numpy>=1.26', "
                                  "'transformers[torch]==4.46.3'") from None
    if req.marker is not None:
        raise BadRequirement(f"{text!r} has an environment marker (`; {req.marker}`), which cmx does not evaluate",
                             hint="give the requirement without the marker, and put the condition in the "
                                  "recipe's `when:`")
    if req.url:
        raise BadRequirement(f"{text!r} is a direct reference (`name @ url`): its version cannot be checked",
                             hint="ask for NAME==VERSION and point pip at the file's folder "
                                  "(pip args `--find-links DIR`) or at an index (`--index-url URL`)")
    return req


def install_command(requirement: str, python: str, extra_args: Sequence[str] = ()) -> list[str]:
    """The pip command a person would run to install `requirement` into `python`."""
    return [python, "-m", "pip", "install", *extra_args, requirement]


def import_memo(python: str, import_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where `ensure(remember_import=True)` keeps the fingerprint of the environment in which `import
    import_name` last worked in `python`: one small file per interpreter and module, under
    $XDG_CACHE_HOME/cmx (~/.cache/cmx), beside no cache entry (it is a fact of the machine, not an artefact)."""
    env = os.environ if environ is None else environ
    root = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")
    which = shutil.which(python) or python
    digest = hashlib.sha256(f"{os.path.realpath(which)}\0{import_name}".encode()).hexdigest()[:24]
    return root / "cmx" / "imports" / f"{import_name}-{digest}"


def _recalled(memo: Path | None) -> str | None:
    """The remembered fingerprint ("" for none yet), or None when no memo is kept."""
    if memo is None:
        return None
    try:
        return memo.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _remember(memo: Path, fingerprint: str) -> None:
    """Best effort: a memo that cannot be written only costs the next check its import."""
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_name(f"{memo.name}.{os.getpid()}.partial")
        partial.write_text(fingerprint + "\n", encoding="utf-8")
        os.replace(partial, memo)
    except OSError:
        pass


def _check(req: Requirement, python: str, import_name: str | None, run: Runner,
           memo: Path | None = None) -> tuple[_Probe, list[_Unmet]]:
    known = _recalled(memo)
    probe = _probe(python, [req.name], import_name, bool(req.extras), run, known)
    found = probe.dists[req.name]
    if found is None or not _accepts(req, found.version):
        return probe, [_Unmet(str(req), req.name, found.version if found else None)]
    extra_reqs = _extra_requirements(found, req.extras, probe.env)
    if extra_reqs:
        extra_probe = _probe(python, [r.name for r in extra_reqs], None, False, run)
        unmet = [_Unmet(_without_marker(r), r.name, d.version if d else None)
                 for r in extra_reqs
                 for d in [extra_probe.dists[r.name]] if d is None or not _accepts(r, d.version)]
        if unmet:
            return probe, unmet
    if probe.import_error is not None:
        raise PackageNotImportable(
            f"{found.name} {found.version} is installed, but `import {import_name}` fails: {probe.import_error}",
            hint=f"see the traceback with `{shlex.join([python, '-c', f'import {import_name}'])}`; to reinstall, "
                 f"run `{shlex.join([python, '-m', 'pip', 'install', '--force-reinstall', str(req)])}`")
    if memo is not None and probe.environment and probe.environment != known:
        _remember(memo, probe.environment)
    return probe, []


def _probe(python: str, names: list[str], import_name: str | None, with_extras: bool, run: Runner,
           known: str | None = None) -> _Probe:
    with tempfile.TemporaryDirectory(prefix="cmx-pip-probe-") as folder:
        script = Path(folder) / "probe.py"
        script.write_text(_PROBE, encoding="utf-8")
        done = run([python, str(script), json.dumps([names, import_name, with_extras, known])])
    lines = [ln for ln in (done.stdout or "").splitlines() if ln.startswith(_MARK)]
    if not lines:
        raise StepError(f"{python} did not answer the package probe",
                        hint="is it a Python 3.8+ interpreter? see the step log for what it printed")
    data: dict[str, Any] = json.loads(lines[-1][len(_MARK):])
    dists = {name: _Dist(d["name"], d["version"], d["location"], tuple(d["requires"])) if d else None
             for name, d in data["dists"].items()}
    return _Probe(dists, data["import_error"], data["env"], data["pip"], data["prefix"], data.get("environment"))


def _accepts(req: Requirement, version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:  # a legacy version string: only an unconstrained requirement accepts it
        return not req.specifier


def _extra_requirements(dist: _Dist, extras: set[str], env: dict[str, str]) -> list[Requirement]:
    """The Requires-Dist entries that the requested extras add (evaluated in the target's environment)."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[Requirement] = []
    for line in dist.requires if extras else ():
        try:
            r = Requirement(line)
        except InvalidRequirement:
            continue  # a malformed line in someone else's metadata: pip would not act on it either
        if r.marker is None or r.marker.evaluate({**env, "extra": ""}):
            continue  # a base dependency, not one an extra adds
        if any(r.marker.evaluate({**env, "extra": e}) for e in extras):
            out.append(r)
    return out


def _without_marker(req: Requirement) -> str:
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _describe(unmet: list[_Unmet], req: Requirement, probe: _Probe) -> str:
    """'numpy 1.26.4 is installed but numpy>=2 is wanted', or what the requested extras lack."""
    found = probe.dists[req.name]
    if found is None or unmet[0].name == req.name:
        return unmet[0].describe()
    extras = ",".join(sorted(req.extras))
    return (f"{found.name} {found.version} is installed, but its extras [{extras}] need more: "
            + "; ".join(u.describe() for u in unmet))


def install_to_folder(requirement: str, folder: Path, *, python: str = sys.executable,
                      run: Runner = run_subprocess) -> None:
    """`python -m pip install --no-deps --target FOLDER REQUIREMENT`: the distribution alone, built for `python`,
    into a folder of its own (an artefact to put first on sys.path), never into an environment. pip's failure is
    a PipInstallFailed whose `.tail` holds pip's last lines."""
    text = requirement.strip()
    argv = [python, "-m", "pip", "install", "--no-input", "--no-deps", "--target", str(folder), text]
    try:
        run(argv)
    except CommandFailed as exc:
        raise PipInstallFailed(f"pip could not install {text!r} into {folder}: {exc.message}", tail=exc.tail,
                               hint=f"pip's last lines say why; after fixing it, `{shlex.join(argv)}` is the "
                                    "command") from None


def read_pins(requirements: Path) -> dict[str, str]:
    """Each `name==version` of a pip requirements file, by name: the pinned set a `make_venv` environment must hold.

    Comments, option lines (`--index-url ...`) and each line's `--hash` options are set aside, as pip reads them;
    a requirement that is not one exact `==` pin (a range, a wildcard, a URL, a marker) is refused, since the set
    would not say what the environment holds."""
    try:
        text = Path(requirements).read_text(encoding="utf-8")
    except OSError as exc:
        raise StepError(f"cannot read the pinned set {requirements}: {exc.strerror or exc}",
                        hint="give the path of a pip requirements file (--input requirements=...)") from None
    pins: dict[str, str] = {}
    for number, line in _logical_lines(text):
        spec = re.split(r"\s--hash", line, maxsplit=1)[0].strip()
        if not spec or spec.startswith("-"):
            continue
        req = parse_requirement(spec)
        exact = [s for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if len(exact) != 1 or len(req.specifier) != 1:
            raise BadRequirement(f"{requirements}:{number}: {spec!r} is not pinned to one version",
                                 hint="write every requirement of the set as NAME==VERSION")
        pins[req.name] = exact[0].version
    if not pins:
        raise BadRequirement(f"{requirements} pins no package", hint="list the set as NAME==VERSION lines")
    return pins


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """The requirements file's lines as pip joins them (a trailing backslash continues a line), comments dropped,
    each with the number of its first physical line."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw)  # pip's comment rule
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, (pending + line).strip()))
        pending = ""
    if pending:
        out.append((start, pending.strip()))
    return out


def make_venv(folder: Path, requirements: Path, *, python: str, run: Runner = run_subprocess,
              extra_args: Sequence[str] = (), site_after: Sequence[Path] = ()) -> dict[str, str]:
    """A virtual environment at `folder`, made by `python -m venv` from `python`, holding the pinned set
    `requirements` installed by its own pip (`pip install -r`, hash-checked where the file gives hashes), and
    checked to hold each pin; returns the pins as found installed. Nothing is installed into `python`.

    Run its interpreter as `FOLDER/bin/python` (or `-m` a module): a venv moved after it is made (a cache entry is
    built beside its final place and renamed) keeps working that way, while its console scripts keep the build
    path in their first line.

    `site_after`: folders of packages the environment also sees, after its own (a .pth file, written once pip is
    done, so pip never sees them): what it does not hold itself, it imports from there (VBench on a CPU: the
    torch of cmx's own environment, whose CPU build PyPI does not carry), while every pin it holds comes first."""
    pins = read_pins(requirements)
    try:
        run([python, "-m", "venv", str(folder)])
    except CommandFailed as exc:
        raise PipInstallFailed(f"{python} could not make a virtual environment in {folder}: {exc.message}",
                               tail=exc.tail, hint="the interpreter needs its venv and ensurepip modules "
                                                   "(Debian: apt install python3-venv)") from None
    env_python = str(folder / "bin" / "python")
    argv = [env_python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", *extra_args,
            "-r", str(requirements)]
    try:
        run(argv)
    except CommandFailed as exc:
        raise PipInstallFailed(f"pip could not install the pinned set {requirements}: {exc.message}", tail=exc.tail,
                               hint=f"pip's last lines say why; after fixing it, `{shlex.join(argv)}` is the "
                                    "command") from None
    if site_after:
        _append_sites(env_python, site_after, run)
    found = installed_versions(list(pins), python=env_python, run=run)
    wrong = [f"{name} {found[name] or '(absent)'} instead of {version}" for name, version in pins.items()
             if found[name] is None or not _accepts(parse_requirement(f"{name}=={version}"), found[name] or "")]
    if wrong:
        raise PackageMissing(f"after pip install -r {requirements}, the environment holds " + "; ".join(wrong),
                             hint="pip_args may point pip at another index, or a pin's name differs from the "
                                  "distribution's; see the step log")
    return {name: version for name, version in found.items() if version is not None}


SITE_AFTER_PTH = "zz-cmx-site-after.pth"  # named to sort last: site reads .pth files in name order


def _append_sites(env_python: str, folders: Sequence[Path], run: Runner) -> None:
    """A .pth file in the environment's site-packages naming `folders`: site appends them to sys.path after the
    environment's own packages."""
    done = run([env_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    site = Path(done.stdout.strip().splitlines()[-1])
    (site / SITE_AFTER_PTH).write_text("".join(f"{Path(f).resolve()}\n" for f in folders), encoding="utf-8")


def _install_lock(prefix: str) -> FileLock:
    """One pip at a time per environment: two pips writing one site-packages can break it. Steps of
    one run are threads and runs are processes; a file lock (flock) serialises both."""
    from filelock import FileLock

    digest = hashlib.sha256(os.path.realpath(prefix).encode()).hexdigest()[:16]
    return FileLock(os.path.join(tempfile.gettempdir(), f"cmx-pip-{digest}.lock"))


def _pip_install(text: str, python: str, extra_args: Sequence[str], probe: _Probe, run: Runner) -> None:
    shown = shlex.join(install_command(text, python, extra_args))
    if not probe.has_pip:
        raise PipInstallFailed(f"cannot install {text!r}: {python} has no pip", tail=[],
                               hint=f"run `{shlex.join([python, '-m', 'ensurepip', '--upgrade'])}`, then `{shown}`")
    argv = [python, "-m", "pip", "install", "--no-input", *extra_args, text]
    try:
        run(argv)
    except CommandFailed as exc:
        raise PipInstallFailed(f"pip could not install {text!r} into {python}: {exc.message}", tail=exc.tail,
                               hint=f"pip's last lines say why; after fixing it, `{shown}` is the command") from None


def _info(probe: _Probe, req: Requirement, *, installed_now: bool) -> PackageInfo:
    found = probe.dists[req.name]
    assert found is not None  # _check returned no unmet requirement
    return PackageInfo(found.name, found.version, Path(found.location), installed_now)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _abbreviate(arg: str, limit: int = 60) -> str:
    first = arg.split("\n", 1)[0]
    return arg if len(arg) <= limit and first == arg else first[:limit].rstrip() + "…"
