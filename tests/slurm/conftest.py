"""A real single-node Slurm cluster on this machine for the --slurm tests: munged, slurmctld and slurmd as root.

One cluster per test session (it takes a few seconds to start): a minimal slurm.conf in a temp folder,
the daemons on free ports, SLURM_CONF pointing at it for them and for every cmx process the tests start
(sbatch, squeue and scontrol read it). No accounting is configured, as on many small clusters: sacct
fails and cmx falls back to `scontrol show job`. The tests skip when the machine cannot run Slurm (no
slurmctld, not root), unless CMX_REQUIRE_SLURM=1 (CI sets it, after .ci/slurm-setup.sh): then they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Home

REQUIRED = os.environ.get("CMX_REQUIRE_SLURM") == "1"
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_SOCKET_DIR = Path("/run/munge")


def _missing() -> str | None:
    """Why this machine cannot start a Slurm cluster (None when it can)."""
    for tool in ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel", "munged", "munge"):
        if shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None:
            return f"{tool} is not installed (run .ci/slurm-setup.sh)"
    if os.geteuid() != 0:
        return "starting slurmctld and slurmd needs root"
    return None


def unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"CMX_REQUIRE_SLURM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbin(tool: str) -> str:
    return shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or tool


def _munge_works() -> bool:
    try:
        return subprocess.run(["munge", "-n"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_munged(log: Path) -> subprocess.Popen | None:
    """munged as the munge user, in the foreground (so the fixture can stop it); None when one already runs."""
    if _munge_works():
        return None
    if not MUNGE_KEY.is_file():
        subprocess.run([_sbin("mungekey"), "--create", "--keyfile", str(MUNGE_KEY)], check=True, capture_output=True)
        shutil.chown(MUNGE_KEY, "munge", "munge")
        MUNGE_KEY.chmod(0o400)
    MUNGE_SOCKET_DIR.mkdir(parents=True, exist_ok=True)
    shutil.chown(MUNGE_SOCKET_DIR, "munge", "munge")
    proc = subprocess.Popen(["runuser", "-u", "munge", "--", _sbin("munged"), "--foreground"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    for _ in range(50):
        if _munge_works():
            return proc
        time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"munged did not start: {log.read_text()[-2000:]}")


def _available_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 2048


@dataclass(frozen=True)
class Cluster:
    conf: Path
    folder: Path
    node: str

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm command against this cluster (squeue, scancel, scontrol...)."""
        return subprocess.run(list(args), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=60, check=check)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.folder.glob("*.log")))


def write_conf(folder: Path, node: str) -> Path:
    conf = folder / "slurm.conf"
    memory = max(512, min(8000, _available_mb() // 2))  # below what is free: slurmd drains a node that has less
    conf.write_text(f"""\
ClusterName=cmxtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
NodeName={node} NodeAddr=127.0.0.1 CPUs={min(os.cpu_count() or 1, 2)} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""", encoding="utf-8")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    return conf


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why = _missing()
    if why:
        unavailable(why)
    folder = tmp_path_factory.mktemp("slurm")
    node = socket.gethostname().split(".")[0]
    cluster = Cluster(write_conf(folder, node), folder, node)
    env = {**os.environ, **cluster.env}
    munged = _start_munged(folder / "munged.log")
    daemons = [subprocess.Popen([_sbin(d), "-D", "-f", str(cluster.conf)], env=env, stdout=subprocess.DEVNULL,
                                stderr=(folder / f"{d}.stderr.log").open("w")) for d in ("slurmctld", "slurmd")]
    try:
        deadline = time.monotonic() + 60
        while True:
            proc = subprocess.run(["sinfo", "--noheader", "--format=%T", "--nodes", node], env=env,
                                  capture_output=True, text=True, timeout=30)
            if proc.stdout.strip() == "idle":
                break
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                sinfo = proc.stdout.strip() or proc.stderr.strip()
                unavailable(f"the local Slurm cluster did not come up (sinfo: {sinfo})"
                            f"\n{cluster.logs()}")
            time.sleep(0.5)
        yield cluster
    finally:
        jobs = subprocess.run(["squeue", "--noheader", "--format=%i"], env=env, capture_output=True, text=True)
        if jobs.stdout.split():
            subprocess.run(["scancel", *jobs.stdout.split()], env=env, capture_output=True)
        for proc in reversed(daemons):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if munged is not None:
            munged.terminate()
            munged.wait(timeout=20)


@dataclass
class SlurmHome:
    """A throw-away cmx home whose processes talk to the test cluster."""

    home: Home
    cluster: Cluster

    @property
    def env(self) -> dict[str, str]:
        return {**self.home.env, **self.cluster.env}

    def cmx(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        from tests.conftest import CMX

        return subprocess.run([*CMX, *args], env={**self.env, **(env or {})}, cwd=self.home.root, capture_output=True,
                              text=True, timeout=timeout)


@pytest.fixture
def shome(home: Home, slurm_cluster: Cluster) -> SlurmHome:
    return SlurmHome(home, slurm_cluster)
