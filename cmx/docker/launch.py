"""`cmx run QUERY --docker` (or `--container podman`): resolve on the host, build (or reuse) the plan's image, run
the same query inside.

The container sees the host's cache, run records and every path the plan names at the same
absolute paths, so its results land exactly where a native run puts them. It runs as the host
user. Secrets reach it as environment variables at run time only: never in the image, its
layers or its command line.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.container import CONTAINER_ENV
from cmx.docker import DockerError, profile_for
from cmx.docker.render import BuildOptions, Rendered, plan_device, render, write_context
from cmx.docker.spec import ContainerSpec, Mount
from cmx.execute import input_env
from cmx.resolve.plan import Plan
from cmx.secrets import Secret
from cmx.settings import Settings

if TYPE_CHECKING:
    from cmx.docker.engines.base import ContainerEngine

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
CA_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


@dataclass(frozen=True)
class DockerRun:
    """What `cmx run --docker` was asked for."""

    query: str
    inputs: Mapping[str, str]           # --input NAME=VALUE as given
    context: Mapping[str, Any]          # --context KEY=VALUE, typed
    build: BuildOptions
    engine: str = "docker"              # the container engine (cmx.docker.engines) that builds and runs it
    engine_note: str = ""               # why that engine, when cmx chose it: said before the build
    gpus: tuple[str, ...] | None = None
    rebuild: bool = False               # build without the engine's layer cache
    keep: bool = False
    jobs: int | None = None
    install_missing: bool = False
    host_command: tuple[str, ...] = ()  # what was typed on the host (secrets redacted), for the run's record
    locked: Path | None = None          # a lockfile the container replays (`cmx run --locked`) instead of the query
    lock_to: Path | None = None         # where the container writes the query's lock (`cmx lock -o`) instead of running
    tune: tuple[str, ...] = ()          # `cmx tune`'s arguments (--scenario S ...): the container tunes the query
    tune_out: Path | None = None        # the inputs file that tune writes (absolute): its folder is mounted


# --- the container's settings --------------------------------------------------------------------

def container_spec(plan: Plan, request: DockerRun, settings: Settings, *, image: str,
                   labels: Mapping[str, str], environ: Mapping[str, str] | None = None) -> ContainerSpec:
    """The container that runs `plan` inside `image`; `labels` are the CMX_CONTAINER_* facts it records."""
    env_in = os.environ if environ is None else environ
    profile = profile_for(plan_device(plan))
    device = profile.device_settings(request.gpus)
    inputs, variables, secrets = _inputs(plan, request.inputs, env_in)
    command = (["cmx", "run", "--locked", str(request.locked)] if request.locked else
               ["cmx", "lock", plan.query, "--output", str(request.lock_to)] if request.lock_to else
               ["cmx", "tune", plan.query] if request.tune else
               ["cmx", "run", plan.query])
    by_env = input_env.by_environment(inputs)  # a URL's password: in the environment, off every command line
    command += by_env.arguments()
    for key, value in request.context.items():
        command += ["--context", f"{key}={_context_text(value)}"]
    if request.jobs and not request.lock_to:
        command += ["--jobs", str(request.jobs)]
    if request.install_missing and not request.lock_to and not request.tune:
        command += ["--install-missing"]
    command += request.tune
    if not request.lock_to:
        command += ["--progress", "plain"]
    environment = {"CMX_CACHE": str(settings.cache), "CMX_RUNS": str(settings.runs), "PYTHONUNBUFFERED": "1",
                   **{CONTAINER_ENV[k]: v for k, v in labels.items() if k in CONTAINER_ENV},
                   **{k: env_in[k] for k in PROXY_VARIABLES if env_in.get(k)},
                   **variables, **by_env.environment, **dict(device.environment), **secrets}
    user = request.build.user
    return ContainerSpec(image=image, command=tuple(command), user=f"{user.uid}:{user.gid}" if user else None,
                         environment=tuple(sorted(environment.items())), secret_names=tuple(sorted(secrets)),
                         mounts=mounts(plan, settings, extra=_lock_paths(request)),
                         device=device, working_dir="/", hostname=os.uname().nodename)


def _lock_paths(request: DockerRun) -> tuple[Path, ...]:
    """The lockfile the container replays, or the folder it writes one or a tune's inputs file into: mounted at
    their own paths."""
    written = request.lock_to or request.tune_out
    return tuple(p for p in (request.locked, written.parent if written else None) if p is not None)


def _context_text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def _inputs(plan: Plan, given: Mapping[str, str],
            environ: Mapping[str, str]) -> tuple[list[tuple[str, str]], dict[str, str], dict[str, str]]:
    """The --input pairs for the inner command (paths made absolute), and for its environment the variables
    inputs read (`env:` of a recipe input, set here: HF_ENDPOINT ...) and the secrets, by variable."""
    inputs: list[tuple[str, str]] = []
    variables: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for name, value in given.items():
        spec = _input_spec(plan, name)
        if spec is not None and spec.type == "secret":
            if not spec.env:
                raise DockerError(f"the secret input {name} has no environment variable to reach the container by",
                                  hint="secrets never go on a container's command line; give the recipe's input "
                                       "an `env:` name and set that variable instead")
            secrets[spec.env] = value
            continue
        if spec is not None and spec.type == "path" and value:
            value = os.path.abspath(os.path.expanduser(value))
        inputs.append((name, value))
    for step in plan:  # what the host environment gives inputs (HF_TOKEN, HF_ENDPOINT ...) goes through as it is
        for name, value in step.inputs.items():
            spec = step.recipe.inputs[name]
            if spec.env and environ.get(spec.env):
                target = secrets if isinstance(value, Secret) or spec.type == "secret" else variables
                target.setdefault(spec.env, environ[spec.env])
    return inputs, variables, secrets


def _input_spec(plan: Plan, name: str) -> Any:
    recipe, _, field = name.rpartition(".")
    for step in plan:
        if (step.name == recipe if recipe else step.id == plan.root) and field in step.recipe.inputs:
            return step.recipe.inputs[field]
    return None


IMAGE_OWN = Path("/opt/cmx")  # where the image keeps cmx: a mount must not hide it
SYSTEM_FOLDERS = tuple(Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/var", "/dev", "/proc",
                                          "/sys", "/run"))


def mounts(plan: Plan, settings: Settings, extra: tuple[Path, ...] = ()) -> tuple[Mount, ...]:
    """The cache, the run records, every path a step names and the `extra` files (a lockfile), each at its own path.

    A path that does not exist yet (a results folder the run will make) is reached through the
    nearest folder above it that does; a mount is never dropped: with no such folder, or one that
    would hide the image's own files, an error."""
    wanted: set[Path] = {Path(os.path.abspath(settings.cache)), Path(os.path.abspath(settings.runs))}
    for step in plan:
        for name, value in step.inputs.items():
            if step.recipe.inputs[name].type == "path" and value is not None:
                wanted.add(_existing_folder_for(Path(value), f"input {name} of {step.name}"))
    wanted.update(Path(os.path.abspath(path)) for path in extra)
    kept: list[Path] = []
    for path in sorted(wanted, key=lambda p: (len(p.parts), str(p))):
        if not any(path == k or k in path.parents for k in kept):  # inside a mount already
            kept.append(path)
    for path in kept:
        hidden = [p for p in (IMAGE_OWN, *SYSTEM_FOLDERS) if p == path or path in p.parents]
        if hidden:
            raise DockerError(f"mounting {path} would hide the image's {hidden[0]}",
                              hint="create the folder you named first (cmx mounts the nearest existing folder "
                                   "above one that does not exist), or name one under another folder")
    return tuple(Mount(str(p), str(p)) for p in sorted(kept))


