"""Engine replicas on Ray: data parallelism across the nodes of a Ray cluster, one vLLM engine per Ray actor.

Each replica is an actor (`ReplicaActor`) holding a `VllmBackend` with its own devices: a
placement group of one bundle (`tensor_parallel_size` GPUs and a CPU, or `cpus_per_replica` CPUs
on a CPU) reserves them, so Ray, not cmx, decides which node each replica lives on, and no two
replicas share a device. The backend here is the driver side of the Backend protocol:

- Offline: the query is split token-balanced across the replicas (`shard_by_cost`, as the
  in-process backend splits it across GPU groups); each replica gets its whole share in one call,
  and streams its results back (a Ray generator) in batches of what finished since the last one.
- Server / Interactive: each request goes to the live replica with the fewest tokens
  outstanding and streams back through a Ray generator (the first token, then the result).
- Every replica's node, devices, samples and tokens are recorded (`StartInfo.details["replicas"]`
  and `details()`), so a run says where its tokens were made.

A replica whose actor or node dies fails its requests with an error that names the node, and
gets no new ones; the harness reports every failed sample, so such a run is never VALID. When it
was the last replica alive, the error is a BackendDead (`every replica has died`), on which the
SUT stops the test at once instead of failing every sample still scheduled.

On a CPU, replicas that share a host are given disjoint cores (VLLM_CPU_OMP_THREADS_BIND), since
Ray counts CPUs but pins nothing and vLLM would bind every engine to the same cores.

Where Ray comes from: `address` None starts a Ray instance in this process (one node, this
machine); "auto" joins the cluster this machine's `ray start` made; HOST:PORT (a head's GCS) or
ray://HOST:PORT (Ray Client) joins that one. Each node needs the same Python environment (cmx,
vLLM) as this process: Ray imports this module there to build the actors.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cmx.mlperf.backends.base import (
    BackendDead,
    BackendError,
    GenRequest,
    GenResult,
    StartInfo,
    StartStop,
    StreamSink,
)
from cmx.mlperf.backends.batching import request_cost
from cmx.mlperf.backends.loop_thread import LoopThread
from cmx.mlperf.backends.profiles import shard_by_cost
from cmx.mlperf.backends.vllm import VllmBackend, VllmBackendConfig
from cmx.mlperf.provenance import software_versions

STREAM_WAIT_S = 1.0  # Offline: how long the driver waits for a replica's next batch before it looks for ended ones
RAY_LOGS_HINT = "the node's Ray logs are in /tmp/ray/session_latest/logs on that node (raylet.out, worker-*.err)"


@dataclass(frozen=True)
class RayReplicasConfig:
    """engine: what every replica builds (device options, model, streaming or not).
    replicas: engine replicas, data parallel, each with `tensor_parallel_size` devices.
    address: None (a Ray instance in this process), "auto", HOST:PORT or ray://HOST:PORT.
    cpus_per_replica: CPUs each replica reserves; on a CPU, the cores its engine computes on.
    placement_timeout_s: how long the replicas' devices may take to be reserved.
    """

    engine: VllmBackendConfig
    replicas: int = 1
    address: str | None = None
    cpus_per_replica: int = 1
    placement_timeout_s: float = 120.0
    connect_timeout_s: float = 10.0

    @property
    def gpus_per_replica(self) -> int:
        return 0 if self.engine.options.device == "cpu" else self.engine.options.tensor_parallel_size

    def bundle(self) -> dict[str, float]:
        """One replica's resources, as Ray counts them."""
        gpus = self.gpus_per_replica
        return {"CPU": float(self.cpus_per_replica), **({"GPU": float(gpus)} if gpus else {})}


