"""Engine replicas on Ray: unit tests of the checks and the placement arithmetic, and e2e runs on a real Ray
cluster of two nodes on this machine (ray.cluster_utils.Cluster: a head and a second node, one CPU each).

The e2e tests run the app through the CLI on the tiny Llama 2 (vLLM's CPU build, LoadGen): Offline and Server
VALID with two 1-CPU replicas, one per node; a cluster too small refused before anything runs; and the
second node killed in the middle of a Server run, which must fail naming that node, with nothing VALID.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cmx.mlperf.app import AppConfig, backend_record
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.backends.base import BackendDead, BackendError, GenRequest, GenResult, Sampling
from cmx.mlperf.backends.batching import QueueSink
from cmx.mlperf.backends.loop_thread import LoopThread
from cmx.mlperf.backends.machine import MachineFacts, ProfileError
from cmx.mlperf.backends.profiles import EngineOptions, engine_specs
from cmx.mlperf.backends.ray_replicas import (
    RayReplicaBackend,
    RayReplicasConfig,
    Replica,
    ReplicaActor,
    _Started,
    capacity_problem,
    cpu_binds,
    gcs_endpoint,
    preflight,
    probe,
)
from cmx.mlperf.backends.vllm import VllmBackendConfig
from cmx.mlperf.backends.vllm_server import engine_flags
from cmx.mlperf.loadgen.harness import build_backend
from cmx.mlperf.loadgen.harness_config import EngineSettings, HarnessConfig, HarnessError
from cmx.mlperf.provenance import software_versions
from cmx.mlperf.run_summary import RunSummary, format_row
from tests.conftest import CMX, REPO, Home, needs_vllm


def replicas_config(device: str = "cpu", replicas: int = 2, tp: int = 1, cpus: int = 1) -> RayReplicasConfig:
    engine = VllmBackendConfig(model=Path("/m"), options=EngineOptions(device=device, tensor_parallel_size=tp))
    return RayReplicasConfig(engine=engine, replicas=replicas, cpus_per_replica=cpus)


NODES = [{"Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 64.0, "GPU": 4.0}},
         {"Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {"CPU": 64.0, "GPU": 2.0}},
         {"Alive": False, "NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 64.0, "GPU": 8.0}}]


def test_a_gpu_replica_reserves_its_tensor_parallel_gpus_and_a_cpu():
    assert replicas_config("rocm", tp=2).bundle() == {"CPU": 1.0, "GPU": 2.0}
    assert replicas_config("cpu", cpus=4).bundle() == {"CPU": 4.0}


def test_more_replicas_than_the_cluster_has_gpus_is_refused_with_each_nodes_count():
    resources = {"CPU": 128.0, "GPU": 6.0}
    assert capacity_problem(resources, NODES, replicas_config("cuda", replicas=3, tp=2), "at h:6379") is None
    problem = capacity_problem(resources, NODES, replicas_config("cuda", replicas=4, tp=2), "at h:6379")
    assert problem == ("replicas=4 need 8 GPUs (2 each), but the Ray cluster at h:6379 reports 6 "
                       "(10.0.0.1: 4, 10.0.0.2: 2)")  # the dead node's 8 are not offered
    problem = capacity_problem({"CPU": 2.0}, NODES[:1], replicas_config("cpu", replicas=3), "started on this machine")
    assert problem is not None and problem.startswith("replicas=3 need 3 CPUs (1 each)")


def test_cpu_replicas_sharing_a_host_get_disjoint_cores():
    places = [{"node_ip": "a", "cores": [0, 1, 2, 3]}, {"node_ip": "b", "cores": [0, 1]},
              {"node_ip": "a", "cores": [0, 1, 2, 3]}, {"node_ip": "a", "cores": [0, 1, 2, 3]}]
    assert cpu_binds(places, 2) == ["0,1", "0,1", "2,3", None]  # a third pair does not fit on host a


@pytest.mark.parametrize(("address", "endpoint"), [("auto", None), ("ray://head:10001", None),
                                                   ("10.1.2.3:6379", ("10.1.2.3", 6379))])
def test_head_addresses_that_can_be_probed(address: str, endpoint: object):
    assert gcs_endpoint(address) == endpoint


def test_a_malformed_or_unreachable_ray_address_is_one_clear_error():
    with pytest.raises(BackendError, match="is not HOST:PORT"):
        gcs_endpoint("head-without-port")
    import socket

    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        began = time.monotonic()
        with pytest.raises(BackendError, match=f"no Ray cluster answers at ray_address=127.0.0.1:{port}") as err:
            probe(f"127.0.0.1:{port}", timeout=5)
    assert time.monotonic() - began < 5 and "ray start --head" in err.value.render()


def test_the_preflight_runs_in_a_child_and_brings_its_error_back_whole(tmp_path: Path):
    """Joining Ray would make cmx's process a driver, whose core worker takes SIGTERM and SIGINT from cmx."""
    import signal
    import socket
    from dataclasses import replace as with_

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        with pytest.raises(BackendError, match=f"no Ray cluster answers at ray_address=127.0.0.1:{port}") as err:
            preflight(with_(replicas_config(), address=f"127.0.0.1:{port}", connect_timeout_s=2))
    assert "ray start --head" in (err.value.hint or "")
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_one_model_over_several_nodes_passes_vllms_own_options_through():
    facts = MachineFacts(gpus=("0", "1", "2", "3"))
    options = EngineOptions(device="cuda", tensor_parallel_size=4, pipeline_parallel_size=2,
                            distributed_executor_backend="ray")
    (spec,) = engine_specs(options, facts)  # one engine, its workers placed by Ray, nothing pinned here
    assert spec.devices == () and "CUDA_VISIBLE_DEVICES" not in spec.env
    assert spec.engine_kwargs["pipeline_parallel_size"] == 2
    assert spec.engine_kwargs["distributed_executor_backend"] == "ray"
    flags = engine_flags(spec.engine_kwargs)
    assert flags[flags.index("--pipeline-parallel-size") + 1] == "2"
    assert flags[flags.index("--distributed-executor-backend") + 1] == "ray"
    plain = engine_specs(EngineOptions(device="cuda"), facts)
    assert "pipeline_parallel_size" not in plain[0].engine_kwargs
    assert "distributed_executor_backend" not in plain[0].engine_kwargs