def _existing_folder_for(path: Path, what: str) -> Path:
    path = Path(os.path.abspath(path))
    if path.exists():
        return path
    for parent in path.parents:
        if parent.is_dir() and parent != Path(parent.anchor):
            return parent
    raise DockerError(f"cannot mount {path} ({what}): neither it nor a folder above it exists",
                      hint="create the folder, or give a path under an existing one")


# --- the extra CA bundle ------------------------------------------------------------------------

def default_wheelhouse(environ: Mapping[str, str] | None = None) -> Path | None:
    """The wheel folder pip is configured with (PIP_FIND_LINKS, pip.conf `find-links`), when it is a local folder."""
    env = os.environ if environ is None else environ
    candidates = [env["PIP_FIND_LINKS"]] if env.get("PIP_FIND_LINKS") else []
    candidates += [v for v in _pip_settings("find-links", env)]
    for value in candidates:
        for item in value.split():
            path = Path(item[len("file://"):] if item.startswith("file://") else item)
            if path.is_dir():
                return path
    return None


def default_ca_bundle(environ: Mapping[str, str] | None = None) -> Path | None:
    """The CA bundle pip or requests is configured with (PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, pip.conf)."""
    env = os.environ if environ is None else environ
    for name in CA_VARIABLES:
        if env.get(name) and Path(env[name]).is_file():
            return Path(env[name])
    found = [Path(v) for v in _pip_settings("cert", env) if Path(v).is_file()]
    return found[0] if found else None


