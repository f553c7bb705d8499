"""`cmx lock QUERY [-o FILE] [--docker | --container ENGINE]`: pin every step of a plan, the packages it runs on and
(in a container) its image, into a lockfile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cmx.cli.common import app, echo_json, parse_query, query_arg, query_options, registry_option
from cmx.cli.docker_options import container_of, container_option, docker_options, docker_options_of


@click.command("lock", help="""Write a lockfile pinning every step of QUERY's plan.

For each step: the recipe, the sha256 of its files, the registry source and its
commit, the chosen variations, the inputs (a secret by its name only) and the
context, the cache key, and the checksums of its cached files (for steps already
in the cache). Beside them: the query, the inputs and context given here, and the
versions of vLLM, torch, LoadGen and the other packages the benchmark runs on.
No step runs and nothing is fetched.

With --docker the lock also pins the image `cmx run QUERY --docker` would run
in, built first if no image has its tag yet (the lock needs its ID): the image
ID (sha256 content digest), the tag cmx gave it, the base image and its ID, the
Dockerfile and its sha256, a sha256 per part of the build context, and the
package versions as the image's Python has them (the run happens there).
--container podman does the same with podman (and records the engine, which the
replay uses). --save-image FILE also saves the image as an archive, which
`cmx run --locked FILE --load-image ARCHIVE` loads on another machine, into
either engine (an image's ID is the same in both).

`cmx run --locked FILE` replays it, or refuses at the first difference; a lock
made with --docker replays in that image, which must be on the machine. Every
run whose root step runs also leaves a cmx.lock beside its run.json, and a
submission packaged from its results carries it in src/.

\b
    cmx lock "app mlperf inference llama2 _cpu _tiny _short" -o cmx.lock
    cmx run --locked cmx.lock --input results_dir=R
    cmx lock "app mlperf inference llama2 _cpu _tiny _short" --docker -o cmx.lock
    cmx lock "app mlperf inference llama2 _cpu _tiny _short" --container podman \\
        -o cmx.lock --save-image image.tar
""")
@query_arg
@query_options()
@click.option("--output", "-o", "out", type=click.Path(path_type=Path, dir_okay=False), default=Path("cmx.lock"),
              show_default=True, help="Where the lockfile goes.")
@click.option("--json", "as_json", is_flag=True, help="Print the lockfile's path and step count as JSON.")
@click.option("--docker", "in_docker", is_flag=True,
              help="Pin the image `cmx run --docker` runs in, building it if it is missing, and its packages.")
@container_option
@click.option("--save-image", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="In a container: save the pinned image as an archive (for `cmx run --locked --load-image`).")
@docker_options
@registry_option
@click.pass_context
# options: click's values, of the types the option decorators give
def command(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], inputs_file: str | None,
            input_envs: tuple[str, ...], contexts: tuple[str, ...], out: Path, as_json: bool, in_docker: bool,
            container: str | None, save_image: Path | None, **options: Any) -> None:
    from cmx import api

    if options["gpus"]:
        raise click.UsageError("--gpus is not part of the image: give it when replaying "
                               "(`cmx run --locked FILE --gpus IDS`)")
    engine = container_of(in_docker, container)
    if not engine and (any(options.values()) or save_image):
        raise click.UsageError("--base-image, --ca-bundle, --wheelhouse, --cmx-wheel and --save-image go with "
                               "--docker or --container")
    docker = docker_options_of(**options, container=engine) if engine else None
    # the build's lines go to stderr: stdout is the summary (or the JSON)
    q = parse_query(query, inputs, contexts, inputs_file, input_envs)
    lock = api.lock(q.query, inputs=q.inputs, context=q.context, settings=app(ctx).settings(), docker=docker,
                    emit=lambda line: click.echo(line, err=True), save_image=save_image)
    path = lock.write(out)
    pinned = sum(1 for s in lock.steps if s.files is not None)
    image = lock.docker
    if as_json:
        echo_json({"lock": str(path), "steps": len(lock.steps), "cached": pinned, "packages": lock.packages,
                   "image": {"tag": image.tag, "id": image.image_id} if image else None})
    else:
        click.echo(f"lock: {path} ({len(lock.steps)} steps, {pinned} with cached files pinned; "
                   f"{len(lock.packages)} packages" + (f" in image {image.tag}, {image.image_id})" if image else ")"))