@pytest.mark.parametrize(("options", "message"), [
    (EngineOptions(device="cpu", pipeline_parallel_size=2), "the CPU profile runs one engine"),
    (EngineOptions(device="cuda", distributed_executor_backend="slurm"), "unknown distributed_executor_backend"),
    (EngineOptions(device="rocm", pipeline_parallel_size=0), "pipeline_parallel_size must be at least 1"),
])
def test_bad_multi_node_options_are_refused(options: EngineOptions, message: str):
    with pytest.raises(ProfileError, match=message):
        engine_specs(options, MachineFacts(gpus=("0",)))


def test_replicas_or_a_ray_address_put_the_engines_on_ray(tmp_path: Path):
    base = dict(model=tmp_path, dataset=tmp_path, scenario="Offline", mode="performance", user_conf=tmp_path,
                output=tmp_path)
    assert not EngineSettings().on_ray
    sampling = Sampling(temperature=1.0, top_k=-1)
    backend = build_backend(HarnessConfig(**base, engine=EngineSettings(replicas=2, replica_cpus=2), sampling=sampling),
                            logging.getLogger("t"))
    assert isinstance(backend, RayReplicaBackend)
    assert backend.config.replicas == 2 and backend.config.cpus_per_replica == 2 and backend.config.address is None
    assert backend.config.engine.sampling == sampling  # what each replica's engine is built with
    config = HarnessConfig(**base, engine=EngineSettings(ray_address="auto"))
    assert HarnessConfig.from_json(config.to_json()).engine == config.engine
    with pytest.raises(HarnessError, match="replicas must be at least 1"):
        EngineSettings(replicas=0)


class RayErrors:
    """The Ray exceptions the driver tells apart (ray.exceptions' names), for replicas that are not Ray's."""

    class RayError(Exception):
        pass

    class RayActorError(RayError):
        pass

    class NodeDiedError(RayError):
        pass


class DyingActor:
    """A replica's actor whose streams fail as Ray's do once its node is gone (the seam: _Started's actors)."""

    def __init__(self) -> None:
        self.stream = SimpleNamespace(remote=self._refs)

    async def _refs(self, request: GenRequest) -> AsyncIterator[Any]:
        raise RayErrors.RayActorError("The actor died unexpectedly before finishing this task.")
        yield  # an async generator, as Ray's streaming refs are


