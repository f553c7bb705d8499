"""Running VBench in an environment of its own (cmx.mlperf.scoring.vbench_run) and wan-2.2-t2v-a14b's score of an
accuracy log (its videos checked against the logged sha256s, then scored).

The scorer's environment here is a real interpreter (this one) given a stand-in `vbench` package on its
PYTHONPATH, written by the test: its `VBench.evaluate` checks what VBench would need (VBENCH_CACHE_DIR, TORCH_HOME,
the working directory holding bert-base-uncased/, the suite) and writes a results file of VBench's form from the
videos the suite names. VBench itself needs its pinned environment and its networks (recipes get-vbench-env and
get-vbench-networks): not on a CI machine.
"""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.accuracy import logged_prompts, score_log
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import VBenchPrompts
from cmx.mlperf.loadgen.accuracy_log import AccuracyError
from cmx.mlperf.scoring.external import ExternalScorer
from cmx.mlperf.scoring.vbench import REFERENCE_DIMENSIONS
from cmx.mlperf.scoring.vbench_networks import DINO_HUB, DINO_WEIGHTS, Fetched, Manifest, link_dino_hub_cache
from cmx.mlperf.scoring.vbench_run import CPU_ENTRY, VBenchJob, command, prompt_suite, run_vbench
from cmx.tools.fs import sha256_file

SUITE: list[dict[str, Any]] = [
    {"prompt_en": "a cat running", "dimension": ["subject_consistency", "dynamic_degree", "motion_smoothness"]},
    {"prompt_en": "alley", "dimension": ["scene", "background_consistency"],
     "auxiliary_info": {"scene": {"scene": {"scene": "alley"}}}},
    {"prompt_en": "a beach, oil painting", "dimension": ["appearance_style"],
     "auxiliary_info": {"appearance_style": {"appearance_style": "oil painting"}}},
    {"prompt_en": "a dog", "dimension": ["object_class"]},
]

# the stand-in: VBench's evaluate(videos_path, name, ..., dimension_list, local, mode) writes
# <output>/<name>_eval_results.json, {dimension: [average, [per-video]]}; here each video's result is its size
# modulo 7 over 10, so the score depends on which videos were read
STAND_IN = '''
import json, os
from pathlib import Path

class VBench:
    def __init__(self, device, full_info_dir, output_path):
        self.device, self.suite, self.output = str(device), full_info_dir, output_path
        os.makedirs(output_path, exist_ok=True)

    def evaluate(self, videos_path, name, prompt_list=[], dimension_list=None, local=False, read_frame=False,
                 mode="vbench_standard", **kwargs):
        assert self.device == "cpu" and local and mode == "vbench_standard", (self.device, local, mode)
        cache = Path(os.environ["VBENCH_CACHE_DIR"])
        assert Path.cwd() == cache and (cache / "bert-base-uncased").is_dir()
        assert os.environ["TORCH_HOME"] == str(cache / "torch") and os.environ["HF_HUB_OFFLINE"] == "1"
        suite = json.load(open(self.suite))
        results = {}
        for dim in dimension_list:
            videos = [os.path.join(videos_path, e["prompt_en"] + "-0.mp4") for e in suite if dim in e["dimension"]]
            per = [{"video_path": v, "video_results": os.path.getsize(v) % 7 / 10} for v in videos]
            results[dim] = [sum(p["video_results"] for p in per) / len(per), per]
        json.dump(results, open(os.path.join(self.output, name + "_eval_results.json"), "w"))
        print("stand-in VBench scored", len(suite), "prompts")
'''


def stand_in_env(tmp_path: Path) -> Path:
    """A folder holding the stand-in vbench package and VBench's suite file, for the scorer's PYTHONPATH."""
    package = tmp_path / "site" / "vbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(STAND_IN), encoding="utf-8")
    (package / "VBench_full_info.json").write_text(json.dumps(SUITE), encoding="utf-8")
    return package.parent


