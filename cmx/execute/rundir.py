"""A run's folder under runs/ and the facts at the top of its run.json, with os and time only.

Shared by RunRecord and by the start-up path of a cached run (cmx.execute.memo), so that both
write the same folder names and the same run.json.
"""

from __future__ import annotations

import os
import sys
import time

from cmx import __version__

TYPE_CHECKING = False  # typing itself costs ~8 ms to import; type checkers read this name as typing's
if TYPE_CHECKING:
    from typing import Any


def new_run_dir(runs_dir: str, name: str) -> tuple[str, str]:
    """Create runs_dir/<time>-<name> (-2, -3... when taken); return it and the start time (ISO 8601, local)."""
    now = time.localtime()
    base = os.path.join(runs_dir, f"{time.strftime('%Y%m%d-%H%M%S', now)}-{name}")
    os.makedirs(runs_dir, exist_ok=True)
    for n in range(1, 1000):
        path = base if n == 1 else f"{base}-{n}"
        try:
            os.mkdir(path)
            return path, _iso(now)
        except FileExistsError:
            continue
    raise FileExistsError(f"{base}-999")


def _iso(t: time.struct_time) -> str:
    """datetime.now().astimezone().isoformat(timespec="seconds"), without datetime's import."""
    offset = time.strftime("%z", t) or "+0000"
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f"{offset[:3]}:{offset[3:5]}"


def header(argv: list[str], started: str, container: dict[str, str] | None) -> dict[str, Any]:
    """The facts run.json opens with: cmx and Python versions, the platform, the command and where it ran."""
    uname = os.uname()  # platform.platform() would spawn `uname -p`: too slow for every run
    return {
        "cmx": __version__,
        "python": sys.version.split()[0],
        "platform": f"{uname.sysname} {uname.release} {uname.machine}",
        "argv": argv,
        "cwd": os.getcwd(),
        "started": started,
        "container": container,  # the image, its base and Dockerfile, in a `cmx run --docker` container
    }
