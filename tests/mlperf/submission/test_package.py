"""The submission packager (cmx.mlperf.submission.package) and the system description
(cmx.mlperf.submission.system_desc).

A cmx results tree is built from recorded real LoadGen logs (tests/submission_trees.py); packaging
it for closed must give a tree `cmx check` finds nothing wrong with, and every reason not to
package (INVALID, errors, short or tiny into closed, missing scenarios, an incomplete system
description ...) must be refused, all reasons at once, with nothing written.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx import __version__
from cmx.mlperf.loadgen.accuracy_log import is_truncated_accuracy_log
from cmx.mlperf.provenance import RunOrigin
from cmx.mlperf.rounds import load_round
from cmx.mlperf.scoring.accuracy_txt import read_accuracy_txt
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from cmx.mlperf.submission.package import measurements, package
from cmx.mlperf.submission.sources import PackageRequest, SourceResult, SubmissionRefused
from cmx.mlperf.submission.system_desc import (
    SystemDescriptionError,
    as_field_text,
    build_description,
    description_problems,
    detected_fields,
    read_user_file,
)
from cmx.mlperf.submission.tree import ResultPaths
from cmx.tools.fs import sha256_file
from tests.conftest import REPO, Home
from tests.submission_trees import BENCHMARK, ORIGIN, RUN_RECORD, SYSTEM, USER_SYSTEM, cmx_results

V60 = load_round("v6.0")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return cmx_results(tmp_path / "results")


def system_file(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "system.yaml"
    data = {**USER_SYSTEM, **changes}
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not ...}))
    return path


def request(tmp_path: Path, results: Path, division: str = "closed", **kw: object) -> PackageRequest:
    base = {"results_dir": results, "out_dir": tmp_path / "out", "submitter": "cmx-test", "division": division}
    if "system_file" not in kw:
        base["system_file"] = system_file(tmp_path)
    return PackageRequest(**{**base, **kw})


def refusal(req: PackageRequest) -> str:
    before = sorted(req.out_dir.rglob("*")) if req.out_dir.exists() else []
    with pytest.raises(SubmissionRefused) as info:
        package(req)
    assert (sorted(req.out_dir.rglob("*")) if req.out_dir.exists() else []) == before  # nothing written
    return info.value.render()


def set_facts(results: Path, scenario: str, **facts: object) -> None:
    path = results / SYSTEM / BENCHMARK / scenario / "cmx_run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **facts}))


def set_origin(results: Path, scenario: str, **changes: object) -> None:
    """Change what cmx_run.json's origin records (its run record, and so the run's lockfile, kept)."""
    path = results / SYSTEM / BENCHMARK / scenario / "cmx_run.json"
    set_facts(results, scenario, origin={**json.loads(path.read_text())["origin"], **changes})


# --- packaging compliant results -------------------------------------------------------------------

def test_compliant_results_package_into_a_closed_tree_that_cmx_check_passes(tmp_path: Path, results: Path):
    done = package(request(tmp_path, results))
    tree = tmp_path / "out" / "closed" / "cmx-test"
    assert done.tree == tree and [r.name for r in done.results] == [
        f"{SYSTEM}/{BENCHMARK}/{s}" for s in ("Interactive", "Offline", "Server")]
    report = check_tree(tmp_path / "out", "v6.0")
    assert report.problems == [], format_report(report)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["closed"]  # nothing else at the root


def test_scenarios_picks_the_results_packaged_and_the_tree_still_checks(tmp_path: Path, results: Path):
    set_facts(results, "Interactive", ok=False)          # came out INVALID: the submitter leaves it out
    done = package(request(tmp_path, results, scenarios=("Offline", "server")))
    assert [r.name for r in done.results] == [f"{SYSTEM}/{BENCHMARK}/{s}" for s in ("Offline", "Server")]
    assert check_tree(tmp_path / "out", "v6.0").problems == []


def test_a_scenario_with_no_result_is_refused_naming_those_there(tmp_path: Path, results: Path):
    said = refusal(request(tmp_path, results, scenarios=("Offline", "SingleStream")))
    assert "no result of scenario SingleStream" in said and "Interactive, Offline, Server" in said


def test_a_tunes_record_beside_the_results_never_reaches_the_submission_tree(tmp_path: Path, results: Path):
    pytest.importorskip("matplotlib")  # the tune is built with the report tests' helpers
    from cmx.mlperf.tune.record import CMX_TUNE_JSON
    from tests.mlperf.report.tunes import write_tune

    tune = write_tune(tmp_path / "tune", confirmed=False)  # a real cmx_tune.json, as `cmx tune` writes it
    record = next(tune.rglob(CMX_TUNE_JSON))
    for scenario in ("Server", "Interactive"):
        (results / SYSTEM / BENCHMARK / scenario / CMX_TUNE_JSON).write_bytes(record.read_bytes())
    package(request(tmp_path, results))
    report = check_tree(tmp_path / "out", "v6.0")
    assert report.problems == [], format_report(report)
    assert list((tmp_path / "out").rglob(CMX_TUNE_JSON)) == []


def test_a_tunes_own_results_folder_is_refused_its_confirm_run_is_no_submission(tmp_path: Path):
    pytest.importorskip("matplotlib")
    from tests.mlperf.report.tunes import write_tune

    tune = write_tune(tmp_path / "tune")
    assert "there is no accuracy run" in refusal(request(tmp_path, tune, division="open"))


def test_the_system_description_joins_detection_and_the_user_file_as_text(tmp_path: Path, results: Path):
    package(request(tmp_path, results))
    desc = json.loads((tmp_path / "out/closed/cmx-test/systems" / f"{SYSTEM}.json").read_text())
    assert set(desc) == set(V60.submission.system_fields)
    assert desc["host_processor_model_name"] == "AMD EPYC 9575F 64-Core Processor"  # detected
    assert (desc["host_processors_per_node"], desc["host_processor_core_count"]) == ("2", "64")
    assert (desc["accelerators_per_node"], desc["accelerator_model_name"]) == ("8", "AMD Instinct MI300X")
    assert desc["framework"] == "vLLM 0.9.2, PyTorch 2.7.0, ROCm 6.4.1"
    assert desc["system_name"] == "Supermicro AS-8125GS-TNMR2" and desc["cooling"] == "air"  # the user's file
    assert (desc["division"], desc["submitter"]) == ("closed", "cmx-test")
    assert all(isinstance(v, str) for v in desc.values())


def test_each_result_gets_logs_truncated_accuracy_with_hash_measurements_and_a_readme(tmp_path: Path, results: Path):
    package(request(tmp_path, results))
    paths = ResultPaths(tmp_path / "out/closed/cmx-test", V60.layout, SYSTEM, BENCHMARK, "Server")
    full = results / SYSTEM / BENCHMARK / "Server" / "accuracy" / "mlperf_log_accuracy.json"
    assert is_truncated_accuracy_log(paths.accuracy / "mlperf_log_accuracy.json")
    assert read_accuracy_txt(paths.accuracy / "accuracy.txt")["hash"] == sha256_file(full)  # the full log, kept
    assert sorted(p.name for p in paths.performance.iterdir()) == ["mlperf_log_detail.txt", "mlperf_log_summary.txt"]
    assert (paths.test06 / "verify_accuracy.txt").is_file()
    assert (paths.test06 / "accuracy" / "mlperf_log_accuracy.json").is_file()
    measurements = json.loads(paths.measurements_json.read_text())
    assert measurements["starting_weights_filename"].startswith("meta-llama/Llama-2-70b-chat-hf (revision e9149a1")
    assert measurements["weight_data_types"] == "bf16"
    readme = paths.readme.read_text()
    assert "cmx run 'app mlperf inference llama2 _rocm _all-scenarios' --input system_name=box" in readme
    assert f"cmx {__version__}" in readme and "Natively on the host" in readme and sha256_file(full) in readme
    assert (paths.user_conf.read_text() ==
            (results / SYSTEM / BENCHMARK / "Server" / "user.conf").read_text())


@pytest.mark.parametrize("engine, model, weights, transformed", [
    ("bf16", {"precision": "bf16", "dtype": "bfloat16"}, "bf16", "none (weights loaded as bfloat16)"),
    ("fp8", {"precision": "fp8"}, "fp8", "quantization to fp8"),
    ("bf16", {"precision": "mxfp4"}, "mxfp4", "none (the checkpoint as published, mxfp4 weights)"),
    ("bf16", {"precision": "bf16", "is_tiny": True}, "bf16", "none (weights loaded as bf16)"),
])
def test_measurements_name_the_weights_data_type_the_checkpoint_holds(engine: str, model: dict, weights: str,
                                                                      transformed: str):
    origin = {**ORIGIN, "model": {"name": "m", **model}}
    source = SourceResult(Path("x"), SYSTEM, BENCHMARK, "Offline", {"engine": {"precision": engine}, "origin": origin})
    written = measurements(source, PackageRequest(results_dir=Path("r"), out_dir=Path("o"), submitter="s",
                                                  division="closed"))
    assert (written["weight_data_types"], written["weight_transformations"]) == (weights, transformed)


def test_closed_gets_a_calibration_statement_when_no_file_is_given(tmp_path: Path, results: Path):
    package(request(tmp_path, results))
    statement = tmp_path / "out/closed/cmx-test/documentation/calibration.md"
    assert "No calibration or quantization" in statement.read_text()


def test_the_runs_lockfile_goes_into_src_and_the_readme_names_the_replay(tmp_path: Path, results: Path):
    package(request(tmp_path, results))
    sub = tmp_path / "out/closed/cmx-test"
    locked = sub / f"src/locks/{RUN_RECORD}.lock"
    assert locked.read_bytes() == (tmp_path / "runs" / RUN_RECORD / "cmx.lock").read_bytes()
    readme = (sub / "results" / SYSTEM / BENCHMARK / "Offline/README.md").read_text()
    assert f"`cmx run --locked src/locks/{RUN_RECORD}.lock --input results_dir=RESULTS`" in readme
    assert "as `src/README.md`" in readme and "pip install -e" not in readme
    assert check_tree(tmp_path / "out", "v6.0").rules_broken() == set()


def test_the_readme_states_the_sampling_and_an_override_of_the_references(tmp_path: Path, results: Path):
    reference = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "seed": None}
    set_facts(results, "Offline", sampling={**reference, "temperature": 0.0}, reference_sampling=reference,
              sampling_overrides=["temperature"])
    set_facts(results, "Server", sampling=reference, reference_sampling=reference, sampling_overrides=[])
    package(request(tmp_path, results, division="open"))  # an override keeps a result out of closed
    readme = {s: (tmp_path / "out/open/cmx-test/results" / SYSTEM / BENCHMARK / s / "README.md").read_text()
              for s in ("Offline", "Server", "Interactive")}
    assert ("Sampling: temperature 0.0, top_p 1.0, top_k off, no seed, **overridden for this run** (temperature; "
            "the reference samples with temperature 1.0, top_p 1.0, top_k off, no seed).") in readme["Offline"]
    assert "Sampling: temperature 1.0, top_p 1.0, top_k off, no seed, as the reference samples." in readme["Server"]
    assert "the run's cmx recorded no sampling" in readme["Interactive"]  # results from an older cmx


def test_results_whose_lockfile_is_gone_are_refused_naming_where_it_was(tmp_path: Path, results: Path):
    lock = tmp_path / "runs" / RUN_RECORD / "cmx.lock"
    lock.unlink()
    text = refusal(request(tmp_path, results))
    assert f"Offline: the run's lockfile is not there (no {lock})" in text
    assert "src/ could not name the recipes that ran" in text


def test_a_run_in_a_container_names_its_image_in_the_readme(tmp_path: Path, results: Path):
    container = {"image": "cmx/llama2-rocm:3f2a", "image_id": "sha256:" + "b" * 64, "base_image": "rocm/vllm:1",
                 "host_command": "cmx run 'app mlperf inference llama2 _rocm' --docker"}
    for scenario in ("Offline", "Server", "Interactive"):
        set_origin(results, scenario, container=container)
    package(request(tmp_path, results))
    readme = (tmp_path / "out/closed/cmx-test/results" / SYSTEM / BENCHMARK / "Offline/README.md").read_text()
    assert "cmx/llama2-rocm:3f2a" in readme and "sha256:" + "b" * 64 in readme and "rocm/vllm:1" in readme
    assert "cmx run 'app mlperf inference llama2 _rocm' --docker\n```" in readme  # what to type again


def test_tar_writes_the_archive_submitters_upload(tmp_path: Path, results: Path):
    done = package(request(tmp_path, results, tar=True))
    assert done.tarball == tmp_path / "out.tar.gz"
    with tarfile.open(done.tarball) as tar:
        names = tar.getnames()
        assert all(n.startswith("closed/cmx-test") for n in names)
        assert f"closed/cmx-test/systems/{SYSTEM}.json" in names
        assert {m.uid for m in tar.getmembers()} == {0}


# --- refusals ----------------------------------------------------------------------------------------

def test_short_and_tiny_results_are_refused_for_closed_naming_every_reason(tmp_path: Path, results: Path):
    for scenario in ("Offline", "Server"):
        set_facts(results, scenario, short=True, tiny=True, rows=256)
    text = refusal(request(tmp_path, results))
    assert f"{SYSTEM}/{BENCHMARK}/Offline: a _short run (cmx's smoke profile) cannot go into the closed" in text
    assert f"{SYSTEM}/{BENCHMARK}/Server: a _tiny run" in text
    assert "only 256 dataset rows were used" in text
    assert "(6 reason(s))" in text


def test_an_overridden_sampling_is_refused_for_closed_and_packaged_for_open(tmp_path: Path, results: Path):
    set_facts(results, "Offline", sampling_overrides=["temperature"])
    text = refusal(request(tmp_path, results))
    assert f"{SYSTEM}/{BENCHMARK}/Offline: its sampling was overridden (temperature): the closed division " \
           "generates as the reference does" in text
    assert "Server: its sampling" not in text
    assert package(request(tmp_path, results, division="open")).tree.is_dir()


REMOTE = {"kind": "endpoint", "transport": "http", "url": "http://gateway:8000/v1", "model": "llama",
          "server_software": "vLLM", "server_version": "0.32.0", "token_ids_source": "server", "started_by_cmx": False}


def test_a_run_against_a_remote_endpoint_is_refused_for_closed_and_named_in_open(tmp_path: Path, results: Path):
    set_facts(results, "Server", backend=REMOTE)
    text = refusal(request(tmp_path, results))
    assert f"{SYSTEM}/{BENCHMARK}/Server: its SUT sent the samples over HTTP to a server on another host " \
           "(http://gateway:8000/v1)" in text and "package it for open" in text
    done = package(request(tmp_path, results, division="open"))
    system = json.loads((done.tree / "systems" / f"{SYSTEM}.json").read_text())
    assert system["sw_notes"].startswith("SUT over HTTP: a remote OpenAI-compatible server (vLLM 0.32.0)")
    assert system["framework"] == "vLLM 0.32.0 (OpenAI-compatible server, over HTTP)"
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Server" / "README.md").read_text()
    assert "over HTTP: vLLM 0.32.0 at `http://gateway:8000/v1`" in readme


def test_a_served_video_run_without_the_fixed_latent_is_refused_for_closed(tmp_path: Path, results: Path):
    served = {"kind": "endpoint", "transport": "http", "url": "http://127.0.0.1:8000/v1", "model": "wan",
              "server_software": None, "server_version": None, "token_ids_source": "video", "video_route": "vllm-omni",
              "video_path": "/videos/sync", "fixed_latent": "/data/fixed_latent.pt", "fixed_latent_sent": False,
              "started_by_cmx": False}
    set_facts(results, "Offline", backend=served)
    text = refusal(request(tmp_path, results))
    assert f"{SYSTEM}/{BENCHMARK}/Offline: its videos came from a server's vllm-omni route, which carries no initial " \
           "latent" in text and "Server: its videos" not in text
    done = package(request(tmp_path, results, division="open"))
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Offline" / "README.md").read_text()
    assert "Each sample was one `POST /v1/videos/sync` (vllm-omni) with the prompt and the run's video settings; " \
           "the mp4 it answered was kept, and LoadGen answered with its sha256. The reference's fixed initial " \
           "latent was not sent." in readme
    system = json.loads((done.tree / "systems" / f"{SYSTEM}.json").read_text())
    assert system["sw_notes"].startswith("SUT over HTTP: a local OpenAI-compatible server (") and \
        system["sw_notes"].endswith("LoadGen's SUT sends each prompt to POST /v1/videos/sync (vllm-omni) and keeps "
                                    "the mp4 it answers")


def test_an_endpoint_readme_names_the_servers_vllm_not_the_one_beside_the_harness(tmp_path: Path, results: Path):
    assert ORIGIN["software"]["vllm"] == "0.9.2"  # the harness's own, which served nothing over HTTP
    set_facts(results, "Server", backend={**REMOTE, "server_version": "0.11.1"})
    done = package(request(tmp_path, results, division="open"))
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Server" / "README.md").read_text()
    assert "over HTTP: vLLM 0.11.1 at `http://gateway:8000/v1`" in readme and "vllm 0.9.2" not in readme
    offline = (done.tree / "results" / SYSTEM / BENCHMARK / "Offline" / "README.md").read_text()
    assert "vLLM 0.9.2 in the harness process." in offline and "Software: vllm 0.9.2, torch 2.7.0" in offline


def ray_runs(results: Path, scenario: str, *versions: str) -> list[dict[str, Any]]:
    """The scenario's runs, as a Ray run's with replicas that reported these vLLM versions."""
    runs = json.loads((results / SYSTEM / BENCHMARK / scenario / "cmx_run.json").read_text())["runs"]
    replicas = [{"index": i, "vllm": v} for i, v in enumerate(versions)]
    return [{**run, "details": {**run.get("details", {}), "transport": "ray", "replicas": replicas}} for run in runs]


def test_a_ray_run_names_its_replicas_their_vllm_and_the_ray_cluster_not_the_harness_process(tmp_path: Path,
                                                                                              results: Path):
    ray = {"kind": "vllm", "transport": "ray", "ray_address": "10.0.0.5:6379", "replicas": 2}
    set_facts(results, "Server", backend=ray, runs=ray_runs(results, "Server", "0.32.0", "0.32.0"))
    set_facts(results, "Offline", backend={**ray, "ray_address": None, "replicas": 1})  # recorded no versions
    done = package(request(tmp_path, results))
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Server" / "README.md").read_text()
    assert "vLLM 0.32.0 in 2 engine replicas on Ray, as actors of the Ray cluster at `10.0.0.5:6379`." in readme
    assert "in the harness process." not in readme and "0.9.2" not in readme.split("Software:")[0]
    offline = (done.tree / "results" / SYSTEM / BENCHMARK / "Offline" / "README.md").read_text()
    assert "vLLM 0.9.2 (the driving node's; the replicas' own were not recorded) in 1 engine replica on Ray, as " \
           "actors of the Ray cluster started in the harness process." in offline


def test_replicas_on_different_vllms_are_each_named(tmp_path: Path, results: Path):
    ray = {"kind": "vllm", "transport": "ray", "ray_address": "h:6379", "replicas": 3}
    set_facts(results, "Server", backend=ray, runs=ray_runs(results, "Server", "0.32.0", "0.31.1", "0.32.0"))
    done = package(request(tmp_path, results, division="open"))
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Server" / "README.md").read_text()
    assert "3 engine replicas on Ray, as actors of the Ray cluster at `h:6379`, **not one vLLM**: vLLM 0.31.1 on " \
           "replica 1; vLLM 0.32.0 on replicas 0, 2." in readme


def test_a_disaggregated_run_names_the_vllm_its_decode_instance_reported(tmp_path: Path, results: Path):
    # the proxy cmx started has no GET /v1/models or /version: cmx_run.json has the decode instance's answer
    proxy = {"kind": "endpoint", "transport": "http", "url": "http://127.0.0.1:8100/v1", "model": "llama",
             "server_software": None, "server_version": None, "token_ids_source": "server", "started_by_cmx": True,
             "server_lists_models": False, "topology": {"served": {"software": "vLLM", "version": "0.32.0"}}}
    set_facts(results, "Server", backend=proxy)
    done = package(request(tmp_path, results, division="open"))
    system = json.loads((done.tree / "systems" / f"{SYSTEM}.json").read_text())
    assert system["framework"] == "vLLM 0.32.0 (OpenAI-compatible server, over HTTP)"
    assert system["sw_notes"].startswith("SUT over HTTP: a local OpenAI-compatible server "
                                         "(vLLM 0.32.0, started by cmx)")
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Server" / "README.md").read_text()
    assert "over HTTP: vLLM 0.32.0 at `http://127.0.0.1:8100/v1`, started by cmx" in readme


def test_an_invalid_run_is_refused_in_open_too(tmp_path: Path, results: Path):
    detail = results / SYSTEM / BENCHMARK / "Offline" / "performance/run_1/mlperf_log_detail.txt"
    detail.write_text(detail.read_text().replace('"key": "result_validity", "value": "VALID"',
                                                 '"key": "result_validity", "value": "INVALID"'))
    text = refusal(request(tmp_path, results, division="open"))
    assert "Offline: performance: LoadGen marked the result INVALID" in text


def test_a_server_run_that_missed_early_stopping_is_refused_in_open_too(tmp_path: Path, results: Path):
    detail = results / SYSTEM / BENCHMARK / "Server" / "performance/run_1/mlperf_log_detail.txt"
    detail.write_text(detail.read_text().replace('"key": "early_stopping_met", "value": true',
                                                 '"key": "early_stopping_met", "value": false'))
    text = refusal(request(tmp_path, results, division="open"))
    assert "Server: performance: LoadGen's early-stopping condition was not met" in text


def test_a_log_linked_out_of_the_results_is_refused_and_nothing_outside_is_copied(tmp_path: Path, results: Path):
    outside = tmp_path / "someone-elses-detail.txt"
    detail = results / SYSTEM / BENCHMARK / "Offline" / "performance/run_1/mlperf_log_detail.txt"
    outside.write_text(detail.read_text())
    detail.unlink()
    detail.symlink_to(outside)
    (results / SYSTEM / BENCHMARK / "Server" / "etc").symlink_to("/etc")
    (results / SYSTEM / BENCHMARK / "Server" / "gone").symlink_to("nothing-here")
    text = refusal(request(tmp_path, results, division="open"))
    assert "Offline: performance/run_1/mlperf_log_detail.txt is a symbolic link that leaves the results folder" in text
    assert "Server: etc is a symbolic link that leaves the results folder (/etc)" in text
    assert "Server: gone is a symbolic link that points at nothing (nothing-here)" in text
    assert not (tmp_path / "out").exists()


def test_a_link_that_stays_inside_the_results_is_packaged(tmp_path: Path, results: Path):
    user_conf = results / SYSTEM / BENCHMARK / "Offline" / "user.conf"
    (user_conf.parent / "user.conf.orig").write_text(user_conf.read_text())
    user_conf.unlink()
    user_conf.symlink_to("user.conf.orig")
    done = package(request(tmp_path, results, division="open"))
    assert not any(p.is_symlink() for p in done.tree.rglob("*"))


def test_error_lines_in_a_log_are_refused(tmp_path: Path, results: Path):
    detail = results / SYSTEM / BENCHMARK / "Server" / "accuracy/mlperf_log_detail.txt"
    entry = {"key": "error_runtime", "value": "Multiple conf files are used", "time_ms": 0.1,
             "metadata": {"is_error": True, "is_warning": False, "file": "x", "line_no": 1}}
    with open(detail, "a") as f:
        f.write(f":::MLLOG {json.dumps(entry)}\n")
    text = refusal(request(tmp_path, results, division="open"))
    assert 'Server: accuracy: LoadGen logged an error: "Multiple conf files are used"' in text


def test_a_stale_accuracy_txt_is_refused(tmp_path: Path, results: Path):
    log = results / SYSTEM / BENCHMARK / "Offline" / "accuracy/mlperf_log_accuracy.json"
    log.write_text(log.read_text() + " ")
    assert "the hash in accuracy.txt is not the sha256 of mlperf_log_accuracy.json" in \
        refusal(request(tmp_path, results, division="open"))


def test_accuracy_below_target_is_refused_for_closed_but_packaged_for_open(tmp_path: Path, results: Path):
    txt = results / SYSTEM / BENCHMARK / "Offline" / "accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("'rouge1': 44.4312", "'rouge1': 40.0"))
    assert "Offline: accuracy: ROUGE-1 is 40.0, below the minimum 43.986888" in refusal(request(tmp_path, results))
    assert package(request(tmp_path, results, division="open")).division == "open"


def test_a_missing_required_scenario_is_refused_for_closed(tmp_path: Path):
    results = cmx_results(tmp_path / "results", ("Offline",))
    assert f"{SYSTEM}/{BENCHMARK}: the closed division needs a result for Server or Interactive" in \
        refusal(request(tmp_path, results))


def test_a_missing_test06_is_refused_for_closed(tmp_path: Path, results: Path):
    (results / SYSTEM / BENCHMARK / "Server" / "TEST06" / "mlperf_log_detail.txt").unlink()
    assert "Server: there is no TEST06 run (closed needs it for LLMs)" in refusal(request(tmp_path, results))


def test_results_of_another_round_are_refused(tmp_path: Path, results: Path):
    text = refusal(request(tmp_path, results, round="v5.1", division="open"))
    assert "it was run for v6.0, not v5.1" in text
    assert "the RNG seeds (LoadGen 6.0.15) are those of v6.0, not v5.1's" in text


def test_missing_system_fields_are_refused_each_with_what_to_put_there(tmp_path: Path, results: Path):
    path = system_file(tmp_path, cooling=..., status=..., host_networking="")
    text = refusal(request(tmp_path, results, system_file=path))
    assert f"systems/{SYSTEM}.json: status: missing" not in text  # every field is written; empty ones are named
    assert f"systems/{SYSTEM}.json: status: empty; put it in the system file (--input system_file=FILE): available" \
        in text
    assert f"systems/{SYSTEM}.json: cooling: empty" in text and "host_networking: empty" in text


def test_quantized_weights_need_a_calibration_file_for_closed(tmp_path: Path, results: Path):
    for scenario in ("Offline", "Server", "Interactive"):
        set_facts(results, scenario, engine={"precision": "fp8"})
    assert "it ran quantized weights (fp8); give --input calibration_file=FILE" in refusal(request(tmp_path, results))
    calibration = tmp_path / "calibration.md"
    calibration.write_text("FP8 with the AMD Quark recipe, calibrated on 1000 OpenOrca samples.\n")
    done = package(request(tmp_path, results, calibration_file=calibration))
    assert (done.tree / "documentation/calibration.md").read_text() == calibration.read_text()


def test_an_existing_tree_or_a_stray_root_folder_is_refused(tmp_path: Path, results: Path):
    package(request(tmp_path, results))
    assert "already exists" in refusal(request(tmp_path, results))
    (tmp_path / "out2" / "notes").mkdir(parents=True)
    text = refusal(request(tmp_path, results, out_dir=tmp_path / "out2"))
    assert "holds notes: the root of a submission tree may hold only division folders" in text


def test_no_results_and_a_bad_division_are_refused(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    assert "no cmx results under" in refusal(request(tmp_path, tmp_path / "empty"))
    assert "division 'network' is not one cmx packages" in refusal(request(tmp_path, tmp_path, division="network"))


# --- the system description ----------------------------------------------------------------------------

def test_field_values_are_text_as_the_checker_wants():
    assert [as_field_text(v) for v in (0, 8, 2.0, 1.5, True, None, " x ")] == ["0", "8", "2", "1.5", "true", "", "x"]


def test_a_cpu_only_system_has_no_accelerators_as_facts_not_blanks():
    origin = RunOrigin.from_json({**ORIGIN, "system": {**ORIGIN["system"], "gpus": [], "gpu_count": 0,
                                                       "rocm_version": ""}})
    fields = detected_fields(origin)
    assert fields["accelerators_per_node"] == "0"
    assert fields["accelerator_model_name"] == fields["accelerator_interconnect"] == "N/A"
    assert fields["framework"] == "vLLM 0.9.2, PyTorch 2.7.0"


def test_the_user_file_overrides_detection_and_the_packager_overrides_both():
    desc = build_description(V60, detected={"system_name": "detected", "cooling": "x"},
                             user={"system_name": "mine", "division": "open"}, division="closed", submitter="me")
    assert (desc["system_name"], desc["cooling"], desc["division"]) == ("mine", "x", "closed")


def test_description_problems_name_zero_bad_status_and_network(tmp_path: Path):
    desc = {name: "x" for name in V60.submission.system_fields}
    desc.update(accelerators_per_node=0, status="released", system_type="Datacenter", is_network="false")
    found = {p.field: str(p) for p in description_problems(desc, V60)}
    assert "the number 0" in found["accelerators_per_node"] and 'the string "0"' in found["accelerators_per_node"]
    assert "available, preview, rdi" in found["status"]
    assert "'Datacenter'" in found["system_type"]
    assert "leave is_network out" in found["is_network"]


def test_a_user_file_with_a_typo_or_bad_yaml_is_an_error_naming_it(tmp_path: Path):
    path = tmp_path / "system.yaml"
    path.write_text("status: available\ncoolng: air\n")
    with pytest.raises(SystemDescriptionError, match="unknown field 'coolng'") as info:
        read_user_file(path, V60)
    assert "did you mean 'cooling'?" in info.value.render()
    path.write_text("status: available\ncooling: [air\n")
    with pytest.raises(SystemDescriptionError, match="not valid YAML") as info:
        read_user_file(path, V60)
    assert f"{path}:3" in info.value.render() or f"{path}:2" in info.value.render()


def test_the_v51_layout_puts_measurements_and_compliance_in_their_own_folders(tmp_path: Path):
    paths = ResultPaths(tmp_path, load_round("v5.1").layout, "box", BENCHMARK, "Server")
    assert paths.measurements_json == tmp_path / "measurements/box" / BENCHMARK / "Server/box_Server.json"
    assert paths.user_conf == tmp_path / "measurements/box" / BENCHMARK / "Server/user.conf"
    assert paths.test06 == tmp_path / "compliance/box" / BENCHMARK / "Server/TEST06"
    assert paths.performance == tmp_path / "results/box" / BENCHMARK / "Server/performance/run_1"


# --- the recipe, through the CLI --------------------------------------------------------------------------

def test_generate_mlperf_submission_packages_and_checks_through_the_cli(home: Home, tmp_path: Path, results: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n")
    args = ["run", "generate mlperf submission", "--input", f"results_dir={results}", "--input",
            f"out_dir={tmp_path / 'out'}", "--input", "submitter=cmx-test", "--input", "division=closed",
            "--input", f"system_file={system_file(tmp_path)}", "--progress", "none"]
    done = home.cmx(*args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = json.loads(done.stdout)["outputs"]
    assert outputs["check_ok"] is True and outputs["check_problems"] == []
    assert outputs["tree"] == str(tmp_path / "out/closed/cmx-test")
    again = home.cmx(*args)
    assert again.returncode == 1
    assert "already exists" in again.stdout + again.stderr


def test_the_v51_profile_packages_into_its_own_layout_and_checks_clean(tmp_path: Path, results: Path):
    """v5.1 logs are v6.0's with v5.1's seeds written in (the only difference cmx can see between them)."""
    v60, v51 = V60.seeds.as_dict(), load_round("v5.1").seeds.as_dict()
    for detail in results.rglob("mlperf_log_detail.txt"):
        text = detail.read_text()
        for key in v60:
            text = text.replace(f'"effective_{key}", "value": {v60[key]}', f'"effective_{key}", "value": {v51[key]}')
        detail.write_text(text)
    for scenario in ("Offline", "Server", "Interactive"):
        set_facts(results, scenario, round="v5.1")
    done = package(request(tmp_path, results))
    assert done.round == "v5.1"
    sub = done.tree
    assert sorted(p.name for p in sub.iterdir()) == ["code", "compliance", "documentation", "measurements",
                                                     "results", "systems"]
    assert (sub / "measurements" / SYSTEM / BENCHMARK / "Server" / f"{SYSTEM}_Server.json").is_file()
    assert (sub / "compliance" / SYSTEM / BENCHMARK / "Server" / "TEST06" / "verify_accuracy.txt").is_file()
    report = check_tree(tmp_path / "out", "v5.1")
    assert report.problems == [], format_report(report)


def test_missing_files_are_refusals_not_crashes(tmp_path: Path, results: Path):
    (results / SYSTEM / BENCHMARK / "Offline" / "user.conf").unlink()
    text = refusal(request(tmp_path, results, calibration_file=tmp_path / "nope.md"))
    assert "Offline: there is no user.conf" in text
    assert f"the calibration file {tmp_path / 'nope.md'} does not exist" in text


def test_results_that_do_not_record_their_model_are_refused(tmp_path: Path, results: Path):
    for scenario in ("Offline", "Server", "Interactive"):
        set_facts(results, scenario, origin=None)
    text = refusal(request(tmp_path, results, division="open"))
    assert "Offline: measurements.json would have no starting_weights_filename" in text
    assert f"systems/{SYSTEM}.json: host_processor_model_name: empty" in text  # nothing detected either


def test_a_results_folder_a_batch_job_left_unfinished_is_never_packaged(tmp_path: Path, results: Path):
    (results / "CANCELLED").write_text("Slurm job 7 ended CANCELLED: nothing in this folder is a valid result.\n")
    message = refusal(request(tmp_path, results, division="open"))
    assert "is marked CANCELLED: Slurm job 7 ended CANCELLED" in message and "re-run the benchmark" in message


STACK = {"name": "llm-d", "form": "pieces", "routing": "load", "device": "rocm", "gpu_name": "AMD Instinct MI300X",
         "entry_url": "http://gw-istio.mlperf.svc.cluster.local:80/v1", "nodes": 2,
         "versions": {"serving image": "rocm/vllm:1", "InferencePool CRD": "v1.5.0"},
         "roles": [{"name": "server", "replicas": 2, "tensor_parallel": 8, "gpus_per_pod": 8, "pods_per_replica": 1}]}


def test_a_run_against_a_deployed_stack_names_it_and_counts_its_nodes(tmp_path: Path, results: Path):
    for scenario in ("Interactive", "Offline", "Server"):
        set_facts(results, scenario, backend={**REMOTE, "stack": STACK})
    done = package(request(tmp_path, results, division="open", system_file=system_file(
        tmp_path, number_of_nodes=..., accelerators_per_node=..., accelerator_model_name=...)))
    system = json.loads((done.tree / "systems" / f"{SYSTEM}.json").read_text())
    assert system["number_of_nodes"] == "2" and system["accelerators_per_node"] == "8"
    assert system["accelerator_model_name"] == "AMD Instinct MI300X"
    assert system["sw_notes"].startswith("SUT over HTTP: a remote OpenAI-compatible server")
    assert "served by llm-d (InferencePool and endpoint picker, load-aware scoring): 2 server x TP 8, 16 rocm GPUs " \
           "in 2 pods on 2 nodes; number_of_nodes counts the nodes its serving pods ran on" in system["sw_notes"]
    readme = (done.tree / "results" / SYSTEM / BENCHMARK / "Server" / "README.md").read_text()
    assert "Served by llm-d (InferencePool and endpoint picker, load-aware scoring), deployed by `cmx deploy " \
           "--stack llm-d`" in readme and "InferencePool CRD v1.5.0, serving image rocm/vllm:1." in readme
