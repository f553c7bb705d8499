"""The image part of a lockfile: pin the image `cmx run --docker` (or `--container podman`) uses (`cmx lock
--docker`), and replay in it, with the engine that locked it unless told another.

Locking renders the plan's image exactly as `run --docker` does and builds it when no image has its tag
yet (a lock must name an image ID, which exists only once the image is built). Then the image's own cmx
writes the lock (`cmx lock` in a container, with the cache mounted): steps, cache keys and package
versions as they are where the run happens, not on the host. To it are added the image's ID (its sha256
content digest), the tag, the base and the base's ID, the Dockerfile and the sha256 of each part of the
build context.

Replaying renders the image again with the options the lock recorded and refuses when the Dockerfile
(naming the first line that differs) or a part of the build context changed, or when no image with the
locked ID is in the engine on this machine. Image builds are not bit-for-bit reproducible (file times,
package mirrors), so building again would give another ID: the image is moved, not rebuilt (`cmx lock
--save-image` on the machine that locked, `cmx run --locked --load-image` here). An image's ID is its
config's digest, the same in Docker and podman, so a lock made with one replays in the other once its archive
is loaded there. Then the container runs `cmx run --locked` on the same lock,
which checks the steps, cache keys, cached files and packages inside the image.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx.docker import DockerError
from cmx.docker.engines import engine_kind
from cmx.docker.launch import DockerRun, Emit, container_spec, prepare
from cmx.docker.render import BuildOptions, Rendered, host_user, render
from cmx.docker.request import DockerQuery, docker_run
from cmx.execute.lockfile import Lock, LockedImage, LockMismatch, in_image
from cmx.execute.request import Runtime, lock_plan, replay_lock, resolved, root_recipe
from cmx.resolve.plan import Plan
from cmx.settings import Settings

# the build context's files, grouped by where they come from (the first prefix that matches)
CONTEXT_PARTS = (("Dockerfile", "the Dockerfile"), ("dist/", "the cmx wheel (built from a checkout's cmx/, "
                                                              "templates/, recipes/..., or the wheel given or "
                                                              "installed from)"),
                 ("cmx-home/", "the recipe sources copied into the image"), ("wheelhouse/", "the wheelhouse"),
                 ("ca-bundle.crt", "the CA bundle"))


def context_parts(rendered: Rendered) -> dict[str, str]:
    """The sha256 of each part of the build context (CONTEXT_PARTS), over its files' names and checksums."""
    parts: dict[str, hashlib._Hash] = {}
    for f in rendered.files:
        part = next((p for p, _ in CONTEXT_PARTS if f.name.startswith(p)), f.name)
        parts.setdefault(part, hashlib.sha256()).update(f"{f.name}\0{f.sha256}\n".encode())
    return {part: digest.hexdigest() for part, digest in sorted(parts.items())}


def lock_image(host_lock: Lock, plan: Plan, request: DockerRun, settings: Settings, emit: Emit,
               save_image: Path | None = None) -> Lock:
    """The lock of the plan as `cmx lock` writes it inside the image `run --docker` would use (built first when
    missing), with that image pinned. Its steps, keys and packages are the image's: a step whose key takes a
    machine fingerprint (detect-system) keys differently there, and the packages are those the run uses.
    `host_lock` gives the recipe sources' commits, which the image's copies of them do not have. With `save_image`,
    the image is saved there too, for `cmx run --locked LOCK --load-image FILE` elsewhere."""
    engine, rendered, image_id, labels = prepare(plan, request, settings, emit)
    base = engine.image(rendered.base_image)
    assert base is not None  # prepare required it
    folder = Path(tempfile.mkdtemp(prefix="cmx-lock-"))
    try:
        inner = replace(request, lock_to=folder / "cmx.lock")
        spec = container_spec(plan, inner, settings, image=rendered.tag, labels=labels)
        for mount in spec.mounts:
            Path(mount.source).mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        code = engine.run(spec, image_id, lines.append)
        if code != 0:
            raise DockerError(f"`cmx lock` in {rendered.tag} exited with status {code}:\n"
                              + "\n".join(f"  | {line}" for line in lines[-15:]),
                              hint="the image's cmx resolves the query with the image's copy of the recipes")
        found = Lock.read(folder / "cmx.lock")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    image = LockedImage(tag=rendered.tag, image_id=image_id, profile=rendered.profile,
                        base_image=rendered.base_image, base_image_id=base.id, base_digest=base.digest,
                        dockerfile_sha256=_sha256(rendered.dockerfile), dockerfile=rendered.dockerfile,
                        context=context_parts(rendered),
                        ca_bundle=str(request.build.ca_bundle) if request.build.ca_bundle else None,
                        wheelhouse=str(request.build.wheelhouse) if request.build.wheelhouse else None,
                        cmx_wheel=str(request.build.cmx_wheel) if request.build.cmx_wheel else None,
                        engine=engine.name)
    if save_image is not None:
        emit(f"saving {rendered.tag} ({image_id[:19]}) to {save_image}")
        save_image.parent.mkdir(parents=True, exist_ok=True)
        engine.save(rendered.tag, save_image)
    return in_image(found, host_lock, image)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def locked_build(image: LockedImage) -> BuildOptions:
    """The build options the locked image was rendered with, for the user running cmx now."""
    return BuildOptions(base_image=image.base_image, ca_bundle=Path(image.ca_bundle) if image.ca_bundle else None,
                        wheelhouse=Path(image.wheelhouse) if image.wheelhouse else None, user=host_user(),
                        cmx_wheel=Path(image.cmx_wheel) if image.cmx_wheel else None)


