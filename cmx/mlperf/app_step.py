"""The app recipes' step (app-mlperf-inference-<benchmark>): choices and inputs into an AppConfig, the run, the package.

The one run.py, app-mlperf-inference's (which every app extends), is `run_benchmark(ctx, ctx.params["benchmark"])`;
what differs between benchmarks is in each app's recipe (its deps, defaults, variations) and in the benchmark
package, not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.execute.context import StepContext, StepProgress
from cmx.mlperf.app import AppConfig
from cmx.mlperf.app_plan import (
    AppConfigError,
    Choices,
    pick,
    refuse_half_topology,
    refuse_workers_without_url,
    scenario_name,
)
from cmx.mlperf.app_targets import named_target, targeted_benchmark
from cmx.mlperf.backends.base import Sampling, SamplingError
from cmx.mlperf.loadgen.harness_config import MODES, EndpointSettings, LoadgenSource, VideoShape
from cmx.mlperf.loadgen.progress import RunProgress
from cmx.mlperf.provenance import RunOrigin
from cmx.mlperf.rounds import Round
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:
    from cmx.mlperf.app import AppResult
    from cmx.mlperf.backends.disaggregated import PrefillDecode
    from cmx.resolve.plan import Step

NO_SEED = -1  # --input sampling_seed=-1: draw unseeded (vLLM's own spelling of "no seed")


def unnamed_devices(step: Step, query_variations: tuple[str, ...], context: dict[str, Any]) -> list[str]:
    """The device variations the app offers when the query names none of them (nor --context device=); [] when
    it names one, or the app has none: a measurement of one machine must say which device it ran on."""
    recipe = step.recipe
    devices = {v.name for group in recipe.groups.values() for v in group if any(k == "device" for k, _ in v.context)}
    return [] if not devices or set(query_variations) & devices or "device" in context else sorted(devices)


def scenarios_for(choice: str, round_: Round, benchmark: str) -> tuple[str, ...]:
    """The scenarios a variation names: one, or (`all-scenarios`) every one LoadGen can run for the benchmark in
    the round. A scenario only MLCommons' endpoint client measures (v6.1 Qwen3-VL Interactive) is refused."""
    bench = round_.benchmark(benchmark)
    names = bench.loadgen_scenario_names
    if choice == "all-scenarios":
        return names
    wanted = scenario_name(choice) or choice.capitalize()
    if wanted in bench.scenario_names and wanted not in names:
        raise AppConfigError(f"{benchmark} {wanted} in {round_.name} is measured by MLCommons' endpoint client "
                             "(inference-endpoint), not by LoadGen, so cmx cannot run it",
                             hint=f"run it with that client; `cmx check` reads its result folder. LoadGen runs "
                                  f"{', '.join(names)}")
    if wanted not in names:
        raise AppConfigError(f"{benchmark} has no {wanted} scenario in {round_.name}",
                             hint=f"its scenarios are {', '.join(names)}")
    return (wanted,)


def modes_for(choice: str, compliance: tuple[str, ...] = ("test06",)) -> tuple[str, ...]:
    """`valid` is what a submission needs per scenario: performance, accuracy and the round's compliance
    tests for the benchmark (`compliance`: TEST06 for most LLMs, TEST07 and TEST09 for gpt-oss-120b)."""
    table = {"performance": ("performance",), "accuracy": ("accuracy",), "compliance": compliance,
             "valid": ("performance", "accuracy", *compliance)}
    if choice not in table:
        raise AppConfigError(f"unknown mode {choice!r}", hint=f"one of {', '.join(table)}")
    return table[choice]


