"""The podman engine through its command-line tool: find it (or say how to install it), find, pull, build, run, save
and load images.

The command line, not podman's Docker-compatible API socket: the socket is a service someone must start (as root,
or per user under systemd), which is what a site without a Docker daemon cannot or will not run, while the command
needs nothing running. Its flags are also where podman's own features are (CDI devices, `--userns=keep-id`,
`--group-add keep-groups`), and what cmx runs is exactly what `cmx docker --print-run` shows.

Build and run output is streamed line by line to a callback, as the Docker engine's is; a failed build names the
instruction that failed and its last lines. No secret goes on a command line (another user's `ps` reads it): a
variable given as a bare `--env NAME` or `--build-arg NAME` takes its value from the environment podman is started
with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cmx.tools.container_images import TAIL_LINES, ContainerEngineError, ImageInfo, build_failure
from cmx.tools.procs import KILL_WAIT_S, STOP_GRACE_S

Emit = Callable[[str], None]
INSTALL_HINT = ("install it (`sudo apt-get install podman uidmap` on Debian and Ubuntu, `sudo dnf install podman` on "
                "RHEL, Rocky, Oracle Linux and Fedora); rootless use needs the user's /etc/subuid and /etc/subgid "
                "ranges (`podman info` checks)")
_STEP = re.compile(r"^STEP \d+/\d+: ")
_STATUS = re.compile(r"exit status (\d+)")
# podman's and buildah's own lines in a build's output, left out of a failed step's tail
_CHATTER = re.compile(r"^(--> |COMMIT |Getting image source signatures|Copying (blob|config) |Writing manifest|"
                      r"Storing signatures|Successfully tagged |[0-9a-f]{64}$)")
_NOT_FOUND = ("image not known", "no such image", "failed to find image")


def program() -> str:
    """The podman executable, or an error that says how to install it."""
    found = shutil.which("podman")
    if found is None:
        raise ContainerEngineError("podman is not installed (no `podman` on PATH)", hint=INSTALL_HINT)
    return found


def present() -> bool:
    return shutil.which("podman") is not None


def rootless() -> bool:
    """Whether podman runs rootless here: started by a user other than root, it keeps that user's own images and
    containers, in a user namespace."""
    return os.geteuid() != 0


def runtime() -> str:
    """The OCI runtime podman runs containers with here (crun, runc), or "" when podman cannot say."""
    proc = _capture(["info", "--format", "{{.Host.OCIRuntime.Name}}"], what="name its runtime")
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _capture(args: Sequence[str], *, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([program(), *args], capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        raise ContainerEngineError(f"podman could not be started to {what} ({exc})", hint=INSTALL_HINT) from None


def _failed(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("Error: ") if lines else f"exit status {proc.returncode}"


def image(ref: str) -> ImageInfo | None:
    """The local image `ref` (a name, or an ID with or without sha256:), or None."""
    proc = _capture(["image", "inspect", "--format", "json", _bare(ref)], what=f"inspect image {ref}")
    if proc.returncode != 0:
        if any(text in proc.stderr.lower() for text in _NOT_FOUND):
            return None
        raise ContainerEngineError(f"`podman image inspect {ref}` failed: {_failed(proc)}",
                                   hint="`podman info` shows whether podman works for this user")
    found = json.loads(proc.stdout)[0]
    image_id = "sha256:" + str(found["Id"]).removeprefix("sha256:")
    # a local name's digest (localhost/...) is not a registry's: where the image came from no registry, its ID
    remote = [d for d in found.get("RepoDigests") or [] if not str(d).startswith("localhost/")]
    return ImageInfo(image_id, str(remote[0]) if remote else image_id)


def _bare(ref: str) -> str:
    """podman names an image by its ID's hex digits: `sha256:` is a transport prefix to it."""
    return ref.removeprefix("sha256:")


def pull(ref: str, emit: Emit) -> None:
    """`podman pull`, its output streamed; an error naming the image and what podman said."""
    lines: deque[str] = deque(maxlen=TAIL_LINES)

    def line(text: str) -> None:
        lines.append(text)
        emit(f"  {text}")

    code = _stream([program(), "pull", ref], emit=line)
    if code != 0:
        raise ContainerEngineError(f"the base image {ref} is not on this machine and could not be pulled "
                                   f"({lines[-1] if lines else f'exit status {code}'})",
                                   hint="pull it where a registry is reachable, `podman save` it there and "
                                        "`podman load` it here (a `docker save` archive loads too), or give another "
                                        "with --base-image (`podman images` lists the local ones)")


