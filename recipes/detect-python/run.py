"""Ask the interpreter about itself (probe.py); refuse one older than version_min."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cmx.errors import StepError
from cmx.execute.context import StepContext

PROBE = Path(__file__).with_name("probe.py")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def run(ctx: StepContext) -> dict[str, Any]:
    done = ctx.run_cmd([ctx.inputs["python"] or sys.executable, PROBE])
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if _version_tuple(info["version"]) < _version_tuple(ctx.inputs["version_min"]):
        raise StepError(f"{info['executable']} is Python {info['version']}, older than {ctx.inputs['version_min']}",
                        hint="pass --input python=/path/to/a/newer/python3")
    ctx.log.info("found %s %s at %s", info["implementation"], info["version"], info["executable"])
    return info
