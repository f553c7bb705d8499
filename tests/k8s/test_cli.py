"""`cmx deploy` as a user runs it: a real process, the repository's recipes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cmx.k8s.validate import validate
from tests.conftest import CMX, REPO, Home


@pytest.fixture
def repo_home(home: Home) -> Home:
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    return home


@pytest.mark.parametrize("device, resource, other", [("rocm", "amd.com/gpu", "nvidia"),
                                                     ("cuda", "nvidia.com/gpu", "amd.com")])
def test_deploy_writes_valid_manifests_of_the_devices_vendor_only(repo_home: Home, tmp_path: Path, device: str,
                                                                  resource: str, other: str) -> None:
    out = tmp_path / "k8s"
    proc = repo_home.cmx("deploy", f"app mlperf inference llama2 _{device}", "--k8s", str(out),
                         "-i", "target_qps_offline=60", check=True)
    assert "10-deployment.yaml" in proc.stdout and "benchmark image: cmx-app-mlperf-inference-llama2:" in proc.stdout
    texts = [p.read_text() for p in sorted(out.glob("*.yaml"))]
    assert len(texts) == 6
    for text in texts:
        validate(yaml.safe_load(text))
        assert other not in text.lower()
    assert resource in "".join(texts)


def test_deploy_json_summarises(repo_home: Home, tmp_path: Path) -> None:
    proc = repo_home.cmx("deploy", "app mlperf inference llama2 _rocm", "--k8s", str(tmp_path / "o"), "--json",
                         "-i", "target_qps_offline=60",
                         "--image", "r.example.com/cmx:1", "--nodes", "2", check=True)
    summary = json.loads(proc.stdout)
    assert summary["gpu_resource"] == "amd.com/gpu" and summary["image"] == "r.example.com/cmx:1"
    assert "LeaderWorkerSet" in [o["kind"] for o in summary["objects"]]


def test_deploy_reads_an_inputs_file_and_passes_its_values_to_the_jobs_run(repo_home: Home, tmp_path: Path) -> None:
    inputs = tmp_path / "node.yaml"
    inputs.write_text("target_qps_offline: 60\ntensor_parallel_size: 8\n", encoding="utf-8")
    repo_home.cmx("deploy", "app mlperf inference llama2 _cuda", "--k8s", str(tmp_path / "o"), "--inputs-file",
                  str(inputs), "--image", "r/x:1", check=True)
    job = (tmp_path / "o" / "91-job-benchmark.yaml").read_text()
    assert "target_qps_offline=60" in job and "tensor_parallel_size=8" in job


def test_deploy_of_a_cpu_plan_is_one_error(repo_home: Home, tmp_path: Path) -> None:
    proc = repo_home.cmx("deploy", "app mlperf inference llama2 _cpu", "--k8s", str(tmp_path / "o"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("error:") == 1 and "supported devices: cuda, rocm" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_deploy_apply_with_an_unreachable_cluster_names_the_server(repo_home: Home, tmp_path: Path) -> None:
    from tests.k8s.test_apply import KUBECONFIG, _closed_port

    port = _closed_port()
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.format(port=port))
    proc = subprocess.run([*CMX, "deploy", "app mlperf inference llama2 _cuda", "--k8s", str(tmp_path / "o"),
                           "--apply", "--image", "r/x:1", "-i", "target_qps_offline=60"],
                          env={**repo_home.env, "KUBECONFIG": str(config)},
                          cwd=repo_home.root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and f"https://127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr


def test_deploy_renders_the_chosen_stack_and_says_what_it_was_checked_against(repo_home: Home, tmp_path: Path) -> None:
    proc = repo_home.cmx("deploy", "app mlperf inference deepseek-r1 _cuda", "--k8s", str(tmp_path / "o"),
                         "--stack", "dynamo", "--input", "tensor_parallel_size=8", "-i", "target_qps_offline=60",
                         "--prefill-workers", "2",
                         "--decode-tp", "4", "--router", "round-robin", "--image", "r/x:1", check=True)
    assert "NVIDIA Dynamo (round-robin routing): 2 prefill x TP 8 + 1 decode x TP 4" in proc.stdout
    assert "DynamoGraphDeployment: no CRD at hand, only the pod specs checked" in proc.stdout
    assert "the cluster needs dynamographdeployments.nvidia.com" in proc.stdout
    graph = yaml.safe_load((tmp_path / "o" / "10-dynamographdeployment.yaml").read_text())
    assert graph["spec"]["services"]["VllmPrefillWorker"]["replicas"] == 2
    assert "```mermaid" in (tmp_path / "o" / "README.md").read_text()


def test_an_option_of_another_stack_is_one_error(repo_home: Home, tmp_path: Path) -> None:
    proc = repo_home.cmx("deploy", "app mlperf inference llama2 _cuda", "--k8s", str(tmp_path / "o"),
                         "--stack", "llm-d", "--router", "kv")
    assert proc.returncode == 1 and "--router is not an option of --stack llm-d --llm-d-form kserve" in proc.stderr
    assert not (tmp_path / "o").exists()
