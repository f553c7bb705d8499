"""A plan's image: the Dockerfile (templates/docker/Dockerfile.j2), its build context, and the tag that names them.

Everything that goes into the image is listed in the build context, and the tag is a hash of
the Dockerfile and of every context file, so an unchanged plan names the image it built last
time and reuses it. Rendering is pure: it reads files and builds nothing (where the image's cmx
comes from is cmx.docker.cmx_source's choice; a checkout's wheel is built only when an image is,
`write_context`).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cmx import __version__
from cmx.docker import DockerError, profile_for
from cmx.docker.cmx_source import WHEEL_NAME, WHEEL_PREFIX, CmxSource, choose, tree
from cmx.recipe.model import DockerSpec
from cmx.resolve.plan import Plan
from cmx.settings import CHECKOUT, Settings
from cmx.tools.fs import sha256_file


@dataclass(frozen=True)
class User:
    uid: int
    gid: int


@dataclass(frozen=True)
class BuildOptions:
    """What the user chose for the image (`cmx run --docker` options)."""

    base_image: str | None = None
    ca_bundle: Path | None = None
    wheelhouse: Path | None = None
    user: User | None = None        # None: root in the container (the host user is root)
    cmx_wheel: Path | None = None   # the wheel of the running cmx to install (--cmx-wheel; cmx.docker.cmx_source)


@dataclass(frozen=True)
class ContextFile:
    """One file of the build context: its name there, where it comes from, its size and sha256."""

    name: str
    source: Path | None     # None: written by cmx (the Dockerfile, the registry, a checkout's wheel)
    size: int | None        # None: built with the context (a checkout's wheel)
    sha256: str             # a checkout's wheel's: of the sources it is built from


@dataclass(frozen=True)
class Rendered:
    """A plan's image before it is built."""

    profile: str
    base_image: str
    dockerfile: str
    files: tuple[ContextFile, ...]
    registry_yaml: str
    tag: str
    cmx: CmxSource          # where the image's cmx comes from
    cmx_install: str        # the Dockerfile's line that installs it

    def listing(self) -> list[str]:
        """The build context, one `size  name` line per file."""
        return [f"{'(built)' if f.size is None else f.size:>12}  {f.name}" for f in self.files]


def plan_device(plan: Plan) -> str | None:
    """The device the plan runs on: the `device` context of its root step (None when it reads none)."""
    value = plan.root_step.full_context.get("device")
    return str(value) if value else None


def docker_spec(plan: Plan) -> DockerSpec:
    """Every step's `docker:` contributions, merged, de-duplicated and sorted (so the file does not depend on step
    order)."""
    apt: set[str] = set()
    pip: set[str] = set()
    env: dict[str, str] = {}
    for step in plan:
        apt.update(step.docker.apt)
        pip.update(step.docker.pip)
        for name, value in step.docker.env:
            if env.get(name, value) != value:
                raise DockerError(f"two steps set the image's {name} differently ({env[name]!r} and {value!r})",
                                  hint=f"make the docker: env of the recipes agree (one of them is {step.name})")
            env[name] = value
    return DockerSpec(apt=tuple(sorted(apt)), pip=tuple(sorted(pip)), env=tuple(sorted(env.items())))


