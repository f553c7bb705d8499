"""Host detection (cmx/tools/system.py): the parsers on real file contents, and this machine read for real.

The x86 /proc/cpuinfo excerpt is this test machine's own (one block kept); the two-socket, ARM and
POWER excerpts are written in the kernel's format with the fields the parser reads, values from
the hosts named beside them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cmx.recipe.model import Fingerprint
from cmx.resolve.fingerprint import take
from cmx.tools.system import (
    CpuInfo,
    OsRelease,
    detect_system,
    parse_cpuinfo,
    parse_meminfo,
    parse_os_release,
    read_os_release,
)
from tests.conftest import REPO

DEBIAN_12 = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
"""

UBUNTU_22 = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
"""


def block(**fields: str) -> str:
    return "".join(f"{key.replace('_', ' ')}\t: {value}\n" for key, value in fields.items()) + "\n"


def two_socket_epyc() -> str:
    """2 x AMD EPYC 9575F, 64 cores each, SMT on: 256 logical CPUs (the 8xMI300X host of the
    MLPerf sample, closed/AMD/systems/8xMI300X_2xEPYC_9575F.json)."""
    return "".join(block(processor=str(n), vendor_id="AuthenticAMD", model_name="AMD EPYC 9575F 64-Core Processor",
                         physical_id=str(n // 128), siblings="128", core_id=str(n % 64), cpu_cores="64")
                   for n in range(256))


def test_os_release_gives_name_version_and_pretty_name() -> None:
    assert parse_os_release(DEBIAN_12) == OsRelease("Debian GNU/Linux", "12", "Debian GNU/Linux 12 (bookworm)",
                                                    "debian")
    assert parse_os_release(UBUNTU_22).pretty_name == "Ubuntu 22.04.4 LTS"


def test_os_release_quoting_comments_and_a_missing_pretty_name() -> None:
    text = "# written by hand\nNAME='Rocky Linux'\nVERSION=\"9.3 (Blue Onyx)\"\nVERSION_ID=9.3\nBROKEN=\"unclosed\n"
    release = parse_os_release(text)
    assert (release.name, release.version_id) == ("Rocky Linux", "9.3")
    assert release.pretty_name == "Rocky Linux 9.3 (Blue Onyx)"


def test_without_an_os_release_file_the_kernel_names_the_os(tmp_path: Path) -> None:
    release = read_os_release((str(tmp_path / "none"),))
    assert release.name == os.uname().sysname and release.pretty_name.startswith(os.uname().sysname)


def test_cpuinfo_of_this_machine_gives_model_count_sockets_and_cores() -> None:
    text = block(processor="0", vendor_id="AuthenticAMD", cpu_family="25", model="1", model_name="AMD EPYC",
                 physical_id="0", siblings="2", core_id="0", cpu_cores="2") + \
        block(processor="1", vendor_id="AuthenticAMD", cpu_family="25", model="1", model_name="AMD EPYC",
              physical_id="0", siblings="2", core_id="1", cpu_cores="2")
    assert parse_cpuinfo(text) == CpuInfo(model="AMD EPYC", logical=2, sockets=1, cores_per_socket=2)


def test_cpuinfo_of_a_two_socket_server_counts_sockets_and_cores_per_socket() -> None:
    assert parse_cpuinfo(two_socket_epyc()) == CpuInfo("AMD EPYC 9575F 64-Core Processor", 256, 2, 64)


def test_cpuinfo_of_an_arm_server_names_the_core_from_implementer_and_part() -> None:
    # NVIDIA Grace: Neoverse-V2 cores, implementer 0x41 (Arm), part 0xd4f; no sockets shown
    text = "".join(block(processor=str(n), BogoMIPS="2000.00", CPU_implementer="0x41", CPU_architecture="8",
                         CPU_variant="0x0", CPU_part="0xd4f", CPU_revision="0") for n in range(4))
    assert parse_cpuinfo(text) == CpuInfo("ARM Neoverse-V2", 4, None, None)
    unknown = text.replace("0xd4f", "0xfff")
    assert parse_cpuinfo(unknown).model == "ARM CPU (implementer 0x41, part 0xfff)"


def test_cpuinfo_of_power_reads_the_cpu_line() -> None:
    text = block(processor="0", cpu="POWER9, altivec supported", clock="3800.000000MHz", revision="2.2 (pvr 004e 1202)")
    assert parse_cpuinfo(text).model == "POWER9, altivec supported"


def test_meminfo_total_is_in_bytes() -> None:
    assert parse_meminfo("MemTotal:       24684096 kB\nMemFree:        20000000 kB\n") == 24684096 * 1024
    with pytest.raises(ValueError, match="MemTotal"):
        parse_meminfo("MemFree: 1 kB\n")


def test_this_machine_is_read_sanely() -> None:
    host = detect_system()
    assert host.cpu.logical == os.cpu_count()
    assert host.memory_bytes > 0 and host.os.name and host.os.pretty_name and host.cpu.model
    assert host.kernel == os.uname().release and host.arch == os.uname().machine
    assert (host.python_version, host.python_executable) == (platform.python_version(), sys.executable)
    if Path("/proc/meminfo").exists():
        assert abs(host.memory_bytes - os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) < 64 << 20


def test_reading_the_system_starts_no_process() -> None:
    """Audit hooks see every process start; a fresh interpreter installs one, then reads the host."""
    probe = textwrap.dedent("""
        import json, sys
        spawned = []
        starts = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.system")
        sys.addaudithook(lambda event, args: spawned.append(event) if event in starts else None)
        from cmx.tools.system import detect_system
        detect_system()
        print(json.dumps(spawned))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert json.loads(done.stdout) == []


def test_a_machine_fingerprint_includes_the_python_running_cmx() -> None:
    facts = take(Fingerprint(machine=True), {})["machine"]
    assert facts["python"] == [sys.executable, sys.version]