def check_rendering(image: LockedImage, rendered: Rendered, query: str) -> None:
    """LockMismatch when the image rendered now is not the locked one: the Dockerfile's first changed line, or
    the part of the build context that changed."""
    if _sha256(rendered.dockerfile) != image.dockerfile_sha256:
        raise LockMismatch(f"the Dockerfile rendered now differs from the locked image's: "
                           f"{first_line_difference(image.dockerfile, rendered.dockerfile)}",
                           hint="a recipe's docker: additions, the base image, where cmx comes from or cmx's "
                                "template changed, or another user (the image holds the host's UID) replays it; "
                                f"restore it, or lock again: {_relock(query, image.engine)}")
    now = context_parts(rendered)
    for part in sorted(set(now) | set(image.context)):
        if now.get(part) != image.context.get(part):
            what = dict(CONTEXT_PARTS).get(part, part)
            raise LockMismatch(f"the image's build context changed since the lock: {what} "
                               + ("is new" if part not in image.context else "is gone" if part not in now
                                  else "holds other files"),
                               hint=f"the image rendered now would be {rendered.tag}, the lock's is {image.tag}; "
                                    f"restore what changed, or lock again: {_relock(query, image.engine)}")


def first_line_difference(locked: str, now: str) -> str:
    """Where two Dockerfiles first differ: the line, and the lines the lock has there and those rendered now
    (at most three of each, blank lines left out)."""
    import difflib

    old, new = locked.splitlines(), now.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        gone, added = _shown(old[i1:i2]), _shown(new[j1:j2])
        return (f"at line {i1 + 1} the lock has {gone or 'nothing'}, " + (f"now {added}" if added else "now nothing"))
    return "only in line endings"


def _shown(lines: list[str]) -> str:
    kept = [line for line in lines if line.strip()]
    return "; ".join(repr(line) for line in kept[:3]) + (f" (and {len(kept) - 3} more)" if len(kept) > 3 else "")


@dataclass(frozen=True)
class Replay:
    """`cmx run --locked PATH` of a lock made with --docker: what the user may add (`inputs` only move outputs)."""

    path: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    container: str | None = None        # the engine to replay with (None: the one that locked)
    load_image: Path | None = None      # an archive (`cmx lock --save-image`) to load into it first
    gpus: tuple[str, ...] | None = None
    keep: bool = False
    jobs: int | None = None
    install_missing: bool = False
    argv: Sequence[str] | None = None


def lock_query(asked: DockerQuery, runtime: Runtime, emit: Emit, save_image: Path | None = None) -> Lock:
    """`cmx lock --docker`: the plan's lock, in the image `run --docker` would use (built first when no image has
    its tag: `emit` gets the build's output), with the packages inside it; with `save_image`, the image saved
    there."""
    p = resolved(asked.query, asked.inputs, asked.context, runtime)
    request = docker_run(p, asked)
    if request.engine_note:
        emit(request.engine_note)
    return lock_image(lock_plan(p, runtime.settings), p, request, runtime.settings, emit, save_image)


