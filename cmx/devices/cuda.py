"""NVIDIA GPUs with CUDA: a CUDA vLLM image, a device request, nvidia.com/gpu, CUDA_VISIBLE_DEVICES, nvidia-smi."""

from __future__ import annotations

from cmx.devices.base import (
    BESIDE_IMAGE_VLLM,
    VLLM_ON_GPUS,
    Container,
    Detection,
    DeviceKind,
    Pod,
    Tool,
    Visibility,
    VllmBuild,
)

# the columns nvidia-smi is asked for, with a header so a parse checks it reads what it asked for
NVIDIA_SMI_FIELDS = ("index", "name", "memory.total", "driver_version", "pci.bus_id", "uuid")

# the release's wheel pins torch==2.13.0, and the image is built from it
VLLM = VllmBuild(version="0.32.0", distribution="vllm", torch="2.13.0",
                 why="vLLM's own image of the release the CPU build runs")

CUDA = DeviceKind(
    name="cuda",
    label="CUDA",
    container=Container(
        # vLLM's own CUDA image (Python, PyTorch, vLLM), which vLLM publishes for every release as
        # vllm/vllm-openai:vX.Y.Z; pinned: a moving tag would change what a rerun gets. Since 0.20 that tag is
        # the CUDA 13.0 build (an NVIDIA driver of the 580 series or newer); -cu129 tags are the CUDA 12.9 one.
        base_image=f"vllm/vllm-openai:v{VLLM.version}",
        vllm=VLLM,
        install=BESIDE_IMAGE_VLLM,
        request_driver="nvidia", request_capabilities=(("gpu",),),   # what `docker run --gpus` sends
        # podman's way (NVIDIA Container Toolkit 1.12+, "Support for Container Device Interface"): the spec
        # `nvidia-ctk cdi generate` writes (since 1.18 the nvidia-cdi-refresh service keeps it current) names
        # every GPU by index and UUID under this kind, and `all`
        cdi_kind="nvidia.com/gpu",
        device_nodes=(), group_nodes=(), fallback_groups=(), security_opt=(), cap_add=(),
        ipc_mode="host",  # NCCL and PyTorch's shared-memory tensors between processes
        shm_size=None,
        ulimits=(("memlock", -1, -1), ("stack", 67108864, 67108864)),
    ),
    engine=VLLM_ON_GPUS,
    # The NVIDIA GPU Operator installs the `nvidia` RuntimeClass; a cluster whose default runtime is
    # already NVIDIA's (GKE, some managed clusters) can drop it with --runtime-class "".
    pod=Pod(resource="nvidia.com/gpu", runtime_class="nvidia", supplemental_groups=(), seccomp_unconfined=False,
            capabilities=()),
    visibility=Visibility(
        pin="CUDA_VISIBLE_DEVICES",
        # CUDA numbers GPUs fastest-first by default; nvidia-smi (where the ids come from) by bus
        pin_env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        pin_unset=(),
        chosen_by=("CUDA_VISIBLE_DEVICES",),
        runtime_filters=("CUDA_VISIBLE_DEVICES",),
    ),
    detection=Detection(
        vendor="nvidia",
        tools=(Tool("nvidia-smi", ("--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS), "--format=csv,nounits")),),
        home_variables=("CUDA_HOME", "CUDA_PATH"),
        default_home="/usr/local/cuda",
        tool_dirs=(),  # nvidia-smi comes with the driver, not the toolkit: PATH only
        install_docs=("NVIDIA's \"CUDA Installation Guide for Linux\", "
                      "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/"),
        driver_docs=("NVIDIA's \"Driver Installation Guide\", "
                     "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"),
    ),
)
