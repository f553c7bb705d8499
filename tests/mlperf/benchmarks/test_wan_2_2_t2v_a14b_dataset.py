"""Wan 2.2's prompts: read as the reference's load_prompts reads them, refused where a prompt cannot name its video,
and handed to the QSL as text-to-video samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.dataset import (
    PROMPTS_FILE,
    VBenchPrompts,
    load_prompts,
    make_tiny_prompts,
)
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import LATENT_FILE
from cmx.mlperf.loadgen.sut import QSL


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROMPTS_FILE).write_text(text, encoding="utf-8")
    return folder


def test_prompts_are_the_stripped_non_blank_lines_in_order(tmp_path: Path) -> None:
    folder = _write(tmp_path / "d", "  a cat drinking water \n\na car turning a corner\n")
    data = load_prompts(folder)
    assert data.prompts == ("a cat drinking water", "a car turning a corner")
    assert data.path == folder and data.latent == folder / LATENT_FILE
    assert load_prompts(folder / PROMPTS_FILE).prompts == data.prompts  # the file itself names the same set


def test_a_sample_is_its_prompt_with_vbench_file_name(tmp_path: Path) -> None:
    data = load_prompts(_write(tmp_path / "d", "a cat drinking water\nindoor swimming pool\n"))
    video = data.video(1)
    assert (video.text, video.file_name) == ("indoor swimming pool", "indoor swimming pool-0.mp4")
    assert data.reference(0) == "a cat drinking water"
    assert data.index_of("indoor swimming pool") == 1
    assert len(data.limit(1)) == 1


def test_the_qsl_hands_the_sut_video_prompts_not_token_ids(tmp_path: Path) -> None:
    data = load_prompts(_write(tmp_path / "d", "a cat drinking water\nindoor swimming pool\n"))
    qsl = QSL(data, performance_sample_count=2)
    qsl.load_samples([0, 1])
    sample = qsl.sample(1)
    assert sample.prompt_ids == [] and sample.video is not None
    assert sample.video.file_name == "indoor swimming pool-0.mp4"


@pytest.mark.parametrize(("text", "says"), [
    ("a cat\na dog\na cat\n", "repeats prompt 0"),
    ("a cat/dog\n", "cannot be a file name"),
    ("x" * 251 + "\n", "cannot be a file name"),
    ("\n\n", "holds no prompt"),
])
def test_a_prompt_that_cannot_name_its_own_video_is_refused_with_its_line(tmp_path: Path, text: str,
                                                                          says: str) -> None:
    with pytest.raises(DatasetError, match=says):
        load_prompts(_write(tmp_path / "d", text))


def test_a_missing_prompts_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=f"{PROMPTS_FILE} is not there"):
        load_prompts(tmp_path)


def test_the_tiny_set_copies_the_tiny_models_latent_beside_its_prompts(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / LATENT_FILE).write_bytes(b"latent")
    path = make_tiny_prompts(tmp_path / "set" / PROMPTS_FILE, model, rows=248, seed=3)
    data = load_prompts(path)
    assert isinstance(data, VBenchPrompts) and len(data) == 248  # unique and usable as file names
    assert data.latent.read_bytes() == b"latent"
    assert make_tiny_prompts(tmp_path / "again" / PROMPTS_FILE, model, rows=248, seed=3).read_text() == \
        path.read_text()


def test_the_tiny_set_needs_the_tiny_models_latent(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"not the tiny Wan 2\.2 pipeline"):
        make_tiny_prompts(tmp_path / PROMPTS_FILE, tmp_path, rows=4)
