"""systems/<system>.json: the fields detection can fill, merged with a user file, and the checks a description
must pass.

A description is built in three layers, each overriding the one before: what the run detected
(`detected_fields`, from the RunOrigin cmx_run.json keeps), the user's file (`--input
system_file=...`, YAML or JSON, for what no program can see: status, cooling, networking), and
the packager's own division and submitter. `description_problems` then says, field by field,
what is missing or wrong and what to put there; the packager refuses while it says anything,
and `cmx check` reports the same sentences for a tree made by anyone.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from cmx import DISTRIBUTION
from cmx.errors import CmxError
from cmx.mlperf.provenance import RunOrigin
from cmx.mlperf.rounds import Round
from cmx.mlperf.serving_stack import ServingStack
from cmx.secrets import environment_redactor

GIB = 1 << 30

# What to write in each field that detection cannot fill, shown when it is missing.
FIELD_ADVICE: dict[str, str] = {
    "status": "available (anyone can buy or rent it), preview, or rdi (research, development, internal)",
    "system_name": 'the product or a descriptive name, like "Supermicro AS-8125GS-TNMR2 (8x MI300X)"',
    "system_type": 'datacenter (or edge)',
    "number_of_nodes": '"1" for one server',
    "host_processor_model_name": 'the CPU model, like "AMD EPYC 9575F"',
    "host_processors_per_node": 'the CPU sockets, like "2"',
    "host_processor_core_count": 'physical cores per processor, like "64"',
    "host_memory_capacity": 'like "1.5 TB"',
    "host_memory_configuration": 'DIMMs, like "24x 64GB DDR5-6000"',
    "host_storage_capacity": 'like "4 TB"',
    "host_storage_type": 'like "NVMe SSD"',
    "host_networking": 'like "Ethernet 100 Gbit/s", or "N/A" for a single node benchmark',
    "host_networking_topology": 'like "N/A" for a single node',
    "host_network_card_count": 'like "1x 100GbE" or "N/A"',
    "accelerators_per_node": 'GPUs in the node, like "8" ("0" for none)',
    "accelerator_model_name": 'like "NVIDIA H100-SXM-80GB", or "N/A" without accelerators',
    "accelerator_memory_capacity": 'memory per accelerator, like "80 GB"',
    "accelerator_memory_configuration": 'like "HBM3"',
    "accelerator_host_interconnect": 'like "PCIe Gen5 x16"',
    "accelerator_interconnect": 'like "NVLink 18x 26.5625 GT/s" or "XGMI"',
    "framework": 'the inference stack, like "vLLM 0.9.2, PyTorch 2.7.0, CUDA 12.8"',
    "operating_system": 'like "Ubuntu 22.04.4 LTS"',
    "other_software_stack": 'drivers and libraries, like "Python 3.11, CUDA driver 570.124"',
    "cooling": 'like "air" or "liquid"',
}


class SystemDescriptionError(CmxError):
    """A user's system file cannot be read or names a field the round does not have."""


@dataclass(frozen=True)
class FieldProblem:
    """One field of a system description that the checker would reject, and what to do."""

    field: str
    found: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.found}; {self.fix}"


# --- building ---------------------------------------------------------------------------------

