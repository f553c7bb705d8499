"""`cmx deploy QUERY --k8s OUT`: Kubernetes manifests serving the plan's model with vLLM, and a benchmark Job."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import click

from cmx import api
from cmx.cli.common import app, echo_json, parse_query, query_arg, query_options, registry_option

# the options whose parameter is not named as StackOptions' field (--stack's is `name`, which is --name's K8sOptions
# field too)
STACK_PARAMS = {"stack_name": "name"}


def _groups(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return tuple(int(g) for g in value.split(",") if g.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of group ids",
                                 param_hint="--supplemental-groups") from None


@click.command("deploy", help="""Render Kubernetes manifests that serve the plan's model and
benchmark it; with --apply, roll them out to your cluster and run the benchmark.

QUERY is a benchmark query as for `cmx run`. Its model (the pinned Hugging Face
repository and commit of the plan's model step) is served with the device
profile's vLLM engine arguments by the stack you choose:

\b
  --stack vllm     `vllm serve` in a Deployment (a LeaderWorkerSet with
                   --nodes N > 1) behind a ClusterIP Service (the default)
  --stack llm-d    llm-d: one KServe LLMInferenceService (--llm-d-form kserve,
                   the default), or its upstream pieces (--llm-d-form pieces):
                   InferencePool, endpoint picker, Gateway and HTTPRoute;
                   --scorer load (the default) or prefix (prefix-cache-aware)
  --stack dynamo   one NVIDIA Dynamo DynamoGraphDeployment: a Frontend, prefill
                   and decode vLLM workers (--prefill-workers, --decode-workers,
                   --prefill-tp, --decode-tp), --router kv or round-robin

A Job runs `cmx run "QUERY _endpoint"` against the stack's entry point and
records the stack, its versions and topology. _cuda requests nvidia.com/gpu,
_rocm amd.com/gpu (a CPU plan is refused). The built-in objects are validated
against the Kubernetes schemas, custom resources against their CRDs (--crd FILE,
or the cluster's on --apply); OUT gets one YAML file per object and a README.md
with a diagram of the stack.

With --apply: checks the cluster has the CRDs the stack needs (and names the
install command of each one missing), applies the stack, waits until it is
ready, lists /v1/models through its entry point, then starts the Job and waits
for its result (--detach: returns once it started). --delete removes it all but
the volumes.

\b
    cmx deploy "app mlperf inference llama2 _rocm" --k8s k8s/ \\
        --input tensor_parallel_size=8 --gpu-name "AMD Instinct MI300X"
    cmx deploy "app mlperf inference gpt-oss-120b _cuda _server" --k8s k8s/ \\
        --stack llm-d --replicas 4 --scorer prefix --image REGISTRY/cmx:1 --apply
    cmx deploy "app mlperf inference deepseek-r1 _cuda" --k8s k8s/ \\
        --stack dynamo --input tensor_parallel_size=8 --prefill-workers 2 \\
        --decode-workers 1 --router kv
    kubectl create secret generic hf-token --from-literal=token=hf_...

The benchmark image defaults to the tag `cmx run "QUERY _endpoint" --docker`
builds; push it to a registry the cluster pulls from and pass --image.
""")
@query_arg
@click.option("--k8s", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False), metavar="OUT_DIR",
              help="Write the manifests and a README.md into OUT_DIR.")
@query_options(input_help="As for cmx run (tensor_parallel_size, max_num_seqs... set the server's engine; all go "
                          "to the Job's run too).", context_help="As for cmx run.")
@click.option("--apply", "do_apply", is_flag=True,
              help="Server-side apply the objects to the cluster of $KUBECONFIG or ~/.kube/config.")
@click.option("--image", metavar="IMAGE",
              help="The cmx image the benchmark Job runs (default: the tag `cmx run \"QUERY _endpoint\" "
                   "--docker` builds, which you must push to a registry the cluster can pull from).")
@click.option("--serving-image", metavar="IMAGE",
              help="The vLLM image of the server (default: the device profile's pinned vLLM image).")
@click.option("--namespace", metavar="NS", help="Put the objects in NS (default: the kubeconfig context's).")
@click.option("--name", metavar="NAME", help="The objects' base name (default: vllm-<model>).")
@click.option("--gpus", type=click.IntRange(min=1), metavar="N",
              help="GPUs per serving pod (default: tensor_parallel_size; a multiple of it is data parallel).")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Pods one model spans: above 1 a LeaderWorkerSet, pipeline parallel over Ray.")
@click.option("--gpu-name", default="", metavar="TEXT",
              help="The cluster's GPU, e.g. \"AMD Instinct MI300X\" (turns on ROCm's AITER kernels).")
@click.option("--hf-token-secret", default="hf-token", show_default=True, metavar="NAME",
              help="The Secret whose key `token` holds the Hugging Face token (optional in the pods).")
@click.option("--cache-size", metavar="SIZE", help="The model cache volume (default: the benchmark's weights and "
                                                    "half again: 200Gi for llama2-70b, 1150Gi for llama3.1-405b).")
@click.option("--results-size", default="10Gi", show_default=True, metavar="SIZE", help="The results volume.")
@click.option("--storage-class", metavar="NAME",
              help="StorageClass of both volumes (the model cache's must offer ReadWriteMany).")
@click.option("--shm-size", default="16Gi", show_default=True, metavar="SIZE", help="The /dev/shm of a server pod.")
@click.option("--runtime-class", metavar="NAME",
              help="cuda: the RuntimeClass of the server pods (default nvidia; \"\" for none).")
@click.option("--supplemental-groups", metavar="GIDS",
              help="rocm: the node's video and render group ids (default 44,109).")
@click.option("--stack", "stack_name", type=click.Choice(api.STACK_NAMES), default="vllm", show_default=True,
              help="The serving stack to render.")
@click.option("--llm-d-form", "llmd_form", type=click.Choice(api.LLMD_FORMS), default="kserve", show_default=True,
              help="llm-d: one KServe LLMInferenceService, or the upstream pieces.")
@click.option("--scorer", type=click.Choice(api.SCORERS), default="load", show_default=True,
              help="llm-d: the endpoint picker's scoring: load-aware (queue depth, KV-cache use), or "
                   "prefix-cache-aware with load as the tie-break (it pays off only where vLLM's prefix caching is "
                   "on, which cmx's engine profile keeps off: no sample may reuse another's KV cache).")
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="llm-d: model-server replicas the picker spreads requests over.")
@click.option("--gateway", metavar="NAME", help="llm-d pieces: attach the HTTPRoute to your Gateway NAME instead "
                                                "of rendering one.")
@click.option("--gateway-class", default=api.GATEWAY_CLASS, show_default=True, metavar="NAME",
              help="llm-d pieces: the rendered Gateway's class (istio, kgateway, agentgateway, ...).")
@click.option("--epp-image", default=api.EPP_IMAGE, show_default=True, metavar="IMAGE",
              help="llm-d pieces: the endpoint picker's image.")
@click.option("--prefill-workers", type=click.IntRange(min=0), default=1, show_default=True, metavar="N",
              help="dynamo: prefill workers (0: aggregated workers that prefill and decode).")
@click.option("--decode-workers", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="dynamo: decode workers (with --prefill-workers 0: the aggregated workers).")
@click.option("--prefill-tp", type=click.IntRange(min=1), metavar="N",
              help="dynamo: GPUs per prefill worker (default: tensor_parallel_size).")
@click.option("--decode-tp", type=click.IntRange(min=1), metavar="N",
              help="dynamo: GPUs per decode worker (default: tensor_parallel_size).")
@click.option("--router", type=click.Choice(api.ROUTERS), default="kv", show_default=True,
              help="dynamo: the Frontend's routing, KV-cache-aware or round-robin.")
@click.option("--expert-parallel", is_flag=True, help="llm-d kserve: expert parallel (wide EP, a mixture of "
                                                      "experts across the data-parallel ranks).")
@click.option("--entry-url", metavar="URL",
              help="The URL the benchmark Job sends to (default: the stack's entry point; --apply finds it).")
@click.option("--crd", "crd_files", multiple=True, type=click.Path(path_type=Path, dir_okay=False, exists=True),
              metavar="FILE", help="A CRD's YAML to check custom resources against offline (repeatable).")
@click.option("--delete", "do_delete", is_flag=True, help="Delete what --apply made (the volumes stay).")
@click.option("--detach", is_flag=True, help="With --apply: return once the benchmark Job started.")
@click.option("--ready-timeout", type=click.FloatRange(min=1), default=3600.0, show_default=True, metavar="S",
              help="With --apply: seconds the stack may take to become ready (the first start downloads the "
                   "weights).")
@click.option("--json", "as_json", is_flag=True, help="Print a summary (files, objects, stack, validation, what "
                                                      "--apply did) as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], out_dir: Path, inputs: tuple[str, ...],
            inputs_file: str | None, input_envs: tuple[str, ...], contexts: tuple[str, ...], do_apply: bool,
            do_delete: bool, detach: bool, ready_timeout: float, as_json: bool, crd_files: tuple[Path, ...],
            **options: Any) -> None:
    """`options`: the K8sOptions and StackOptions, by their own names."""
    stack_fields = {f.name for f in fields(api.StackOptions)}
    params = {STACK_PARAMS.get(p, p): p for p in list(options)
              if p != "name" and STACK_PARAMS.get(p, p) in stack_fields}
    stack = api.StackOptions(**{field: options.pop(param) for field, param in params.items()})
    api.refuse_foreign(stack, {field for field, param in params.items() if _given(ctx, param)})
    k8s = api.K8sOptions(**{**options, "supplemental_groups": _groups(options["supplemental_groups"])},
                         stack=stack, crd_files=crd_files)
    q = parse_query(query, inputs, contexts, inputs_file, input_envs)
    result = api.deploy_k8s(q.query, inputs=q.inputs, context=q.context, out_dir=out_dir, options=k8s,
                            apply=do_apply, delete=do_delete, detach=detach,
                            waits=api.Waits(ready_s=ready_timeout),
                            say=lambda line: click.echo(line, err=True), settings=app(ctx).settings())
    if as_json:
        echo_json(result.to_json())
    else:
        _report(result)
    if result.job is not None and not result.job.succeeded:
        raise SystemExit(1)


def _given(ctx: click.Context, param: str) -> bool:
    return ctx.get_parameter_source(param) == click.core.ParameterSource.COMMANDLINE


def _report(result: Any) -> None:
    spec, rendered = result.rendered.spec, result.rendered
    click.echo(f"wrote {len(result.files)} files to {result.out_dir} ({rendered.stack.title()}: "
               f"{rendered.stack.topology()}; serving {spec.model.repo}@{spec.model.revision[:12]}):")
    for path in result.files:
        click.echo(f"  {path}")
    click.echo(f"validated: the built-in objects against Kubernetes {api.KUBERNETES_VERSION}"
               + (f"; {rendered.validation.describe()}" if rendered.validation.checked or rendered.validation.unchecked
                  else ""))
    if result.image_is_default:
        click.echo(f"benchmark image: {spec.benchmark_image} (build it with `cmx run \"{spec.benchmark_query}\" "
                   "--docker`, push it where the cluster pulls from, and pass --image)")
    for a in result.applied:
        click.echo(f"applied {a.kind} {a.namespace}/{a.name}")
    for a in result.deleted:
        click.echo(f"deleted {a.kind} {a.namespace}/{a.name}")
    if result.job is not None:
        verdict = "succeeded" if result.job.succeeded else "FAILED"
        click.echo(f"benchmark Job {result.job.name} {verdict} (pod {result.job.pod})")
        click.echo(result.job.log_tail.rstrip()[-1500:])
    elif not result.applied and not result.deleted:
        needs = ", ".join(r.crd for r in rendered.requirements)
        click.echo(f"next: read {result.out_dir / 'README.md'}"
                   + (f" (the cluster needs {needs})" if needs else "") + f", then `kubectl apply -f {result.out_dir}`"
                   " or run again with --apply")
