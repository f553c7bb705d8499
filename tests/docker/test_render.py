"""Rendering a plan's image and container (cmx.docker): no Docker engine needed.

Dockerfiles and container settings for the cuda, rocm and cpu profiles, byte-for-byte
reproducibility and the tag that follows content, merged docker: contributions, secrets kept out
of images and command lines, mounts that are never dropped, and the CLI's `cmx docker` views.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx import api
from cmx.devices import CUDA, ROCM
from cmx.docker import DockerError
from cmx.docker.launch import DockerRun, container_spec, default_ca_bundle, mounts
from cmx.docker.render import BuildOptions, User, docker_spec, render
from tests.conftest import Home

LLAMA2 = "app mlperf inference llama2"


def print_run(home: Home, query: str, *args: str) -> dict:
    proc = home.cmx("docker", query, "--print-run", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def dockerfile(home: Home, query: str, *args: str) -> str:
    proc = home.cmx("docker", query, "--dockerfile-only", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_cuda_gets_an_nvidia_device_request_and_nothing_of_amd(builtin: Home):
    run = print_run(builtin, f"{LLAMA2} _cuda")
    assert run["device_requests"] == [{"driver": "nvidia", "count": -1, "device_ids": [], "capabilities": [["gpu"]]}]
    assert run["devices"] == [] and run["group_add"] == [] and "HIP_VISIBLE_DEVICES" not in run["environment"]
    assert run["ipc_mode"] == "host" and {u["name"] for u in run["ulimits"]} == {"memlock", "stack"}
    assert f"\nFROM {CUDA.container.base_image}\n" in dockerfile(builtin, f"{LLAMA2} _cuda")
    assert CUDA.container.base_image.startswith("vllm/vllm-openai:v")  # vLLM's own CUDA image
    two = print_run(builtin, f"{LLAMA2} _cuda", "--gpus", "0,3")
    assert two["device_requests"][0]["device_ids"] == ["0", "3"] and two["device_requests"][0]["count"] == 0


def test_rocm_gets_kfd_dri_video_render_and_no_nvidia_flags(builtin: Home):
    run = print_run(builtin, f"{LLAMA2} _rocm", "--gpus", "2,3")
    assert run["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert run["group_add"] == ["video", "render"] and run["security_opt"] == ["seccomp=unconfined"]
    assert run["device_requests"] == [] and run["ipc_mode"] == "host" and run["shm_size"] == "16g"
    assert run["environment"]["HIP_VISIBLE_DEVICES"] == "2,3"
    assert not any("NVIDIA" in k or "CUDA" in k for k in run["environment"])
    text = dockerfile(builtin, f"{LLAMA2} _rocm")
    assert f"FROM {ROCM.container.base_image}\n" in text and "[mlperf]" in text and "nvidia" not in text
    assert ROCM.container.base_image.startswith("rocm/vllm:rocm")  # AMD's ROCm vLLM image


def test_cpu_gets_no_devices_and_installs_the_cpu_extra_in_a_venv(builtin: Home):
    run = print_run(builtin, f"{LLAMA2} _cpu _tiny _short")
    assert run["devices"] == [] and run["device_requests"] == [] and run["group_add"] == []
    text = dockerfile(builtin, f"{LLAMA2} _cpu _tiny _short", "--base-image", "local/bookworm:1")
    assert "FROM local/bookworm:1" in text
    assert "apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \\" in text
    assert "apt-get install -y --no-install-recommends libnuma1 \\" in text  # get-vllm _cpu adds it, after cmx
    assert "cmx_bench-0.2.0-py3-none-any.whl[cpu]" in text
    # in the install's own layer, so that the image is smaller by what goes (triton: 1 GB)
    assert "cmx_bench-0.2.0-py3-none-any.whl[cpu]' \\\n && /opt/cmx/venv/bin/python -m pip uninstall --yes " \
           "torchvision torchaudio torchcodec triton\n" in text


def test_the_same_plan_renders_the_same_dockerfile_and_tag_and_a_change_moves_the_tag(home: Home):
    home.recipe("tool", "name: tool\ntags: [tool]\ndocker: {apt: [zstd, curl], pip: [b==1, a==2], env: {Z: '1'}}\n")
    home.recipe("app", "name: app\ntags: [app]\ndeps: [{tags: tool}]\n"
                       "docker: {apt: [curl, git], pip: ['a==2'], env: {A: 'x y'}}\n")
    plan = api.plan("app", settings=home.settings).plan
    first, again = render(plan, BuildOptions(), home.settings), render(plan, BuildOptions(), home.settings)
    assert first.dockerfile == again.dockerfile and first.tag == again.tag
    assert docker_spec(plan).apt == ("curl", "git", "zstd") and docker_spec(plan).pip == ("a==2", "b==1")
    assert "--no-install-recommends curl git zstd \\" in first.dockerfile
    assert "ENV CMX_REGISTRY=/opt/cmx/home/registry.yaml A='x y' Z=1" in first.dockerfile
    (home.recipes / "tool" / "recipe.yaml").write_text("name: tool\ntags: [tool]\ndocker: {apt: [zstd]}\n")
    changed = render(api.plan("app", settings=home.settings).plan, BuildOptions(), home.settings)
    assert changed.tag != first.tag and changed.tag.startswith("cmx-app:")


def test_two_steps_that_set_one_variable_differently_are_an_error(home: Home):
    home.recipe("tool", "name: tool\ntags: [tool]\ndocker: {env: {MODE: fast}}\n")
    home.recipe("app", "name: app\ntags: [app]\ndeps: [{tags: tool}]\ndocker: {env: {MODE: slow}}\n")
    with pytest.raises(DockerError, match="two steps set the image's MODE differently"):
        render(api.plan("app", settings=home.settings).plan, BuildOptions(), home.settings)


def test_a_secret_goes_to_the_environment_never_the_image_or_the_command(home: Home, tmp_path: Path):
    home.recipe("app", "name: app\ntags: [app]\ninputs:\n  token: {type: secret, env: APP_TOKEN}\n"
                       "  out: {type: path, default: null}\n")
    secret = "s3cr3t-value-42"
    plan = api.plan("app", inputs={"token": secret, "out": str(tmp_path / "new" / "out")},
                    settings=home.settings).plan
    request = DockerRun("app", {"token": secret, "out": str(tmp_path / "new" / "out")}, {}, BuildOptions())
    rendered = render(plan, request.build, home.settings)
    spec = container_spec(plan, request, home.settings, image=rendered.tag, labels={"image": rendered.tag})
    assert secret not in rendered.dockerfile and secret not in " ".join(spec.command)
    assert dict(spec.environment)["APP_TOKEN"] == secret and spec.secret_names == ("APP_TOKEN",)
    assert spec.to_json()["environment"]["APP_TOKEN"] == "********"
    assert dict(spec.environment)["CMX_CONTAINER_IMAGE"] == rendered.tag
    assert f"out={tmp_path / 'new' / 'out'}" in spec.command


def test_mounts_cover_cache_runs_and_paths_never_dropping_one(home: Home, tmp_path: Path):
    home.recipe("app", "name: app\ntags: [app]\ninputs:\n  out: {type: path, default: null}\n")
    (tmp_path / "work").mkdir()
    plan = api.plan("app", inputs={"out": str(tmp_path / "work" / "results" / "demo")}, settings=home.settings).plan
    found = {m.source for m in mounts(plan, home.settings)}
    # results/demo does not exist yet: the folder that will hold it is mounted
    assert found == {str(home.settings.cache), str(home.settings.runs), str(tmp_path / "work")}
    plan = api.plan("app", inputs={"out": str(home.root / "results")}, settings=home.settings).plan
    assert {m.source for m in mounts(plan, home.settings)} == {str(home.root)}  # one mount holds the others
    plan = api.plan("app", inputs={"out": "/no-such-top-folder-cmx/a/b"}, settings=home.settings).plan
    with pytest.raises(DockerError, match="neither it nor a folder above it exists"):
        mounts(plan, home.settings)


def test_the_host_user_runs_the_container_and_the_image_has_that_user(home: Home):
    home.recipe("app", "name: app\ntags: [app]\n")
    plan = api.plan("app", settings=home.settings).plan
    request = DockerRun("app", {}, {}, BuildOptions(user=User(1234, 2345)))
    rendered = render(plan, request.build, home.settings)
    assert "useradd --create-home --uid 1234 --gid 2345 cmx" in rendered.dockerfile
    assert container_spec(plan, request, home.settings, image="x", labels={}).user == "1234:2345"


def test_the_build_context_lists_ca_bundle_wheelhouse_recipes_and_the_wheel(home: Home, tmp_path: Path):
    home.recipe("app", "name: app\ntags: [app]\n")
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"w" * 10)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    options = BuildOptions(ca_bundle=tmp_path / "ca.crt", wheelhouse=tmp_path / "wheels")
    rendered = render(api.plan("app", settings=home.settings).plan, options, home.settings)
    names = [f.name for f in rendered.files]
    assert names == sorted(names)
    assert {"Dockerfile", "ca-bundle.crt", "cmx-home/registry.yaml", "cmx-home/local/app/recipe.yaml",
            "dist/cmx_bench-0.2.0-py3-none-any.whl",
            "wheelhouse/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"} \
        <= set(names)
    assert "COPY ca-bundle.crt /etc/cmx/ca-bundle.crt" in rendered.dockerfile
    assert "ENV PIP_FIND_LINKS=/opt/cmx/wheelhouse" in rendered.dockerfile
    assert "(built)  dist/cmx_bench-0.2.0-py3-none-any.whl" in "\n".join(rendered.listing())


def test_the_default_ca_bundle_is_the_one_pip_or_requests_uses(tmp_path: Path):
    bundle = tmp_path / "corp.pem"
    bundle.write_text("x")
    assert default_ca_bundle({"REQUESTS_CA_BUNDLE": str(bundle)}) == bundle
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\ncert = {bundle}\n")
    assert default_ca_bundle({"PIP_CONFIG_FILE": str(conf)}) == bundle


def test_a_docker_engine_that_is_not_running_is_named_with_how_to_start_it(builtin: Home, tmp_path: Path):
    env = {**builtin.env, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "cmx", "run", "detect python", "--docker", "--base-image", "x:1"],
                          env=env, cwd=builtin.root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "cannot reach the Docker engine" in proc.stderr and "sudo dockerd" in proc.stderr


def test_docker_options_without_docker_are_a_usage_error(builtin: Home):
    proc = builtin.cmx("run", "detect python", "--base-image", "x:1")
    assert proc.returncode == 2 and "go with --docker" in proc.stderr


def test_cmx_docker_reads_an_inputs_file_as_cmx_run_does_under_its_explicit_inputs(builtin: Home, tmp_path: Path):
    inputs = tmp_path / "h200.yaml"
    inputs.write_text("target_qps_offline: 60\ntensor_parallel_size: 2\n", encoding="utf-8")
    run = print_run(builtin, f"{LLAMA2} _cuda", "--inputs-file", str(inputs), "-i", "tensor_parallel_size=4")
    command = run["command"]
    assert "target_qps_offline=60" in command and "tensor_parallel_size=4" in command
    assert "tensor_parallel_size=2" not in command


def test_cmx_docker_wants_exactly_one_view(builtin: Home):
    proc = builtin.cmx("docker", "detect python")
    assert proc.returncode == 2 and "one of --dockerfile-only and --print-run" in proc.stderr


def test_a_mount_that_would_hide_the_images_own_files_is_refused(home: Home):
    home.recipe("app", "name: app\ntags: [app]\ninputs:\n  out: {type: path, default: null}\n")
    plan = api.plan("app", inputs={"out": "/opt/cmx-results-that-do-not-exist/x"}, settings=home.settings).plan
    with pytest.raises(DockerError, match="mounting /opt would hide the image's /opt/cmx"):
        mounts(plan, home.settings)


def test_variables_inputs_read_go_to_the_container_and_the_entrypoint_is_reset(home: Home):
    home.recipe("app", "name: app\ntags: [app]\ninputs:\n  endpoint: {type: str, env: APP_ENDPOINT, default: x}\n")
    plan = api.plan("app", settings=home.settings, environ={"APP_ENDPOINT": "http://mirror"}).plan
    request = DockerRun("app", {}, {}, BuildOptions(), install_missing=True, host_command=("cmx", "run", "app"))
    spec = container_spec(plan, request, home.settings, image="x", labels={"host_command": "cmx run app --docker"},
                          environ={"APP_ENDPOINT": "http://mirror"})
    env = dict(spec.environment)
    assert env["APP_ENDPOINT"] == "http://mirror" and "APP_ENDPOINT" not in spec.secret_names
    assert env["CMX_CONTAINER_HOST_COMMAND"] == "cmx run app --docker"
    assert spec.command[-3:] == ("--install-missing", "--progress", "plain")
    assert "ENTRYPOINT []" in render(plan, BuildOptions(), home.settings).dockerfile


def test_an_input_with_a_url_password_reaches_the_container_by_its_environment_on_either_engine(home: Home):
    """The inner command reads it with --input-env; neither engine's command line (another user's `ps` shows
    podman's) nor --print-run holds the password."""
    from cmx.docker.engines.docker import run_line as docker_line
    from cmx.docker.engines.podman import run_line as podman_line

    home.recipe("app", "name: app\ntags: [app]\ninputs:\n  endpoint_url: {type: str, default: x}\n"
                       "  word: {type: str, default: y}\n")
    given = {"endpoint_url": "http://alice:pw-Zk4@10.0.0.7:8000/v1", "word": "hi"}
    plan = api.plan("app", inputs=given, settings=home.settings).plan
    spec = container_spec(plan, DockerRun("app", given, {}, BuildOptions()), home.settings, image="x", labels={},
                          environ={})
    assert spec.command[:8] == ("cmx", "run", "app", "--input", "word=hi", "--input-env",
                                "endpoint_url=CMX_INPUT_ENDPOINT_URL", "--progress")
    assert dict(spec.environment)["CMX_INPUT_ENDPOINT_URL"] == given["endpoint_url"]
    for line in (podman_line, docker_line):
        run = line(spec, "img:1")
        assert not any("pw-Zk4" in a for a in run.argv)
        assert "CMX_INPUT_ENDPOINT_URL" in run.argv and dict(run.environment)["CMX_INPUT_ENDPOINT_URL"] == \
            given["endpoint_url"]
    assert "pw-Zk4" not in json.dumps(spec.to_json())


