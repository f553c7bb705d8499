"""The kinds of device cmx runs on (cuda, rocm, cpu), one file each, and the registry every layer looks them up in.

A kind's file holds all that cmx knows about it as plain data (cmx.devices.base.DeviceKind): the
base image and how a container reaches the devices (read by cmx.docker), vLLM's defaults on it
(cmx.mlperf.backends.profiles), the pod's GPU resource (cmx.k8s.devices), the visibility variables
(cmx.mlperf.backends.machine) and the programs that detect it (cmx.tools.gpu). Those layers keep
only their own mechanics, so no layer names a vendor's flag itself, and a ROCm container or pod
gets nothing of CUDA's.

This package is the lowest layer above the floor (tests/test_layers.py): every layer from tools/
up reads it, and it imports nothing of cmx but its own modules.

Adding a kind (say Intel XPU) is writing `xpu.py` with its DeviceKind, adding it to KINDS below,
and adding the parser of its listing tool's output to cmx.tools.gpu.PARSERS: the container, engine
and pod profiles and the visibility variables follow from the file. Outside the layers above, a
query reaches the kind through a recipe variation that sets `device: xpu`, and the vLLM build for
it is cmx.mlperf.runtime's. Which vLLM release the kind's image holds is a fact of its file
(`container.vllm`, against TESTED_VLLM below), which docs/docker.md tabulates.
"""

from __future__ import annotations

from collections.abc import Mapping

from cmx.devices.base import DeviceKind
from cmx.devices.cpu import CPU
from cmx.devices.cuda import CUDA
from cmx.devices.rocm import ROCM

# in the order messages list them
KINDS: Mapping[str, DeviceKind] = {k.name: k for k in (CUDA, ROCM, CPU)}

# the vLLM every test and the demo run (the CPU build, pinned in pyproject.toml): a kind whose image holds
# another says why in its container's `vllm.why` (docs/docker.md § 3)
TESTED_VLLM = CPU.container.vllm.version

__all__ = ["CPU", "CUDA", "KINDS", "ROCM", "TESTED_VLLM", "DeviceKind"]
