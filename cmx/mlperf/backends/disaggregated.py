"""Start a disaggregated prefill/decode topology here: P prefill and D decode `vllm serve` instances joined by vLLM's
shared-storage KV connector, behind the proxy script the user gives, and always stop it.

    with DisaggregatedServer(DisaggregatedConfig(server=VLLM_SERVER_CONFIG, prefill=1, decode=1,
                                                 proxy=Path("disagg_proxy_demo.py"), work_dir=DIR)) as pair:
        EndpointBackend(EndpointConfig(url=pair.url, model=NAME)) ...
        pair.report().transfer.decode_loaded_tokens   # prompt tokens the decode side loaded, not computed

The instances are cmx's VllmServer (the device profile's engine arguments, its start-up checks and its stop that
outlasts vLLM ignoring SIGTERM while its engine starts), each given `--kv-transfer-config` with vLLM's
`ExampleConnector` (the connector that was `SharedStorageConnector`: the only one of vLLM 0.32's that moves KV
between instances without a GPU or a package vLLM's CPU build lacks), kv_role `kv_producer` on the prefill side and
`kv_consumer` on the decode side, and one `shared_storage_path`: a folder made for this topology and removed with
it, since the connector never deletes what it writes and keys it by the prompt's token ids only (another model's
files under the same key would be loaded as this one's KV).

The proxy is not cmx's: vLLM's wheel ships none, and its docs run `disagg_proxy_demo.py` from vLLM's source
(`--model NAME --prefill HOST:PORT... --decode HOST:PORT... --port P`: each request with max_tokens 1 to a prefill
instance, then unchanged to a decode instance, round-robin on each side). cmx runs the script it is given, in a
process group of its own (cmx.tools.procs), logged to a file, and waits until it answers GET /status; it has no
GET /v1/models, /health or /version, so the facts a client would read there come from a decode instance
(`TopologyInfo.served`).

On a CPU, each instance computes on cores of its own (VLLM_CPU_OMP_THREADS_BIND, as cmx binds a Ray replica's
engine), unless the user chose a binding; with fewer cores than instances, they take one core each in turn.
The instances start one after another in the calling thread: a server's parent-death signal follows the thread
that started it (cmx.mlperf.backends.vllm_server), and on 2 cores two engines starting side by side gain little.

What the connector moved is read from the instances' own Prometheus counters (`report()`, at any time, and once
more when stopping): the decode side's `vllm:external_prefix_cache_hits_total` counts the prompt tokens it loaded
instead of computing. ExampleConnector moves only whole KV blocks (128 tokens on a CPU) of a prompt less its last
token, so a prompt under 130 tokens moves nothing and is computed on the decode side (the answer is the same).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx.mlperf.backends.base import BackendError, StartStop
from cmx.mlperf.backends.vllm_server import VllmServer, VllmServerConfig, free_port, log_tail
from cmx.tools import procs

CONNECTOR = "ExampleConnector"  # vLLM >= 0.11's name of its shared-storage connector
HITS_METRIC = "vllm:external_prefix_cache_hits_total"
QUERIES_METRIC = "vllm:external_prefix_cache_queries_total"
PROMPT_TOKENS_METRIC = "vllm:prompt_tokens_total"
PROXY_STARTUP_TIMEOUT_S = 120.0
PROXY_STOP_GRACE_S = 10.0
PROXY_READY_ROUTE = "/status"  # the demo proxy's only GET route
BIND_VAR = "VLLM_CPU_OMP_THREADS_BIND"
METRICS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PrefillDecode:
    """The topology a user asked for: `prefill` and `decode` instances behind the proxy script `proxy`."""

    prefill: int
    decode: int
    proxy: Path

    def __post_init__(self) -> None:
        if self.prefill < 1 or self.decode < 1:
            raise BackendError(f"a disaggregated topology needs at least one prefill and one decode instance, not "
                               f"{self.prefill}:{self.decode}", hint="give prefill_decode=P:D with P and D >= 1")

    @property
    def label(self) -> str:
        return f"{self.prefill}P:{self.decode}D"


def parse_prefill_decode(text: str, proxy: Path) -> PrefillDecode:
    """`"1:1"` (prefill:decode instances) and the proxy script as a PrefillDecode."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if match is None:
        raise BackendError(f"prefill_decode {text!r} is not P:D", hint="give the instance counts, e.g. 1:1")
    return PrefillDecode(int(match.group(1)), int(match.group(2)), Path(proxy))


