"""VBench's networks into one folder of VBench's layout: fetched and checked (cmx.mlperf.scoring.vbench_networks),
or, for _tiny, random weights of the same architectures built by tiny_networks.py in VBench's own environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cmx.errors import StepError
from cmx.execute.context import StepContext
from cmx.mlperf.scoring import vbench_networks as nets
from cmx.tools.fs import sha256_file
from cmx.tools.huggingface import download_repo, list_files

TINY_SCRIPT = Path(__file__).with_name("tiny_networks.py")
DIMENSIONS = {"clip": ("background_consistency", "appearance_style"), "dino": ("subject_consistency",),
              "amt": ("motion_smoothness",), "raft": ("dynamic_degree",), "tag2text": ("scene",)}
PATHS = {"clip": "clip_model/ViT-B-32.pt", "dino": nets.DINO_WEIGHTS, "amt": "amt_model/amt-s.pth",
         "raft": "raft_model/models/raft-things.pth", "tag2text": "caption_model/tag2text_swin_14m.pth"}


def run(ctx: StepContext) -> dict[str, Any]:
    folder = ctx.workdir
    manifest = _tiny(ctx, folder) if ctx.variation("size") == "tiny" else _full(ctx, folder)
    manifest.write(folder)
    unverified = [f.path for f in manifest.files if not f.verified]
    return {"path": folder, "manifest": folder / nets.MANIFEST, "is_random": manifest.is_random,
            "unverified": unverified}


def _full(ctx: StepContext, folder: Path) -> nets.Manifest:
    fetched: list[nets.Fetched] = []
    for name, rel in PATHS.items():
        f = nets.NetworkFile(rel, ctx.inputs[f"{name}_url"], ctx.inputs[f"{name}_sha256"] or None, DIMENSIONS[name])
        bar = ctx.progress(None, f"download {Path(rel).name}")
        fetch = nets.fetch_raft if name == "raft" else nets.fetch_file
        fetched.append(fetch(f, folder, ctx.scratch, retries=ctx.inputs["retries"], log=ctx.log,
                             on_progress=bar.update))
    nets.link_dino_hub_cache(folder)
    hub = nets.copy_hub_code(Path(ctx.deps.dino_hub.outputs["path"]), folder)
    fetched += nets.recorded(folder, [str((hub / "hubconf.py").relative_to(folder))],
                             f"{ctx.inputs['dino_repo']} at {ctx.deps.dino_hub.outputs['rev']}")
    fetched += _bert(ctx, folder)
    return nets.Manifest(tuple(fetched), is_random=False)


def _bert(ctx: StepContext, folder: Path) -> list[nets.Fetched]:
    """bert-base-uncased at the pinned commit: the Hub's listing gives each file's LFS sha256 or git blob id, and
    download_repo checks every file against it."""
    endpoint, repo, rev = ctx.inputs["endpoint"], ctx.inputs["bert_repo"], ctx.inputs["bert_revision"]
    wanted = set(ctx.inputs["bert_include"].split())
    listed = [f for f in list_files(endpoint, repo, rev, token=ctx.inputs["token"]) if f.path in wanted]
    missing = sorted(wanted - {f.path for f in listed})
    if missing:
        raise StepError(f"{repo} at {rev[:12]} has no {', '.join(missing)}",
                        hint="pass --input bert_include= the files that commit holds")
    bar = ctx.progress(None, f"download {repo}")
    dest = download_repo(endpoint, repo, rev, folder / nets.BERT, token=ctx.inputs["token"], files=listed,
                         scratch=ctx.scratch / "bert", retries=ctx.inputs["retries"],
                         on_progress=lambda done, total: bar.update(done, total))
    return [nets.Fetched(f"{nets.BERT}/{f.path}", f"{repo}@{rev}/{f.path}", sha256_file(dest / f.path),
                         (dest / f.path).stat().st_size, verified=True) for f in listed]


def _tiny(ctx: StepContext, folder: Path) -> nets.Manifest:
    made_by = {} if ctx.inputs["env_python"] else ctx.deps.env.outputs
    python = ctx.inputs["env_python"] or made_by["python"]
    seed = 0 if ctx.inputs["seed"] is None else ctx.inputs["seed"]
    ctx.log.warning("VBench's networks for _tiny are RANDOM weights of the real architectures: any vbench_score "
                    "scored with them is meaningless")
    # torch >= 2.6 loads checkpoints weights-only by default, and VBench 0.1.5's loaders (written for torch 2.5)
    # do not ask; the builder loads what it wrote itself through those same loaders
    env = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if made_by.get("pythonpath"):  # _host-torch's environment: torchvision's Python code
        env["PYTHONPATH"] = os.pathsep.join([*made_by["pythonpath"], *filter(None, [os.environ.get("PYTHONPATH")])])
    ctx.run_cmd([python, str(TINY_SCRIPT), str(folder), "--seed", str(seed),
                 "--caption-end-bias", str(ctx.inputs["caption_end_bias"])], cwd=folder, env=env)
    bert = sorted(str(p.relative_to(folder)) for p in (folder / nets.BERT).iterdir())
    made = [*PATHS.values(), f"{nets.DINO_HUB}/hubconf.py", *bert]
    nets.link_dino_hub_cache(folder)
    files = nets.recorded(folder, made, f"random weights, seed {seed}, [SEP] bias {ctx.inputs['caption_end_bias']} "
                                        "(tiny_networks.py)")
    return nets.Manifest(tuple(files), is_random=True,
                         note="RANDOM weights of the real architectures, made by get-vbench-networks _tiny: any "
                              "vbench_score from them is meaningless")
