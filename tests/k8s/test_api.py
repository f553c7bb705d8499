"""api.deploy_k8s: from a query of the repository's recipes to validated files, and what it refuses."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from cmx import api
from cmx.k8s import K8sError
from cmx.k8s.devices import UnsupportedDevice
from cmx.k8s.served import ServedModelError
from cmx.k8s.validate import validate
from cmx.settings import Settings

QUERY = "app mlperf inference llama2"
IMAGE = api.K8sOptions(image="registry.example.com/cmx:1")
TARGET = {"target_qps_offline": "60"}  # a full run's Offline target: the Job's plan is checked at deploy


@pytest.mark.parametrize("device, resource", [("cuda", "nvidia.com/gpu"), ("rocm", "amd.com/gpu")])
def test_the_files_are_written_validated_and_summarised(repo_settings: Settings, tmp_path: Path, device: str,
                                                        resource: str) -> None:
    result = api.deploy_k8s(f"{QUERY} _{device}", inputs={"tensor_parallel_size": "8", **TARGET},
                            out_dir=tmp_path / "out",
                            options=IMAGE, settings=repo_settings)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["00-pvc-model-cache.yaml", "01-pvc-results.yaml", "10-deployment.yaml", "20-service.yaml",
                     "90-configmap-stack.yaml", "91-job-benchmark.yaml", "README.md"]
    for path in result.files[:-1]:
        validate(yaml.safe_load(path.read_text()))
    summary = result.to_json()
    assert summary["device"] == device and summary["gpu_resource"] == resource and summary["gpus_per_pod"] == 8
    assert summary["image"] == "registry.example.com/cmx:1" and summary["image_is_default"] is False
    assert [o["kind"] for o in summary["objects"]] == ["PersistentVolumeClaim", "PersistentVolumeClaim",
                                                        "Deployment", "Service", "ConfigMap", "Job"]
    assert summary["stack"]["name"] == "vllm" and summary["requirements"] == []
    assert summary["benchmark_query"] == f"{QUERY} _{device} _endpoint" and summary["applied"] == []
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "kubectl apply -f" in readme and "kubectl create secret generic hf-token" in readme
    assert "--tensor-parallel-size 8" in readme


def test_the_default_image_is_the_tag_run_docker_builds_for_the_jobs_query(repo_settings: Settings,
                                                                           tmp_path: Path) -> None:
    result = api.deploy_k8s(f"{QUERY} _rocm", inputs=TARGET, out_dir=tmp_path, settings=repo_settings)
    tag = api.docker_file(f"{QUERY} _rocm _endpoint", settings=repo_settings).tag
    assert result.image_is_default and result.rendered.spec.benchmark_image == tag
    assert "docker push" in (tmp_path / "README.md").read_text()


def test_nodes_render_a_leader_worker_set_and_drop_the_stale_deployment(repo_settings: Settings,
                                                                         tmp_path: Path) -> None:
    api.deploy_k8s(f"{QUERY} _cuda", inputs=TARGET, out_dir=tmp_path, options=IMAGE, settings=repo_settings)
    (tmp_path / "99-mine.yaml").write_text("kind: ConfigMap\n")
    api.deploy_k8s(f"{QUERY} _cuda", inputs={"tensor_parallel_size": "8", "target_qps_offline": "60"}, out_dir=tmp_path,
                   options=replace(IMAGE, nodes=2), settings=repo_settings)
    names = {p.name for p in tmp_path.iterdir()}
    assert "10-leaderworkerset.yaml" in names and "10-deployment.yaml" not in names
    assert "99-mine.yaml" in names  # not cmx's: left alone


def test_a_cpu_plan_is_refused(repo_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedDevice, match="cuda, rocm"):
        api.deploy_k8s(f"{QUERY} _cpu", out_dir=tmp_path / "out", options=IMAGE, settings=repo_settings)
    assert not (tmp_path / "out").exists()


def test_a_tiny_plan_is_refused(repo_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(ServedModelError, match="_tiny"):
        api.deploy_k8s(f"{QUERY} _cuda _tiny", out_dir=tmp_path, options=IMAGE, settings=repo_settings)


def test_a_job_its_run_would_refuse_is_refused_before_anything_is_written(repo_settings: Settings,
                                                                          tmp_path: Path) -> None:
    from cmx.mlperf.app_plan import AppConfigError

    # (a missing target is not refused: the Job's cmx run measures it, find-performance; a mistyped scenario is)
    with pytest.raises(AppConfigError, match="unknown scenario 'servr'"):
        api.deploy_k8s(f"{QUERY} _cuda", inputs={**TARGET, "scenarios": "offline,servr"}, out_dir=tmp_path / "out",
                       options=IMAGE, settings=repo_settings)
    assert not (tmp_path / "out").exists()


def test_inputs_the_job_sets_itself_are_refused(repo_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(K8sError, match="endpoint_url"):
        api.deploy_k8s(f"{QUERY} _cuda", inputs={"endpoint_url": "http://x/v1"}, out_dir=tmp_path, options=IMAGE,
                       settings=repo_settings)


def test_an_input_with_url_credentials_is_refused_before_a_manifest_holds_it(repo_settings: Settings,
                                                                              tmp_path: Path) -> None:
    with pytest.raises(K8sError) as err:
        api.deploy_k8s(f"{QUERY} _cuda", inputs={"system_name": "https://u:pw-K8@mirror/x"},
                       out_dir=tmp_path / "out", options=IMAGE, settings=repo_settings)
    assert "--input system_name holds a URL with credentials" in err.value.message
    assert "pw-K8" not in err.value.render() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("device, options", [("rocm", replace(IMAGE, runtime_class="nvidia")),
                                             ("cuda", replace(IMAGE, supplemental_groups=(44,)))])
def test_a_vendor_option_on_the_other_vendor_is_refused(repo_settings: Settings, tmp_path: Path, device: str,
                                                        options: api.K8sOptions) -> None:
    with pytest.raises(K8sError):
        api.deploy_k8s(f"{QUERY} _{device}", inputs=TARGET, out_dir=tmp_path, options=options, settings=repo_settings)


def test_apply_without_a_kubeconfig_still_leaves_the_files(repo_settings: Settings, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx.k8s.apply import KubeconfigError

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    with pytest.raises(KubeconfigError):
        api.deploy_k8s(f"{QUERY} _cuda", inputs=TARGET, out_dir=tmp_path / "out", options=IMAGE, apply=True,
                       settings=repo_settings)
    assert (tmp_path / "out" / "10-deployment.yaml").is_file()