@dataclass(frozen=True)
class DisaggregatedConfig:
    """server: each instance's VllmServerConfig (its model, engine options, served name, flags), of which the log,
        the cores and the KV connector are set per instance.
    prefill, decode, proxy: the topology (PrefillDecode).
    work_dir: where the logs (vllm-prefill-0.log, ..., disagg-proxy.log) and the KV folder go.
    """

    server: VllmServerConfig
    topology: PrefillDecode
    work_dir: Path
    proxy_python: str = sys.executable
    proxy_startup_timeout_s: float = PROXY_STARTUP_TIMEOUT_S


@dataclass(frozen=True)
class KvTransfer:
    """What the instances' counters say the connector moved, summed over each side, since they started (warm-up
    requests included). decode_loaded_tokens: prompt tokens the decode side loaded instead of computing."""

    decode_loaded_tokens: int
    decode_queried_tokens: int
    decode_prompt_tokens: int
    prefill_prompt_tokens: int

    @property
    def happened(self) -> bool:
        return self.decode_loaded_tokens > 0


@dataclass(frozen=True)
class TopologyInfo:
    """A started topology: the proxy's URL and how each part was started (no secrets)."""

    url: str
    topology: PrefillDecode
    prefill_urls: tuple[str, ...]
    decode_urls: tuple[str, ...]
    cpu_binds: tuple[str | None, ...]  # per instance, prefill first; None: not bound by cmx
    proxy_argv: tuple[str, ...]
    proxy_log: Path
    instance_logs: tuple[Path, ...]
    kv_dir: Path
    served: dict[str, Any]  # what a decode instance says of itself (GET /v1/models, /version): the proxy has neither


@dataclass(frozen=True)
class TopologyReport:
    """The topology and what its connector moved, for a run's record."""

    info: TopologyInfo
    transfer: KvTransfer | None  # None: the counters could not be read

    def to_json(self) -> dict[str, Any]:
        i = self.info
        return {"kind": "disaggregated", "prefill": i.topology.prefill, "decode": i.topology.decode,
                "connector": CONNECTOR, "proxy": i.topology.proxy.name, "proxy_path": str(i.topology.proxy),
                "prefill_urls": list(i.prefill_urls), "decode_urls": list(i.decode_urls),
                "cpu_binds": list(i.cpu_binds), "proxy_log": str(i.proxy_log),
                "instance_logs": [str(p) for p in i.instance_logs], "served": i.served,
                "kv_transfer": None if self.transfer is None else {
                    **vars(self.transfer), "happened": self.transfer.happened,
                    "counted": "since the instances started, warm-up requests included"}}


# --- pure parts --------------------------------------------------------------------------------------


def kv_transfer_config(role: str, storage: Path) -> str:
    """The `--kv-transfer-config` JSON of one instance (role kv_producer or kv_consumer)."""
    return json.dumps({"kv_connector": CONNECTOR, "kv_role": role,
                       "kv_connector_extra_config": {"shared_storage_path": str(storage)}})


def cpu_list(cpus: Sequence[int]) -> str:
    """CPU numbers as VLLM_CPU_OMP_THREADS_BIND takes them: a range when contiguous ("2-3"), else a list."""
    cpus = sorted(cpus)
    if cpus == list(range(cpus[0], cpus[-1] + 1)):
        return str(cpus[0]) if len(cpus) == 1 else f"{cpus[0]}-{cpus[-1]}"
    return ",".join(map(str, cpus))


def split_cores(cpus: Sequence[int], instances: int) -> tuple[str, ...]:
    """One VLLM_CPU_OMP_THREADS_BIND value per instance: the cores in `instances` contiguous shares, or, with
    fewer cores than instances, one core each in turn."""
    cpus = sorted(cpus)
    if len(cpus) < instances:
        return tuple(str(cpus[i % len(cpus)]) for i in range(instances))
    size, extra = divmod(len(cpus), instances)
    binds, start = [], 0
    for i in range(instances):
        end = start + size + (i < extra)
        binds.append(cpu_list(cpus[start:end]))
        start = end
    return tuple(binds)


def instance_binds(server: VllmServerConfig, instances: int, environ: dict[str, str] | os._Environ[str],
                   cpus: Sequence[int]) -> tuple[str | None, ...]:
    """Each instance's binding: cores of its own on a CPU with one rank per engine; None (vLLM's or the user's own
    choice) elsewhere, or where the user chose one (the options' cpu_threads_bind or the variable)."""
    options = server.options
    if options.device != "cpu" or options.tensor_parallel_size != 1 or options.cpu_threads_bind is not None \
            or BIND_VAR in environ or BIND_VAR in options.extra_env:
        return (None,) * instances
    return split_cores(cpus, instances)


