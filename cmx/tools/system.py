"""What the host is (OS, kernel, CPU, memory, Python), read from /etc and /proc without running anything."""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

OS_RELEASE_FILES = ("/etc/os-release", "/usr/lib/os-release")  # the order os-release(5) says to try

# ARM cores by (implementer, part), for kernels whose /proc/cpuinfo has no "model name"; the
# same ids lscpu maps, limited to the server cores an MLPerf host is likely to have
_ARM_CORES = {
    ("0x41", "0xd0c"): "ARM Neoverse-N1",
    ("0x41", "0xd40"): "ARM Neoverse-V1",
    ("0x41", "0xd49"): "ARM Neoverse-N2",
    ("0x41", "0xd4f"): "ARM Neoverse-V2",
    ("0x41", "0xd8e"): "ARM Neoverse-N3",
    ("0x41", "0xd84"): "ARM Neoverse-V3",
    ("0xc0", "0xac3"): "Ampere-1",
    ("0xc0", "0xac4"): "Ampere-1a",
}


@dataclass(frozen=True)
class OsRelease:
    """The fields of os-release(5) a report needs; "" where the file does not say."""

    name: str
    version_id: str
    pretty_name: str
    id: str = ""


@dataclass(frozen=True)
class CpuInfo:
    """`logical`: CPUs the OS schedules on. `sockets` and `cores_per_socket` (physical cores)
    are None where /proc/cpuinfo does not show them (most ARM kernels)."""

    model: str
    logical: int
    sockets: int | None
    cores_per_socket: int | None


@dataclass(frozen=True)
class SystemInfo:
    os: OsRelease
    kernel: str
    arch: str
    cpu: CpuInfo
    memory_bytes: int
    python_version: str
    python_executable: str
    storage_bytes: int = 0  # the size of the filesystem holding / (0 when it cannot be read)


def parse_os_release(text: str) -> OsRelease:
    """Parse os-release(5): KEY=value lines, values quoted as in a shell."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        try:
            parts = shlex.split(raw)
        except ValueError:  # an unbalanced quote: keep the text as written
            parts = [raw.strip("\"'")]
        fields[key.strip()] = " ".join(parts)
    name = fields.get("NAME", "")
    pretty = fields.get("PRETTY_NAME") or " ".join(p for p in (name, fields.get("VERSION", "")) if p)
    return OsRelease(name=name, version_id=fields.get("VERSION_ID", ""), pretty_name=pretty, id=fields.get("ID", ""))


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = [{}]
    for line in text.splitlines():
        if not line.strip():
            if blocks[-1]:
                blocks.append({})
            continue
        key, sep, value = line.partition(":")
        if sep:
            blocks[-1].setdefault(key.strip(), value.strip())
    return [b for b in blocks if b]


def _cpu_model(blocks: list[dict[str, str]]) -> str:
    for block in blocks:
        # x86 "model name"; POWER "cpu"; MIPS "cpu model"; 32-bit ARM and some SoCs "Hardware"
        for key in ("model name", "cpu model", "cpu", "Hardware"):
            if block.get(key):
                return block[key]
    for block in blocks:
        implementer, part = block.get("CPU implementer", "").lower(), block.get("CPU part", "").lower()
        if implementer and part:
            return _ARM_CORES.get((implementer, part), f"ARM CPU (implementer {implementer}, part {part})")
    return ""


def parse_cpuinfo(text: str) -> CpuInfo:
    """Model, logical CPUs, sockets and physical cores per socket from /proc/cpuinfo."""
    blocks = _cpuinfo_blocks(text)
    processors = [b for b in blocks if "processor" in b]
    sockets = {b["physical id"] for b in processors if "physical id" in b}
    cores = [b["cpu cores"] for b in processors if b.get("cpu cores", "").isdigit()]
    return CpuInfo(model=_cpu_model(blocks), logical=len(processors), sockets=len(sockets) or None,
                   cores_per_socket=int(cores[0]) if cores else None)


def parse_meminfo(text: str) -> int:
    """Total memory in bytes from /proc/meminfo's MemTotal (its "kB" are KiB)."""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    if not match:
        raise ValueError("no MemTotal line in /proc/meminfo")
    return int(match.group(1)) * 1024


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def read_os_release(paths: tuple[str, ...] = OS_RELEASE_FILES) -> OsRelease:
    for path in paths:
        text = _read(path)
        if text is not None:
            return parse_os_release(text)
    uname = os.uname()
    return OsRelease(name=uname.sysname, version_id="", pretty_name=f"{uname.sysname} {uname.release}")


def read_cpu(path: str = "/proc/cpuinfo") -> CpuInfo:
    parsed = parse_cpuinfo(_read(path) or "")
    # os.cpu_count() is what the scheduler uses; some ARM kernels list only online CPUs in cpuinfo
    logical = os.cpu_count() or parsed.logical
    return CpuInfo(model=parsed.model or os.uname().machine, logical=logical, sockets=parsed.sockets,
                   cores_per_socket=parsed.cores_per_socket)


def read_memory_bytes(path: str = "/proc/meminfo") -> int:
    text = _read(path)
    if text is not None:
        try:
            return parse_meminfo(text)
        except ValueError:
            pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def detect_system() -> SystemInfo:
    """Everything above, for this host and the Python running cmx."""
    uname = os.uname()
    return SystemInfo(os=read_os_release(), kernel=uname.release, arch=uname.machine, cpu=read_cpu(),
                      memory_bytes=read_memory_bytes(), python_version=platform.python_version(),
                      python_executable=sys.executable, storage_bytes=read_storage_bytes())


def read_storage_bytes(path: str = "/") -> int:
    """The capacity of the filesystem holding `path` (statvfs; no process is started)."""
    try:
        return shutil.disk_usage(path).total
    except OSError:
        return 0
