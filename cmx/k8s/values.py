"""The formats and ranges of the values `cmx deploy --k8s` puts into objects, checked before anything is rendered or
written, each refused in one line that names the flag and the rule.

kubernetes-validate checks the objects' types and fields, not the formats of names nor the int32 range of a
count, so a name with a newline or 99999999999999999999 replicas would reach the API server as "validated".
Every stack (vllm, llm-d, dynamo) builds its objects from a ServingSpec, its StackOptions and a ServedModel, and
all three check themselves here. The rules are Kubernetes' own (apimachinery's validation: DNS-1123 labels and
subdomains, quantities, group ids, int32 counts), the container image grammar of distribution/reference, and the
Hugging Face Hub's rule for repository ids; on top of the API server's ranges, ranges no real deployment leaves
(see the constants), so a typo'd count is refused here instead of queueing a billion pods.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from cmx.errors import cut_repr
from cmx.k8s import K8sError

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Kubernetes supports clusters of up to 5,000 nodes (its documented scalability limits): pods one model spans
MAX_NODES = 5_000
# replicas or workers of one model: beyond any serving system (MLPerf's largest entries use a few hundred GPUs),
# and far below the int32 the API server takes
MAX_REPLICAS = 10_000
# GPUs one pod asks for: nodes carry 8 (16 at most, HGX-2), and 64 leaves room for partitioned devices (an MI300X
# node in CPX mode shows 64)
MAX_GPUS = 64
# the largest volume worth asking for: llama3.1-405b's model cache is 1150Gi
MAX_STORAGE = 2**50  # 1Pi
# Kubernetes' IsValidGroupID
MAX_GROUP_ID = INT32_MAX
MAX_TEXT = 200
SHOWN = 60

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUANTITY = re.compile(r"(?P<num>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
_SUFFIX = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
# distribution/reference's grammar (reference/regexp.go), ASCII only
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_IMAGE = re.compile(rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*)"
                    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")
# huggingface_hub's validate_repo_id, anchored for real (its `$` lets a trailing newline through) and ASCII
_HF_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HF_REPO = re.compile(rf"(?:{_HF_PART}/)?{_HF_PART}")
_REVISION = re.compile(r"[0-9a-f]{40}|[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}")


class InvalidValue(K8sError):
    """A flag's or input's value that the cluster would refuse, or that no real deployment has."""


def show(value: object) -> str:
    """The value as a message echoes it: repr (a newline shows as \\n), cut to SHOWN characters."""
    if isinstance(value, int) and value.bit_length() > 200:  # repr of a huge int is slow, or refused past 4300 digits
        return f"(an integer of {value.bit_length()} bits)"
    return cut_repr(value, SHOWN)


def _refuse(flag: str, value: object, rule: str, hint: str | None = None) -> InvalidValue:
    return InvalidValue(f"{flag} {show(value)} is not {rule}", hint=hint)


def count(flag: str, value: object, low: int, high: int, why: str = "") -> None:
    """An integer in [low, high] (an int32 count, further bounded by what real deployments use)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise _refuse(flag, value, "an integer")
    if not low <= value <= high:
        raise _refuse(flag, value, f"between {low:,} and {high:,}{' (' + why + ')' if why else ''}")


def dns_label(flag: str, value: str, max_length: int = 63) -> None:
    """A DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric (namespaces)."""
    if not isinstance(value, str) or len(value) > max_length or not _DNS_LABEL.fullmatch(value):
        raise _refuse(flag, value, f"a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
                                   f"with a letter or digit, at most {max_length} characters)")


def dns_subdomain(flag: str, value: str) -> None:
    """A DNS-1123 subdomain: DNS labels joined by '.', at most 253 characters (Secret, StorageClass, Gateway,
    GatewayClass and RuntimeClass names)."""
    if not isinstance(value, str) or not 0 < len(value) <= 253 or \
            not all(_DNS_LABEL.fullmatch(part) for part in value.split(".")):
        raise _refuse(flag, value, "a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', each part "
                                   "starting and ending with a letter or digit, at most 253 characters)")


def quantity(flag: str, value: str, high: int = MAX_STORAGE) -> None:
    """A Kubernetes quantity of bytes above 0 and at most `high` (200Gi, 10G, 1.5Ti)."""
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise _refuse(flag, value, "a Kubernetes quantity", hint="write it like 200Gi")
    size = float(match["num"]) * _SUFFIX[match["suffix"]]
    if not 0 < size <= high:
        raise _refuse(flag, value, f"a size above 0 and at most {high // 2**50}Pi")


def image(flag: str, value: str) -> None:
    """A container image reference: [registry[:port]/]path[:tag][@digest], as distribution/reference parses it."""
    match = _IMAGE.fullmatch(value) if isinstance(value, str) else None
    if match is None or len(match["name"]) > 255:
        raise _refuse(flag, value, "a container image reference", hint="write it like registry.example.com/"
                                                                         "team/cmx:1.0 or NAME@sha256:DIGEST")


def repo_id(flag: str, value: str) -> None:
    """A Hugging Face repository id: NAME or OWNER/NAME, letters, digits, '_', '.', '-', no '--' or '..', at most
    96 characters a part, not ending in .git."""
    if not isinstance(value, str) or not _HF_REPO.fullmatch(value) or "--" in value or ".." in value or \
            value.endswith(".git"):
        raise _refuse(flag, value, "a Hugging Face repository id (OWNER/NAME: letters, digits, '_', '.' and '-', "
                                   "no '--' or '..')")


def revision(flag: str, value: str) -> None:
    """A commit (40 hex digits), or a branch or tag name: no spaces, control characters or '..'."""
    if not isinstance(value, str) or not _REVISION.fullmatch(value) or ".." in value:
        raise _refuse(flag, value, "a commit (40 hex digits) or a branch or tag name")


def text(flag: str, value: str, max_length: int = MAX_TEXT) -> None:
    """Free text a pod's environment carries (a GPU's product name): printable, one line, bounded."""
    if not isinstance(value, str) or len(value) > max_length or not value.isprintable():
        raise _refuse(flag, value, f"one line of printable text of at most {max_length} characters")


def url(flag: str, value: str) -> None:
    """An http(s) URL with a host, and no whitespace or control characters."""
    ok = isinstance(value, str) and len(value) <= 2048 and value.isprintable() and " " not in value
    try:
        parts = urlsplit(value) if ok else None
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(flag, value, "an http(s) URL with a host", hint="write it like http://HOST:8000/v1")


__all__ = ["INT32_MAX", "INT64_MAX", "INT64_MIN", "MAX_GPUS", "MAX_NODES", "MAX_REPLICAS", "InvalidValue", "count",
           "dns_label", "dns_subdomain", "image", "quantity", "repo_id", "revision", "show", "text", "url"]
