"""AMD GPUs with ROCm: a ROCm vLLM image, /dev/kfd and /dev/dri, amd.com/gpu, HIP_VISIBLE_DEVICES, amd-smi."""

from __future__ import annotations

from dataclasses import replace

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

ROCM_DOCS = "AMD's \"ROCm installation for Linux\", https://rocm.docs.amd.com/projects/install-on-linux/en/latest/"

# AMD's components of the image, as its "vLLM inference performance testing version history" page lists them
# (rocm.docs.amd.com). No ROCm image of the CPU build's vLLM (0.32.0, when this was checked) could be confirmed:
# the newest AMD rocm/vllm tag found holds vLLM 0.23.0 (ROCm 7.14, Python 3.14), and vLLM's own
# vllm/vllm-openai-rocm was found up to v0.31.0. Neither is the same vLLM, so the pin stays where cmx's ROCm
# defaults (HIP_FORCE_DEV_KERNARG, AITER below) were set up.
VLLM = VllmBuild(version="0.11.1", distribution="vllm", torch="2.9.0",
                 why="no ROCm image of the CPU build's vLLM was found (AMD's rocm/vllm tags found reach vLLM 0.23.0): "
                     "AMD's MI300X inference-testing image stays until one is")

ROCM = DeviceKind(
    name="rocm",
    label="ROCm",
    container=Container(
        # AMD's ROCm vLLM image (ROCm 7.0.0), pinned
        base_image=f"rocm/vllm:rocm7.0.0_vllm_{VLLM.version}_20251024",
        vllm=VLLM,
        install=BESIDE_IMAGE_VLLM,
        request_driver="", request_capabilities=(),   # no device request: the device files themselves
        cdi_kind="",  # the same device files under podman, as AMD's "Running ROCm Docker containers" passes them
        device_nodes=("/dev/kfd", "/dev/dri"),
        # the process must be in the groups owning /dev/kfd and the render nodes, by the host's numeric
        # ids (an image's own /etc/group may lack `render`, or number it differently)
        group_nodes=("kfd", "dri/renderD*"),
        fallback_groups=("video", "render"),
        security_opt=("seccomp=unconfined",),
        cap_add=("SYS_PTRACE",),
        ipc_mode="host",
        shm_size="16g",  # RCCL and the engine workers share tensors through /dev/shm
        ulimits=(),
    ),
    engine=replace(
        VLLM_ON_GPUS,
        # kernel arguments in device memory: faster launches (set in AMD's vLLM images already)
        env_defaults={**VLLM_ON_GPUS.env_defaults, "HIP_FORCE_DEV_KERNARG": "1"},
        # AITER's master switch (vLLM picks the AITER kernels per op); AITER has kernels for CDNA3
        # and CDNA4 (MI300X/MI325X: gfx942; MI350X/MI355X: gfx950)
        kernels_env={"VLLM_ROCM_USE_AITER": "1"},
        kernels_archs=("gfx942", "gfx950"),
        kernels_names=r"\bMI3[0-5]\d",
    ),
    pod=Pod(
        resource="amd.com/gpu", runtime_class=None,
        # The video and render groups' usual ids on the nodes (Ubuntu, RHEL): the container process must
        # be in the groups owning /dev/kfd and /dev/dri/renderD*, whatever the image's /etc/group says.
        # A node numbering them differently needs --supplemental-groups.
        supplemental_groups=(44, 109),
        # ROCm's debugger and memory-mapping calls are refused by the default seccomp profile
        seccomp_unconfined=True, capabilities=("SYS_PTRACE",),
    ),
    visibility=Visibility(
        pin="HIP_VISIBLE_DEVICES",
        pin_env={},
        # vLLM copies HIP_VISIBLE_DEVICES into CUDA_VISIBLE_DEVICES when it is imported, and refuses
        # to start when the two differ: drop the copy so each engine's processes make their own
        pin_unset=("CUDA_VISIBLE_DEVICES",),
        chosen_by=("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),  # HIP honours CUDA's variable too
        runtime_filters=("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
    ),
    detection=Detection(
        vendor="amd",
        tools=(Tool("amd-smi", ("static", "--json")),
               Tool("rocm-smi", ("--showproductname", "--showmeminfo", "vram", "--showbus", "--showuniqueid",
                                 "--json"))),
        home_variables=("ROCM_PATH",),
        default_home="/opt/rocm",
        tool_dirs=("bin",),
        install_docs=ROCM_DOCS,
        driver_docs=ROCM_DOCS,  # amdgpu comes with ROCm's installer
    ),
)
