"""Every object passes kubernetes-validate (strict, pinned version); a broken one is refused with its message."""

from __future__ import annotations

import copy

import pytest

from cmx.k8s.stacks import objects
from cmx.k8s.validate import KUBERNETES_VERSION, InvalidManifest, validate
from tests.k8s.conftest import make_spec, shared_crd


@pytest.mark.parametrize("device", ["cuda", "rocm"])
@pytest.mark.parametrize("nodes", [1, 2])
def test_every_object_is_valid(device: str, nodes: int) -> None:
    for m in objects(make_spec(device, nodes=nodes, namespace="mlperf", storage_class="nfs")):
        validate(m.body)


def test_the_pinned_version_is_one_kubernetes_validate_ships() -> None:
    import kubernetes_validate

    bodies = [m.body for m in objects(make_spec("cuda"))]
    assert kubernetes_validate.validate(bodies[-1], KUBERNETES_VERSION, strict=True) == KUBERNETES_VERSION


def test_an_unknown_field_is_refused_with_the_validators_message() -> None:
    job = copy.deepcopy(objects(make_spec("cuda"))[-1].body)
    job["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(InvalidManifest, match="'volumeMount' was unexpected") as err:
        validate(job)
    assert "Job vllm-llama2-benchmark" in err.value.message and "spec/template/spec/containers/0" in err.value.message


def test_a_wrong_type_is_refused() -> None:
    service = copy.deepcopy(objects(make_spec("rocm"))[3].body)
    service["spec"]["ports"][0]["port"] = "eight thousand"
    with pytest.raises(InvalidManifest, match="is not of type 'integer'"):
        validate(service)


def _lws() -> dict:
    return copy.deepcopy(objects(make_spec("cuda", nodes=2))[2].body)


def test_a_leader_worker_sets_pod_templates_are_validated_as_pod_template_specs() -> None:
    lws = _lws()
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(InvalidManifest, match=r"workerTemplate.*'resource' was unexpected"):
        validate(lws)


@pytest.mark.parametrize("change, match", [("size", "size: '2' is not of type integer"),
                                           ("api", "not served by the CRD leaderworkersets"),
                                           ("field", "leaderWorkerTemplate.sizes: unknown field")])
def test_a_leader_worker_sets_own_fields_are_checked_against_its_real_crd(change: str, match: str) -> None:
    lws = _lws()
    crds = {"LeaderWorkerSet": shared_crd("leaderworkerset.x-k8s.io_leaderworkersets.yaml")}
    assert validate(copy.deepcopy(lws), crds=crds)[0].startswith("the CRD leaderworkersets.leaderworkerset.x-k8s.io")
    if change == "size":
        lws["spec"]["leaderWorkerTemplate"]["size"] = "2"
    elif change == "api":
        lws["apiVersion"] = "leaderworkerset.x-k8s.io/v2"
    else:
        lws["spec"]["leaderWorkerTemplate"]["sizes"] = 2
    with pytest.raises(InvalidManifest, match=match):
        validate(lws, crds=crds)


def test_without_its_crd_a_leader_worker_set_still_needs_a_worker_template() -> None:
    lws = _lws()
    del lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    with pytest.raises(InvalidManifest, match="workerTemplate is missing"):
        validate(lws)
