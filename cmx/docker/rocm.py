"""The ROCm container profile: a ROCm vLLM image, GPUs through /dev/kfd and /dev/dri and the video and render groups."""

from __future__ import annotations

import os
from pathlib import Path

from cmx.docker.profiles import DeviceSettings, InstallPlan

# AMD's ROCm vLLM image (ROCm 7.0.0, vLLM 0.11.1, PyTorch 2.9.0), pinned
DEFAULT_BASE = "rocm/vllm:rocm7.0.0_vllm_0.11.1_20251024"


def device_groups(dev: Path = Path("/dev")) -> tuple[str, ...]:
    """The groups that own /dev/kfd and the render nodes, by the host's numeric ids (an image's own
    /etc/group may lack `render`, or number it differently); by name where the host has no such devices."""
    gids = set()
    for node in [dev / "kfd", *sorted((dev / "dri").glob("renderD*"))]:
        try:
            gids.add(os.stat(node).st_gid)
        except OSError:
            continue
    return tuple(str(g) for g in sorted(gids)) if gids else ("video", "render")


class RocmContainerProfile:
    name = "rocm"
    default_base_image = DEFAULT_BASE

    def install(self) -> InstallPlan:
        return InstallPlan(python="python3", extra="mlperf")  # LoadGen and the accuracy metric beside its vLLM

    def device_settings(self, gpus: tuple[str, ...] | None) -> DeviceSettings:
        env = (("HIP_VISIBLE_DEVICES", ",".join(gpus)),) if gpus else ()
        return DeviceSettings(
            devices=("/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"),
            group_add=device_groups(),
            security_opt=("seccomp=unconfined",),
            cap_add=("SYS_PTRACE",),
            ipc_mode="host",
            shm_size="16g",  # RCCL and the engine workers share tensors through /dev/shm
            environment=env,
        )
