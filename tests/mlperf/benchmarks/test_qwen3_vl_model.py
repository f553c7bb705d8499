"""qwen3-vl's model side: the folder it needs (model.py) and the tiny random Qwen3-VL MoE (tiny_model.py), read
back from its files as vLLM's loader reads them: names, shapes, the fused experts' released layout."""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path

import numpy as np
import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.model import ModelError
from cmx.mlperf.benchmarks.qwen3_vl.model import FILES, MODEL, describe
from cmx.mlperf.benchmarks.qwen3_vl.tiny_model import (
    ARCHITECTURE,
    CHAT_TEMPLATE,
    IM_END,
    IMAGE_PAD,
    SPECIALS,
    TinyQwen3VL,
    make_tiny_qwen3_vl,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyQwen3VL:
    return make_tiny_qwen3_vl(tmp_path_factory.mktemp("tiny-qwen3-vl"), seed=0)


def header(path: Path) -> dict:
    """The safetensors header: each tensor's dtype, shape and byte range."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def tensor(path: Path, name: str) -> np.ndarray:
    """A bfloat16 tensor of the file as float32 (its bits are the top half of a float32's)."""
    entry = header(path)[name]
    assert entry["dtype"] == "BF16"
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        start, end = entry["data_offsets"]
        f.seek(8 + size + start)
        bits = np.frombuffer(f.read(end - start), dtype="<u2")
    return (bits.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def config_of(tiny: TinyQwen3VL, name: str = "config.json") -> dict:
    return json.loads((tiny.path / name).read_text())


def test_the_same_seed_writes_byte_identical_files_and_another_seed_other_weights(tmp_path: Path) -> None:
    a, b = make_tiny_qwen3_vl(tmp_path / "a", seed=3), make_tiny_qwen3_vl(tmp_path / "b", seed=3)
    names = sorted(p.name for p in a.path.iterdir())
    assert names == sorted(p.name for p in b.path.iterdir())
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "chat_template.json", "preprocessor_config.json", "video_preprocessor_config.json"} <= set(names)
    assert all((a.path / n).read_bytes() == (b.path / n).read_bytes() for n in names)
    other = make_tiny_qwen3_vl(tmp_path / "c", seed=4)
    assert (other.path / "model.safetensors").read_bytes() != (a.path / "model.safetensors").read_bytes()


def test_the_experts_are_stored_transposed_as_the_release_stores_them(tiny: TinyQwen3VL) -> None:
    shapes = {k: tuple(v["shape"]) for k, v in header(tiny.path / "model.safetensors").items() if k != "__metadata__"}
    h, moe = tiny.hidden_size, config_of(tiny)["text_config"]["moe_intermediate_size"]
    assert 2 * moe != h  # so that the other layout cannot load by chance
    for i in range(tiny.layers):
        p = f"model.language_model.layers.{i}.mlp."
        assert shapes[p + "experts.gate_up_proj"] == (tiny.experts, h, 2 * moe)
        assert shapes[p + "experts.down_proj"] == (tiny.experts, moe, h)
        assert shapes[p + "gate.weight"] == (tiny.experts, h)
    assert all(v["dtype"] == "BF16" for k, v in header(tiny.path / "model.safetensors").items() if k != "__metadata__")


def test_the_checkpoint_has_the_names_vllm_loads(tiny: TinyQwen3VL) -> None:
    names = set(header(tiny.path / "model.safetensors")) - {"__metadata__"}
    assert all(n.startswith(("model.language_model.", "model.visual.")) or n == "lm_head.weight" for n in names)
    assert {"model.language_model.embed_tokens.weight", "model.language_model.norm.weight", "lm_head.weight",
            "model.language_model.layers.0.self_attn.q_norm.weight",
            "model.language_model.layers.0.self_attn.k_norm.weight",
            "model.visual.patch_embed.proj.weight", "model.visual.pos_embed.weight",
            "model.visual.blocks.0.attn.qkv.weight", "model.visual.merger.linear_fc2.weight",
            "model.visual.deepstack_merger_list.1.linear_fc2.weight"} <= names


def test_the_config_is_the_releases_shape_at_tiny_sizes(tiny: TinyQwen3VL) -> None:
    config = config_of(tiny)
    text, vision = config["text_config"], config["vision_config"]
    assert (config["architectures"], config["model_type"], text["model_type"]) == (
        [ARCHITECTURE], "qwen3_vl_moe", "qwen3_vl_moe_text")
    assert text["norm_topk_prob"] is True and config["tie_word_embeddings"] is False
    assert (text["head_dim"], text["mlp_only_layers"], text["decoder_sparse_step"]) == (64, [], 1)
    assert sum(text["rope_scaling"]["mrope_section"]) == text["head_dim"] // 2
    assert text["rope_scaling"]["mrope_interleaved"] is True
    assert vision["out_hidden_size"] == text["hidden_size"]
    assert set(vision["deepstack_visual_indexes"]) <= set(range(vision["depth"]))
    assert len(vision["deepstack_visual_indexes"]) <= text["num_hidden_layers"]


def test_the_vision_token_ids_are_the_tokenizers(tiny: TinyQwen3VL) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tiny.path / "tokenizer.json"))
    config = config_of(tiny)
    for key, token in (("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
                       ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>")):
        assert tokenizer.token_to_id(token) == config[key]
    assert [tokenizer.token_to_id(t) for t in SPECIALS] == list(range(tiny.endoftext_id, tiny.vocab_size))
    assert tokenizer.get_vocab_size() == config["text_config"]["vocab_size"] == tiny.vocab_size


def test_generation_config_has_the_real_sampling_defaults_and_end_ids(tiny: TinyQwen3VL) -> None:
    generation = config_of(tiny, "generation_config.json")
    assert (generation["temperature"], generation["top_p"], generation["top_k"]) == (0.7, 0.8, 20)
    assert generation["eos_token_id"] == [tiny.special_id(IM_END), tiny.endoftext_id]


def test_the_chat_template_renders_an_image_part_as_the_vision_placeholder(tiny: TinyQwen3VL) -> None:
    import jinja2

    assert config_of(tiny, "tokenizer_config.json")["chat_template"] == CHAT_TEMPLATE
    assert config_of(tiny, "chat_template.json")["chat_template"] == CHAT_TEMPLATE
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "A red shirt."}, {"type": "image"}]}]
    text = jinja2.Environment().from_string(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nA red shirt."
                    f"<|vision_start|>{IMAGE_PAD}<|vision_end|><|im_end|>\n<|im_start|>assistant\n")


