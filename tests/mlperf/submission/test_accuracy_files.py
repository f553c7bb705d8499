"""The files a round wants in accuracy/ besides the logs (wan-2.2-t2v-a14b's 10 videos): the packager asks the
benchmark which file of the accuracy run each is (Benchmark.accuracy_files, on the dataset cmx_run.json records),
copies them, and refuses, writing nothing, when one is missing; `cmx check` wants them where the official checker
does. The benchmark here is a fake: llama2-70b-99's plug-in with an accuracy_files that names each sample's file
after its prompt, as wan's does, under a copy of cmx's rounds whose llama2-70b-99 wants two such files."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx.mlperf import benchmarks, rounds
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from cmx.mlperf.submission.package import package
from cmx.mlperf.submission.sources import PackageRequest, SubmissionRefused
from tests.submission_trees import BENCHMARK, SYSTEM, USER_SYSTEM, cmx_results

WANTED = ("videos/3.mp4", "videos/1.mp4")
CAUGHT = ("accuracy.extra-files",)  # the rules these tests see cmx check break (test_check.py counts them)
PROMPTS = ("a cat", "a dog", "a red fox", "the sea", "a tree")


@dataclass(frozen=True)
class Prompts:
    """A dataset of one prompt a line."""

    path: Path
    lines: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.lines)

    def reference(self, i: int) -> str:
        return self.lines[i]

    def limit(self, n: int) -> Prompts:
        return Prompts(self.path, self.lines[:n])


class NamedAfterPrompts:
    """llama2-70b-99's plug-in, but its accuracy run writes `videos/<prompt>-0.mp4` per sample, as wan's does."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.loaded: list[Path] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def load_dataset_for(self, path: Path, mode: str) -> Prompts:
        self.loaded.append(path)
        return Prompts(path, tuple(path.read_text(encoding="utf-8").splitlines()))

    def accuracy_files(self, accuracy_dir: Path, dataset: Prompts) -> dict[str, Path]:
        # every sample's, as wan's does: the round's list picks those packaged
        return {f"videos/{i}.mp4": accuracy_dir / "videos" / f"{dataset.reference(i)}-0.mp4"
                for i in range(len(dataset))}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NamedAfterPrompts:
    folder = tmp_path / "rounds"
    folder.mkdir()
    for path in rounds.ROUNDS_DIR.glob("*.yaml"):
        shutil.copyfile(path, folder / path.name)
    data = yaml.safe_load((folder / "v6.0.yaml").read_text(encoding="utf-8"))
    data["benchmarks"][BENCHMARK]["accuracy_files"] = list(WANTED)
    (folder / "v6.0.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr(rounds, "ROUNDS_DIR", folder)
    real_for = benchmarks.benchmark_for
    bench = NamedAfterPrompts(real_for(BENCHMARK))
    monkeypatch.setattr(benchmarks, "benchmark_for", lambda name: bench if name == BENCHMARK else real_for(name))
    return bench


def results_with_videos(tmp_path: Path, *, missing: str | None = None) -> Path:
    """The compliant llama2 results, each scenario's accuracy run with a video per prompt and its dataset recorded."""
    dataset = tmp_path / "prompts.txt"
    dataset.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    results = cmx_results(tmp_path / "results", dataset=str(dataset))
    for acc in results.glob(f"{SYSTEM}/{BENCHMARK}/*/accuracy"):
        (acc / "videos").mkdir()
        for prompt in PROMPTS:
            if prompt != missing:
                (acc / "videos" / f"{prompt}-0.mp4").write_bytes(f"mp4 of {prompt}".encode())
    return results


def request(tmp_path: Path, results: Path) -> PackageRequest:
    system = tmp_path / "system.yaml"
    system.write_text(yaml.safe_dump(USER_SYSTEM), encoding="utf-8")
    return PackageRequest(results_dir=results, out_dir=tmp_path / "out", submitter="cmx-test", division="closed",
                          system_file=system)


def refusal(req: PackageRequest) -> str:
    with pytest.raises(SubmissionRefused) as info:
        package(req)
    assert not req.out_dir.exists() or not any(req.out_dir.rglob("*"))  # nothing written
    return info.value.render()


def test_the_kits_default_names_no_accuracy_files(tmp_path: Path):
    assert BenchmarkDefaults.accuracy_files(benchmarks.benchmark_for(BENCHMARK), tmp_path, Prompts(tmp_path, ())) == {}


def test_the_packager_copies_each_file_the_round_wants_from_the_accuracy_run_and_cmx_check_passes(
        tmp_path: Path, fake: NamedAfterPrompts):
    results = results_with_videos(tmp_path)
    done = package(request(tmp_path, results))
    for scenario in ("Interactive", "Offline", "Server"):
        acc = done.tree / "results" / SYSTEM / BENCHMARK / scenario / "accuracy"
        assert sorted(p.name for p in (acc / "videos").iterdir()) == ["1.mp4", "3.mp4"]  # the round's, no other
        assert (acc / "videos" / "3.mp4").read_bytes() == b"mp4 of the sea"  # sample 3's prompt
        assert (acc / "videos" / "1.mp4").read_bytes() == b"mp4 of a dog"
    assert set(fake.loaded) == {tmp_path / "prompts.txt"}  # the dataset cmx_run.json records
    report = check_tree(tmp_path / "out", "v6.0")
    assert report.problems == [], format_report(report)


def test_cmx_check_wants_each_file_in_accuracy_as_the_official_checker_does(tmp_path: Path, fake: NamedAfterPrompts):
    done = package(request(tmp_path, results_with_videos(tmp_path)))
    (done.tree / "results" / SYSTEM / BENCHMARK / "Offline" / "accuracy" / "videos" / "3.mp4").unlink()
    report = check_tree(tmp_path / "out", "v6.0")
    assert [(p.rule, p.path, p.found) for p in report.problems] == [
        (CAUGHT[0], f"closed/cmx-test/results/{SYSTEM}/{BENCHMARK}/Offline/accuracy/videos/3.mp4",
         "missing")]


def test_a_file_the_accuracy_run_did_not_write_is_refused_naming_it_and_what_to_do(tmp_path: Path,
                                                                                  fake: NamedAfterPrompts):
    said = refusal(request(tmp_path, results_with_videos(tmp_path, missing="the sea")))
    assert "accuracy/videos/3.mp4 is copied from" in said and "the sea-0.mp4, which is missing" in said
    assert "run the accuracy test again over the whole dataset" in said
    assert "videos/1.mp4" not in said


def test_a_file_of_a_sample_beyond_the_rows_the_run_read_is_left_out_for_open_and_reported_by_cmx_check(
        tmp_path: Path, fake: NamedAfterPrompts):
    results = results_with_videos(tmp_path)
    for path in results.glob(f"{SYSTEM}/{BENCHMARK}/*/cmx_run.json"):
        path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "rows": 2}), encoding="utf-8")
    closed = refusal(request(tmp_path, results))  # a rows-limited run is never compliant
    assert "the closed division needs all" in closed and "videos/3.mp4" not in closed
    done = package(replace(request(tmp_path, results), division="open"))
    for scenario in ("Offline", "Server"):
        acc = done.tree / "results" / SYSTEM / BENCHMARK / scenario / "accuracy"
        assert sorted(p.name for p in (acc / "videos").iterdir()) == ["1.mp4"]  # sample 3 was never made
    report = check_tree(tmp_path / "out", "v6.0")
    assert {(p.rule, p.path.rsplit("/", 1)[-1]) for p in report.problems if p.rule in CAUGHT} == {
        (CAUGHT[0], "3.mp4")}


