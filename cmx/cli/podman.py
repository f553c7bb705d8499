"""`cmx podman QUERY`: `cmx docker QUERY --container podman`, the Dockerfile and the `podman run` command of
`cmx run QUERY --container podman`."""

from __future__ import annotations

from cmx.cli.docker import verb

command = verb("podman", "podman")
