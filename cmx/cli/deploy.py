"""`cmx deploy QUERY --k8s OUT`: Kubernetes manifests serving the plan's model with vLLM, and a benchmark Job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cmx.cli.common import app, echo_json, parse_query, query_arg, query_options, registry_option


def _groups(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return tuple(int(g) for g in value.split(",") if g.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of group ids",
                                 param_hint="--supplemental-groups") from None


@click.command("deploy", help="""Render Kubernetes manifests that serve the plan's model with vLLM and
benchmark it; with --apply, send them to your cluster.

QUERY is a benchmark query as for `cmx run`. Its model (the pinned Hugging Face
repository and commit of the plan's model step) is served by `vllm serve` with the
device profile's engine arguments, in a Deployment (a LeaderWorkerSet with
--nodes N > 1), behind a ClusterIP Service on port 8000; a Job runs
`cmx run "QUERY _endpoint"` against it and writes the results to a volume. The
device comes from the query: _cuda requests nvidia.com/gpu, _rocm amd.com/gpu (a
CPU plan is refused). Every object is validated against the Kubernetes schemas
before anything is written; OUT gets one YAML file per object and a README.md.

\b
    cmx deploy "app mlperf inference llama2 _rocm" --k8s k8s/ \\
        --input tensor_parallel_size=8 --gpu-name "AMD Instinct MI300X"
    cmx deploy "app mlperf inference llama2 _cuda _server" --k8s k8s/ \\
        --input tensor_parallel_size=8 --input target_qps_server=40 \\
        --image registry.example.com/cmx-llama2:1 --namespace mlperf
    cmx deploy "app mlperf inference llama2 _cuda" --k8s k8s/ --nodes 2 \\
        --input tensor_parallel_size=8
    kubectl create secret generic hf-token --from-literal=token=hf_...
    kubectl apply -f k8s/        # or: cmx deploy ... --k8s k8s/ --apply

The benchmark image defaults to the tag `cmx run "QUERY _endpoint" --docker`
builds; push it to a registry the cluster pulls from and pass --image.
""")
@query_arg
@click.option("--k8s", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False), metavar="OUT_DIR",
              help="Write the manifests and a README.md into OUT_DIR.")
@query_options(input_help="As for cmx run (tensor_parallel_size, max_num_seqs... set the server's engine; all go "
                          "to the Job's run too).", context_help="As for cmx run.", inputs_file=False)
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
@click.option("--json", "as_json", is_flag=True, help="Print a summary (files, objects, image, device) as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], out_dir: Path, inputs: tuple[str, ...],
            contexts: tuple[str, ...], do_apply: bool, as_json: bool, **options: Any) -> None:
    """`options`: the K8sOptions, by their own names."""
    from cmx import api

    k8s = api.K8sOptions(**{**options, "supplemental_groups": _groups(options["supplemental_groups"])})
    q = parse_query(query, inputs, contexts)
    result = api.deploy_k8s(q.query, inputs=q.inputs, context=q.context, out_dir=out_dir, options=k8s,
                            apply=do_apply, settings=app(ctx).settings())
    if as_json:
        echo_json(result.to_json())
        return
    spec = result.rendered.spec
    click.echo(f"wrote {len(result.files)} files to {result.out_dir} ({spec.device}: {spec.gpus} x "
               f"{spec.profile.resource} per pod{f', {spec.nodes} pods' if spec.multi_node else ''}; "
               f"serving {spec.model.repo}@{spec.model.revision[:12]}):")
    for path in result.files:
        click.echo(f"  {path}")
    if result.image_is_default:
        click.echo(f"benchmark image: {spec.benchmark_image} (build it with `cmx run \"{spec.benchmark_query}\" "
                   "--docker`, push it where the cluster pulls from, and pass --image)")
    for a in result.applied:
        click.echo(f"applied {a.kind} {a.namespace}/{a.name}")
    if not result.applied:
        click.echo(f"next: read {result.out_dir / 'README.md'}, then `kubectl apply -f {result.out_dir}`")
