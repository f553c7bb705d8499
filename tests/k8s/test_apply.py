"""--apply's two failures a user meets first: no kubeconfig, and a cluster that does not answer."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cmx.errors import CmxError
from cmx.k8s.apply import (
    ClusterError,
    KubeconfigError,
    apply,
    find_kubeconfig,
    kubeconfig_paths,
)
from cmx.k8s.stacks import objects
from tests.k8s.conftest import make_spec


def test_no_kubeconfig_names_where_it_looked_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError) as err:
        find_kubeconfig(environ={}, home=tmp_path)
    text = err.value.render()
    assert str(tmp_path / ".kube" / "config") in text and "KUBECONFIG" in text and "kubectl apply -f" in text
    assert isinstance(err.value, CmxError)


def test_kubeconfig_is_found_as_kubectl_finds_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("x")
    assert kubeconfig_paths({"KUBECONFIG": f"{a}:{b}"}) == [a, b]
    assert find_kubeconfig({"KUBECONFIG": f"{a}:{b}"}) == b
    with pytest.raises(KubeconfigError, match=str(a)):
        find_kubeconfig({"KUBECONFIG": str(a)}, home=tmp_path)


def test_apply_without_a_kubeconfig_fails_before_contacting_anything(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(KubeconfigError, match="missing"):
        apply([m.body for m in objects(make_spec("cuda"))])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
users:
- name: me
  user: {{token: not-a-real-token}}
contexts:
- name: nowhere
  context: {{cluster: nowhere, user: me, namespace: mlperf}}
current-context: nowhere
"""


def test_an_unreachable_cluster_is_one_error_naming_its_server(tmp_path: Path) -> None:
    port = _closed_port()
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.format(port=port))
    with pytest.raises(ClusterError) as err:
        apply([m.body for m in objects(make_spec("rocm"))], kubeconfig=config)
    assert f"https://127.0.0.1:{port}" in err.value.message
    assert "cannot reach" in err.value.message and err.value.hint


def test_an_unusable_kubeconfig_is_named(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    with pytest.raises(KubeconfigError, match=str(config)):
        apply([], kubeconfig=config)