def test_results_that_do_not_record_their_dataset_are_refused_when_the_round_wants_files(tmp_path: Path,
                                                                                       fake: NamedAfterPrompts):
    results = results_with_videos(tmp_path)
    for path in results.glob(f"{SYSTEM}/{BENCHMARK}/*/cmx_run.json"):
        facts = json.loads(path.read_text(encoding="utf-8"))
        del facts["dataset"]
        path.write_text(json.dumps(facts), encoding="utf-8")
    said = refusal(request(tmp_path, results))
    assert "does not record the dataset the run read" in said and "videos/3.mp4" in said


def test_a_dataset_gone_since_the_run_is_refused(tmp_path: Path, fake: NamedAfterPrompts):
    results = results_with_videos(tmp_path)
    (tmp_path / "prompts.txt").unlink()
    assert f"{tmp_path / 'prompts.txt'} is gone" in refusal(request(tmp_path, results))


def test_a_benchmark_whose_round_wants_no_files_never_loads_its_dataset(tmp_path: Path, fake: NamedAfterPrompts,
                                                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(rounds, "ROUNDS_DIR", Path(rounds.__file__).resolve().parent)  # cmx's own
    results = cmx_results(tmp_path / "results", dataset=str(tmp_path / "gone.txt"))
    package(request(tmp_path, results))
    assert fake.loaded == []