def test_the_last_replica_to_die_makes_the_backend_dead_and_every_later_request_says_so():
    backend = RayReplicaBackend(replicas_config(replicas=2))
    loop = LoopThread("test-ray-replicas")
    loop.start()
    backend._state = _Started(ray=SimpleNamespace(exceptions=RayErrors), owns_ray=False,
                              actors=[DyingActor(), DyingActor()], groups=[], loop=loop,
                              replicas=[Replica(i, f"node{i}" * 4, f"10.0.0.{i + 1}", (f"cpu:{i}",)) for i in (0, 1)])
    errors: list[BaseException] = []
    try:
        for i in range(3):  # one at a time: replica 0 dies, then replica 1, then none is left
            sink = QueueSink()
            backend.submit(GenRequest(id=i, prompt_ids=[5, 6]), sink)
            item = sink.queue.get(timeout=10)
            assert isinstance(item, BaseException)
            errors.append(item)
    finally:
        loop.close()
        backend._state = None
    first, last, later = errors
    assert isinstance(first, BackendError) and not isinstance(first, BackendDead)  # replica 1 still lives
    assert first.message.startswith("replica 0 on node 10.0.0.1 (id node0node0no) died during the run: RayActorError")
    assert isinstance(last, BackendDead)
    assert last.message.startswith("every replica has died (the last: replica 1 on node 10.0.0.2")
    assert isinstance(later, BackendDead) and later.message == "every replica has died"


class FakeStream:
    """A replica's Offline stream as the driver sees Ray's ObjectRefGenerator: `next` gives a ref (here, the item
    itself: a batch of results, or the error `ray.get` would raise), StopIteration at the end."""

    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)

    def __next__(self) -> Any:
        if not self.items:
            raise StopIteration
        return self.items.pop(0)

    def is_finished(self) -> bool:
        return not self.items


class FakeRay:
    """ray.wait (a stream with an item left is ready; an ended one never is, as Ray may say), ray.get, exceptions."""

    exceptions = RayErrors

    def __init__(self) -> None:
        self.waits = 0

    def wait(self, streams: list[FakeStream], num_returns: int, timeout: float) -> tuple[list, list]:
        self.waits += 1
        ready = [s for s in streams if s.items][:num_returns]
        return ready, [s for s in streams if s not in ready]

    def get(self, ref: Any) -> Any:
        if isinstance(ref, BaseException):
            raise ref
        return ref


def offline_replicas(shards: list[Callable[[list[GenRequest]], list[Any]]]) -> RayReplicaBackend:
    """A started backend whose replica i streams what shards[i] makes of the requests it is given."""
    backend = RayReplicaBackend(replicas_config(replicas=len(shards)))
    actors = [SimpleNamespace(generate=SimpleNamespace(remote=lambda reqs, make=make: FakeStream(make(reqs))))
              for make in shards]
    backend._state = _Started(ray=FakeRay(), owns_ray=False, actors=actors, groups=[],
                              replicas=[Replica(i, f"node{i}" * 4, f"10.0.0.{i + 1}", (f"cpu:{i}",))
                                        for i in range(len(shards))])
    return backend


def in_two_batches(requests: list[GenRequest]) -> list[list[GenResult]]:
    results = [GenResult(id=r.id, token_ids=[7, 8, 9]) for r in requests]
    return [results[:1], results[1:]]


def test_offline_replicas_stream_their_results_back_in_batches_and_count_them():
    backend = offline_replicas([in_two_batches, in_two_batches])
    results = list(backend.generate([GenRequest(id=i, prompt_ids=[5, 6]) for i in range(10)]))
    assert sorted(r.id for r in results) == list(range(10))
    state = backend._started()
    assert [r.samples for r in state.replicas] == [5, 5] and [r.tokens for r in state.replicas] == [15, 15]
    assert state.ray.waits >= 4  # a wait per batch: the driver took each as it came