def replay(asked: Replay, settings: Settings, emit: Emit) -> int:
    """Replay a lock made with --docker: check its steps' recipes here, then its image (the Dockerfile and build
    context rendered now, the image ID on this machine), and run `cmx run --locked` in that image, which checks
    the inputs, context, cache keys, cached files and packages there, where the lock was made; the container's
    exit status."""
    from cmx.execute.lockfile import check_recipes
    from cmx.execute.record import redact_argv

    lock, _ = replay_lock(asked.path, asked.inputs, settings)
    assert lock.docker is not None, "a lock without an image replays with run(locked=...)"
    given = moved_paths(lock, root_recipe(lock.query, settings).inputs,
                        {k: str(v) for k, v in asked.inputs.items()})
    p = resolved(lock.query, {**lock.inputs, **given}, dict(lock.context), Runtime(settings))
    check_recipes(lock, p)
    host_command = tuple(redact_argv(list(asked.argv), p)) if asked.argv else ()
    engine = engine_kind(asked.container or lock.docker.engine).name
    request = DockerRun(query=lock.query, inputs=given, context={}, build=locked_build(lock.docker), engine=engine,
                        gpus=asked.gpus, keep=asked.keep, jobs=asked.jobs, install_missing=asked.install_missing,
                        host_command=host_command)
    return replay_in_image(lock, Path(asked.path), p, request, settings, emit, load_image=asked.load_image)


def replay_in_image(lock: Lock, lock_path: Path, plan: Plan, request: DockerRun, settings: Settings,
                    emit: Emit, load_image: Path | None = None) -> int:
    """Start the locked image (by ID) and replay the lock in it; the container's exit status. The host has checked
    the plan's steps; here: the rendering, and that the image is on this machine (after loading `load_image`, an
    archive of it, into the engine)."""
    image = lock.docker
    assert image is not None
    rendered = render(plan, request.build, settings)
    check_rendering(image, rendered, lock.query)
    engine = engine_kind(request.engine).connect()
    if load_image is not None:
        emit(f"loading {load_image} into {engine.name}")
        engine.load(load_image)
    if engine.image(image.image_id) is None:
        raise LockMismatch(f"the locked image {image.image_id} ({image.tag}) is not in {engine.name} on this machine"
                           + (f", and {load_image} did not hold it" if load_image else ""),
                           hint="bring it from the machine that locked (`cmx lock ... --save-image image.tar` there, "
                                "`cmx run --locked LOCK --load-image image.tar` here; `docker save` and `podman save "
                                "--format docker-archive` archives load alike): a new build would have another ID. "
                                f"Or lock again here: {_relock(lock.query, request.engine)}")
    labels = {"engine": engine.name, "image": image.tag, "image_id": image.image_id, "base_image": image.base_image,
              "base_digest": image.base_digest, "host_command": shlex.join(request.host_command),
              "cmx_source": rendered.cmx.describe()}  # the rendering matched the lock's: so does its cmx
    request = replace(request, locked=Path(os.path.abspath(lock_path)))
    spec = container_spec(plan, request, settings, image=image.tag, labels=labels)
    for mount in spec.mounts:
        if not Path(mount.source).exists():
            Path(mount.source).mkdir(parents=True)  # the cache and run records may be new
    emit(f"replaying {lock_path} in {image.tag} ({image.image_id[:19]}, {engine.name})")
    return engine.run(spec, image.image_id, emit, keep=request.keep)


def _relock(query: str, engine: str = "docker") -> str:
    flag = "--docker" if engine == "docker" else f"--container {engine}"
    return f"`cmx lock {shlex.quote(query)} {flag} -o FILE` (with the container options it was locked with)"


def moved_paths(lock: Lock, root_inputs: Mapping[str, object], given: Mapping[str, str]) -> dict[str, str]:
    """The inputs the container's replay is given: those the user moved, and every other root path input of the
    lock, made absolute here (the container starts in /, where a relative path would name another folder)."""
    out = dict(given)
    for name, value in lock.inputs.items():
        spec = root_inputs.get(name)
        if name not in out and spec is not None and getattr(spec, "type", None) == "path" and value:
            out[name] = os.path.abspath(os.path.expanduser(value))
    return out