def _pip_settings(key: str, env: Mapping[str, str]) -> list[str]:
    """A pip setting from its configuration files, the one that wins first (PIP_CONFIG_FILE, user, site, global)."""
    import configparser

    files = [Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf"), Path.home() / ".pip/pip.conf",
             Path.home() / ".config/pip/pip.conf"]
    if env.get("PIP_CONFIG_FILE"):
        files.append(Path(env["PIP_CONFIG_FILE"]))
    values = []
    for path in files:  # later files override earlier ones, as in pip
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        for section in ("install", "global"):
            value = parser.get(section, key, fallback=None)
            if value:
                values.append(value.strip())
                break
    return values[::-1]


# --- running ------------------------------------------------------------------------------------

Emit = Callable[[str], None]


def prepare(plan: Plan, request: DockerRun, settings: Settings,
            emit: Emit) -> tuple[ContainerEngine, Rendered, str, dict[str, str]]:
    """Connect, render, and build the image unless an identical one exists; the engine, the rendering, the image id
    and the CMX_CONTAINER_* facts."""
    from cmx.docker.engines import engine_kind

    rendered = render(plan, request.build, settings)
    engine = engine_kind(request.engine).connect()
    base = engine.require_base_image(rendered.base_image, emit)
    existing = engine.image(rendered.tag)
    if existing is not None and not request.rebuild:
        emit(f"image {rendered.tag} is up to date ({existing.id[:19]}): no build")
        image_id = existing.id
    else:
        image_id = _build(engine, rendered, request, emit)
    labels = {"engine": engine.name, "image": rendered.tag, "image_id": image_id, "base_image": rendered.base_image,
              "base_digest": base.digest, "host_command": shlex.join(request.host_command),
              "cmx_source": rendered.cmx.describe()}
    return engine, rendered, image_id, labels


def _build(engine: ContainerEngine, rendered: Rendered, request: DockerRun, emit: Emit) -> str:
    from cmx.docker.cmx_source import not_on_the_index
    from cmx.tools.container_images import ContainerEngineError

    context = Path(tempfile.mkdtemp(prefix="cmx-docker-context-"))
    try:
        emit(f"building {rendered.tag} with {engine.name} ({rendered.profile} profile, from {rendered.base_image})")
        emit(f"  cmx in the image: {rendered.cmx.describe()}: {rendered.cmx.chosen}")
        write_context(rendered, context)
        buildargs = {k: v for k, v in os.environ.items() if k in PROXY_VARIABLES}
        hint = (f"the build context is kept in {context}" if request.keep else
                "run again with --keep to keep the build context") + "; fix the cause the output names"
        try:
            return engine.build(context, rendered.tag, buildargs=buildargs, emit=lambda line: emit(f"  {line}"),
                                keep_hint=hint, nocache=request.rebuild)
        except ContainerEngineError as exc:
            # pip's own words end the build's tail; said plainly when it is cmx itself that the index lacks
            missing = not_on_the_index(exc.message) if rendered.cmx.kind == "index" else None
            if missing is not None:
                raise missing from None
            raise
    finally:
        if request.keep:
            emit(f"build context kept in {context}")
        else:
            shutil.rmtree(context, ignore_errors=True)


def run_in_docker(plan: Plan, request: DockerRun, settings: Settings, emit: Emit) -> int:
    """Build or reuse the image and run the query in it; the container's exit status."""
    container_spec(plan, request, settings, image="", labels={})  # bad mounts or secrets fail before a long build
    engine, rendered, image_id, labels = prepare(plan, request, settings, emit)
    spec = container_spec(plan, request, settings, image=rendered.tag, labels=labels)
    for mount in spec.mounts:
        Path(mount.source).mkdir(parents=True, exist_ok=True)  # the cache and run records may be new
    emit(f"running `{' '.join(spec.command[:3])}` in {rendered.tag} ({engine.name})")
    return engine.run(spec, image_id, emit, keep=request.keep)
