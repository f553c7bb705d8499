"""One pod profile per GPU vendor, each with only its own vendor's settings; a CPU plan has none."""

from __future__ import annotations

import pytest

from cmx.errors import CmxError
from cmx.k8s.devices import (
    CUDA,
    ROCM,
    ROCM_DEVICE_GROUPS,
    UnsupportedDevice,
    pod_profile,
)


def test_each_gpu_device_has_its_vendors_resource_and_nothing_of_the_other() -> None:
    assert pod_profile("cuda") is CUDA and pod_profile("rocm") is ROCM
    assert (CUDA.resource, CUDA.runtime_class) == ("nvidia.com/gpu", "nvidia")
    assert (CUDA.supplemental_groups, CUDA.seccomp_unconfined, CUDA.capabilities) == ((), False, ())
    assert ROCM.resource == "amd.com/gpu" and ROCM.runtime_class is None
    assert ROCM.supplemental_groups == ROCM_DEVICE_GROUPS == (44, 109)
    assert ROCM.seccomp_unconfined and ROCM.capabilities == ("SYS_PTRACE",)


@pytest.mark.parametrize("device", ["cpu", None, "tpu"])
def test_a_device_without_a_gpu_resource_is_one_clear_error(device: str | None) -> None:
    with pytest.raises(UnsupportedDevice) as err:
        pod_profile(device)
    assert isinstance(err.value, CmxError)
    assert "supported devices: cuda, rocm" in err.value.render()
