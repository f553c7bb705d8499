"""llama2-70b's model side (its model.py on the kit's defaults): what a Llama 2 folder must hold, and its outputs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model import (
    ModelError,
    check_own_folder,
    refuse_tiny_inputs,
)

BENCH = benchmark_for("llama2-70b")
describe, make_tiny, require_model_files = BENCH.describe, BENCH.make_tiny, BENCH.require_model_files


def model_folder(path: Path, config: dict | None = None, generation: dict | None = None,
                 tokenizer: str | None = "tokenizer.json") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "float16", **(config or {})}))
    if generation is not None:
        (path / "generation_config.json").write_text(json.dumps(generation))
    if tokenizer:
        (path / tokenizer).write_text("{}")
    return path


def test_describe_reads_the_eos_id_and_takes_the_dtype_from_the_precision(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m", {"eos_token_id": 7}, {"eos_token_id": [2, 9]})
    model = describe(folder, "org/name", "c" * 40, "bf16", is_tiny=False)
    assert (model.eos_token_id, model.dtype, model.precision, model.revision) == (2, "bfloat16", "bf16", "c" * 40)
    assert model.outputs() == {"path": folder, "name": "org/name", "revision": "c" * 40, "dtype": "bfloat16",
                               "precision": "bf16", "tokenizer_path": folder, "eos_token_id": 2, "is_tiny": False}
    assert describe(folder, "x", "", "fp16", is_tiny=False).dtype == "float16"


def test_fp8_takes_the_checkpoints_own_dtype_and_eos_defaults_to_2(tmp_path: Path) -> None:
    model = describe(model_folder(tmp_path / "m", tokenizer="tokenizer.model"), "x", "", "fp8", is_tiny=False)
    assert (model.dtype, model.eos_token_id) == ("float16", 2)


def test_a_folder_without_a_tokenizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"has no tokenizer \(tokenizer.json or tokenizer.model\)"):
        describe(model_folder(tmp_path / "m", tokenizer=None), "x", "", "bf16", is_tiny=False)


def test_a_model_that_is_not_a_llama_is_described_with_a_warning(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    folder = model_folder(tmp_path / "m", {"model_type": "mistral"})
    describe(folder, "x", "", "bf16", is_tiny=False, log=logging.getLogger("test-llama"))
    assert "is a 'mistral' model, not a Llama" in caplog.text


def test_an_unreadable_config_is_a_clear_error(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m")
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelError, match=r"config.json is not a JSON object"):
        describe(folder, "x", "", "bf16", is_tiny=False)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match=r"cannot read .*config.json"):
        describe(folder, "x", "", "bf16", is_tiny=False)


def test_your_own_folder_must_exist_be_a_folder_and_hold_config_json(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        check_own_folder(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelError, match="is not a folder"):
        check_own_folder(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"has no config.json: it is not a Hugging Face model folder"):
        check_own_folder(tmp_path / "empty")
    assert check_own_folder(model_folder(tmp_path / "m")) == tmp_path / "m"


def test_the_files_chosen_must_include_config_json_and_a_tokenizer() -> None:
    require_model_files({"config.json", "tokenizer.model", "a.safetensors"}, "org/name", "c" * 40)
    with pytest.raises(ModelError, match=r"has no config.json among the files chosen"):
        require_model_files({"tokenizer.json"}, "org/name", "c" * 40)
    with pytest.raises(ModelError, match=r"has no tokenizer .* among the files chosen"):
        require_model_files(["config.json", "a.safetensors"], "org/name", "c" * 40)


def test_tiny_only_inputs_are_refused_for_another_model() -> None:
    refuse_tiny_inputs({"seed": None, "layers": None, "model_path": None})
    with pytest.raises(ModelError, match=r"^layers applies to the tiny model only\n"):
        refuse_tiny_inputs({"layers": 4})
    with pytest.raises(ModelError, match=r"^seed, heads apply to the tiny model only\n"):
        refuse_tiny_inputs({"seed": 1, "heads": 2})


def test_the_tiny_model_has_no_fp8_and_takes_no_model_path(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="the tiny model has no FP8 checkpoint"):
        make_tiny(tmp_path / "m", "fp8", {})
    with pytest.raises(ModelError, match="model_path and _tiny exclude each other"):
        make_tiny(tmp_path / "m", "bf16", {"model_path": tmp_path})
    assert not (tmp_path / "m").exists()