def networks(tmp_path: Path, *, random: bool = False) -> Path:
    """A networks folder that check_folder accepts: two files in the manifest, DINO's hub code, torch hub's link."""
    folder = tmp_path / "networks"
    (folder / DINO_HUB).mkdir(parents=True)
    (folder / DINO_HUB / "hubconf.py").write_text("def dino_vitb16(**kw): ...\n", encoding="utf-8")
    (folder / DINO_WEIGHTS).write_bytes(b"dino")
    (folder / "bert-base-uncased").mkdir()
    (folder / "bert-base-uncased/vocab.txt").write_text("[PAD]\n", encoding="utf-8")
    link_dino_hub_cache(folder)
    files = tuple(Fetched(rel, "test", sha256_file(folder / rel), (folder / rel).stat().st_size, verified=False)
                  for rel in (DINO_WEIGHTS, "bert-base-uncased/vocab.txt"))
    Manifest(files, is_random=random).write(folder)
    return folder


def scorer(tmp_path: Path, *, random: bool = False) -> ExternalScorer:
    return ExternalScorer(Path(sys.executable), networks(tmp_path, random=random),
                          pythonpath=(stand_in_env(tmp_path),))


def videos(folder: Path, prompts: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, prompt in enumerate(prompts):
        (folder / f"{prompt}-0.mp4").write_bytes(b"\0" * (100 + i))
    return folder


def test_the_suite_holds_vbenchs_own_entries_for_the_logged_prompts_in_its_order() -> None:
    kept = prompt_suite(["alley", "a cat running"], SUITE, REFERENCE_DIMENSIONS, random_networks=False)
    assert [e["prompt_en"] for e in kept] == ["a cat running", "alley"]
    assert kept[1]["auxiliary_info"] == SUITE[1]["auxiliary_info"]


def test_a_prompt_vbench_does_not_know_is_refused_unless_the_networks_are_random() -> None:
    with pytest.raises(AccuracyError, match="not in VBench's prompt suite"):
        prompt_suite(["a cat running", "a made-up prompt 3"], SUITE, REFERENCE_DIMENSIONS, random_networks=False)
    kept = prompt_suite(["a made-up prompt 3"], SUITE, REFERENCE_DIMENSIONS, random_networks=True)
    assert kept == [{"prompt_en": "a made-up prompt 3", "dimension": list(REFERENCE_DIMENSIONS),
                     "auxiliary_info": {"scene": {"scene": {"scene": "a"}},
                                        "appearance_style": {"appearance_style": "a made-up prompt 3"}}}]


def test_gpus_run_vbenchs_entry_under_torch_distributed_and_the_cpu_its_evaluate_in_one_process(
        tmp_path: Path) -> None:
    job = VBenchJob(tmp_path / "v", ("a",), tmp_path / "o")
    on_gpus = command(ExternalScorer(Path("/env/python"), tmp_path, gpus=8), Path("/env/vbench"), job, tmp_path / "s")
    assert on_gpus[:5] == ["/env/python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=8"]
    assert on_gpus[5] == "/env/vbench/launch/evaluate.py" and "--load_ckpt_from_local=True" in on_gpus
    assert on_gpus[-7:] == ["--dimension", *REFERENCE_DIMENSIONS]
    on_cpu = command(ExternalScorer(Path("/env/python"), tmp_path), Path("/env/vbench"), job, tmp_path / "s")
    assert on_cpu[:3] == ["/env/python", "-c", CPU_ENTRY] and on_cpu[-6:] == list(REFERENCE_DIMENSIONS)


def test_vbench_runs_in_its_environment_on_the_folder_and_its_newest_results_are_averaged(tmp_path: Path) -> None:
    prompts = [e["prompt_en"] for e in SUITE[:3]]
    folder = videos(tmp_path / "videos", prompts)
    stale = tmp_path / "out" / "results_9999-12-31-23:59:59_eval_results.json"
    stale.parent.mkdir()
    stale.write_text("{}", encoding="utf-8")  # an older run's file must never be read
    result = run_vbench(scorer(tmp_path), VBenchJob(folder, tuple(prompts), tmp_path / "out"))
    # the stand-in's per-video result: size % 7 / 10; sizes 100, 101, 102
    expected = {"subject_consistency": 0.2, "dynamic_degree": 0.2, "motion_smoothness": 0.2, "scene": 0.3,
                "background_consistency": 0.3, "appearance_style": 0.4}
    assert result.dimensions == pytest.approx(expected)
    assert result.vbench_score == pytest.approx(100 * sum(expected.values()) / 6)
    assert not stale.exists() and result.random_networks is False
    assert "stand-in VBench scored 3 prompts" in (tmp_path / "out" / "vbench.log").read_text(encoding="utf-8")


def test_a_vbench_that_fails_is_an_error_naming_its_log(tmp_path: Path) -> None:
    folder = videos(tmp_path / "videos", ["a cat running"])  # the suite's other dimensions find no video
    with pytest.raises(AccuracyError, match="VBench exited with 1") as err:
        run_vbench(scorer(tmp_path), VBenchJob(folder, ("a cat running",), tmp_path / "out"))
    assert "vbench.log" in (err.value.hint or "")


def write_log(path: Path, records: list[tuple[int, bytes]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"seq_id": i, "qsl_idx": q, "data": d.hex().upper()}
                                for i, (q, d) in enumerate(records)]), encoding="utf-8")
    return path


