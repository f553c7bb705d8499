"""The CUDA container profile: a CUDA vLLM image, GPUs through an NVIDIA device request."""

from __future__ import annotations

from cmx.docker.profiles import DeviceRequest, DeviceSettings, InstallPlan

# vLLM's own CUDA image (Python, PyTorch, vLLM); pinned: a moving tag would change what a rerun gets
DEFAULT_BASE = "vllm/vllm-openai:v0.11.1"


class CudaContainerProfile:
    name = "cuda"
    default_base_image = DEFAULT_BASE

    def install(self) -> InstallPlan:
        # the image's Python already has vLLM for its CUDA; cmx and LoadGen go in beside it
        return InstallPlan(python="python3", extra="mlperf")  # LoadGen and the accuracy metric beside its vLLM

    def device_settings(self, gpus: tuple[str, ...] | None) -> DeviceSettings:
        request = DeviceRequest(count=0, device_ids=gpus) if gpus else DeviceRequest(count=-1)
        return DeviceSettings(
            device_requests=(request,),
            ipc_mode="host",  # NCCL and PyTorch's shared-memory tensors between processes
            ulimits=(("memlock", -1, -1), ("stack", 67108864, 67108864)),
        )