def system_name(facts: Mapping[str, Any], given: str | None = None) -> str:
    """A folder name for the system: `given`, else the GPUs (`8xNVIDIA_H100_80GB_HBM3`) or the CPU model."""
    if given:
        return _slug(given)
    gpus = facts.get("gpus") or []
    if gpus:
        first = gpus[0]
        name = first.get("name", "gpu") if isinstance(first, Mapping) else str(first)
        return _slug(f"{len(gpus)}x{name}")
    return _slug(str(facts.get("cpu_model") or "cpu"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip()).strip("_") or "system"


def scenarios_from_list(listed: str, round_: Round, benchmark: str) -> tuple[str, ...]:
    """`Offline,server` -> ("Offline", "Server"), each checked against the round."""
    names = tuple(dict.fromkeys(n.strip() for n in listed.split(",") if n.strip()))
    return tuple(s for n in names for s in scenarios_for(n.lower(), round_, benchmark))


def modes_from_list(listed: str, compliance: tuple[str, ...] = ("test06",)) -> tuple[str, ...]:
    """`performance,accuracy` -> ("performance", "accuracy"); `compliance` stands for the round's compliance tests."""
    out: list[str] = []
    for name in (n.strip().lower() for n in listed.split(",") if n.strip()):
        modes = compliance if name == "compliance" else (name,)
        for mode in modes:
            if mode not in MODES:
                raise AppConfigError(f"unknown mode {name!r} in modes={listed}", hint=f"modes are {', '.join(MODES)}")
            out.append(mode)
    return tuple(dict.fromkeys(out))


# --- the step ----------------------------------------------------------------------------------

def chosen_sampling(inputs: Mapping[str, Any], reference: Sampling) -> Sampling:
    """The reference's sampling with each field the user gave in its place (`--input temperature=0` for a
    greedy debug run; `sampling_seed=-1` drops the reference's seed)."""
    given: dict[str, Any] = {}
    if inputs["temperature"] is not None:
        given["temperature"] = float(inputs["temperature"])
    if inputs["top_p"] is not None:
        given["top_p"] = float(inputs["top_p"])
    if inputs["top_k"] is not None:
        given["top_k"] = int(inputs["top_k"])
    if inputs["sampling_seed"] is not None:
        given["seed"] = None if inputs["sampling_seed"] == NO_SEED else int(inputs["sampling_seed"])
    try:
        return replace(reference, **given)
    except SamplingError as err:
        raise AppConfigError(f"--input: {err.message}", hint=err.hint) from None


def run_benchmark(ctx: StepContext, family: str) -> dict[str, Any]:
    """Run the app recipe's step for the benchmark `family` (llama2-70b, llama3.1-8b) and return its outputs."""
    from cmx.mlperf.app import run_app

    if ctx.flag("submission"):  # before the hours of benchmarking, not after
        from cmx.mlperf.benchmarks import benchmark_for
        from cmx.mlperf.benchmarks.kit.outputs import model_outputs

        check_submission_inputs(ctx, benchmark_of(benchmark_for(family).names, ctx), short=ctx.flag("short"),
                                tiny=model_outputs(ctx)["is_tiny"])
    config = app_config(ctx, family)
    if all(config.target_qps.get(s) is not None for s in config.scenarios):
        result = run_app(config, logger=ctx.log, on_progress=ProgressLines(ctx))
    else:
        result = run_measured(ctx, config, family)
    ctx.log.info("results in %s\n%s", result.results_dir, result.table)
    return {"results_dir": result.results_dir, "system": config.system, "benchmark": config.benchmark,
            "summary": [asdict(r) for r in result.runs], "table": result.table,
            "submission": submission(ctx, config.results_dir) if ctx.flag("submission") else {}}


def run_measured(ctx: StepContext, config: AppConfig, family: str) -> AppResult:
    """find-performance, then the run: the targets the user gave none of measured first (cmx.mlperf.tune.measure)
    on the engine the run uses (a server cmx starts for the run is started once, for both)."""
    from cmx.mlperf.app import earlier_attempt, run_app, serving
    from cmx.mlperf.tune.measure import find_targets

    for scenario in config.scenarios:  # a folder that would refuse the run refuses it before the probes
        earlier_attempt(config.scenario_dir(scenario))
    with serving(config, ctx.log) as served:
        measured = find_targets(ctx, served, family)
        return run_app(measured, logger=ctx.log, on_progress=ProgressLines(ctx))


def app_config(ctx: StepContext, family: str) -> AppConfig:
    """The AppConfig the app recipe's choices, inputs and deps make (what `run_benchmark` runs and `cmx tune` tunes)."""
    from cmx.mlperf.app import SHORT_TIMEOUT_S
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.mlperf.benchmarks.kit.outputs import dataset_outputs, model_outputs
    from cmx.mlperf.loadgen.harness_config import EngineSettings
    from cmx.mlperf.rounds import load_round
    from cmx.mlperf.serving_stack import read_stack_file

    i = ctx.inputs
    bench = benchmark_for(family)
    name = benchmark_of(bench.names, ctx)
    model = model_outputs(ctx)
    short, tiny = ctx.flag("short"), model["is_tiny"]
    round_ = load_round(i["round"])
    return AppConfig(
        round=i["round"], benchmark=name, device=ctx.context["device"],
        scenarios=chosen_scenarios(ctx, round_, name), modes=chosen_modes(ctx, round_, name),
        model=Path(model["path"]), tokenizer=Path(model["tokenizer_path"]),
        dataset=Path(dataset_outputs(ctx)["path"]),
        results_dir=i["results_dir"] or ctx.workdir / "results",
        system=system_name(ctx.deps.system.outputs, i["system_name"]),
        target_qps={"Offline": i["target_qps_offline"], "Server": i["target_qps_server"],
                    "Interactive": i["target_qps_interactive"]},
        short=short, tiny=tiny, rows=i["rows"], max_tokens=i["max_tokens"] or bench.generation.max_tokens,
        engine=EngineSettings(precision=ctx.context.get("precision"), tensor_parallel_size=i["tensor_parallel_size"],
                              max_num_seqs=i["max_num_seqs"], max_num_batched_tokens=i["max_num_batched_tokens"],
                              gpu_memory_utilization=i["gpu_memory_utilization"], max_model_len=i["max_model_len"],
                              replicas=i["replicas"], ray_address=i["ray_address"], replica_cpus=i["replica_cpus"],
                              pipeline_parallel_size=i["pipeline_parallel_size"],
                              distributed_executor_backend=i["distributed_executor_backend"]),
        backend=ctx.variation("backend"), endpoint=endpoint_settings(ctx), api_key=i["endpoint_api_key"],
        server_log_dir=ctx.workdir, eos_token_id=model.get("eos_token_id"),
        timeout_s=i["timeout_s"] or (SHORT_TIMEOUT_S if short else None), origin=origin(ctx, model),
        sampling=chosen_sampling(i, bench.generation.sampling), reference_sampling=bench.generation.sampling,
        # a vision model's server on a CPU: torchvision without its compiled ops (get-torchvision-python-only)
        server_python_path=(Path(ctx.deps.torchvision.outputs["path"]),) if "torchvision" in ctx.deps else (),
        serving_stack=read_stack_file(i["serving_stack"]) if i["serving_stack"] else None,
        prefill_decode=prefill_decode(i), loadgen=loadgen_source(ctx.deps.loadgen.outputs),
        video=video_shape(i), scorer=external_scorer(ctx))


def external_scorer(ctx: StepContext) -> ExternalScorer | None:
    """VBench's environment and networks where the app has them (its deps scorer_env, get-vbench-env, and
    scorer_models, get-vbench-networks), on the CPU for a cpu run and over every GPU detect-system found otherwise
    (the reference's torch.distributed.run --nproc_per_node); None for an app without them."""
    if "scorer_env" not in ctx.deps or "scorer_models" not in ctx.deps:
        return None
    gpus = 0 if ctx.context["device"] == "cpu" else max(1, int(ctx.deps.system.outputs.get("gpu_count") or 0))
    env = ctx.deps.scorer_env.outputs
    return ExternalScorer(python=Path(env["python"]), models=Path(ctx.deps.scorer_models.outputs["path"]), gpus=gpus,
                          pythonpath=tuple(Path(p) for p in env.get("pythonpath") or ()))


def video_shape(inputs: Mapping[str, Any]) -> VideoShape | None:
    """A text-to-video app's video_width, video_height, video_frames and video_steps, where any is given (its
    `_tiny` gives the tiny pipeline's); None: the reference's (an app without those inputs has none)."""
    given = {k: inputs.get(f"video_{k}") for k in ("width", "height", "frames", "steps")}
    return VideoShape(**given) if any(v is not None for v in given.values()) else None


class ProgressLines:
    """Each LoadGen test's live progress on the step's line: one progress bar per test, its detail the rates,
    the p99s against the limits and the ETA (cmx.mlperf.loadgen.progress.RunProgress)."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        self._bars: dict[str, StepProgress] = {}

    def __call__(self, progress: RunProgress) -> None:
        bar = self._bars.get(progress.headline())
        if bar is None:
            bar = self._bars[progress.headline()] = self._ctx.progress(progress.expected, progress.headline())
        bar.update(progress.completed, progress.expected, progress.detail())


def benchmark_of(names: tuple[str, ...], ctx: Choices) -> str:
    """The MLPerf name the query chose: where the benchmark has several targets, the `target` variation (99, 99.9)
    the round keeps, or the round's own when none is named (cmx.mlperf.app_targets)."""
    if len(names) == 1:
        return names[0]
    name = targeted_benchmark(ctx.params["benchmark"], ctx.inputs["round"], named_target(ctx))
    if name is None or name not in names:
        raise AppConfigError(f"no benchmark {name!r} among {', '.join(names)}")
    return name


def chosen_scenarios(ctx: Choices, round_: Round, benchmark: str) -> tuple[str, ...]:
    variation = ctx.variation("scenario")
    listed = pick(ctx.inputs["scenarios"], variation, "offline", group="scenarios", input_name="scenarios")
    return scenarios_from_list(listed, round_, benchmark) if listed else scenarios_for(variation, round_, benchmark)


def chosen_modes(ctx: Choices, round_: Round, benchmark: str) -> tuple[str, ...]:
    from cmx.mlperf.loadgen.compliance import modes_of

    compliance = modes_of(round_.benchmark(benchmark).compliance_tests)
    variation = ctx.variation("mode")
    listed = pick(ctx.inputs["modes"], variation, "valid", group="tests", input_name="modes")
    return modes_from_list(listed, compliance) if listed else modes_for(variation, compliance)


def endpoint_settings(ctx: Choices) -> EndpointSettings | None:
    """The server the query names (`_endpoint --input endpoint_url=...`); None when cmx is to start one,
    or with _vllm."""
    from cmx.mlperf.engines import http_backend

    i = ctx.inputs
    if ctx.variation("backend") != http_backend():
        given = [k for k in ("endpoint_url", "endpoint_model") if i[k]]
        if given:
            raise AppConfigError(f"--input {given[0]} needs the endpoint backend",
                                 hint="add _endpoint to the query (the default, _vllm, runs vLLM in-process)")
        return None
    if not i["endpoint_url"]:
        refuse_workers_without_url(i)
        return None
    return EndpointSettings(url=i["endpoint_url"], model=i["endpoint_model"], request_timeout_s=i["request_timeout_s"],
                            max_concurrency=i["max_concurrency"], workers=i["client_workers"],
                            video_route=i["video_route"])


def prefill_decode(inputs: Mapping[str, Any]) -> PrefillDecode | None:
    """The disaggregated topology `--input prefill_decode=P:D --input disagg_proxy=SCRIPT` ask for (None: one
    server); refused with an endpoint_url, or one of the two without the other."""
    from cmx.mlperf.backends.base import BackendError
    from cmx.mlperf.backends.disaggregated import parse_prefill_decode

    refuse_half_topology(inputs)
    text, proxy = inputs["prefill_decode"], inputs["disagg_proxy"]
    if text is None or proxy is None:
        return None
    if inputs["endpoint_url"]:
        raise AppConfigError("--input prefill_decode starts a disaggregated topology here, and an endpoint_url names "
                             "a server that is already running",
                             hint="drop endpoint_url (cmx starts the instances and the proxy), or drop prefill_decode "
                                  "and disagg_proxy")
    if not Path(proxy).is_file():
        raise AppConfigError(f"the disaggregation proxy {proxy} is not a file",
                             hint="give the path of vLLM's examples/disaggregated/disaggregated_serving/"
                                  "disagg_proxy_demo.py (in vLLM's source distribution, vllm-VERSION.tar.gz on PyPI)")
    try:
        return parse_prefill_decode(str(text), Path(proxy))
    except BackendError as err:
        raise AppConfigError(f"--input {err.message}", hint=err.hint) from None


def loadgen_source(found: Mapping[str, Any]) -> LoadgenSource:
    """get-loadgen's outputs as the harness takes them: the version, and the cached folder ("" for none)."""
    return LoadgenSource(found["version"], Path(found["path"]) if found.get("path") else None)


def origin(ctx: StepContext, model: Mapping[str, Any]) -> RunOrigin:
    from cmx import __version__
    from cmx.container import container_facts
    from cmx.mlperf.provenance import software_versions

    return RunOrigin(command=ctx.run_argv, cmx_version=__version__,
                     run_record=str(ctx.run_record) if ctx.run_record else None,
                     # LoadGen: the one the harness imports (get-loadgen's), not this environment's
                     system=dict(ctx.deps.system.outputs),
                     software={**software_versions(), "loadgen": ctx.deps.loadgen.outputs["version"]},
                     # `architecture` where the model step reports it: what vLLM actually ran
                     model={k: model[k] for k in ("name", "revision", "precision", "dtype", "is_tiny", "architecture")
                            if k in model or k != "architecture"},
                     container=container_facts(), python=ctx.deps.system.outputs["python"])


def check_submission_inputs(ctx: Choices, benchmark: str, *, short: bool, tiny: bool) -> None:
    """With _submission, what the packager would refuse after the run, refused before it."""
    from cmx.mlperf.rounds import load_round
    from cmx.mlperf.submission.refusals import closed_refusals
    from cmx.mlperf.submission.system_desc import read_user_file

    i = ctx.inputs
    if not i["submitter"]:
        raise AppConfigError("_submission needs --input submitter=NAME (your organisation, the tree's folder name)")
    round_ = load_round(i["round"])
    if i["system_file"]:
        read_user_file(i["system_file"], round_)  # a missing file or an unknown field fails now
    if i["division"] == "closed":
        reasons = closed_refusals(short=short, tiny=tiny, rows=i["rows"],
                                  dataset_size=round_.benchmark(benchmark).dataset_size)
        if reasons:
            raise AppConfigError("_submission into the closed division would be refused after the run: "
                                 + "; ".join(reasons), hint="use --input division=open, or drop what it names")


def submission(ctx: StepContext, results_dir: Path) -> dict[str, Any]:
    from cmx.mlperf.submission.package import package_and_check
    from cmx.mlperf.submission.sources import PackageRequest

    i = ctx.inputs
    request = PackageRequest(results_dir=results_dir, out_dir=i["submission_dir"] or results_dir.parent / "submission",
                             submitter=i["submitter"], division=i["division"], round=i["round"],
                             system_file=i["system_file"], calibration_file=i["calibration_file"])
    packaged = package_and_check(request, ctx.log)
    return {**packaged, "tree": str(packaged["tree"])}
