"""Set-ups of docs/recipes.md: the stand-in GPU tools, the file server and the venv with wheels its examples use."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tests.conftest import DATA
from tests.docs.console import Session
from tests.tools.test_download import DATA as DOWNLOADED
from tests.tools.test_download import Handler, Site
from tests.tools.test_pip import write_wheel

GPU_DATA = DATA / "gpu"


def _tool(path: Path, default: str, query: str | None = None) -> None:
    """An executable PATH printing the recorded output DEFAULT (QUERY when its arguments hold --query-gpu), as
    tests/recipes/test_system_gpu.py makes them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cases = f'  *--query-gpu*) cat "{GPU_DATA / query}" ;;\n' if query else ""
    path.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}  *) cat "{GPU_DATA / default}" ;;\nesac\n')
    path.chmod(0o755)


def gpu_fakes(session: Session) -> None:
    """/tmp/dz/fake: nvidia-smi and nvcc of an 8 x H100 host (driver 565.57.01, CUDA 12.7) with the CUDA 11.1
    toolkit; /tmp/dz/rocm: a ROCm 6.2.0 folder whose bin/amd-smi reports 4 MI300X."""
    fake, rocm = Path(session.local("/tmp/dz/fake")), Path(session.local("/tmp/dz/rocm"))
    _tool(fake / "nvidia-smi", "nvidia-smi-h100x8.txt", query="nvidia-smi-query-h100x8.csv")
    _tool(fake / "nvcc", "nvcc-11.1.txt")
    (rocm / ".info").mkdir(parents=True, exist_ok=True)
    shutil.copy(GPU_DATA / "rocm-info-version.txt", rocm / ".info" / "version")
    _tool(rocm / "bin" / "amd-smi", "amd-smi-static-mi300x.json")


def file_server(session: Session) -> None:
    """tests/tools/test_download.py's server on 127.0.0.1:8765 (the port the page names), serving its 1,000,000
    bytes (sha256 ca5248fc...e8) as /models/llama/model.bin; stopped after the page."""
    site = Site(files={"/models/llama/model.bin": DOWNLOADED})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 8765), type("Handler", (Handler,), {"site": site}))
    server.daemon_threads = True                  # a keep-alive connection does not hold the page's end
    threading.Thread(target=server.serve_forever, daemon=True).start()
    session.cleanups.append(lambda: (server.shutdown(), server.server_close()))


def pip_demo(session: Session) -> None:
    """/tmp/pipdoc/venv: a venv with pip and nothing else; /tmp/pipdoc/wheels: a wheel of cmxdemo 2.0."""
    venv, wheels = Path(session.local("/tmp/pipdoc/venv")), Path(session.local("/tmp/pipdoc/wheels"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # pip copied from the venv running the tests: what `python -m venv` would install, in a tenth of the time
    import pip

    ours = Path(pip.__file__).parent.parent
    site = next((venv / "lib").glob("python3*/site-packages"))
    for entry in [ours / "pip", *ours.glob("pip-*.dist-info")]:
        shutil.copytree(entry, site / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
    wheels.mkdir(parents=True, exist_ok=True)
    write_wheel(wheels, "cmxdemo", "2.0", {"cmxdemo/__init__.py": "VERSION = '2.0'\n"})


SETUPS = {"gpu-fakes": gpu_fakes, "file-server": file_server, "pip-demo": pip_demo}
