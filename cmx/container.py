"""What a process knows of the container it runs in: the image `cmx run --docker` built and started it from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# set by `cmx run --docker` (`--container podman`) on the container it starts
CONTAINER_ENV = {"engine": "CMX_CONTAINER_ENGINE", "image_id": "CMX_CONTAINER_IMAGE_ID", "image": "CMX_CONTAINER_IMAGE",
                 "base_image": "CMX_CONTAINER_BASE_IMAGE", "base_digest": "CMX_CONTAINER_BASE_DIGEST",
                 "host_command": "CMX_CONTAINER_HOST_COMMAND",  # the `cmx run ... --docker` typed on the host
                 "cmx_source": "CMX_CONTAINER_CMX_SOURCE"}  # the cmx it installed (cmx.docker.cmx_source)
DOCKERFILE_IN_IMAGE = Path("/opt/cmx/Dockerfile")  # the rendered Dockerfile, copied into every image cmx builds


def container_facts(environ: Mapping[str, str] | None = None,
                    dockerfile: Path = DOCKERFILE_IN_IMAGE) -> dict[str, str] | None:
    """The image this process runs in (and its Dockerfile), as `cmx run --docker` declared it; None outside one."""
    env = os.environ if environ is None else environ
    facts = {key: env[var] for key, var in CONTAINER_ENV.items() if env.get(var)}
    if not facts:
        return None
    if dockerfile.is_file():
        facts["dockerfile"] = dockerfile.read_text(encoding="utf-8", errors="replace")
    return facts