def detected_fields(origin: RunOrigin | None, device: str = "",
                    backend: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The fields a run's own detection answers (CPU, memory, GPUs, OS, software), as strings.

    `device` (cuda, rocm, cpu) is what the run ran on: only its GPU stack is named in framework.
    `backend` is cmx_run.json's record of how the SUT reached the model: for an endpoint, framework
    names the server's software and version as the server reported them, and sw_notes says so."""
    if origin is None:
        return {}
    sysf, sw = origin.system, origin.software
    out: dict[str, str] = {"number_of_nodes": "1", "system_type": "datacenter"}
    if sysf.get("cpu_model"):
        out["host_processor_model_name"] = str(sysf["cpu_model"])
    if sysf.get("sockets"):
        out["host_processors_per_node"] = str(sysf["sockets"])
    if sysf.get("cores_per_socket"):
        out["host_processor_core_count"] = str(sysf["cores_per_socket"])
    if sysf.get("memory_bytes"):
        out["host_memory_capacity"] = f"{sysf['memory_bytes'] / GIB:.0f} GiB"
    if sysf.get("storage_bytes"):
        out["host_storage_capacity"] = f"{sysf['storage_bytes'] / 1e9:.0f} GB"
    if sysf.get("os"):
        out["operating_system"] = f"{sysf['os']} (kernel {sysf['kernel']})" if sysf.get("kernel") else str(sysf["os"])
    gpus = [g for g in sysf.get("gpus") or [] if isinstance(g, Mapping)]
    out["accelerators_per_node"] = str(len(gpus))  # "0", never 0: the checker reads 0 as empty
    if gpus:
        out["accelerator_model_name"] = str(gpus[0].get("name") or "")
        if gpus[0].get("memory_mib"):
            out["accelerator_memory_capacity"] = f"{int(gpus[0]['memory_mib']) / 1024:.0f} GiB"
    else:  # no accelerator: these are facts, not blanks
        for name in ("accelerator_model_name", "accelerator_memory_capacity", "accelerator_memory_configuration",
                     "accelerator_host_interconnect", "accelerator_interconnect"):
            out[name] = "N/A"
    out["framework"] = framework_string(origin, device)
    if backend and backend.get("kind") == "endpoint":
        server = " ".join(p for p in served_software(backend) if p)
        out["framework"] = f"{server or 'an OpenAI-compatible server'} (OpenAI-compatible server, over HTTP)"
        out["sw_notes"] = endpoint_note(backend)
        stack = served_by(backend)
        if stack is not None:
            out.update(stack_fields(stack, out))
    software = [f"Python {origin.python}" if origin.python else "",
                f"mlcommons-loadgen {sw['loadgen']}" if sw.get("loadgen") else "",
                f"{DISTRIBUTION} {origin.cmx_version}" if origin.cmx_version else "",
                f"GPU driver {sysf['driver_version']}" if sysf.get("driver_version") else ""]
    out["other_software_stack"] = ", ".join(s for s in software if s)
    return {k: v for k, v in out.items() if v}


def served_software(backend: Mapping[str, Any]) -> tuple[str, str]:
    """The software and version an endpoint run's server reported ("" for what it did not): its listing's, or,
    for a disaggregated topology cmx started (whose proxy has no listing), what its decode instance said."""
    topology = backend.get("topology")
    served = topology.get("served") if isinstance(topology, Mapping) else None
    served = served if isinstance(served, Mapping) else {}
    return (str(backend.get("server_software") or served.get("software") or ""),
            str(backend.get("server_version") or served.get("version") or ""))


def served_by(backend: Mapping[str, Any]) -> ServingStack | None:
    """The serving stack cmx_run.json records behind the endpoint (`cmx deploy`'s), None when none is."""
    data = backend.get("stack")
    return ServingStack.from_json(data, "cmx_run.json's backend.stack") if isinstance(data, Mapping) else None


def stack_fields(stack: ServingStack, detected: Mapping[str, str]) -> dict[str, str]:
    """The fields a deployed stack answers, over what the benchmark Job's own pod detected (no GPU there: the
    stack's pods had them). number_of_nodes: the nodes its serving pods ran on, read from the cluster, or
    their pods' count when the deploy could not read them (sw_notes then says so). sw_notes keeps the
    endpoint sentence and adds what served."""
    nodes = stack.nodes or stack.pods
    counted = ("the nodes its serving pods ran on" if stack.nodes
               else "its serving pods (the nodes were not read from the cluster)")
    versions = ", ".join(f"{k} {v}" for k, v in sorted(stack.versions.items()))
    note = (f"served by {stack.title()}: {stack.topology()}; number_of_nodes counts {counted}"
            + (f"; versions: {versions}" if versions else ""))
    fields = {"number_of_nodes": str(nodes), "sw_notes": "; ".join(n for n in (detected.get("sw_notes"), note) if n)}
    # the Job's pod has no GPU: its "N/A" accelerator facts are not the system's
    fields.update({k: "" for k, v in detected.items() if k.startswith("accelerator") and v in ("N/A", "0")})
    if stack.gpus and stack.gpus % nodes == 0:
        fields["accelerators_per_node"] = str(stack.gpus // nodes)
    if stack.gpu_name:
        fields["accelerator_model_name"] = stack.gpu_name
    return fields


ENDPOINT_NOTE = re.compile(r"SUT over HTTP: a (local|remote) OpenAI-compatible server")


def endpoint_is_remote(url: str) -> bool:
    """Whether an endpoint URL names another host (anything but loopback)."""
    host = (urlsplit(url).hostname or "").lower()
    return not (host == "localhost" or host == "::1" or host.startswith("127."))


def endpoint_note(backend: Mapping[str, Any]) -> str:
    """sw_notes for an endpoint run: `cmx check` reads the local/remote word back (ENDPOINT_NOTE)."""
    where = "remote" if endpoint_is_remote(str(backend.get("url") or "")) else "local"
    server = " ".join(p for p in served_software(backend) if p) or "unknown"
    started = ", started by cmx" if backend.get("started_by_cmx") else ""
    head = f"SUT over HTTP: a {where} OpenAI-compatible server ({server}{started}); LoadGen's SUT sends each "
    if backend.get("video_route"):  # a text-to-video run: a prompt out, an mp4 back (no tokens either way)
        return (f"{head}prompt to POST /v1{backend.get('video_path')} ({backend.get('video_route')}) and keeps the mp4 "
                "it answers")
    return (f"{head}sample to POST /v1/completions as token ids, token ids back from the "
            f"{backend.get('token_ids_source') or 'server'}")


def framework_string(origin: RunOrigin, device: str = "") -> str:
    """ "vLLM 0.32.0, PyTorch 2.9.0+cpu" plus the CUDA or ROCm release of the device the run used (a CUDA
    toolkit installed beside a CPU run is not part of its stack)."""
    sw, sysf = origin.software, origin.system
    parts = [f"vLLM {sw['vllm']}" if sw.get("vllm") else "", f"PyTorch {sw['torch']}" if sw.get("torch") else "",
             f"CUDA {sysf['cuda_version']}" if device == "cuda" and sysf.get("cuda_version") else "",
             f"ROCm {sysf['rocm_version']}" if device == "rocm" and sysf.get("rocm_version") else ""]
    return ", ".join(p for p in parts if p)


def read_user_file(path: Path, round_: Round) -> dict[str, str]:
    """A user's system file (YAML or JSON mapping of field: value), every value as the string the checker wants."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML
    except FileNotFoundError:
        raise SystemDescriptionError(f"the system file {path} does not exist",
                                     hint="give --input system_file=FILE with the fields detection cannot fill "
                                          "(see docs/submission.md)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SystemDescriptionError(f"the system file is not valid YAML or JSON: {getattr(exc, 'problem', exc)}",
                                     where=where) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SystemDescriptionError("the system file must be a mapping of field: value", where=str(path))
    known = round_.submission.system_fields
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            raise SystemDescriptionError(f"the system file names an unknown field {key!r}", where=str(path),
                                         hint=f"did you mean {close[0]!r}?" if close else
                                         f"the fields of {round_.name} are listed in docs/submission.md")
        out[key] = as_field_text(value)
    return out


def as_field_text(value: Any) -> str:
    """A value as the checker wants it: numbers as text ("0", not 0), booleans as text, None as ""."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def build_description(round_: Round, *, detected: Mapping[str, str], user: Mapping[str, str], division: str,
                      submitter: str) -> dict[str, str]:
    """Every field of the round, detection < user file < the packager's division and submitter, sorted by name.
    An endpoint run's sw_notes sentence is kept after the user's own notes: it says what the SUT was."""
    merged = {name: "" for name in round_.submission.system_fields}
    merged.update(detected)
    merged.update(user)
    note = detected.get("sw_notes", "")
    if ENDPOINT_NOTE.search(note) and note not in merged.get("sw_notes", ""):
        merged["sw_notes"] = "; ".join(n for n in (str(user.get("sw_notes") or "").strip(), note) if n)
    merged.update(division=division, submitter=submitter)
    return dict(sorted(merged.items()))


# --- checking ---------------------------------------------------------------------------------

def description_problems(desc: Mapping[str, Any], round_: Round, *, division: str | None = None,
                         submitter: str | None = None) -> list[FieldProblem]:
    """Every field the round's checker would reject: missing, empty, 0 where text is due, a value out of its set."""
    rules = round_.submission
    out: list[FieldProblem] = []
    for name in rules.system_fields:
        if name not in desc:
            out.append(FieldProblem(name, "missing", _fill(name)))
            continue
        value = desc[name]
        if name in rules.system_fields_may_be_empty:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            out.append(FieldProblem(name, "the number 0, which the checker reads as empty",
                                    'write it as the string "0"'))
        elif value is None or (isinstance(value, str) and not value.strip()):
            out.append(FieldProblem(name, "empty", _fill(name)))
    status = str(desc.get("status", "")).strip()
    if status and status.lower() not in rules.status_values:
        out.append(FieldProblem("status", repr(status), f"use one of {', '.join(rules.status_values)}"))
    kind = str(desc.get("system_type", "")).strip()
    if kind and kind not in rules.system_types:
        out.append(FieldProblem("system_type", repr(kind), f"use one of {', '.join(rules.system_types)}"))
    if division is not None and desc.get("division") not in (None, "", division):
        out.append(FieldProblem("division", repr(desc.get("division")),
                                f"it must equal the division folder it is in, {division!r}"))
    if submitter is not None and str(desc.get("submitter") or "").lower() not in ("", submitter.lower()):
        out.append(FieldProblem("submitter", repr(desc.get("submitter")),
                                f"it must equal the submitter folder it is in, {submitter!r}"))
    note = ENDPOINT_NOTE.search(str(desc.get("sw_notes") or ""))
    if division == "closed" and note and note.group(1) == "remote":
        out.append(FieldProblem("sw_notes", "a SUT that sent its samples over HTTP to a server on another host",
                                "the closed division measures the system described, with LoadGen on it; cmx does not "
                                "make network-division results (LoadGen over the network): package it for open"))
    if "is_network" in desc:
        out += _network_problems(desc["is_network"], division)
    elif division == "network":
        out.append(FieldProblem("is_network", "missing",
                                'a system in the network division must say is_network: "true"'))
    return out


def _network_problems(value: Any, division: str | None) -> list[FieldProblem]:
    """The checker reads is_network as a string, and adds the network fields whenever it is non-empty."""
    if not isinstance(value, str):
        return [FieldProblem("is_network", f"{json.dumps(value)} (not a string)",
                             "leave is_network out unless this is a network submission (then write \"true\")")]
    if value.strip().lower() != "true":
        return [FieldProblem("is_network", repr(value), "leave is_network out unless this is a network submission: "
                             "the checker reads any non-empty value, \"false\" too, as one and then wants the "
                             "network fields")]
    if division == "closed":
        return [FieldProblem("is_network", repr(value), "a network system belongs in the network division")]
    return []


def _fill(name: str) -> str:
    advice = FIELD_ADVICE.get(name)
    return f"put it in the system file (--input system_file=FILE): {advice}" if advice else \
        "put it in the system file (--input system_file=FILE)"


def write_description(desc: Mapping[str, str], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # sw_notes quote the server's own words (cmx_run.json): an older cmx's record may hold a secret
    path.write_text(json.dumps(environment_redactor().redact_json(dict(desc)), indent=4) + "\n", encoding="utf-8")
    return path