def test_an_offline_replica_that_dies_mid_shard_fails_the_query_naming_its_node():
    def dies_after_one(requests: list[GenRequest]) -> list[Any]:
        return [in_two_batches(requests)[0], RayErrors.RayActorError("The actor died unexpectedly")]

    backend = offline_replicas([in_two_batches, dies_after_one])
    seen: list[GenResult] = []
    with pytest.raises(BackendError, match=r"replica 1 on node 10\.0\.0\.2 \(id node1node1no\) died during the run"):
        seen.extend(backend.generate([GenRequest(id=i, prompt_ids=[5, 6]) for i in range(10)]))
    assert seen  # what finished before it died was delivered
    assert backend._started().replicas[1].alive is False


class SlowEngine:
    """A started VllmBackend's Offline side: yields a result every few milliseconds; remembers being closed."""

    def __init__(self) -> None:
        self.closed = False

    def generate(self, requests: list[GenRequest]) -> Iterator[GenResult]:
        try:
            for r in requests:
                time.sleep(0.005)
                yield GenResult(id=r.id, token_ids=[7, 8])
        finally:
            self.closed = True


def test_a_replica_actor_sends_its_shard_as_it_finishes_and_aborts_it_when_the_driver_stops_reading(tmp_path: Path):
    async def batches(actor: ReplicaActor, requests: list[GenRequest], keep: int | None = None) -> list[list[int]]:
        out: list[list[int]] = []
        stream = actor.generate(requests)
        async for batch in stream:
            out.append([r.id for r in batch])
            if keep is not None and len(out) == keep:
                await stream.aclose()  # what Ray does to the generator when the driver drops it
                break
        return out

    actor = ReplicaActor(VllmBackendConfig(model=tmp_path, options=EngineOptions(device="cpu")))
    requests = [GenRequest(id=i, prompt_ids=[5, 6]) for i in range(40)]
    actor.backend = engine = SlowEngine()  # type: ignore[assignment]
    got = asyncio.run(batches(actor, requests))
    assert [i for batch in got for i in batch] == list(range(40)) and len(got) > 1 and engine.closed
    actor.backend = engine = SlowEngine()  # type: ignore[assignment]
    got = asyncio.run(batches(actor, requests, keep=1))
    assert engine.closed and len(got) == 1 and len(got[0]) < 40


def app_config(tmp_path: Path, **kw: object) -> AppConfig:
    base: dict[str, object] = dict(round="v6.0", benchmark="llama2-70b-99", device="cpu", scenarios=("Offline",),
                                   modes=("performance",), model=tmp_path, tokenizer=tmp_path, dataset=tmp_path,
                                   results_dir=tmp_path / "r", system="box", target_qps={"Offline": 1.0})
    return AppConfig(**{**base, **kw})


def test_replicas_go_with_the_in_process_engines_only_and_are_recorded(tmp_path: Path):
    with pytest.raises(AppConfigError, match="replicas and ray_address are for the vllm backend"):
        app_config(tmp_path, backend="endpoint", engine=EngineSettings(replicas=2))
    record = backend_record(app_config(tmp_path, engine=EngineSettings(replicas=2, ray_address="h:6379")), [])
    assert record == {"kind": "vllm", "transport": "ray", "ray_address": "h:6379", "replicas": 2}


def test_a_run_with_failed_samples_is_never_shown_valid():
    failed = RunSummary(scenario="Server", mode="performance", folder="f", validity="VALID", tokens_per_second=1.0,
                        ttft_p99_ms=1.0, tpot_p99_ms=1.0, rouge=None, problems=["4 samples failed"])
    assert "FAILED (1 problem(s); LoadGen said VALID)" in format_row(failed)


# --- e2e on a two-node local Ray cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = c.add_node(num_cpus=1)
    c.wait_for_nodes()
    try:
        yield c, worker
    finally:
        c.shutdown()


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """One cmx home for the module, on the repository's recipes: the tiny model is made once."""
    root = tmp_path_factory.mktemp("ray-home")
    (root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                        encoding="utf-8")
    return Home(root)


QUERY = "app mlperf inference llama2 _cpu _tiny _short"
# the round these tests' folders and checks are written for, and a Server target given (find-performance has its
# own e2e test, tests/mlperf/tune/test_findperf_e2e.py): these are about the replicas
PINNED = ("--input", "round=v6.0", "--input", "target_qps_server=20")


