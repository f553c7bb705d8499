"""Container engines: Docker and podman behind one protocol, and which one a command uses.

One module an engine (docker.py, podman.py), each with its `EngineKind` (base.py) in `engines()`: adding one is a
module and an entry. An engine builds an image from the rendered Dockerfile, runs a ContainerSpec
(cmx.docker.spec) with its own flags, inspects, saves and loads images; its kind also writes the exact command
line that runs a spec (`cmx docker --print-run`), which for podman is what runs.

Which engine: the one asked for (`--container podman`, `--docker`); else CMX_CONTAINER; else `container:` in the
cmx home's settings.yaml; else Docker where a Docker engine is reachable, podman where only podman is installed
(said in a line: a run that changes engine must not do so silently), and Docker where neither is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.docker import DockerError
from cmx.docker.engines.base import ContainerEngine, EngineKind, RunLine

__all__ = ["Choice", "ContainerEngine", "EngineKind", "RunLine", "choose", "engine_kind", "engines"]

SETTINGS_FILE = "settings.yaml"     # in the cmx home: `container: podman`
CHOICE_VARIABLE = "CMX_CONTAINER"


@dataclass(frozen=True)
class Choice:
    kind: EngineKind
    note: str = ""          # why, when the engine was chosen for the user: said before it runs


def engines() -> Mapping[str, EngineKind]:
    """The registry, by name. Its modules import no engine's client until one connects."""
    from cmx.docker.engines.docker import DOCKER
    from cmx.docker.engines.podman import PODMAN

    return {kind.name: kind for kind in (DOCKER, PODMAN)}


def engine_kind(name: str, where: str = "--container", known: Mapping[str, EngineKind] | None = None) -> EngineKind:
    known = engines() if known is None else known
    if name not in known:
        raise DockerError(f"no container engine {name!r} ({where})", hint=f"engines: {', '.join(known)}")
    return known[name]


def choose(asked: str | None, environ: Mapping[str, str] | None = None,
           known: Mapping[str, EngineKind] | None = None) -> Choice:
    """The engine a command uses: `asked` (a name; None: not asked), CMX_CONTAINER, the home's settings.yaml, then
    the engine that is here: Docker where it is reachable, podman where only it is installed, and Docker where
    neither is (rendering needs no engine; a build then says how to get one)."""
    env = os.environ if environ is None else environ
    known = engines() if known is None else known
    if asked:
        return Choice(engine_kind(asked, known=known))
    if env.get(CHOICE_VARIABLE):
        return Choice(engine_kind(env[CHOICE_VARIABLE], CHOICE_VARIABLE, known))
    configured, path = home_setting(env)
    if configured:
        return Choice(engine_kind(configured, f"`container:` in {path}", known))
    docker, podman = known["docker"], known["podman"]
    if not docker.present() and podman.present():
        return Choice(podman, note=f"using podman: no Docker engine is reachable here; `--container docker` or "
                                   f"{CHOICE_VARIABLE}=docker chooses Docker, `container: podman` in {path} says "
                                   "podman for good")
    return Choice(docker)


def home_setting(environ: Mapping[str, str]) -> tuple[str | None, Path]:
    """The home's `container:` setting (None when the file or the key is absent), and the file's path."""
    from cmx.home import home_dir

    path = Path(home_dir(environ)) / SETTINGS_FILE
    if not path.is_file():
        return None, path
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise DockerError(f"{where} is not valid YAML ({getattr(exc, 'problem', None) or exc})",
                          hint="it holds settings as `key: value` lines, e.g. `container: podman`") from None
    if not isinstance(data, dict):
        raise DockerError(f"{path} holds no `key: value` settings", hint="e.g. `container: podman`")
    value = data.get("container")
    if value is not None and not isinstance(value, str):
        raise DockerError(f"{path}: `container:` must be an engine's name, not {value!r}",
                          hint=f"engines: {', '.join(engines())}")
    return value, path