@dataclass
class Replica:
    """One replica as the driver sees it: where it lives, what it was given, what it did."""

    index: int
    node_id: str
    node_ip: str
    devices: tuple[str, ...]
    vllm: str = ""  # the vLLM installed where the replica runs ("" where none is)
    samples: int = 0
    tokens: int = 0
    alive: bool = True
    outstanding: int = 0  # tokens in flight (streaming; touched on the driver's loop only)

    @property
    def name(self) -> str:
        return f"replica {self.index} on node {self.node_ip} (id {self.node_id[:12]})"

    def record(self) -> dict[str, Any]:
        return {"index": self.index, "node_ip": self.node_ip, "node_id": self.node_id, "devices": list(self.devices),
                "vllm": self.vllm, "samples": self.samples, "tokens": self.tokens, "alive": self.alive}


# --- what the driver checks before starting anything ----------------------------------------------------------


def gcs_endpoint(address: str) -> tuple[str, int] | None:
    """HOST and PORT of a head address cmx can probe with a TCP connect (None: "auto", or a Ray Client URL)."""
    if address == "auto" or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BackendError(f"ray_address {address!r} is not HOST:PORT, ray://HOST:PORT or auto",
                           hint="the head prints its address when `ray start --head` starts (port 6379 by default)")
    return host, int(port)


