"""The container engines' command lines, and which engine a command uses.

The flags are checked against what the vendors document for podman: NVIDIA's "Support for Container Device
Interface" (`podman run --device nvidia.com/gpu=all --security-opt=label=disable`) and AMD's "Running ROCm Docker
containers" (`--device /dev/kfd --device /dev/dri --security-opt seccomp=unconfined`), with podman's own rootless
pieces (`--userns=keep-id`, `--group-add keep-groups`). tests/docker/test_podman.py (rootful) and
test_podman_rootless.py run them on a real podman.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cmx import api
from cmx.docker import DockerError
from cmx.docker.engines import choose, engines
from cmx.docker.engines.docker import DOCKER
from cmx.docker.engines.docker import run_line as docker_line
from cmx.docker.engines.podman import PODMAN, notes, user_limits
from cmx.docker.engines.podman import run_line as podman_line
from cmx.docker.profiles import DeviceSettings
from cmx.docker.spec import ContainerSpec, Mount
from cmx.execute.lockfile import Lock
from tests.conftest import Home

LLAMA2 = "app mlperf inference llama2"


def print_run(home: Home, query: str, *args: str) -> dict:
    proc = home.cmx("docker", query, "--print-run", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def pairs(argv: list[str], flag: str) -> list[str]:
    """The values of every `flag VALUE` in argv."""
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


NO_DEVICES = DeviceSettings()


def spec(device: DeviceSettings = NO_DEVICES, *, environment: tuple[tuple[str, str], ...] = (),
         secrets: tuple[str, ...] = (), user: str | None = "1000:1000") -> ContainerSpec:
    return ContainerSpec(image="img:1", command=("cmx", "run", "q"), user=user, environment=environment,
                         secret_names=secrets, mounts=(Mount("/data/cache", "/data/cache"),), device=device,
                         working_dir="/", hostname="box")


def test_cuda_under_podman_uses_cdi_as_nvidia_documents_and_nothing_of_amd(builtin: Home):
    run = print_run(builtin, f"{LLAMA2} _cuda", "--container", "podman")
    argv = run["run"]
    assert run["engine"] == "podman" and argv[:2] == ["podman", "run"]
    assert pairs(argv, "--device") == ["nvidia.com/gpu=all"]
    assert "label=disable" in pairs(argv, "--security-opt")
    assert "--gpus" not in argv and not any("kfd" in a or "/dev/dri" in a for a in argv)
    assert pairs(argv, "--ipc") == ["host"] and pairs(argv, "--ulimit") == ["memlock=-1:-1", "stack=67108864:67108864"]
    assert argv[argv.index(run["image"]):] == [run["image"], "cmx", "run", f"{LLAMA2} _cuda", "--progress", "plain"]
    assert run["cdi_devices"] == ["nvidia.com/gpu=all"] and run["environment"]["CMX_CONTAINER_ENGINE"] == "podman"
    two = print_run(builtin, f"{LLAMA2} _cuda", "--container", "podman", "--gpus", "0,3")
    assert pairs(two["run"], "--device") == ["nvidia.com/gpu=0", "nvidia.com/gpu=3"]


def test_rocm_under_podman_passes_kfd_and_dri_as_amd_documents_and_no_nvidia_flags(builtin: Home):
    run = print_run(builtin, f"{LLAMA2} _rocm", "--container", "podman", "--gpus", "2,3")
    argv = run["run"]
    assert pairs(argv, "--device") == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert "seccomp=unconfined" in pairs(argv, "--security-opt") and pairs(argv, "--cap-add") == ["SYS_PTRACE"]
    assert "HIP_VISIBLE_DEVICES=2,3" in pairs(argv, "--env")
    assert not any("nvidia" in a.lower() for a in argv) and "--gpus" not in argv
    # the host's /dev/shm is the container's under --ipc host: podman refuses a size for it
    assert pairs(argv, "--ipc") == ["host"] and "--shm-size" not in argv


def test_docker_print_run_writes_the_docker_run_line_of_the_same_settings(builtin: Home):
    run = print_run(builtin, f"{LLAMA2} _cuda", "--container", "docker", "--gpus", "0,1")
    argv = run["run"]
    assert run["engine"] == "docker" and argv[:3] == ["docker", "run", "--rm"]
    assert pairs(argv, "--gpus") == ['"device=0,1"'] and "nvidia.com/gpu=0" not in argv
    assert "label=disable" not in argv and run["shell"].startswith("docker run --rm ")


def test_rootless_podman_keeps_the_users_id_and_groups_and_lowers_limits_it_cannot_raise():
    rocm = DeviceSettings(devices=("/dev/kfd:/dev/kfd:rwm",), group_add=("44", "109"),
                          ulimits=(("memlock", -1, -1), ("stack", 67108864, 67108864)))
    hard = {"memlock": 8388608, "stack": -1}
    argv = list(podman_line(spec(rocm), "sha256:" + "ab" * 32, name="cmx-t", rootless=True, hard_limits=hard).argv)
    assert "--userns=keep-id" in argv and pairs(argv, "--user") == ["1000:1000"]
    assert pairs(argv, "--group-add") == ["keep-groups"]  # the host's group numbers are not mapped rootless
    assert pairs(argv, "--ulimit") == ["memlock=8388608:8388608", "stack=67108864:67108864"]
    assert argv[argv.index("cmx") - 1] == "ab" * 32  # an ID runs as its hex digits
    said = notes(spec(rocm), rootless=True, hard_limits=hard, runtime="crun")
    assert any("keep-groups" in n for n in said) and any("memlock -1:-1 -> 8388608:8388608" in n for n in said)
    assert not any("install crun" in n for n in said)
    assert any("this podman runs runc: install crun" in n for n in notes(spec(rocm), rootless=True, runtime="runc"))
    rootful = list(podman_line(spec(rocm), "img:1", name="cmx-t", rootless=False).argv)
    assert "--userns=keep-id" not in rootful and pairs(rootful, "--group-add") == ["44", "109"]
    assert pairs(rootful, "--ulimit") == ["memlock=-1:-1", "stack=67108864:67108864"]
    assert notes(spec(rocm), rootless=False) == []


def test_a_limit_is_lowered_only_to_the_users_hard_limit():
    assert user_limits((("nofile", 4096, 65536),), {"nofile": 1024}) == (("nofile", 1024, 1024),)
    assert user_limits((("nofile", 512, 65536),), {"nofile": 1024}) == (("nofile", 512, 1024),)
    assert user_limits((("memlock", -1, -1),), {"memlock": -1}) == (("memlock", -1, -1),)


@pytest.mark.parametrize("line", [podman_line, docker_line])
def test_a_secret_or_a_url_password_reaches_the_engine_by_its_environment_never_the_command_line(line):
    env = (("APP_TOKEN", "s3cr3t-42"), ("HF_ENDPOINT", "https://u:pw-9@hub.example"), ("PLAIN", "1"))
    run = line(spec(environment=env, secrets=("APP_TOKEN",)), "img:1")
    text = " ".join(run.argv)
    assert "s3cr3t-42" not in text and "pw-9" not in text
    assert pairs(list(run.argv), "--env") == ["APP_TOKEN", "HF_ENDPOINT", "PLAIN=1"]
    assert dict(run.environment) == {"APP_TOKEN": "s3cr3t-42", "HF_ENDPOINT": "https://u:pw-9@hub.example"}


def test_podman_refuses_a_mount_whose_path_has_a_comma():
    bad = replace(spec(), mounts=(Mount("/data/a,b", "/data/a,b"),))
    with pytest.raises(DockerError, match="commas"):
        podman_line(bad, "img:1")


def _kinds(docker_here: bool, podman_here: bool) -> dict:
    return {"docker": replace(DOCKER, present=lambda: docker_here),
            "podman": replace(PODMAN, present=lambda: podman_here)}


def test_podman_is_chosen_and_said_when_only_podman_is_here(tmp_path: Path):
    env = {"CMX_HOME": str(tmp_path)}
    only_podman = choose(None, env, _kinds(False, True))
    assert only_podman.kind.name == "podman" and only_podman.note.startswith("using podman: no Docker engine")
    both = choose(None, env, _kinds(True, True))
    assert both.kind.name == "docker" and both.note == ""
    assert choose(None, env, _kinds(False, False)).kind.name == "docker"  # rendering needs none; a build says so
    assert choose("podman", env, _kinds(True, False)).kind.name == "podman"  # asked: no detection


def test_cmx_container_and_the_homes_setting_choose_before_detection(tmp_path: Path):
    (tmp_path / "settings.yaml").write_text("container: podman\n")
    env = {"CMX_HOME": str(tmp_path)}
    assert choose(None, env, _kinds(True, True)).kind.name == "podman"
    assert choose(None, {**env, "CMX_CONTAINER": "docker"}, _kinds(True, True)).kind.name == "docker"
    assert choose("docker", env, _kinds(True, True)).kind.name == "docker"
    (tmp_path / "settings.yaml").write_text("container: lxc\n")
    with pytest.raises(DockerError, match="no container engine 'lxc'") as err:
        choose(None, env, _kinds(True, True))
    assert str(tmp_path / "settings.yaml") in str(err.value) and "docker, podman" in err.value.hint
    (tmp_path / "settings.yaml").write_text("container: [podman\n")
    with pytest.raises(DockerError, match=r"settings\.yaml:\d+ is not valid YAML"):
        choose(None, env, _kinds(True, True))


def test_the_registry_holds_both_engines_by_name():
    assert set(engines()) == {"docker", "podman"}


def test_a_lock_records_its_engine_and_an_older_lock_replays_with_docker(builtin: Home, tmp_path: Path):
    import yaml

    from cmx.execute.lockfile import LockedImage

    image = LockedImage(tag="t:1", image_id="sha256:" + "0" * 64, profile="cpu", base_image="b:1",
                        base_image_id="sha256:" + "1" * 64, base_digest="sha256:" + "1" * 64, dockerfile_sha256="x",
                        dockerfile="FROM b:1\n", context={}, engine="podman")
    lock = replace(api.lock("detect python", settings=builtin.settings), docker=image)
    lock.write(tmp_path / "b.lock")
    assert Lock.read(tmp_path / "b.lock").docker == image
    data = yaml.safe_load((tmp_path / "b.lock").read_text())
    del data["docker"]["engine"]  # a lock written before podman
    (tmp_path / "c.lock").write_text(yaml.safe_dump(data))
    assert Lock.read(tmp_path / "c.lock").docker.engine == "docker"


def test_the_container_options_go_together_or_are_refused(builtin: Home, tmp_path: Path):
    proc = builtin.cmx("run", "detect python", "--docker", "--container", "podman")
    assert proc.returncode == 2 and "--docker is --container docker" in proc.stderr
    proc = builtin.cmx("run", "detect python", "--load-image", str(builtin.root / "registry.yaml"))
    assert proc.returncode == 2 and "--load-image goes with --locked" in proc.stderr
    proc = builtin.cmx("lock", "detect python", "--save-image", str(tmp_path / "i.tar"))
    assert proc.returncode == 2 and "go with --docker or --container" in proc.stderr
    proc = builtin.cmx("run", "detect python", "--container", "lxc")
    assert proc.returncode == 2 and "'lxc' is not one of" in proc.stderr


def test_podman_missing_is_named_with_how_to_install_it(builtin: Home, tmp_path: Path):
    import subprocess
    import sys

    env = {**builtin.env, "PATH": str(tmp_path)}  # no podman on it
    proc = subprocess.run([sys.executable, "-m", "cmx", "run", "detect python", "--container", "podman",
                           "--base-image", "x:1"], env=env, cwd=builtin.root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "podman is not installed (no `podman` on PATH)" in proc.stderr
    assert "sudo apt-get install podman uidmap" in proc.stderr and "sudo dnf install podman" in proc.stderr


def test_cmx_podman_is_cmx_docker_with_the_podman_engine(builtin: Home):
    twin = print_run(builtin, f"{LLAMA2} _rocm", "--gpus", "1")
    proc = builtin.cmx("podman", f"{LLAMA2} _rocm", "--print-run", "--gpus", "1")
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run["engine"] == "podman" and run["run"][:2] == ["podman", "run"]
    assert run["devices"] == twin["devices"] and run["environment"] == {**twin["environment"],
                                                                          "CMX_CONTAINER_ENGINE": "podman"}
