"""The fields NVIDIA Dynamo's DynamoGraphDeployment CRD defines, for the fields cmx renders: its types, enums,
bounds and required lists as ai-dynamo/dynamo defines them (deploy/cloud/operator/config/crd/bases/
nvidia.com_dynamographdeployments.yaml at 967e177cc575, group nvidia.com, version v1alpha1).

Not the CRD itself (the project copies no other repository's files, and it is 777 kB, mostly the PodSpec
inlined): a structural schema written here from the fields it defines. Where the real CRD inlines
Kubernetes' PodSpec and Container (extraPodSpec and its mainContainer), this one keeps unknown fields, and
cmx checks those pod specs against Kubernetes' own PodTemplateSpec instead (cmx.k8s.validate).
"""

from __future__ import annotations

from typing import Any

_STRING: dict[str, Any] = {"type": "string"}
_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_ENV = {"type": "array", "items": {"type": "object", "required": ["name"],
                                   "properties": {"name": _STRING, "value": _STRING,
                                                  "valueFrom": {"type": "object",
                                                                "x-kubernetes-preserve-unknown-fields": True}}}}
# requests and limits are Dynamo's own struct, not a ResourceList: gpu is a string, gpuType names the resource
_RESOURCE_ITEM = {"type": "object", "properties": {"cpu": _STRING, "memory": _STRING, "gpu": _STRING,
                                                   "gpuType": _STRING, "custom": _MAP}}
_SERVICE = {
    "type": "object",
    "properties": {
        "annotations": _MAP, "labels": _MAP,
        "componentType": _STRING, "subComponentType": _STRING, "dynamoNamespace": _STRING,
        "globalDynamoNamespace": {"type": "boolean"}, "serviceName": _STRING,
        "replicas": {"type": "integer", "format": "int32"},
        "resources": {"type": "object", "properties": {"requests": _RESOURCE_ITEM, "limits": _RESOURCE_ITEM,
                                                       "claims": {"type": "array", "items": {
                                                           "type": "object", "required": ["name"],
                                                           "properties": {"name": _STRING, "request": _STRING}}}}},
        "envs": _ENV, "envFromSecret": _STRING,
        "volumeMounts": {"type": "array", "items": {"type": "object", "required": ["name"],
                                                    "properties": {"name": _STRING, "mountPoint": _STRING,
                                                                   "useAsCompilationCache": {"type": "boolean"}}}},
        "sharedMemory": {"type": "object", "properties": {"disabled": {"type": "boolean"},
                                                          "size": {"x-kubernetes-int-or-string": True}}},
        "multinode": {"type": "object", "required": ["nodeCount"],
                      "properties": {"nodeCount": {"type": "integer", "minimum": 2}}},
        "extraPodMetadata": {"type": "object", "properties": {"annotations": _MAP, "labels": _MAP}},
        "extraPodSpec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"mainContainer": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}},
        "livenessProbe": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "readinessProbe": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "backendFramework": {"type": "string", "enum": ["sglang", "vllm", "trtllm"]},
            "envs": _ENV,
            "pvcs": {"type": "array", "maxItems": 100, "items": {
                "type": "object", "required": ["name"],
                "properties": {"create": {"type": "boolean"}, "name": _STRING,
                               "size": {"x-kubernetes-int-or-string": True}, "storageClass": _STRING,
                               "volumeAccessMode": _STRING}}},
            "services": {"type": "object", "maxProperties": 25, "additionalProperties": _SERVICE},
        }},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def dynamo_crd() -> dict[str, Any]:
    """A CustomResourceDefinition object of DynamoGraphDeployment with the schema above."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "dynamographdeployments.nvidia.com"},
            "spec": {"group": "nvidia.com", "scope": "Namespaced",
                     "names": {"kind": "DynamoGraphDeployment", "plural": "dynamographdeployments",
                               "singular": "dynamographdeployment", "listKind": "DynamoGraphDeploymentList"},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": SCHEMA}, "subresources": {"status": {}}}]}}
