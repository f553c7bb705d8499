"""Values the cluster would refuse are refused before anything is rendered (cmx.k8s.values): counts in int32 and
in real ranges, DNS-1123 names, quantities, image references, Hugging Face repository ids; and the CRD schema
check enforces `format: int32` and `int64` as the API server does."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cmx.k8s import K8sError
from cmx.k8s.crd_schema import check
from cmx.k8s.devices import CUDA, ROCM
from cmx.k8s.served import ServedModel
from cmx.k8s.stack_options import StackOptions
from cmx.k8s.stacks import objects
from cmx.k8s.values import InvalidValue
from tests.conftest import Home
from tests.k8s.conftest import LLAMA2, make_spec, shared_crd
from tests.k8s.test_cli import repo_home

__all__ = ["repo_home"]  # the fixture, imported for the CLI test

HUGE = 99999999999999999999


def refused(exc: pytest.ExceptionInfo[InvalidValue], flag: str) -> str:
    """The one-line message, which names the flag and echoes the value bounded and escaped."""
    message = exc.value.message
    assert message.startswith(f"{flag} ") and "\n" not in message and len(message) < 400
    return message


@pytest.mark.parametrize("changes, flag, rule", [
    ({"replicas": HUGE}, "--replicas", "between 1 and 10,000"),
    ({"replicas": 2**31 - 1}, "--replicas", "between 1 and 10,000"),  # int32, but no deployment has it
    ({"replicas": 0}, "--replicas", "between 1"),
    ({"name": "dynamo", "decode_workers": 1_000_000_000}, "--decode-workers", "between 1 and 10,000"),
    ({"name": "dynamo", "prefill_workers": -1}, "--prefill-workers", "between 0"),
    ({"name": "dynamo", "prefill_workers": 6000, "decode_workers": 6000}, "--prefill-workers + --decode-workers",
     "workers of one graph"),
    ({"name": "dynamo", "decode_tp": 1000}, "--decode-tp", "between 1 and 64"),
    ({"replicas": True}, "--replicas", "an integer"),
])
def test_counts_out_of_int32_or_real_ranges_are_refused(changes: dict[str, Any], flag: str, rule: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        StackOptions(**changes)
    assert rule in refused(exc, flag)


@pytest.mark.parametrize("changes, flag", [
    ({"gpus": HUGE}, "--gpus"), ({"gpus": 65}, "--gpus"), ({"nodes": 5001, "gpus": 8}, "--nodes"),
    ({"profile": replace(ROCM, supplemental_groups=(44, 2**31))}, "--supplemental-groups"),
    ({"profile": replace(ROCM, supplemental_groups=(-1,))}, "--supplemental-groups"),
])
def test_pod_counts_and_group_ids_out_of_range_are_refused(changes: dict[str, Any], flag: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        make_spec("rocm", **changes)
    refused(exc, flag)


@pytest.mark.parametrize("value", ["my secret", "a/b", "hf-token\n", "Upper", "-lead", "x" * 254, ""])
def test_a_secret_name_must_be_a_dns_subdomain(value: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        make_spec("cuda", hf_token_secret=value)
    assert "a DNS-1123 subdomain" in refused(exc, "--hf-token-secret")


@pytest.mark.parametrize("field, flag", [("storage_class", "--storage-class")])
@pytest.mark.parametrize("value", ["fast\nssd", "fast ssd", "../nfs"])
def test_a_storage_class_must_be_a_dns_subdomain(field: str, flag: str, value: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        make_spec("cuda", **{field: value})
    refused(exc, flag)


@pytest.mark.parametrize("changes, flag", [
    ({"gateway": "gw\nkind: Secret"}, "--gateway"), ({"gateway": "my gateway"}, "--gateway"),
    ({"gateway_class": "istio\n"}, "--gateway-class"),
    ({"epp_image": "epp:v1\nx"}, "--epp-image"), ({"entry_url": "http://gw/v1\n"}, "--entry-url"),
    ({"entry_url": "file:///etc/passwd"}, "--entry-url"),
])
def test_gateway_names_images_and_urls_with_newlines_or_spaces_are_refused(changes: dict[str, Any],
                                                                           flag: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        StackOptions(name="llm-d", llmd_form="pieces", **changes)
    refused(exc, flag)


@pytest.mark.parametrize("value", ["vllm:1\n", "Registry.example.com/UPPER:1", "a b", "img:", "img@sha256:abc",
                                   "-img", "x" * 300])
def test_an_image_must_be_an_image_reference(value: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        make_spec("cuda", serving_image=value)
    assert "a container image reference" in refused(exc, "--serving-image")
    with pytest.raises(InvalidValue):
        make_spec("cuda", benchmark_image=value)


@pytest.mark.parametrize("value", ["vllm:1", "vllm/vllm-openai:v0.10.1", "localhost:5000/team/cmx:1.0",
                                   "registry.example.com/a/b_c__d-e", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.1",
                                   "rocm/vllm@sha256:" + "a" * 64, "[::1]:5000/cmx:1"])
def test_real_image_references_pass(value: str) -> None:
    assert make_spec("cuda", serving_image=value).serving_image == value


@pytest.mark.parametrize("value", ["200Gi\n", "200 Gi", "-1Gi", "0", "lots", "2Ei", "1e400"])
def test_storage_sizes_must_be_quantities_above_zero_and_at_most_a_pebibyte(value: str) -> None:
    for field, flag in (("cache_size", "--cache-size"), ("results_size", "--results-size"),
                        ("shm_size", "--shm-size")):
        with pytest.raises(InvalidValue) as exc:
            make_spec("cuda", **{field: value})
        refused(exc, flag)


@pytest.mark.parametrize("value", ["../../etc/passwd", "meta-llama/Llama-2\n", "/etc/passwd", "a/b/c", "a--b/c",
                                   "org/x.git", "org/ name", "-org/name", "x" * 97])
def test_a_model_repository_must_be_a_hugging_face_repository_id(value: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        replace(LLAMA2, repo=value)
    assert "a Hugging Face repository id" in refused(exc, "--input get-ml-model-llama2.repo")


def test_a_quantized_models_repository_is_named_by_its_fp8_input() -> None:
    with pytest.raises(InvalidValue) as exc:
        ServedModel(repo="../x", revision="c" * 40, recipe="get-ml-model-llama2", quantized=True)
    refused(exc, "--input get-ml-model-llama2.fp8_repo")


@pytest.mark.parametrize("value", ["main\n", "a b", "../../x", "-x"])
def test_a_revision_must_be_a_commit_or_a_ref_name(value: str) -> None:
    with pytest.raises(InvalidValue) as exc:
        replace(LLAMA2, revision=value)
    refused(exc, "--input get-ml-model-llama2.revision")


@pytest.mark.parametrize("changes, flag", [
    ({"namespace": "a/b"}, "--namespace"), ({"namespace": "ns\n"}, "--namespace"),
    ({"name": "vllm\n"}, "--name"), ({"gpu_name": "MI300X\nkind: Secret"}, "--gpu-name"),
    ({"profile": replace(CUDA, runtime_class="nvidia runtime")}, "--runtime-class"),
])
def test_names_and_text_with_newlines_are_refused(changes: dict[str, Any], flag: str) -> None:
    with pytest.raises(K8sError) as exc:
        make_spec("cuda", **changes)
    assert exc.value.message.startswith(flag) and "\n" not in exc.value.message


def test_a_huge_integer_is_echoed_bounded() -> None:
    with pytest.raises(InvalidValue) as exc:
        StackOptions(replicas=10**5000)
    assert "an integer of 16610 bits" in refused(exc, "--replicas")


def test_values_at_the_edges_of_the_ranges_pass() -> None:
    StackOptions(name="dynamo", prefill_workers=0, decode_workers=10_000)
    StackOptions(name="llm-d", replicas=10_000)
    spec = make_spec("rocm", gpus=64, hf_token_secret="team.hf-token", storage_class="nfs.csi.k8s.io",
                     cache_size="1Pi", profile=replace(ROCM, supplemental_groups=(0, 2**31 - 1)))
    assert spec.gpus == 64


# --- the CRD schema check: format int32 and int64 ------------------------------------------------------------


def _lws() -> dict[str, Any]:
    return copy.deepcopy(objects(make_spec("cuda", nodes=2))[2].body)


@pytest.mark.parametrize("value, ok", [(2**31 - 1, True), (2**31, False), (HUGE, False), (-(2**31) - 1, False)])
def test_the_real_crds_int32_fields_are_range_checked(value: int, ok: bool) -> None:
    crd = shared_crd("leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    lws = _lws()
    lws["spec"]["leaderWorkerTemplate"]["size"] = value  # int32, with no maximum of its own
    problems = check(lws, crd).problems
    assert (problems == ()) is ok, problems
    if not ok:
        assert "spec.leaderWorkerTemplate.size" in problems[0] and "outside the int32 range" in problems[0]


def test_an_int64_field_is_range_checked() -> None:
    from cmx.k8s.crd_schema import CrdSchema

    schema = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                               "spec": {"type": "object", "properties": {
        "seconds": {"type": "integer", "format": "int64"}}}}}
    crd = CrdSchema(name="things.example.com", group="example.com", kind="Thing", schemas={"v1": schema},
                    source="test")
    body = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"seconds": 2**63}}
    assert "outside the int64 range" in check(body, crd).problems[0]
    body["spec"]["seconds"] = 2**63 - 1
    assert check(body, crd).problems == ()


# --- the command, as a user runs it ---------------------------------------------------------------------------


@pytest.mark.parametrize("flags, flag", [
    (["--stack", "llm-d", "--replicas", str(HUGE)], "--replicas"),
    (["--stack", "dynamo", "--decode-workers", "1000000000"], "--decode-workers"),
    (["--hf-token-secret", "my secret"], "--hf-token-secret"),
    (["--serving-image", "vllm:1\nx"], "--serving-image"),
])
def test_deploy_refuses_a_value_in_one_line_and_writes_no_file(repo_home: Home, tmp_path: Path, flags: list[str],
                                                                flag: str) -> None:
    out = tmp_path / "k8s"
    proc = repo_home.cmx("deploy", "app mlperf inference llama2 _cuda", "--k8s", str(out),
                         "-i", "target_qps_offline=60", *flags)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("error:") == 1 and f"{flag} " in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
