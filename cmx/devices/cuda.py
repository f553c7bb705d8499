"""NVIDIA GPUs with CUDA: a CUDA vLLM image, a device request, nvidia.com/gpu, CUDA_VISIBLE_DEVICES, nvidia-smi."""

from __future__ import annotations

from cmx.devices.base import BESIDE_IMAGE_VLLM, VLLM_ON_GPUS, Container, Detection, DeviceKind, Pod, Tool, Visibility

# the columns nvidia-smi is asked for, with a header so a parse checks it reads what it asked for
NVIDIA_SMI_FIELDS = ("index", "name", "memory.total", "driver_version", "pci.bus_id", "uuid")

CUDA = DeviceKind(
    name="cuda",
    label="CUDA",
    container=Container(
        # vLLM's own CUDA image (Python, PyTorch, vLLM); pinned: a moving tag would change what a rerun gets
        base_image="vllm/vllm-openai:v0.11.1",
        install=BESIDE_IMAGE_VLLM,
        request_driver="nvidia", request_capabilities=(("gpu",),),   # what `docker run --gpus` sends
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