def scenario_dir(results: Path, scenario: str) -> Path:
    return results / "box" / "llama2-70b-99" / scenario


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_two_replicas_on_two_nodes_run_offline_and_server_valid(cluster, app_home: Home, tmp_path: Path):
    c, _ = cluster
    results = tmp_path / "results"
    proc = app_home.cmx("run", QUERY, *PINNED, "--input", "scenarios=Offline,Server", "--input", "modes=performance",
                        "--input", "replicas=2", "--input", f"ray_address={c.address}", "--input", "system_name=box",
                        "--input", f"results_dir={results}", "--progress", "none", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for scenario in ("Offline", "Server"):
        facts = json.loads((scenario_dir(results, scenario) / "cmx_run.json").read_text())
        assert facts["ok"] is True and facts["validity"]["performance"] == "VALID"
        assert facts["backend"] == {"kind": "vllm", "transport": "ray", "ray_address": c.address, "replicas": 2}
        replicas = facts["runs"][0]["details"]["replicas"]
        assert len({r["node_id"] for r in replicas}) == 2, replicas  # one per node: each has one CPU
        assert all(r["samples"] > 0 and r["tokens"] >= 2 * r["samples"] and r["alive"] for r in replicas), replicas
        assert sorted(d for r in replicas for d in r["devices"]) == ["cpu:0", "cpu:1"]  # disjoint cores
        assert {r["vllm"] for r in replicas} == {software_versions()["vllm"]} != {""}  # each replica's own vLLM
        result = json.loads((scenario_dir(results, scenario) / "performance" / "run_1" / "result.json").read_text())
        assert sum(r["samples"] for r in replicas) >= result["completed_samples"]  # warm-up is not counted


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_more_replicas_than_the_cluster_holds_fail_before_anything_runs(cluster, app_home: Home, tmp_path: Path):
    c, _ = cluster
    proc = app_home.cmx("run", QUERY, *PINNED, "--input", "replicas=3", "--input", f"ray_address={c.address}",
                        "--input", f"results_dir={tmp_path / 'r'}", "--progress", "none", timeout=300)
    assert proc.returncode != 0
    assert f"replicas=3 need 3 CPUs (1 each), but the Ray cluster at {c.address} reports 2" in proc.stderr
    assert not list((tmp_path / "r").rglob("harness.log"))  # no test was started


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_a_replicas_node_killed_mid_run_fails_the_run_naming_the_node(cluster, app_home: Home, tmp_path: Path):
    c, worker = cluster
    results = tmp_path / "results"
    harness_log = scenario_dir(results, "Server") / "performance" / "run_1" / "harness.log"
    proc = subprocess.Popen([*CMX, "run", f"{QUERY} _server", *PINNED, "--input", "modes=performance",
                             "--input", "replicas=2",
                             "--input", f"ray_address={c.address}", "--input", "system_name=box",
                             "--input", f"results_dir={results}", "--progress", "none"],
                            env=app_home.env, cwd=app_home.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 300
        while not (harness_log.is_file() and "test starts" in harness_log.read_text(errors="replace")):
            assert proc.poll() is None and time.monotonic() < deadline, "the Server test never started"
            time.sleep(0.5)
        time.sleep(3)  # well inside the run (480 queries at 20/s)
        c.remove_node(worker, allow_graceful=False)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, out + err
    node_id = worker.node_id[:12]
    assert "died during the run" in err and f"(id {node_id})" in err, err
    facts = json.loads((scenario_dir(results, "Server") / "cmx_run.json").read_text())
    assert facts["ok"] is False and any(f"(id {node_id})" in p for p in facts["problems"]["performance"])
    dead = [r for r in facts["runs"][0]["details"]["replicas"] if not r["alive"]]
    assert [r["node_id"][:12] for r in dead] == [node_id]
    summary = (results / "summary.txt").read_text()
    assert "Server" in summary and " VALID " not in summary.replace("said VALID", "")
    assert no_process_left("ray::ReplicaActor"), "a replica outlived its run"


def no_process_left(pattern: str, wait_s: float = 20.0) -> bool:
    """No process's command line matches `pattern` (Ray ends killed actors asynchronously: give it a moment)."""
    deadline = time.monotonic() + wait_s
    while subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True
