"""wan-2.2-t2v-a14b's model side (model.py): a diffusers pipeline folder (model_index.json and one subfolder per part)
described as get-ml-model-wan-2.2-t2v-a14b reports it, and refused where it is not one; the tiny latent's shape
checked before anything is made. The folders here are written by hand: describe reads JSON and checks files."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.kit.model import ModelDefaults, ModelError, ModelSpec, check_own_folder
from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.model import FILES, MODEL, SIZE, describe, make_tiny_model

PARTS = ("transformer/config.json", "transformer_2/config.json", "text_encoder/config.json",
         "tokenizer/tokenizer_config.json", "vae/config.json", "scheduler/scheduler_config.json")


class Side(ModelDefaults):
    model: ModelSpec = MODEL


def pipeline(folder: Path, cls: str = "WanPipeline", text: dict | None = None) -> Path:
    for part in PARTS:
        (folder / part).parent.mkdir(parents=True, exist_ok=True)
        (folder / part).write_text("{}")
    (folder / "text_encoder" / "config.json").write_text(json.dumps({"model_type": "umt5", "eos_token_id": 1}
                                                                    if text is None else text))
    (folder / "model_index.json").write_text(json.dumps({"_class_name": cls, "boundary_ratio": 0.875}))
    return folder


def test_a_pipeline_folder_is_described_with_its_class_dtype_and_text_encoders_end_id(tmp_path: Path) -> None:
    folder = pipeline(tmp_path / "wan")
    out = describe(folder, "Wan-AI/Wan2.2-T2V-A14B-Diffusers", "c" * 40, None, is_tiny=False).outputs()
    assert (out["dtype"], out["precision"], out["eos_token_id"], out["architecture"]) == \
        ("bfloat16", "bf16", 1, "WanPipeline")  # the reference's bf16
    assert out["tokenizer_path"] == folder and set(out) == {"path", "name", "revision", "dtype", "precision",
                                                            "tokenizer_path", "eos_token_id", "is_tiny", "architecture"}
    assert describe(folder, "w", "", "fp32", is_tiny=False).dtype == "float32"
    assert describe(folder, "w", "", "fp16", is_tiny=False).dtype == "float16"
    # a text encoder config naming no end id: UMT5's default, as transformers reads it (not a refusal after 126 GB)
    assert describe(pipeline(tmp_path / "bare", text={}), "w", "", None, is_tiny=False).eos_token_id == 1


def test_another_pipeline_class_is_accepted_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        out = describe(pipeline(tmp_path / "p", cls="WanImageToVideoPipeline"), "p", "", None, is_tiny=False,
                       log=logging.getLogger("t"))
    assert out.architecture == "WanImageToVideoPipeline"
    assert "is a 'WanImageToVideoPipeline' pipeline, not a WanPipeline" in caplog.text
    assert "closed division needs Wan-AI/Wan2.2-T2V-A14B-Diffusers" in caplog.text


def test_a_checkpoint_folder_a_missing_part_and_another_precision_are_refused(tmp_path: Path) -> None:
    checkpoint = tmp_path / "llm"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    with pytest.raises(ModelError, match=r"has no model_index\.json: it is not a diffusers pipeline folder"):
        describe(checkpoint, "x", "", None, is_tiny=False)
    folder = pipeline(tmp_path / "wan")
    assert check_own_folder(folder) == folder  # a user's pipeline folder passes the kit's own-folder check
    (folder / "transformer_2" / "config.json").unlink()
    with pytest.raises(ModelError, match=r"has no transformer_2/config.json") as refused:
        describe(folder, "x", "", None, is_tiny=False)
    assert "model_index.json, transformer/, transformer_2/" in (refused.value.hint or "")
    with pytest.raises(ModelError, match="does not run in fp8"):
        describe(pipeline(tmp_path / "w2"), "x", "", "fp8", is_tiny=False)


def test_a_download_must_choose_the_index_and_every_part() -> None:
    side = Side()
    side.require_model_files(["model_index.json", *PARTS, "vae/diffusion_pytorch_model.safetensors"], "r", "c")
    with pytest.raises(ModelError, match=r"has no model_index\.json among the files chosen: it is not a diffusers "
                                         r"pipeline repository"):
        side.require_model_files(list(PARTS), "r", "c")
    with pytest.raises(ModelError, match=r"has no tokenizer/tokenizer_config\.json among the files chosen"):
        side.require_model_files(["model_index.json", *(p for p in PARTS if not p.startswith("tokenizer/"))], "r",
                                 "c")
    assert FILES.index == "model_index.json"
    assert 120 * 10**9 < SIZE < 130 * 10**9  # two 14 B experts in float32, UMT5-XXL in bfloat16, the VAE


@pytest.mark.parametrize(("sizes", "message"), [
    ({"width": 30}, "a tiny Wan of 30x64 has no latent"),
    ({"height": 8}, "a tiny Wan of 64x8 has no latent"),
    ({"frames": 6}, "a tiny Wan of 6 frames has no latent"),
])
def test_a_tiny_latent_wan_pipeline_cannot_take_is_refused_before_anything_is_made(
        tmp_path: Path, sizes: dict[str, int], message: str) -> None:
    with pytest.raises(ModelError, match=message):
        make_tiny_model(tmp_path / "tiny", 0, {"layers": 1, "heads": 2, **sizes})
    assert not (tmp_path / "tiny").exists()


def test_the_tiny_inputs_include_the_latents_shape_and_refuse_hidden_size(tmp_path: Path) -> None:
    side = Side()
    with pytest.raises(ModelError, match=r"^height applies to the tiny model only"):
        side.refuse_tiny_inputs({"height": 64})
    with pytest.raises(ModelError, match="the tiny Wan's widths are fixed"):
        side.make_tiny(tmp_path / "t", None, {"hidden_size": 64, "model_path": None})
    with pytest.raises(ModelError, match="the tiny model has no FP8 checkpoint"):
        side.make_tiny(tmp_path / "t", "fp8", {"model_path": None})
