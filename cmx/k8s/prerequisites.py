"""The CustomResourceDefinitions a serving stack's objects need, and how each one's own docs install it.

A stack names what it needs (cmx.k8s.stack); `cmx deploy --apply` refuses a cluster that lacks one
(cmx.k8s.cluster.require), and the rendered README lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

GATEWAY_API_INSTALL = ("kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/"
                       "download/v1.5.1/standard-install.yaml")
GIE_INSTALL = ("kubectl apply -f https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/"
               "download/v1.5.0/manifests.yaml")
LWS_INSTALL = ("kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws/releases/download/v0.10.0/"
               "manifests.yaml")
KSERVE_INSTALL = ("helm install kserve-llmisvc-crd oci://ghcr.io/kserve/charts/kserve-llmisvc-crd -n kserve "
                  "--create-namespace && helm install kserve-llmisvc-resources "
                  "oci://ghcr.io/kserve/charts/kserve-llmisvc-resources -n kserve (KServe's llmisvc install; it "
                  "also needs cert-manager and a gateway: see KServe's docs)")
ISTIO_INSTALL = "istioctl install --set values.pilot.env.ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true"
DYNAMO_INSTALL = ("helm fetch https://helm.ngc.nvidia.com/nvidia/ai-dynamo/charts/dynamo-platform-${RELEASE}.tgz && "
                  "helm install dynamo-platform dynamo-platform-${RELEASE}.tgz -n dynamo-system --create-namespace "
                  "(Dynamo's platform chart installs its CRDs and operator)")


@dataclass(frozen=True)
class Requirement:
    """A CustomResourceDefinition the stack's objects need, and how its own docs install it."""

    crd: str          # plural.group, as `kubectl get crd` lists it
    what: str
    install: str


LWS = Requirement("leaderworkersets.leaderworkerset.x-k8s.io", "LeaderWorkerSet (a model across nodes)", LWS_INSTALL)
GATEWAY = Requirement("gateways.gateway.networking.k8s.io", "Gateway API's Gateway", GATEWAY_API_INSTALL)
ROUTE = Requirement("httproutes.gateway.networking.k8s.io", "Gateway API's HTTPRoute", GATEWAY_API_INSTALL)
POOL = Requirement("inferencepools.inference.networking.k8s.io", "the Inference Extension's InferencePool",
                   GIE_INSTALL)
KSERVE = Requirement("llminferenceservices.serving.kserve.io", "KServe's LLMInferenceService", KSERVE_INSTALL)
ISTIO = Requirement("destinationrules.networking.istio.io", "Istio's DestinationRule (the Istio gateway)",
                    ISTIO_INSTALL)
DYNAMO = Requirement("dynamographdeployments.nvidia.com", "Dynamo's DynamoGraphDeployment (its operator)",
                     DYNAMO_INSTALL)