def build(context: Path, tag: str, *, buildargs: Mapping[str, str], emit: Emit, keep_hint: str = "",
          nocache: bool = False) -> str:
    """Build the image in `context` (its Dockerfile), streaming the output to `emit`; its ID (sha256:...), or an
    error with the failed instruction. Layers are cached (`--layers`), as Docker caches them; nothing is pulled
    (the base was required first). The build arguments' values reach podman through its environment."""
    with tempfile.TemporaryDirectory(prefix="cmx-podman-build-") as tmp:
        iidfile = Path(tmp) / "iid"
        argv = build_argv(context, tag, buildargs, iidfile, nocache)
        step = ""
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        last_error = ""

        def line(text: str) -> None:
            nonlocal step, last_error
            if _STEP.match(text):
                step = text
                tail.clear()
            elif text.startswith("Error: "):
                last_error = text
            elif text.strip() and not _CHATTER.match(text):
                tail.append(text)
            if text.strip():
                emit(text)

        code = _stream(argv, emit=line, env={**os.environ, **buildargs})
        if code != 0:
            status = _STATUS.search(last_error)
            why = f"it exited with status {status.group(1)}" if status else \
                (last_error.removeprefix("Error: ") or f"podman build exited with status {code}")
            raise build_failure(step, why, tail, keep_hint)
        image_id = iidfile.read_text(encoding="utf-8").strip() if iidfile.is_file() else ""
    if not image_id:
        raise ContainerEngineError(f"the build of {tag} ended without an image")
    return "sha256:" + image_id.removeprefix("sha256:")


def build_argv(context: Path, tag: str, buildargs: Mapping[str, str], iidfile: Path, nocache: bool) -> list[str]:
    """`podman build`'s command line: each build argument by its name alone (its value is in podman's environment:
    a proxy's URL may hold a password)."""
    return [program(), "build", "--layers", "--pull=never", "--tag", tag, "--iidfile", str(iidfile),
            "--file", str(context / "Dockerfile"), *(["--no-cache"] if nocache else []),
            *(f"--build-arg={name}" for name in sorted(buildargs)), str(context)]


def run(argv: Sequence[str], *, name: str, env: Mapping[str, str], emit: Emit, keep: bool = False) -> int:
    """Run `argv` (a `podman run --name NAME ...` command line, attached) to its end, streaming its output; the
    container's exit status. `env` is podman's environment: the values of its bare `--env NAME` flags. The
    container is removed afterwards unless `keep`; on Ctrl-C or SIGTERM (cmx.cli.app.Interrupts) it is stopped
    first, as the Docker engine stops its own."""
    lines: deque[str] = deque(maxlen=TAIL_LINES)

    def line(text: str) -> None:
        lines.append(text)
        emit(text)

    try:
        code = _stream(argv, emit=line, env=env, stop=lambda: _stop(name, emit))
    finally:
        if keep:
            emit(f"container {name} kept (podman rm {name} removes it)")
        else:
            subprocess.run([program(), "rm", "--force", "--ignore", name], capture_output=True, check=False)
    if code == 125:  # podman's own failure: the container did not start
        said = next((t for t in reversed(lines) if t.startswith("Error: ")), lines[-1] if lines else "")
        raise ContainerEngineError(f"the container did not start ({said.removeprefix('Error: ') or 'exit status 125'})",
                                   hint="the command it got: `cmx docker QUERY --container podman --print-run`")
    return code


def _stop(name: str, emit: Emit) -> None:
    """SIGTERM to the cmx inside (PID 1, which handles it as Ctrl-C: it stops its children and records "interrupted"
    in the run record on the mounted runs folder), SIGKILL from podman when it takes longer than its own grace and
    the kill after it."""
    emit(f"stopping container {name}")
    proc = subprocess.run([program(), "stop", "--time", str(int(STOP_GRACE_S + KILL_WAIT_S)), name],
                          capture_output=True, text=True, errors="replace", check=False)
    if proc.returncode != 0:  # already gone: removing it (force) is all that is left
        emit(f"could not stop container {name}: {_failed(proc)}")


def save(ref: str, path: Path) -> None:
    """`podman save` in Docker's archive format (which both `podman load` and `docker load` read)."""
    proc = _capture(["save", "--format", "docker-archive", "--output", str(path), _bare(ref)],
                    what=f"save image {ref}")
    if proc.returncode != 0:
        raise ContainerEngineError(f"could not save image {ref} to {path} ({_failed(proc)})",
                                   hint="`podman images` lists what this user's podman has")


def load(path: Path) -> list[str]:
    """`podman load`: the images in the archive at `path` (`podman save`'s or `docker save`'s); what podman
    named them."""
    proc = _capture(["load", "--input", str(path)], what=f"load images from {path}")
    if proc.returncode != 0:
        raise ContainerEngineError(f"could not load images from {path} ({_failed(proc)})",
                                   hint="give an archive `podman save` or `docker save` wrote")
    return [name.strip() for out in proc.stdout.splitlines() if out.startswith("Loaded image")
            for name in out.split(":", 1)[1].split(",")]


def _stream(argv: Sequence[str], *, emit: Emit, env: Mapping[str, str] | None = None,
            stop: Callable[[], None] | None = None) -> int:
    """Run `argv` in a session of its own (a terminal's Ctrl-C reaches cmx, which stops what runs in order), its
    output (stderr too) to `emit` line by line; its exit status. On an interrupt: `stop` (or a SIGTERM), then the
    process is waited for, and killed when it outlives the grace."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=dict(env) if env is not None else None, start_new_session=True)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            for text in raw.decode("utf-8", errors="replace").replace("\r", "\n").splitlines():
                emit(text)
        return proc.wait()
    except BaseException:
        if stop is not None:
            stop()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=STOP_GRACE_S + 2 * KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