def test_only_im_end_among_the_specials_can_win_and_it_reads_the_constant_dimension(tiny: TinyQwen3VL) -> None:
    weights = tiny.path / "model.safetensors"
    head, embeddings = tensor(weights, "lm_head.weight"), tensor(weights, "model.language_model.embed_tokens.weight")
    end = tiny.special_id(IM_END)
    assert np.all(embeddings[:, 0] == 1.0)
    assert np.count_nonzero(head[:, 0]) == 1 and head[end, 0] > 0
    assert not np.any(np.delete(head[tiny.endoftext_id:], end - tiny.endoftext_id, axis=0))
    assert np.count_nonzero(head[end]) == 1


def test_describe_reports_the_architecture_and_the_end_ids(tiny: TinyQwen3VL) -> None:
    model = describe(tiny.path, "tiny", "", None, is_tiny=True)
    assert (model.architecture, model.eos_token_ids, model.eos_token_id) == (
        ARCHITECTURE, (tiny.special_id(IM_END), tiny.endoftext_id), tiny.special_id(IM_END))
    assert (model.dtype, model.precision) == ("bfloat16", "bf16")
    assert model.outputs()["eos_token_ids"] == [tiny.special_id(IM_END), tiny.endoftext_id]


def test_without_generation_config_the_end_id_is_the_text_configs(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl_moe", "architectures": [ARCHITECTURE],
                                                    "text_config": {"eos_token_id": 151645}}))
    for name in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"):
        (folder / name).write_text("{}")
    assert describe(folder, "x", "", "bf16", is_tiny=False).eos_token_ids == (151645,)


@pytest.mark.parametrize(("lacking", "named"), [("tokenizer.json", "tokenizer.json"),
                                                ("preprocessor_config.json", "preprocessor_config.json"),
                                                ("tokenizer_config.json", "tokenizer_config.json")])
def test_a_folder_lacking_a_file_is_refused_naming_it(tmp_path: Path, lacking: str, named: str) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl_moe"}))
    for name in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"):
        if name != lacking:
            (folder / name).write_text("{}")
    with pytest.raises(ModelError, match=f"has no {named}") as caught:
        describe(folder, "x", "", "bf16", is_tiny=False)
    assert caught.value.hint == FILES.hint


def test_another_model_type_is_described_with_a_warning(tiny: TinyQwen3VL, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    for p in tiny.path.iterdir():
        if p.suffix == ".json":
            (folder / p.name).write_bytes(p.read_bytes())
    (folder / "config.json").write_text(json.dumps({**config_of(tiny), "model_type": "qwen2_5_vl"}))
    describe(folder, "x", "", "bf16", is_tiny=False, log=logging.getLogger("test-qwen3-vl"))
    assert "is a 'qwen2_5_vl' model, not a Qwen3-VL MoE" in caplog.text


@pytest.mark.parametrize("sizes", [{"heads": 3}, {"hidden_size": 100}, {"layers": 1}, {"experts": 1},
                                   {"vocab_size": 300}])
def test_sizes_a_qwen3_vl_cannot_have_are_refused(tmp_path: Path, sizes: dict[str, int]) -> None:
    with pytest.raises(CmxError):
        make_tiny_qwen3_vl(tmp_path / "m", **sizes)
    assert not (tmp_path / "m").exists()


def test_the_tiny_model_is_made_through_the_model_spec(tiny: TinyQwen3VL, tmp_path: Path) -> None:
    path = MODEL.tiny.make(tmp_path / "m", 0, {"hidden_size": 128, "layers": 2, "heads": 4, "experts": 8,
                                                "vocab_size": 4096})
    assert (path / "model.safetensors").read_bytes() == (tiny.path / "model.safetensors").read_bytes()
    assert MODEL.size == 470 * 10**9