def test_the_logged_videos_are_scored_each_checked_against_its_logged_sha256(tmp_path: Path) -> None:
    prompts = VBenchPrompts(tuple(e["prompt_en"] for e in SUITE), tmp_path)
    run = tmp_path / "run"
    folder = videos(run / "videos", list(prompts.prompts[:3]))
    digests = [hashlib.sha256((folder / f"{p}-0.mp4").read_bytes()).digest() for p in prompts.prompts[:3]]
    log = write_log(run / "mlperf_log_accuracy.json", [(2, digests[2]), (0, digests[0]), (1, digests[1]),
                                                       (0, digests[0])])
    assert logged_prompts(log, prompts) == (prompts.prompts[2], prompts.prompts[0], prompts.prompts[1])
    with pytest.raises(AccuracyError, match="in an environment of its own"):
        score_log(log, prompts)
    result = score_log(log, prompts, scorer=scorer(tmp_path))
    assert result.vbench_score == pytest.approx(100 * (0.2 * 3 + 0.3 * 2 + 0.4) / 6)
    assert (run / "vbench" / "prompt_suite.json").is_file()

    (folder / f"{prompts.prompts[1]}-0.mp4").write_bytes(b"another video")
    with pytest.raises(AccuracyError, match=r"sample 1's video .* has sha256 .* not the .* LoadGen logged"):
        logged_prompts(log, prompts)
    (folder / f"{prompts.prompts[1]}-0.mp4").unlink()
    with pytest.raises(AccuracyError, match=r"sample 1's video .* is missing"):
        logged_prompts(log, prompts)


def test_random_networks_score_generated_prompts_and_say_so(tmp_path: Path) -> None:
    prompts = VBenchPrompts(("a cat walking 0", "the sky at sunset 1"), tmp_path)
    run = tmp_path / "run"
    folder = videos(run / "videos", list(prompts.prompts))
    log = write_log(run / "mlperf_log_accuracy.json",
                    [(i, hashlib.sha256((folder / f"{p}-0.mp4").read_bytes()).digest())
                     for i, p in enumerate(prompts.prompts)])
    with pytest.raises(AccuracyError, match="not in VBench's prompt suite"):
        score_log(log, prompts, scorer=scorer(tmp_path / "real"))
    result = score_log(log, prompts, scorer=scorer(tmp_path / "random", random=True))
    assert result.random_networks is True and set(result.dimensions) == set(REFERENCE_DIMENSIONS)


def test_the_harness_config_records_the_scorer_and_reads_it_back(tmp_path: Path) -> None:
    from cmx.mlperf.loadgen.harness_config import HarnessConfig

    given = ExternalScorer(Path("/env/bin/python"), Path("/cache/networks"), gpus=2, pythonpath=(Path("/tv"),),
                           env=(("A", "1"),))
    config = HarnessConfig(model=tmp_path, dataset=tmp_path, scenario="Offline", mode="accuracy",
                           user_conf=tmp_path / "user.conf", output=tmp_path, benchmark="llama2-70b", scorer=given)
    text = config.to_json()
    assert json.loads(text)["scorer"]["models"] == "/cache/networks"
    assert HarnessConfig.from_json(text).scorer == given
    assert HarnessConfig.from_json(config.__class__(**{**config.__dict__, "scorer": None}).to_json()).scorer is None
