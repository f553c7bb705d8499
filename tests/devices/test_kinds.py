"""The registry of device kinds (cmx/devices): which kinds there are, and that each states every fact."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

import pytest

from cmx.devices import CPU, CUDA, KINDS, ROCM
from cmx.devices.base import DeviceKind
from cmx.docker import PROFILES as CONTAINER_PROFILES
from cmx.k8s.devices import PROFILES as POD_PROFILES
from cmx.mlperf.backends.profiles import PROFILES as ENGINE_PROFILES
from cmx.tools.gpu import PARSERS


def conforms(value: Any, hint: Any) -> bool:
    """Whether `value` is of the annotated type (the few forms the kinds use: unions, tuples, mappings, plain types)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(conforms(v, a) for v, a in zip(value, args, strict=True))
    if origin is Mapping or hint is Mapping:
        return isinstance(value, Mapping) and all(conforms(k, args[0]) and conforms(v, args[1])
                                                  for k, v in value.items())
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def unfilled(obj: Any, where: str) -> list[str]:
    """The fields of a kind (and of its sections, recursively) whose value is not of their declared type."""
    hints = typing.get_type_hints(type(obj))
    out = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if not conforms(value, hints[f.name]):
            out.append(f"{where}.{f.name} = {value!r} is not {hints[f.name]}")
        elif is_dataclass(value):
            out += unfilled(value, f"{where}.{f.name}")
        elif isinstance(value, tuple):
            out += [p for i, v in enumerate(value) if is_dataclass(v) for p in unfilled(v, f"{where}.{f.name}[{i}]")]
    return out


def test_the_registry_lists_exactly_cuda_rocm_and_cpu() -> None:
    assert list(KINDS) == ["cuda", "rocm", "cpu"]
    assert (KINDS["cuda"], KINDS["rocm"], KINDS["cpu"]) == (CUDA, ROCM, CPU)
    assert all(isinstance(k, DeviceKind) and k.name == name for name, k in KINDS.items())


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_fills_every_field_with_a_value_of_its_type(name: str) -> None:
    assert unfilled(KINDS[name], name) == []


def test_a_kind_can_leave_out_no_fact() -> None:
    """No field has a default: a kind's file that forgets one fails when it is imported."""
    sections = [DeviceKind, *(typing.get_type_hints(DeviceKind)[f.name] for f in fields(DeviceKind))]
    for section in sections:
        for cls in typing.get_args(section) or (section,):
            if is_dataclass(cls):
                assert [f.name for f in fields(cls)
                        if f.default is not MISSING or f.default_factory is not MISSING] == [], cls


def test_every_kind_with_gpus_has_a_pod_a_pin_variable_and_a_detection_whose_tools_have_parsers() -> None:
    for kind in KINDS.values():
        has_gpus = kind.engine.on_gpus
        assert (kind.pod is not None, kind.detection is not None, bool(kind.visibility.pin)) == (has_gpus,) * 3
        if kind.detection:
            assert kind.detection.tools and all(t.program in PARSERS for t in kind.detection.tools)


def test_every_layer_has_a_profile_for_each_kind_it_serves() -> None:
    assert list(CONTAINER_PROFILES) == list(ENGINE_PROFILES) == list(KINDS)
    assert list(POD_PROFILES) == [name for name, kind in KINDS.items() if kind.pod is not None] == ["cuda", "rocm"]


def test_no_kind_carries_another_vendors_names() -> None:
    """ROCm stays first-class: nothing of NVIDIA's in its file's data, nothing of AMD's in CUDA's."""
    rocm, cuda = repr(ROCM).lower(), repr(CUDA).lower()
    assert "nvidia" not in rocm and "amd" not in cuda and "kfd" not in cuda and "hip_" not in cuda
    # CUDA_VISIBLE_DEVICES is the one CUDA name in the ROCm kind: HIP honours it, and vLLM copies HIP's
    # variable into it, so a pinned ROCm engine unsets it
    assert ROCM.visibility.pin_unset == ("CUDA_VISIBLE_DEVICES",) and ROCM.visibility.pin == "HIP_VISIBLE_DEVICES"
    assert "nvidia" not in repr(CPU).lower() and "amd" not in repr(CPU).lower()