def probe(address: str, timeout: float) -> None:
    """A clear error now if nothing listens at the head's address, instead of Ray's own retries for a minute."""
    endpoint = gcs_endpoint(address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except OSError as err:
        raise BackendError(f"no Ray cluster answers at ray_address={address}: {err}",
                           hint="start one with `ray start --head` there (or check the address and the firewall); "
                                "leave ray_address unset to start Ray on this machine") from None


def capacity_problem(resources: Mapping[str, float], nodes: Sequence[Mapping[str, Any]], config: RayReplicasConfig,
                     where: str) -> str | None:
    """Why the cluster cannot hold the replicas (None: it can), from Ray's own count of its resources."""
    need = config.bundle()
    for kind, per_replica in need.items():
        total = resources.get(kind, 0.0)
        if per_replica * config.replicas > total:
            per_node = ", ".join(f"{n.get('NodeManagerAddress', '?')}: {n.get('Resources', {}).get(kind, 0):g}"
                                 for n in nodes if n.get("Alive"))
            unit = "GPU" if kind == "GPU" else "CPU"
            return (f"replicas={config.replicas} need {per_replica * config.replicas:g} {unit}s "
                    f"({per_replica:g} each), but the Ray cluster {where} reports {total:g} ({per_node or 'no nodes'})")
    return None


def check_capacity(ray: Any, config: RayReplicasConfig) -> None:
    where = f"at {config.address}" if config.address else "started on this machine"
    problem = capacity_problem(ray.cluster_resources(), ray.nodes(), config, where)
    if problem:
        raise BackendError(problem, hint="ask for fewer replicas (or fewer devices each), or add nodes to the cluster")


def preflight(config: RayReplicasConfig) -> None:
    """Join (or start) Ray as the run will, and raise now the error the run would meet if the cluster is not
    there or cannot hold the replicas; then leave it. In a child process (`python -m
    cmx.mlperf.backends.ray_replicas CONFIG`): joining Ray makes this process a Ray driver, whose core worker
    installs C-level handlers for SIGTERM and SIGINT over cmx's own, and a Ctrl-C would then end cmx at once,
    before it stops the processes of its run."""
    from cmx.tools.procs import spawn

    config_arg = base64.b64encode(pickle.dumps(config)).decode("ascii")
    proc = spawn([sys.executable, "-m", __name__, config_arg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                 text=True)
    output, _ = proc.communicate()
    found = [line for line in output.splitlines() if line.startswith(PREFLIGHT_MARK)]
    if proc.returncode == 0 and not found:
        return
    if found:
        problem = json.loads(found[-1].removeprefix(PREFLIGHT_MARK))
        raise BackendError(problem["message"], hint=problem["hint"])
    raise BackendError(f"the Ray preflight exited {proc.returncode}: {output.strip()[-2000:]}", hint=RAY_LOGS_HINT)


PREFLIGHT_MARK = "CMX-RAY-PREFLIGHT "


def _preflight_here(config: RayReplicasConfig) -> None:
    ray, _ = connect(config, logging.getLogger(__name__))
    try:
        check_capacity(ray, config)
    finally:
        ray.shutdown()


def main(argv: list[str]) -> int:
    """The preflight's child process: the config (pickled, base64) in, a BackendError's message and hint out."""
    config = pickle.loads(base64.b64decode(argv[0]))
    try:
        _preflight_here(config)
    except BackendError as err:
        print(PREFLIGHT_MARK + json.dumps({"message": err.message, "hint": err.hint}), flush=True)
        return 1
    return 0


def cpu_binds(places: Sequence[Mapping[str, Any]], cpus_per_replica: int) -> list[str | None]:
    """Disjoint core lists for CPU replicas that share a host (same node IP), as VLLM_CPU_OMP_THREADS_BIND values.

    The k-th replica on a host gets the k-th slice of `cpus_per_replica` cores of the cores its
    process may use; None where the host has too few (vLLM then binds as it would by itself).
    """
    seen: dict[str, int] = {}
    out: list[str | None] = []
    for place in places:
        k = seen.get(place["node_ip"], 0)
        seen[place["node_ip"]] = k + 1
        cores = sorted(place["cores"])[k * cpus_per_replica:(k + 1) * cpus_per_replica]
        out.append(",".join(str(c) for c in cores) if len(cores) == cpus_per_replica else None)
    return out


def died(error: BaseException, replica: Replica, replicas: Sequence[Replica] = ()) -> BackendError:
    """The error a request on a dead replica gets: it names the node, and is a BackendDead when no replica
    of `replicas` is left alive."""
    what = f"{replica.name} died during the run: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
    hint = f"nothing this run measured counts; {RAY_LOGS_HINT}"
    if replicas and not any(r.alive for r in replicas):
        return BackendDead(f"every replica has died (the last: {what})", hint=hint)
    return BackendError(what, hint=hint)


def no_replica_left() -> BackendDead:
    """The error a request gets when no replica is alive to take it."""
    return BackendDead("every replica has died", hint=RAY_LOGS_HINT)


# --- the actor -------------------------------------------------------------------------------------------------


class ReplicaActor:
    """One engine replica, run by Ray as an async actor on whichever node holds its placement group."""

    def __init__(self, config: VllmBackendConfig) -> None:
        self.config = config
        self.backend: VllmBackend | None = None
        self.log = logging.getLogger("cmx.mlperf.backends.ray_replicas.replica")

    async def where(self) -> dict[str, Any]:
        import ray

        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid(),
                "gpus": [str(g) for g in ray.get_gpu_ids()], "cores": sorted(os.sched_getaffinity(0)),
                "vllm": software_versions()["vllm"]}

    async def start(self, cpu_bind: str | None) -> dict[str, Any]:
        import ray

        options = self.config.options
        if cpu_bind is not None and options.cpu_threads_bind is None and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
            options = replace(options, cpu_threads_bind=cpu_bind)
        gpus = ray.get_gpu_ids()  # Ray has set the vendor's visibility variable to these
        config = replace(self.config, options=options, detected_gpus=len(gpus))
        self.backend = VllmBackend(config, self.log)
        info = await asyncio.to_thread(self.backend.start)
        return asdict(info)

    async def generate(self, requests: Sequence[GenRequest]) -> AsyncIterator[list[GenResult]]:
        """The shard's results as they finish (a Ray streaming generator): each item is what finished since the
        last one was sent, so the driver sees progress from the first samples, not at the shard's end. The
        engine is read on a thread; if the driver stops reading, the engine's requests are aborted."""
        backend = self._started()
        loop = asyncio.get_running_loop()
        ready: asyncio.Queue[GenResult | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            stream = backend.generate(requests)
            try:
                for result in stream:
                    loop.call_soon_threadsafe(ready.put_nowait, result)
                    if stop.is_set():
                        return
            except BaseException as exc:  # noqa: BLE001 - raised on the loop, where Ray sends it to the driver
                loop.call_soon_threadsafe(ready.put_nowait, exc)
                return
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()  # a generator left early aborts what the engine still holds
            loop.call_soon_threadsafe(ready.put_nowait, None)

        pumping = asyncio.ensure_future(asyncio.to_thread(pump))
        try:
            while True:
                batch, item = [], await ready.get()
                while item is not None:
                    if isinstance(item, BaseException):
                        raise item
                    batch.append(item)
                    if ready.empty():
                        break
                    item = ready.get_nowait()
                if batch:
                    yield batch
                if item is None:
                    return
        finally:
            stop.set()
            await asyncio.shield(pumping)

    async def stream(self, request: GenRequest) -> AsyncIterator[tuple[str, Any]]:
        """("first", token id) as soon as there is one, then ("done", GenResult); an error is raised."""
        backend = self._started()
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        backend.submit(request, _LoopSink(loop, events))
        while True:
            kind, value = await events.get()
            if kind == "error":
                raise value
            yield kind, value
            if kind == "done":
                return

    async def stop(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            await asyncio.to_thread(backend.stop)

    def _started(self) -> VllmBackend:
        if self.backend is None:
            raise BackendError("the replica is not started")
        return self.backend


class _LoopSink:
    """A StreamSink that hands the engine thread's events to the actor's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, events: asyncio.Queue[tuple[str, Any]]) -> None:
        self.loop, self.events = loop, events

    def on_first_token(self, request_id: int, token_id: int) -> None:
        self.loop.call_soon_threadsafe(self.events.put_nowait, ("first", token_id))

    def on_done(self, result: GenResult) -> None:
        self.loop.call_soon_threadsafe(self.events.put_nowait, ("done", result))

    def on_error(self, request_id: int, error: BaseException) -> None:
        self.loop.call_soon_threadsafe(self.events.put_nowait, ("error", error))


# --- the driver ------------------------------------------------------------------------------------------------


@dataclass
class _Started:
    ray: Any
    owns_ray: bool
    actors: list[Any]
    replicas: list[Replica]
    groups: list[Any]
    places: list[dict[str, Any]] = field(default_factory=list)  # what each actor said of its node
    loop: LoopThread | None = None  # streaming only: where requests are sent and their streams read


class RayReplicaBackend(StartStop):
    """The Backend protocol over `replicas` ReplicaActors (see the module docstring)."""

    def __init__(self, config: RayReplicasConfig, logger: logging.Logger | None = None) -> None:
        if config.replicas < 1:
            raise BackendError(f"replicas must be at least 1, not {config.replicas}")
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self._state: _Started | None = None

    def start(self) -> StartInfo:
        if self._state is not None:
            raise BackendError("the Ray replicas are already started")
        began = time.monotonic()
        ray, owns = connect(self.config, self.log)
        state = _Started(ray=ray, owns_ray=owns, actors=[], replicas=[], groups=[])
        try:
            self._launch(state)
            infos = self._start_engines(state)
            if self.config.engine.streaming:
                self._start_loop(state)
        except BaseException:
            self._teardown(state)
            raise
        self._state = state
        for r in state.replicas:
            self.log.info("%s: devices %s, vLLM %s", r.name, ",".join(r.devices) or "-", r.vllm or "?")
        if len({r.vllm for r in state.replicas}) > 1:
            self.log.warning("the replicas run different vLLMs (%s): a result names one; install the same on every "
                             "node", ", ".join(f"{r.index}: {r.vllm or '?'}" for r in state.replicas))
        return StartInfo(
            engines=tuple(e for info in infos for e in info["engines"]),
            start_seconds=time.monotonic() - began,
            warmup_requests=sum(info["warmup_requests"] for info in infos),
            warmup_seconds=max(info["warmup_seconds"] for info in infos),
            details={"streaming": self.config.engine.streaming, "transport": "ray", "ray_address": self.config.address,
                     "replicas": [r.record() for r in state.replicas]})

    def details(self) -> dict[str, Any]:
        """Per replica: node, devices, samples and tokens so far (the harness records them after the run)."""
        state = self._state
        return {"replicas": [r.record() for r in state.replicas]} if state else {}

    def _launch(self, state: _Started) -> None:
        """Reserve each replica's devices with a placement group, then start its actor on them."""
        ray, config = state.ray, self.config
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        check_capacity(ray, config)
        bundle = config.bundle()
        state.groups = [placement_group([bundle], strategy="STRICT_PACK", name=f"cmx-replica-{i}")
                        for i in range(config.replicas)]
        ready, _ = ray.wait([g.ready() for g in state.groups], num_returns=len(state.groups),
                            timeout=config.placement_timeout_s)
        if len(ready) < len(state.groups):
            raise BackendError(f"Ray could not reserve {bundle} for each of {config.replicas} replicas within "
                               f"{config.placement_timeout_s:.0f} s (reserved {len(ready)})",
                               hint="the devices exist but not together on one node, or other jobs hold them; "
                                    "see `ray status`")
        actor_class = ray.remote(ReplicaActor)
        state.actors = [actor_class.options(
            num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0), max_concurrency=4096, max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=g, placement_group_bundle_index=0),
        ).remote(config.engine) for g in state.groups]
        state.places = ray.get([a.where.remote() for a in state.actors])
        state.replicas = [Replica(index=i, node_id=p["node_id"], node_ip=p["node_ip"],
                                  devices=tuple(f"gpu:{g}" for g in p["gpus"]) or tuple(f"cpu:{c}" for c in p["cores"]),
                                  vllm=str(p.get("vllm") or ""))
                          for i, p in enumerate(state.places)]

    def _start_engines(self, state: _Started) -> list[dict[str, Any]]:
        binds: list[str | None] = [None] * len(state.actors)
        if self.config.engine.options.device == "cpu":
            binds = cpu_binds(state.places, self.config.cpus_per_replica)
            for replica, bind in zip(state.replicas, binds, strict=True):
                if bind is not None:
                    replica.devices = tuple(f"cpu:{c}" for c in bind.split(","))
        refs = [a.start.remote(b) for a, b in zip(state.actors, binds, strict=True)]
        infos = []
        for replica, ref in zip(state.replicas, refs, strict=True):
            try:
                infos.append(state.ray.get(ref))
            except state.ray.exceptions.RayError as err:
                raise BackendError(f"{replica.name} could not start its engine: {_cause(err)}",
                                   hint=RAY_LOGS_HINT) from None
        return infos

    # --- Offline ---

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        state = self._started()
        live = [r for r in state.replicas if r.alive]
        if not live:
            raise no_replica_left()
        if not requests:
            return
        estimate = self.config.engine.output_tokens_estimate
        shards = shard_by_cost([request_cost(r, estimate) for r in requests], len(live))
        # one streaming generator per replica: each of its items is a batch of results that have finished
        streams: dict[Any, Replica] = {}
        for replica, shard in zip(live, shards, strict=True):
            if shard:
                streams[state.actors[replica.index].generate.remote([requests[i] for i in shard])] = replica
        ray = state.ray
        while streams:
            # a stream with an item ready; one that has ended (which ray.wait may not count as ready) is looked
            # at once the wait times out
            ready, _ = ray.wait(list(streams), num_returns=1, timeout=STREAM_WAIT_S)
            for stream in ready or [s for s in streams if s.is_finished()]:
                replica = streams[stream]
                try:
                    batch = ray.get(next(stream))
                except StopIteration:  # that replica's shard is done
                    del streams[stream]
                    continue
                except ray.exceptions.RayError as err:
                    raise self._failure(err, replica) from None
                for result in batch:
                    replica.samples += 1
                    replica.tokens += result.n_tokens
                    yield result

    def _failure(self, err: BaseException, replica: Replica) -> BackendError:
        state = self._started()
        ray = state.ray
        if not replica.alive:  # another request on it saw it die first
            return died(err, replica, state.replicas)
        if isinstance(err, (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError)):
            replica.alive = False
            self.log.error("%s died: %s", replica.name, err)
            return died(err, replica, state.replicas)
        cause = _cause(err)
        return cause if isinstance(cause, BackendError) else BackendError(f"{replica.name}: {cause}")

    # --- Server / Interactive ---

    def _start_loop(self, state: _Started) -> None:
        state.loop = LoopThread("cmx-ray-replicas", self.log)
        state.loop.start()

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        state = self._started()
        if state.loop is None:
            raise BackendError("submit() needs streaming replicas",
                               hint="build them with VllmBackendConfig(streaming=True) for Server/Interactive")
        cost = request_cost(request, self.config.engine.output_tokens_estimate)
        state.loop.spawn(self._serve(state, request, sink, cost))

    async def _serve(self, state: _Started, request: GenRequest, sink: StreamSink, cost: int) -> None:
        # the replica is chosen here, on the loop, where `outstanding` is kept
        live = [r for r in state.replicas if r.alive]
        if not live:
            sink.on_error(request.id, no_replica_left())
            return
        replica = min(live, key=lambda r: (r.outstanding, r.index))
        replica.outstanding += cost
        result: GenResult | None = None
        try:
            async for ref in state.actors[replica.index].stream.remote(request):
                kind, value = await ref
                if kind == "first":
                    sink.on_first_token(request.id, value)
                else:
                    result = value
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - the sink must hear of every failure
            sink.on_error(request.id, self._failure(err, replica))
            return
        finally:
            replica.outstanding -= cost
        if result is None:
            sink.on_error(request.id, BackendError(f"{replica.name} ended {request.name} without a result"))
            return
        replica.samples += 1
        replica.tokens += result.n_tokens
        sink.on_done(result)

    def stop(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            self._teardown(state)
            self.log.info("Ray replicas stopped")

    def _teardown(self, state: _Started) -> None:
        ray = state.ray
        if state.loop is not None:  # the streams in flight end before the actors do
            state.loop.close()
        # no replicas yet: the actors failed to start, and each is stopped; else one replica per actor
        replicas: list[Replica | None] = [*state.replicas] or [None] * len(state.actors)
        stops = [a.stop.remote() for a, r in zip(state.actors, replicas, strict=True) if r is None or r.alive]
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=60)
        for actor in state.actors:
            ray.kill(actor)
        from ray.util.placement_group import remove_placement_group

        for group in state.groups:
            with contextlib.suppress(Exception):  # a group on a dead node is gone already
                remove_placement_group(group)
        ray.shutdown()

    def _started(self) -> _Started:
        if self._state is None:
            raise BackendError("the Ray replicas are not started", hint="call start() first")
        return self._state


def _cause(err: BaseException) -> BaseException:
    """The exception a Ray task raised, unwrapped from Ray's RayTaskError."""
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, BaseException) else err


def connect(config: RayReplicasConfig, log: logging.Logger) -> tuple[Any, bool]:
    """Ray, initialised for `config.address`, and whether this process started the Ray instance."""
    try:
        import ray
    except ImportError:
        raise BackendError("replicas on Ray need the ray package, which is not installed",
                           hint="pip install ray (the same version on every node)") from None
    if config.address is not None:
        probe(config.address, config.connect_timeout_s)
    try:
        # the engines' environment travels with the actors: vLLM reads its variables in the replica's process
        ray.init(address=config.address, ignore_reinit_error=True, logging_level=logging.WARNING,
                 runtime_env={"env_vars": _forwarded_env()})
    except ConnectionError as err:
        raise BackendError(f"cannot join the Ray cluster at ray_address={config.address}: {err}",
                           hint="`ray status` on the head says whether it runs; with auto, this machine must have "
                                "run `ray start`") from None
    log.info("Ray %s: %s", ray.__version__, "started in this process" if config.address is None
             else f"joined {config.address}")
    return ray, config.address is None


def _forwarded_env() -> dict[str, str]:
    """The variables of this process that shape the engines (vLLM's, Hugging Face's), for the replicas."""
    return {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "HF_"))}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
