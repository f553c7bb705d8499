"""Random-weight networks of VBench's architectures in VBench's folder layout, for get-vbench-networks _tiny.

Run by VBench's own environment's interpreter (torch, vbench 0.1.5, openai-clip, timm, transformers 4.33.2), with
the folder as its working directory: `python tiny_networks.py FOLDER --seed N`. Each network is built by the class
VBench itself loads, with random weights, and saved in the form VBench's loader reads:

- CLIP ViT-B/32: openai-clip's `CLIP` with ViT-B/32's sizes, saved as TorchScript (the published ViT-B-32.pt is a
  TorchScript archive, and `clip.load` reads one first);
- AMT-S: vbench's bundled `third_party/amt` network from its AMT-S.yaml, saved as {"state_dict": ...};
- RAFT: vbench's bundled `third_party/RAFT` (the full model, as dynamic_degree builds it), keys prefixed `module.`
  as in raft-things.pth;
- Tag2Text Swin-B: vbench's bundled `tag2text_caption` at 384 pixels, saved as {"model": ...}; it reads
  bert-base-uncased while it is built, so that folder is made first: a random BertModel of bert-base-uncased's
  sizes and a WordPiece vocabulary of its size and special tokens (made-up word pieces: captions are noise); its
  text decoder's output bias (the LM head's `cls.predictions.bias`, the only weight not random) favours the
  end-of-caption token, so that every caption ends as soon as VBench's generate lets it (see END_BIAS);
- DINO ViT-B/16: DINO's hub code is a git checkout that cannot be had without the network, so the hub folder holds
  a hubconf.py of cmx's own whose `dino_vitb16` builds timm's VisionTransformer with DINO ViT-B/16's sizes (patch
  16, width 768, 12 blocks of 12 heads, no head: the class token's features, as DINO's ViT returns) and loads its
  weights the way DINO's does, through torch hub's cache; not DINO's code, the same architecture.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch

DINO_HUBCONF = '''"""cmx's stand-in for DINO's hub code (get-vbench-networks _tiny): timm's ViT with DINO ViT-B/16's
sizes and random weights, loaded from torch hub's cache as DINO's hubconf.py loads its pretrained ones."""

import torch
from timm.models.vision_transformer import VisionTransformer

dependencies = ["torch", "timm"]
URL = "https://dl.fbaipublicfiles.com/dino/dino_vitbase16_pretrain/dino_vitbase16_pretrain.pth"


def dino_vitb16(pretrained=True, **kwargs):
    model = VisionTransformer(img_size=224, patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                              qkv_bias=True, num_classes=0, dynamic_img_size=True)
    if pretrained:
        model.load_state_dict(torch.hub.load_state_dict_from_url(URL, map_location="cpu"))
    return model
'''
BERT_VOCAB = 30522  # bert-base-uncased's, and Tag2Text's med_config.json vocab_size less its [DEC] and [ENC]
# Why one weight of the random Tag2Text is not random: VBench's scene captions each of 16 frames by a 3-beam search
# (Tag2Text_Caption.generate: num_beams=3, min_length=10, max_length=30, eos_token_id=tokenizer.sep_token_id), and
# its decoder recomputes the whole prefix at every step (med.py's prepare_inputs_for_generation reads `past`, which
# transformers 4.33 never passes). Random weights never pick [SEP], so every beam ran to 30 tokens: 47 s of the
# ~65 s scene took per video here (2 cores). With [SEP]'s logit raised by END_BIAS (random logits spread about
# +-2.5), [SEP] is the first choice at every step, VBench's min_length holds it back until the 10th token, and then
# every beam ends. A caption from random weights is noise either way, so this changes what the tiny path costs,
# not what its (meaningless) score means.
END_BIAS = 20.0


def clip_vit_b32(folder: Path) -> None:
    from clip.model import CLIP

    model = CLIP(embed_dim=512, image_resolution=224, vision_layers=12, vision_width=768, vision_patch_size=32,
                 context_length=77, vocab_size=49408, transformer_width=512, transformer_heads=8,
                 transformer_layers=12).eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, (torch.zeros(1, 3, 224, 224), torch.zeros(1, 77, dtype=torch.long)))
    (folder / "clip_model").mkdir(exist_ok=True)
    traced.save(str(folder / "clip_model/ViT-B-32.pt"))


def amt_s(folder: Path) -> None:
    import vbench
    from omegaconf import OmegaConf
    from vbench.third_party.amt.utils.build_utils import build_from_cfg

    config = OmegaConf.load(Path(vbench.__file__).parent / "third_party/amt/cfgs/AMT-S.yaml").network
    (folder / "amt_model").mkdir(exist_ok=True)
    torch.save({"state_dict": build_from_cfg(config).state_dict()}, folder / "amt_model/amt-s.pth")


def raft(folder: Path) -> None:
    from easydict import EasyDict
    from vbench.third_party.RAFT.core.raft import RAFT

    model = RAFT(EasyDict({"small": False, "mixed_precision": False, "alternate_corr": False}))
    (folder / "raft_model/models").mkdir(parents=True, exist_ok=True)
    torch.save({f"module.{k}": v for k, v in model.state_dict().items()}, folder / "raft_model/models/raft-things.pth")


def bert_base_uncased(folder: Path) -> None:
    from transformers import BertConfig, BertModel

    bert = folder / "bert-base-uncased"
    bert.mkdir(exist_ok=True)
    # bert-base-uncased's layout: [PAD], 99 unused, [UNK], [CLS], [SEP], [MASK], then word pieces
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [f"w{i}" for i in range(BERT_VOCAB - len(vocab))]
    (bert / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (bert / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}) + "\n", encoding="utf-8")
    BertModel(BertConfig(vocab_size=BERT_VOCAB)).save_pretrained(bert, safe_serialization=True)


def tag2text_swin_b(folder: Path, end_bias: float) -> None:
    from vbench.third_party.tag2Text.tag2text import tag2text_caption

    model = tag2text_caption(pretrained="", image_size=384, vit="swin_b")
    end = model.tokenizer.sep_token_id  # what Tag2Text_Caption.generate passes as eos_token_id
    with torch.no_grad():
        model.text_decoder.cls.predictions.bias[end] += end_bias  # the LM head's bias (decoder.bias is this tensor)
    if end_bias > 0:
        _check_caption_ends(model, end)
    (folder / "caption_model").mkdir(exist_ok=True)
    torch.save({"model": model.state_dict()}, folder / "caption_model/tag2text_swin_14m.pth")


def _check_caption_ends(model: torch.nn.Module, end: int) -> None:
    """Refuse to write a Tag2Text whose decoder would not pick [SEP] first after generate's own prompt: the bias
    is there to end captions, and a random draw that still outvotes it would bring back minutes per video."""
    prompt = model.tokenizer([model.prompt], return_tensors="pt").input_ids[:, :-1]
    prompt[:, 0] = model.tokenizer.bos_token_id
    # the tag encoder's states generate cross-attends to (40 tokens of width 768), drawn apart from the global
    # generator so that the check leaves the seeded weights of the networks built after it as they were
    tags = torch.randn(1, 40, 768, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model.text_decoder(input_ids=prompt, encoder_hidden_states=tags, return_dict=True).logits
    picked = int(logits[0, -1].argmax())
    if picked != end:
        raise SystemExit(f"tiny_networks.py: the random Tag2Text's decoder picks token {picked}, not [SEP] ({end}), "
                         "after its prompt: raise --caption-end-bias")


def dino_vit_b16(folder: Path) -> None:
    hub = folder / "dino_model/facebookresearch_dino_main"
    hub.mkdir(parents=True, exist_ok=True)
    (hub / "hubconf.py").write_text(DINO_HUBCONF, encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(compile(DINO_HUBCONF, str(hub / "hubconf.py"), "exec"), namespace)  # the same code torch.hub will load
    model = namespace["dino_vitb16"](pretrained=False)  # type: ignore[operator]  # the function just defined
    torch.save(model.state_dict(), folder / "dino_model/dino_vitbase16_pretrain.pth")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--caption-end-bias", type=float, default=END_BIAS,
                        help="added to [SEP]'s logit in Tag2Text's decoder (0: every weight random)")
    args = parser.parse_args(argv)
    folder = args.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    # bert-base-uncased first: Tag2Text reads it (from the working directory, this folder) while it is built
    builds: list[tuple[Callable[..., None], tuple[object, ...]]] = [
        (clip_vit_b32, ()), (amt_s, ()), (raft, ()), (bert_base_uncased, ()),
        (tag2text_swin_b, (args.caption_end_bias,)), (dino_vit_b16, ())]
    for build, extra in builds:
        build(folder, *extra)
        print(f"{build.__name__}: random weights written", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
