"""VBench's pinned environment, a cache entry of its own (cmx.mlperf.runtime.cached_venv)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

from cmx.errors import StepError
from cmx.execute.context import StepContext
from cmx.mlperf.runtime import cached_venv

ARTEFACT = "get-vbench-env"  # the entries' folder: cache/get-vbench-env/<key>/


def run(ctx: StepContext) -> dict[str, Any]:
    if ctx.store is None:
        raise StepError("get-vbench-env needs the run's cache (a StepContext made by cmx's runner)")
    python = ctx.deps.python.outputs["executable"]
    host = ctx.variation("torch") == "host-torch"
    borrowed = _torch_site(ctx, python) if host else None
    found = cached_venv(ARTEFACT, ctx.inputs["requirements"] or _default_set(ctx, host), python=python,
                        store=ctx.store, run=lambda argv: ctx.run_cmd(argv, cwd=ctx.workdir),
                        extra_args=_pip_args(ctx, host),
                        site_after=(borrowed,) if borrowed else ())
    ctx.log.info("VBench's environment %s: %d pinned packages%s", found.python, len(found.packages),
                 " (made now)" if found.built_now else "")
    if host:
        ctx.log.warning("VBench's environment borrows the torch of %s (%s), not the pinned torch 2.5.1: a plumbing "
                        "check, never a result", python, borrowed)
    return {"python": found.python, "packages": found.packages, "key": found.key, "built_now": found.built_now,
            "pythonpath": [ctx.deps.torchvision.outputs["path"]] if host else [],
            "torch_from": str(borrowed or "")}


def _default_set(ctx: StepContext, host: bool) -> Path:
    """The recipe's own set: cpu-host-torch-cp311.txt for _host-torch, the full hashed resolution for _cuda (PyPI's
    torch is the CUDA build), else the direct pins (torch from the device's index)."""
    here = Path(__file__).parent
    if host:
        return here / "cpu-host-torch-cp311.txt"
    return here / ("cuda-cp311.txt" if ctx.variation("device") == "cuda" else "pins.txt")


def _pip_args(ctx: StepContext, host: bool) -> list[str]:
    """pip's arguments: PyTorch's index for the device's torch, or, with _host-torch, --no-deps (the set is a full
    resolution less torch's own, whose dependencies pip would otherwise fetch), then the user's."""
    index = ctx.inputs["torch_index"]
    own = ["--no-deps"] if host else (["--extra-index-url", index] if index else [])
    return [*own, *shlex.split(ctx.inputs["pip_args"] or "")]


def _torch_site(ctx: StepContext, python: str) -> Path:
    """The site-packages holding `python`'s torch, which _host-torch's environment sees after its own packages."""
    probe = "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise StepError(f"{python} has no torch for VBench's environment to borrow (_host-torch)",
                        hint="install cmx's video extra (torch's CPU build) into it, or use get-vbench-env without "
                             "_host-torch where PyTorch's index is reachable")
    return Path(done.stdout.strip().splitlines()[-1])