def test_rocm_groups_are_the_host_device_owners_by_id(tmp_path: Path):
    from cmx.devices import ROCM
    from cmx.docker.profiles import device_groups

    assert device_groups(ROCM, tmp_path) == ("video", "render")  # no AMD devices on this host
    (tmp_path / "kfd").write_text("")
    (tmp_path / "dri").mkdir()
    (tmp_path / "dri" / "renderD128").write_text("")
    assert set(device_groups(ROCM, tmp_path)) == {str((tmp_path / "kfd").stat().st_gid),
                                             str((tmp_path / "dri" / "renderD128").stat().st_gid)}


def test_the_default_wheelhouse_is_pips_find_links_folder(tmp_path: Path):
    from cmx.docker.launch import default_wheelhouse

    (tmp_path / "wheels").mkdir()
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {tmp_path / 'wheels'}\n")
    assert default_wheelhouse({"PIP_CONFIG_FILE": str(conf)}) == tmp_path / "wheels"
    assert default_wheelhouse({"PIP_FIND_LINKS": f"file://{tmp_path / 'wheels'}"}) == tmp_path / "wheels"


def test_json_does_not_go_with_docker(builtin: Home):
    proc = builtin.cmx("run", "detect python", "--docker", "--json")
    assert proc.returncode == 2 and "--json does not go with --docker" in proc.stderr


