"""What llm-d's two forms share: the stack's name and options, the endpoint picker's scorers and its config.

llm-d comes in two forms, each an entry of its own: kserve (cmx.k8s.llmd_kserve, the default: one KServe
LLMInferenceService, from which KServe makes the rest) and pieces (cmx.k8s.llmd_pieces: the upstream parts
llm-d's Helm guides install, rendered as objects). Scoring is the user's choice in both: `prefix` is llm-d's
inference-scheduling default (prefix-cache-aware, with queue depth and KV-cache use as the load half), `load`
the load half alone.
"""

from __future__ import annotations

from typing import Any

from cmx.k8s.manifests import ServingSpec
from cmx.k8s.stack import StackDefaults

# the scorers and their weights: llm-d's inference-scheduling guide (prefix 3, queue 2, KV-cache use 2)
SCORERS = {"prefix": (("prefix-cache-scorer", 3), ("queue-scorer", 2), ("kv-cache-utilization-scorer", 2)),
           "load": (("queue-scorer", 1), ("kv-cache-utilization-scorer", 1))}


def picker_config(scorer: str, api_version: str) -> dict[str, Any]:
    """The EndpointPickerConfig (of the group the form's picker reads): one scheduling profile, the scorers of
    `scorer` with their weights, the highest score picked."""
    scorers = SCORERS[scorer]
    return {
        "apiVersion": api_version, "kind": "EndpointPickerConfig",
        "plugins": [{"type": "single-profile-handler"}, *({"type": name} for name, _ in scorers),
                    {"type": "max-score-picker"}],
        "schedulingProfiles": [{"name": "default", "plugins": [*({"pluginRef": name, "weight": weight}
                                                                  for name, weight in scorers),
                                                                {"pluginRef": "max-score-picker"}]}],
    }


class LlmdStack(StackDefaults):
    """--stack llm-d: `replicas` vLLM pods the endpoint picker spreads requests over, scored by --scorer."""

    options = frozenset({"llmd_form", "scorer", "replicas"})

    def routing(self, spec: ServingSpec) -> str:
        return spec.stack.scorer


__all__ = ["SCORERS", "LlmdStack", "picker_config"]