def render(plan: Plan, options: BuildOptions, settings: Settings) -> Rendered:
    """The Dockerfile and build context for `plan`, and the image tag they hash to."""
    profile = profile_for(plan_device(plan))
    install = profile.install()
    spec = docker_spec(plan)
    base = options.base_image or profile.default_base_image
    cmx = choose(options.cmx_wheel)
    cmx_install = f"{install.python} -m pip install --no-cache-dir {shlex.quote(cmx.requirement(install.extra))}"
    from cmx.templates import render as render_template

    dockerfile = render_template(
        "docker/Dockerfile.j2", version=__version__, query=plan.query, profile=profile.name, base_image=base,
        ca_bundle=options.ca_bundle is not None, profile_apt=sorted(install.apt),
        apt=[a for a in spec.apt if a not in install.apt], pip=[shlex.quote(p) for p in spec.pip],
        make_venv=install.make_venv, wheelhouse=options.wheelhouse is not None, python=install.python,
        cmx=cmx.summary(), cmx_dist=cmx.wheel_name is not None, cmx_install=cmx_install,
        remove_after=install.remove_after, env=[(name, shlex.quote(value)) for name, value in spec.env],
        user=options.user)
    registry_yaml, sources = _registry(settings)
    files = [_text_file("Dockerfile", dockerfile), _text_file("cmx-home/registry.yaml", registry_yaml)]
    if cmx.kind == "checkout":  # built with the context, named by the sources it is built from
        files.append(ContextFile(f"dist/{WHEEL_NAME}", None, None, cmx.sha256))
    elif cmx.wheel is not None:
        files.append(_file(f"dist/{cmx.wheel.name}", cmx.wheel))
    if options.ca_bundle is not None:
        files.append(_file("ca-bundle.crt", _existing(options.ca_bundle, "the CA bundle (--ca-bundle)")))
    if options.wheelhouse is not None:
        folder = _existing(options.wheelhouse, "the wheelhouse (--wheelhouse)")
        files += [_file(f"wheelhouse/{p.name}", p) for p in sorted(folder.iterdir()) if p.is_file()]
    for name, folder in sources:
        files += [_file(f"cmx-home/{name}/{rel}", folder / rel) for rel in tree(folder)]
    files.sort(key=lambda f: f.name)
    digest = hashlib.sha256("".join(f"{f.name}\0{f.sha256}\n" for f in files).encode()).hexdigest()
    return Rendered(profile.name, base, dockerfile, tuple(files), registry_yaml,
                    tag=f"cmx-{plan.root_step.name}:{digest[:16]}", cmx=cmx, cmx_install=cmx_install)


def _registry(settings: Settings) -> tuple[str, list[tuple[str, Path]]]:
    """registry.yaml for the image, whose sources are copies of the host's (git ones from their pinned checkout)."""
    from cmx.registry.sources import read_registry

    lines = ["# the recipe sources of the host's registry, copied into the image by cmx", "sources:"]
    folders = []
    for source in read_registry(settings.registry):
        folder = source.recipes_dir(settings.sources_dir)
        if not folder.is_dir():
            raise DockerError(f"recipe source {source.name!r} has no folder at {folder}",
                              hint="run `cmx registry ls` (a git source is checked out when first used)")
        lines += [f"  - name: {source.name}", f"    path: {source.name}"]
        folders.append((source.name, folder))
    return "\n".join(lines) + "\n", folders


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise DockerError(f"{what} {path} does not exist")
    return path


def _file(name: str, source: Path) -> ContextFile:
    return ContextFile(name, source, source.stat().st_size, sha256_file(source))


def _text_file(name: str, text: str) -> ContextFile:
    data = text.encode()
    return ContextFile(name, None, len(data), hashlib.sha256(data).hexdigest())


def write_context(rendered: Rendered, dest: Path) -> Path:
    """The build context in `dest`: the Dockerfile, the copied files, the registry and, from a checkout, a freshly
    built cmx wheel."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "Dockerfile").write_text(rendered.dockerfile, encoding="utf-8")
    (dest / "cmx-home").mkdir(exist_ok=True)
    (dest / "cmx-home" / "registry.yaml").write_text(rendered.registry_yaml, encoding="utf-8")
    for f in rendered.files:
        if f.source is not None:
            target = dest / f.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f.source, target)
    if rendered.cmx.kind == "checkout":
        build_wheel(dest / "dist")
    return dest


def build_wheel(dest: Path) -> Path:
    """cmx's wheel, built from this checkout with pip (hatchling), into `dest`."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", tmp,
                               str(CHECKOUT)], capture_output=True, text=True)
        built = list(Path(tmp).glob(f"{WHEEL_PREFIX}-*.whl"))
        if proc.returncode != 0 or len(built) != 1:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
            raise DockerError(f"building the cmx wheel failed (pip wheel exited with status {proc.returncode}):\n"
                              f"{tail}", hint="pip builds it with hatchling, which it fetches from the index")
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / WHEEL_NAME
        shutil.copyfile(built[0], target)
    return target


def host_user() -> User | None:
    """The user running cmx (None for root, which every image has)."""
    uid, gid = os.getuid(), os.getgid()
    return None if uid == 0 else User(uid, gid)

