"""Kubernetes manifests for serving a plan's model with vLLM and benchmarking it from a Job.

`cmx deploy QUERY --k8s OUT` resolves the query, finds the model the plan serves, and renders a
Deployment (or, across nodes, a LeaderWorkerSet) running `vllm serve` with the device profile's
engine arguments, a Service in front of it, the PersistentVolumeClaims for the model cache and the
results, and a Job that runs the same benchmark against the Service with the endpoint backend.
Every object is checked against the Kubernetes schemas offline before anything is written.

One small profile per device (cmx.k8s.devices) names the GPU resource and what a pod needs for
that vendor; a profile sets only its own vendor's fields, as cmx.docker's container profiles do.
"""

from __future__ import annotations

from cmx.errors import CmxError


class K8sError(CmxError):
    """The manifests cannot be rendered for this plan, are invalid, or cannot be applied."""
