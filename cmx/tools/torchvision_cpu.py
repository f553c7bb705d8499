"""torchvision's Python code for a CPU build of torch, without its compiled ops: what vLLM's Qwen3-VL image processor
imports, on a machine whose only torchvision wheel is a CUDA build.

PyPI's Linux torchvision wheels are CUDA builds: their compiled ops (`_C.so`, `image.so`) need CUDA's libraries and
cannot load against a CPU torch, and the CPU wheel lives on PyTorch's own index, which a machine may not reach.
torchvision works without its compiled ops (`torchvision.extension._has_ops()` is then False and it registers no
meta kernels), except that its import registers fake kernels for `torchvision::nms` and `torchvision::qnms`
unconditionally, which fails when no op of that name exists ("operator torchvision::nms does not exist").

`install(dest, version)` puts the wheel's Python package into `dest` (`pip install --target`, no dependencies),
removes the compiled ops and the CUDA libraries they link, and writes a `sitecustomize.py` that defines those two
ops' schemas, with no kernel, just before torchvision is first imported (so calling them fails, as torchvision's
ops do without `_C`), then runs the sitecustomize it shadows, if any. Nothing else is changed. The folder goes on
the PYTHONPATH of the processes that need it (the `vllm serve` cmx starts for a vision model on a CPU), never into
an environment: every other process keeps seeing no torchvision. Image decoding by torchvision itself
(`torchvision.io`) is among what is missing; vLLM decodes images with Pillow.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

from cmx.errors import CmxError

# torchvision's compiled parts: its ops and image codecs, and the libraries they link (CUDA's among them)
COMPILED = ("_C*.so", "image*.so", "*.pyd")
SITECUSTOMIZE = '''"""cmx: torchvision without its compiled ops, for a CPU torch (cmx.tools.torchvision_cpu wrote
this; see docs/benchmarks/qwen3-vl.md). Just before torchvision is first imported, the schemas of torchvision::nms and
torchvision::qnms are defined, with no kernel: its import registers fake kernels for those two ops, which needs
them to exist. Then the sitecustomize this one shadows, if any, runs."""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_KEEP = []


class _TorchvisionOpSchemas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch

            lib = torch.library.Library("torchvision", "FRAGMENT")
            for schema in _SCHEMAS:
                lib.define(schema)
            _KEEP.append(lib)
        return None


sys.meta_path.insert(0, _TorchvisionOpSchemas())

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
'''


class TorchvisionError(CmxError):
    """torchvision could not be put in place for a CPU torch."""


def matching_version(torch_version: str) -> str:
    """The torchvision release built for `torch_version`: 0.(minor + 15).patch for torch 2.x (0.28.0 for 2.13.0,
    0.23.0 for 2.8.0), as torchvision's releases pair with torch's."""
    match = re.fullmatch(r"2\.(\d+)\.(\d+)(?:[+.].*)?", torch_version)
    if match is None:
        raise TorchvisionError(f"no torchvision release is known to pair with torch {torch_version}",
                               hint="give --input version=X.Y.Z, the torchvision built for this torch")
    return f"0.{int(match[1]) + 15}.{match[2]}"


def installed_torch(python: str = sys.executable) -> str:
    """The version of torch in the interpreter `python`, read from its metadata (torch is not imported)."""
    if python == sys.executable:
        try:
            return importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            found = None
    else:
        done = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                              capture_output=True, text=True, check=False)
        found = done.stdout.strip() if done.returncode == 0 else None
        if found:
            return found
    raise TorchvisionError(f"torch is not installed in {python}",
                           hint="install vLLM's CPU build first (get vllm _cpu)")


def install(dest: Path, version: str, *, python: str = sys.executable, log: logging.Logger | None = None) -> Path:
    """torchvision `version`'s Python package in `dest`, without its compiled parts, with the op-schema
    sitecustomize beside it; returns `dest` (what goes on PYTHONPATH)."""
    log = log or logging.getLogger(__name__)
    if dest.exists():
        shutil.rmtree(dest)
    argv = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:", "--target", str(dest),
            f"torchvision=={version}"]
    log.info("%s", " ".join(argv))
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TorchvisionError(f"pip could not fetch torchvision {version} (exit status {done.returncode})",
                               hint=f"pip's last lines:\n{_tail(done.stderr or done.stdout)}")
    removed = [p for pattern in COMPILED for p in (dest / "torchvision").glob(pattern)]
    for path in removed:
        path.unlink()
    for libs in dest.glob("torchvision.libs"):
        shutil.rmtree(libs)
    (dest / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    log.info("torchvision %s in %s without its compiled ops (%s removed)", version, dest,
             ", ".join(p.name for p in removed) or "none found")
    return dest


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


__all__ = ["SITECUSTOMIZE", "TorchvisionError", "install", "installed_torch", "matching_version"]