def test_a_tune_in_docker_runs_cmx_tune_in_the_runs_image_and_writes_its_inputs_file_on_the_host(
        builtin: Home, tmp_path: Path):
    from cmx.docker.request import DockerQuery, container
    from cmx.docker.request import dockerfile as rendered_file
    from cmx.mlperf.tune.target import TuneRequest

    out = tmp_path / "nodes" / "mi300x.yaml"
    asked = DockerQuery(f"{LLAMA2} _rocm", inputs={"tensor_parallel_size": "8"},
                        tune=TuneRequest("Server", start_qps=20.0, out=out))
    spec = container(asked, builtin.settings)
    assert spec.command[:3] == ("cmx", "tune", f"{LLAMA2} _rocm")
    assert spec.command[3:] == ("--input", "tensor_parallel_size=8", "--scenario", "Server", "--start", "20",
                                "--out", str(out), "--progress", "plain")
    assert str(out.parent) in {m.source for m in spec.mounts}      # the inputs file lands on the host
    ran = DockerQuery(f"{LLAMA2} _rocm", inputs={"tensor_parallel_size": "8"})
    assert rendered_file(asked, builtin.settings).tag == rendered_file(ran, builtin.settings).tag  # one image


def test_a_tune_in_docker_that_cannot_tune_is_refused_before_any_build(builtin: Home):
    proc = builtin.cmx("tune", LLAMA2, "--scenario", "Server", "--docker", "--base-image", "cmx-test/none:1")
    assert proc.returncode == 1 and "the query names no device" in proc.stderr
    assert "image" not in proc.stdout
    assert builtin.cmx("tune", f"{LLAMA2} _cuda", "--scenario", "Server", "--docker", "--json").returncode == 2
    assert builtin.cmx("tune", f"{LLAMA2} _cuda", "--scenario", "Server", "--gpus", "0").returncode == 2