def instance_config(server: VllmServerConfig, role: str, storage: Path, log_path: Path,
                    bind: str | None) -> VllmServerConfig:
    """One instance's VllmServerConfig: the shared one with its log, its cores and the KV connector in `role`."""
    options = server.options if bind is None else replace(server.options, cpu_threads_bind=bind)
    return replace(server, options=options, log_path=log_path, port=None,
                   extra_args=(*server.extra_args, "--kv-transfer-config", kv_transfer_config(role, storage)))


def host_port(url: str) -> str:
    """`http://127.0.0.1:8000/v1` as the proxy takes an instance: `127.0.0.1:8000`."""
    return urllib.parse.urlsplit(url).netloc


def proxy_argv(python: str, script: Path, model: str, prefill: Sequence[str], decode: Sequence[str],
               port: int) -> list[str]:
    """vLLM's demo proxy's command line (its XpYd flags)."""
    return [python, str(script), "--model", model, "--prefill", *map(host_port, prefill),
            "--decode", *map(host_port, decode), "--port", str(port)]


def counter(text: str, name: str) -> float:
    """The sum of a Prometheus counter's samples (every label set) in an exposition `text`; 0 when absent."""
    pattern = rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([-+0-9.eE]+|NaN)(?: \d+)?$"
    return sum(float(v) for v in re.findall(pattern, text, re.MULTILINE) if v != "NaN")


