"""Read the host from /etc and /proc (cmx/tools/system.py; nothing is run) and add detect-gpu's findings."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.system import detect_system

GPU_OUTPUTS = ("gpus", "gpu_count", "gpu_vendor", "driver_version", "cuda_version", "cuda_driver_version",
               "rocm_version")


def run(ctx: StepContext) -> dict[str, Any]:
    host = detect_system()
    gpu = ctx.deps.gpu.outputs
    ctx.log.info("%s, kernel %s, %s x %d, %d bytes of memory, %d GPU(s)", host.os.pretty_name, host.kernel,
                 host.cpu.model, host.cpu.logical, host.memory_bytes, gpu["gpu_count"])
    return {
        "os": host.os.pretty_name,
        "os_name": host.os.name,
        "os_version": host.os.version_id,
        "kernel": host.kernel,
        "arch": host.arch,
        "cpu_model": host.cpu.model,
        "cpus": host.cpu.logical,
        "sockets": host.cpu.sockets or 0,
        "cores_per_socket": host.cpu.cores_per_socket or 0,
        "memory_bytes": host.memory_bytes,
        "storage_bytes": host.storage_bytes,
        "python": host.python_version,
        "python_executable": host.python_executable,
        **{name: gpu[name] for name in GPU_OUTPUTS},
    }
