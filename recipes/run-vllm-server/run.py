"""Start a vLLM server for the model, print its URL, serve until Ctrl-C (or serve_seconds), stop it.

The work is in cmx.mlperf.backends.vllm_server (flags from the device profile, waiting for /health, stopping
the whole process group), where it is tested.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.backends.profiles import EngineOptions
from cmx.mlperf.backends.vllm_server import VllmServer, VllmServerConfig


def run(ctx: StepContext) -> dict[str, Any]:
    i = ctx.inputs
    model = ctx.deps.model.outputs
    options = EngineOptions(device=ctx.context["device"], precision=ctx.context.get("precision"),
                            tensor_parallel_size=i["tensor_parallel_size"], max_num_seqs=i["max_num_seqs"],
                            max_num_batched_tokens=i["max_num_batched_tokens"],
                            gpu_memory_utilization=i["gpu_memory_utilization"])
    log_path = ctx.workdir / "vllm-server.log"
    config = VllmServerConfig(model=Path(model["path"]), options=options, log_path=log_path, host=i["host"],
                              port=i["port"], served_model_name=i["served_model_name"], api_key=i["api_key"],
                              max_model_len=i["max_model_len"], startup_timeout_s=i["startup_timeout_s"])
    until = None if i["serve_seconds"] is None else time.monotonic() + i["serve_seconds"]
    # the server stops when this block ends: after serve_seconds, when the run stops (Ctrl-C sets
    # ctx.stopping), on an error; and if cmx dies first, its parent-death signal stops it
    with VllmServer(config, ctx.log) as server:
        served = i["served_model_name"] or model["path"]
        print(f"vLLM server for {served} at {server.url} (log {log_path}); "
              + ("Ctrl-C stops it" if until is None else f"stopping in {i['serve_seconds']:g} s"), flush=True)
        ctx.log.info("serving at %s", server.url)
        server.serve(lambda: ctx.stopping or (until is not None and time.monotonic() >= until))
        assert server.info is not None  # entering the block started the server
        url, start_seconds = server.url, server.info.start_seconds
    return {"url": url, "model": served, "log": str(log_path), "start_seconds": round(start_seconds, 3)}