def server_root(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _get(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, ""


# --- the topology --------------------------------------------------------------------------------------


class DisaggregatedServer(StartStop):
    """P prefill and D decode vLLM servers and the proxy in front of them. `start()` starts the instances, then the
    proxy, and waits until it answers; `stop()` stops the proxy first, then every instance, and removes the KV
    folder. A context manager that does both; a failed or interrupted start stops what had started."""

    def __init__(self, config: DisaggregatedConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self.info: TopologyInfo | None = None
        self.final: KvTransfer | None = None  # the counters read last, while stopping
        self._prefill: list[VllmServer] = []
        self._decode: list[VllmServer] = []
        self._proxy: subprocess.Popen[bytes] | None = None
        self._kv_dir: Path | None = None

    @property
    def started(self) -> TopologyInfo:
        """What start() made; BackendError before it or after stop()."""
        if self.info is None:
            raise BackendError("the disaggregated topology is not started")
        return self.info

    @property
    def url(self) -> str:
        return self.started.url

    def start(self) -> TopologyInfo:
        if self.info is not None or self._prefill:
            raise BackendError("the disaggregated topology is already started")
        cfg, topo = self.config, self.config.topology
        if not topo.proxy.is_file():
            raise BackendError(f"the proxy script {topo.proxy} does not exist",
                               hint="give vLLM's examples/disaggregated/disaggregated_serving/disagg_proxy_demo.py "
                                    "(in vLLM's source distribution) as disagg_proxy")
        name = cfg.server.served_model_name
        if not name:
            raise BackendError("a disaggregated topology needs the served model's name (the proxy checks it)",
                               hint="set served_model_name in the server's config")
        try:
            return self._start(name)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str) -> TopologyInfo:
        cfg, topo = self.config, self.config.topology
        cfg.work_dir.mkdir(parents=True, exist_ok=True)
        kv_dir = self._kv_dir = Path(tempfile.mkdtemp(prefix="kv-transfer-", dir=cfg.work_dir))
        roles = [("prefill", "kv_producer", i) for i in range(topo.prefill)] + \
                [("decode", "kv_consumer", i) for i in range(topo.decode)]
        binds = instance_binds(cfg.server, len(roles), os.environ, sorted(os.sched_getaffinity(0)))
        logs = []
        for (side, role, i), bind in zip(roles, binds, strict=True):
            log_path = cfg.work_dir / f"vllm-{side}-{i}.log"
            logs.append(log_path)
            server = VllmServer(instance_config(cfg.server, role, kv_dir, log_path, bind), self.log)
            (self._prefill if side == "prefill" else self._decode).append(server)
            self.log.info("disaggregated %s: starting %s instance %d (cores %s)", topo.label, side, i,
                          bind or "unbound")
            server.start()
        prefill_urls = tuple(s.url for s in self._prefill)
        decode_urls = tuple(s.url for s in self._decode)
        port = free_port("127.0.0.1")
        argv = proxy_argv(cfg.proxy_python, topo.proxy, name, prefill_urls, decode_urls, port)
        proxy_log = cfg.work_dir / "disagg-proxy.log"
        self.log.info("disaggregated %s: proxy %s (log %s)", topo.label, " ".join(argv), proxy_log)
        with proxy_log.open("ab") as out:
            self._proxy = procs.spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        root = f"http://127.0.0.1:{port}"
        self._wait_proxy(root, proxy_log)
        self.info = TopologyInfo(url=f"{root}/v1", topology=topo, prefill_urls=prefill_urls, decode_urls=decode_urls,
                                 cpu_binds=binds, proxy_argv=tuple(argv), proxy_log=proxy_log,
                                 instance_logs=tuple(logs), kv_dir=kv_dir, served=self._served(decode_urls[0], name))
        self.log.info("disaggregated %s ready at %s (KV through %s)", topo.label, self.info.url, kv_dir)
        return self.info

    def _wait_proxy(self, root: str, log_path: Path) -> None:
        assert self._proxy is not None
        deadline = time.monotonic() + self.config.proxy_startup_timeout_s
        while True:
            if (code := self._proxy.poll()) is not None:
                raise BackendError(f"the disaggregation proxy exited with status {code} while starting",
                                   where=str(log_path), hint=f"the log's last lines:\n{log_tail(log_path)}")
            try:
                if _get(root + PROXY_READY_ROUTE, timeout=5)[0] == 200:
                    return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise BackendError(f"the disaggregation proxy did not answer GET {PROXY_READY_ROUTE} within "
                                   f"{self.config.proxy_startup_timeout_s:g} s", where=str(log_path),
                                   hint=f"is it vLLM's disagg_proxy_demo.py? The log's last lines:\n"
                                        f"{log_tail(log_path)}")
            time.sleep(0.3)

    def _served(self, decode_url: str, name: str) -> dict[str, Any]:
        """What a decode instance says it serves (GET /v1/models' entry, GET /version)."""
        try:
            status, text = _get(f"{decode_url}/models", METRICS_TIMEOUT_S)
            listed: list[dict[str, Any]] = json.loads(text)["data"] if status == 200 else []
            entry: dict[str, Any] = next((m for m in listed if m.get("id") == name), {})
            status, text = _get(f"{server_root(decode_url)}/version", METRICS_TIMEOUT_S)
            version = json.loads(text).get("version") if status == 200 else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.log.warning("could not read what the decode instance serves: %s", exc)
            return {}
        return {"model": entry.get("id"), "max_model_len": entry.get("max_model_len"),
                "software": "vLLM" if entry.get("owned_by") == "vllm" else entry.get("owned_by"), "version": version}

    def transfer(self) -> KvTransfer | None:
        """What the connector moved so far, from the instances' counters; None when one cannot be read."""
        try:
            decode = [self._metrics(s) for s in self._decode]
            prefill = [self._metrics(s) for s in self._prefill]
        except (OSError, ValueError, BackendError) as exc:
            self.log.warning("could not read the instances' metrics: %s", exc)
            return None
        return KvTransfer(decode_loaded_tokens=int(sum(counter(t, HITS_METRIC) for t in decode)),
                          decode_queried_tokens=int(sum(counter(t, QUERIES_METRIC) for t in decode)),
                          decode_prompt_tokens=int(sum(counter(t, PROMPT_TOKENS_METRIC) for t in decode)),
                          prefill_prompt_tokens=int(sum(counter(t, PROMPT_TOKENS_METRIC) for t in prefill)))

    @staticmethod
    def _metrics(server: VllmServer) -> str:
        status, text = _get(f"{server_root(server.url)}/metrics", METRICS_TIMEOUT_S)
        if status != 200:
            raise BackendError(f"GET /metrics answered {status}", where=server.url)
        return text

    def report(self) -> TopologyReport:
        """The topology and what its connector moved so far (the last reading, once stopped)."""
        if self.info is None:
            raise BackendError("the disaggregated topology is not started")
        return TopologyReport(self.info, self.final if self._proxy is None else self.transfer())

    def stop(self) -> None:
        """The proxy first (no request reaches a stopping instance), then the instances, then the KV folder. Safe
        to call twice, and on a topology that never (or only partly) started."""
        if self.info is not None and self._proxy is not None:
            self.final = self.transfer()
            if self.final is not None:
                self.log.info("disaggregated %s: the decode side loaded %d prompt tokens from the prefill side "
                              "(of %d it computed or loaded)", self.info.topology.label,
                              self.final.decode_loaded_tokens, self.final.decode_prompt_tokens)
        proxy, self._proxy = self._proxy, None
        try:
            if proxy is not None:
                procs.stop(proxy, PROXY_STOP_GRACE_S)
        finally:
            servers, self._prefill, self._decode = [*self._prefill, *self._decode], [], []
            try:
                _stop_each(servers)
            finally:
                kv_dir, self._kv_dir = self._kv_dir, None
                if kv_dir is not None:
                    shutil.rmtree(kv_dir, ignore_errors=True)


def _stop_each(servers: Sequence[VllmServer]) -> None:
    """Stop every server, each even when stopping one before it was interrupted."""
    if servers:
        try:
            servers[0].stop()
        finally:
            _stop_each(servers[1:])
