"""Resolve the deps' outputs into an AppConfig and run it (cmx.mlperf.app)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from cmx import __version__
from cmx.container import container_facts
from cmx.mlperf.app import (
    SHORT_TIMEOUT_S,
    AppConfig,
    AppConfigError,
    EngineSettings,
    benchmark_name,
    modes_for,
    modes_from_list,
    pick,
    run_app,
    scenarios_for,
    scenarios_from_list,
    system_name,
)
from cmx.mlperf.provenance import RunOrigin, software_versions
from cmx.mlperf.rounds import load_round
from cmx.mlperf.submission.package import (
    PackageRequest,
    closed_refusals,
    package_and_check,
)
from cmx.mlperf.submission.system_desc import read_user_file

GROUPS = {"target": ("99", "99.9"), "scenario": ("offline", "server", "interactive", "all-scenarios"),
          "mode": ("valid", "performance", "accuracy", "compliance")}


def chosen(ctx, group):
    return next(v for v in ctx.variations if v in GROUPS[group])


def scenarios(ctx, round_, benchmark):
    variation = chosen(ctx, "scenario")
    listed = pick(ctx.inputs["scenarios"], variation, "offline", group="scenarios", input_name="scenarios")
    return scenarios_from_list(listed, round_, benchmark) if listed else scenarios_for(variation, round_, benchmark)


def modes(ctx):
    variation = chosen(ctx, "mode")
    listed = pick(ctx.inputs["modes"], variation, "valid", group="tests", input_name="modes")
    return modes_from_list(listed) if listed else modes_for(variation)


def origin(ctx, model):
    return RunOrigin(command=ctx.run_argv, cmx_version=__version__,
                     run_record=str(ctx.run_record) if ctx.run_record else None,
                     system=dict(ctx.deps.system.outputs), software=software_versions(),
                     model={k: model[k] for k in ("name", "revision", "precision", "dtype", "is_tiny")},
                     container=container_facts(), python=ctx.deps.system.outputs["python"])


def run(ctx):
    i = ctx.inputs
    benchmark = benchmark_name("llama2-70b", chosen(ctx, "target"))
    model = ctx.deps.model.outputs
    short = "short" in ctx.variations
    if "submission" in ctx.variations:  # before the hours of benchmarking, not after
        check_submission_inputs(ctx, benchmark, short=short, tiny=bool(model["is_tiny"]))
    config = AppConfig(
        round=i["round"], benchmark=benchmark, device=ctx.context["device"],
        scenarios=scenarios(ctx, load_round(i["round"]), benchmark), modes=modes(ctx),
        model=Path(model["path"]), tokenizer=Path(model["tokenizer_path"]),
        dataset=Path(ctx.deps.dataset.outputs["path"]),
        results_dir=i["results_dir"] or ctx.workdir / "results",
        system=system_name(ctx.deps.system.outputs, i["system_name"]),
        target_qps={"Offline": i["target_qps_offline"], "Server": i["target_qps_server"],
                    "Interactive": i["target_qps_interactive"]},
        short=short, tiny=bool(model["is_tiny"]), rows=i["rows"], max_tokens=i["max_tokens"],
        engine=EngineSettings(precision=ctx.context.get("precision"), tensor_parallel_size=i["tensor_parallel_size"],
                              max_num_seqs=i["max_num_seqs"], max_num_batched_tokens=i["max_num_batched_tokens"],
                              gpu_memory_utilization=i["gpu_memory_utilization"], max_model_len=i["max_model_len"]),
        timeout_s=i["timeout_s"] or (SHORT_TIMEOUT_S if short else None), origin=origin(ctx, model))
    result = run_app(config, logger=ctx.log)
    ctx.log.info("results in %s\n%s", result.results_dir, result.table)
    return {"results_dir": result.results_dir, "system": config.system, "benchmark": benchmark,
            "summary": [asdict(r) for r in result.runs], "table": result.table,
            "submission": submission(ctx, config.results_dir) if "submission" in ctx.variations else {}}


def check_submission_inputs(ctx, benchmark, *, short, tiny):
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


def submission(ctx, results_dir):
    i = ctx.inputs
    request = PackageRequest(results_dir=results_dir, out_dir=i["submission_dir"] or results_dir.parent / "submission",
                             submitter=i["submitter"], division=i["division"], round=i["round"],
                             system_file=i["system_file"], calibration_file=i["calibration_file"])
    packaged = package_and_check(request, ctx.log)
    return {**packaged, "tree": str(packaged["tree"])}
