"""Running VBench on a folder of videos, in VBench's own environment, as MLPerf's reference runs it, and reading its
score with cmx.mlperf.scoring.vbench. Standard library only on cmx's side: VBench's interpreter does the rest.

How the reference runs it (mlcommons/inference b66003e, text_to_video/wan-2.2-t2v-a14b/run_evaluation.py, lines
140 to 160): `python -m torch.distributed.run --nproc_per_node=<GPUs> <VBench>/evaluate.py --videos_path=...
--output_path=... --load_ckpt_from_local=True --dimension <the six>`, VBench's git tree's entry. PyPI's vbench 0.1.5
ships the same entry as `vbench/launch/evaluate.py`, which cmx runs the same way, with:
- `--full_json_dir`: a prompt suite of the logged videos only (`prompt_suite`): VBench's own entries for their
  prompts, copied from the VBench_full_info.json of the installed package (each entry names the dimensions a prompt
  is scored on and the scene and style that two of them check). VBench's standard mode scores each prompt of the
  suite whose video it finds, so a suite of the logged prompts scores what the full suite scores on the same
  folder, and a video in the folder that the log does not list is not scored;
- the networks' folder as VBENCH_CACHE_DIR and as the working directory (Tag2Text reads `bert-base-uncased/` from
  it), TORCH_HOME=<folder>/torch (DINO's weights in torch hub's cache: cmx.mlperf.scoring.vbench_networks), and
  the Hub and transformers offline: a file that is missing fails instead of being fetched unchecked.

On a CPU (no GPU given), evaluate.py cannot run: its dist_init starts NCCL and calls torch.cuda.set_device, and it
asks for device "cuda". cmx then calls the same `VBench(device, full_info, output).evaluate(...)` with the CPU as
device, in one process, with the same arguments evaluate.py passes (CPU_ENTRY); every dimension's code is VBench's.

Random networks (get-vbench-networks _tiny) are scored by the same code; their folder's manifest says they are
random, and the result says so (VBenchResult.random_networks). Only then may a prompt be outside VBench's suite
(the tiny set's prompts are generated): it gets an entry of cmx's own, scored on every dimension asked for, its
scene the prompt's first word and its style the whole prompt.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from cmx.mlperf.loadgen.accuracy_log import AccuracyError
from cmx.mlperf.scoring.external import ExternalScorer
from cmx.mlperf.scoring.vbench import REFERENCE_DIMENSIONS, VBenchResult, score_folder
from cmx.mlperf.scoring.vbench_networks import TORCH_HOME, check_folder

SUITE_FILE = "VBench_full_info.json"  # in the vbench package; launch/evaluate.py's --full_json_dir default
ENTRY = "launch/evaluate.py"  # in the vbench package
LOG_FILE = "vbench.log"
# launch/evaluate.py's main without dist_init and with the CPU as device (module docstring), under no_grad: VBench
# only scores, but scene runs Tag2Text's Swin-B and tagging head outside any no_grad, and on a CPU the autograd graph
# of 16 frames at 384 pixels held ~22 GB (a 23 GB machine killed it, measured); the values are the same without it
CPU_ENTRY = """\
import sys
from datetime import datetime

import torch
from vbench import VBench

suite, videos, output, *dimensions = sys.argv[1:]
with torch.no_grad():
    VBench(torch.device("cpu"), suite, output).evaluate(
        videos_path=videos, name=f"results_{datetime.now().strftime('%Y-%m-%d-%H:%M:%S')}", prompt_list=[],
        dimension_list=dimensions, local=True, read_frame=None, mode="vbench_standard")
"""
_FIND_PACKAGE = "import importlib.util; print(importlib.util.find_spec('vbench').submodule_search_locations[0])"

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class VBenchJob:
    """What to score: the folder of mp4s (VBench's `<prompt>-0.mp4` names), the prompts of the videos to score,
    the folder VBench writes its results into (emptied first: a stale results file must never be read), and the
    dimensions."""

    videos: Path
    prompts: tuple[str, ...]
    output: Path
    dimensions: tuple[str, ...] = REFERENCE_DIMENSIONS


def vbench_package(scorer: ExternalScorer) -> Path:
    """The installed vbench package's folder in the scorer's environment (found without importing torch)."""
    try:
        done = subprocess.run([str(scorer.python), "-c", _FIND_PACKAGE], capture_output=True, text=True,
                              timeout=120, env=scorer_environ(scorer), check=False)
    except OSError as exc:
        raise AccuracyError(f"cannot run VBench's interpreter {scorer.python}: {exc}", hint=_ENV_HINT) from None
    if done.returncode != 0 or not done.stdout.strip():
        raise AccuracyError(f"{scorer.python} has no vbench package ({(done.stderr.strip().splitlines() or [''])[-1]})",
                            hint=_ENV_HINT)
    return Path(done.stdout.strip().splitlines()[-1])


def prompt_suite(prompts: Sequence[str], suite: Sequence[dict[str, Any]], dimensions: Sequence[str], *,
                 random_networks: bool) -> list[dict[str, Any]]:
    """The suite VBench reads for `prompts`: every entry of VBench's `suite` whose prompt is one of them, in the
    suite's order; a prompt it lacks is refused, unless the networks are random (module docstring)."""
    wanted = set(prompts)
    kept = [dict(entry) for entry in suite if entry.get("prompt_en") in wanted]
    missing = [p for p in dict.fromkeys(prompts) if p not in {e["prompt_en"] for e in kept}]
    if missing and not random_networks:
        raise AccuracyError(f"{len(missing)} prompt(s) are not in VBench's prompt suite ({SUITE_FILE}), first "
                            f"{missing[0]!r}: VBench scores the prompts it knows",
                            hint="score videos of the reference's prompts (get dataset wan-2.2-t2v-a14b)")
    for prompt in missing:
        words = prompt.split()
        kept.append({"prompt_en": prompt, "dimension": list(dimensions),
                     "auxiliary_info": {"scene": {"scene": {"scene": words[0] if words else prompt}},
                                        "appearance_style": {"appearance_style": prompt}}})
    return kept


def scorer_environ(scorer: ExternalScorer) -> dict[str, str]:
    """The scorer process's environment: this one's, the networks' folder named as VBench and torch hub read it,
    the Hub offline, and the scorer's own additions."""
    env = dict(os.environ)
    models = str(scorer.models)
    env.update(VBENCH_CACHE_DIR=models, TORCH_HOME=str(Path(models) / TORCH_HOME), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1",
               # VBench 0.1.5's loaders pass no weights_only to torch.load, and torch 2.6 on makes it True by
               # default, which refuses Tag2Text's and AMT's plain pickles; the files are checksummed
               # (check_folder) before they are loaded. torch 2.5.1, the pinned one, ignores it
               TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    if scorer.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in scorer.pythonpath),
                                             *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.update(dict(scorer.env))
    return env


def command(scorer: ExternalScorer, package: Path, job: VBenchJob, suite: Path) -> list[str]:
    """The scorer's command line: VBench's launch/evaluate.py under torch.distributed.run on GPUs, as the reference
    runs it; on the CPU, CPU_ENTRY."""
    if scorer.gpus == 0:
        return [str(scorer.python), "-c", CPU_ENTRY, str(suite), str(job.videos), str(job.output), *job.dimensions]
    return [str(scorer.python), "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={scorer.gpus}",
            str(package / ENTRY), f"--videos_path={job.videos}", f"--output_path={job.output}",
            f"--full_json_dir={suite}", "--load_ckpt_from_local=True", "--dimension", *job.dimensions]


def run_vbench(scorer: ExternalScorer, job: VBenchJob, *, log: logging.Logger | None = None) -> VBenchResult:
    """Score `job` with VBench in the scorer's environment; VBench's output goes to `<output>/vbench.log`."""
    log = log or _log
    networks = check_folder(scorer.models)
    if networks.is_random:
        log.warning("VBench's networks in %s are RANDOM weights (get-vbench-networks _tiny): the vbench_score of "
                    "this run is meaningless", scorer.models)
    package = vbench_package(scorer)
    suite = json.loads((package / SUITE_FILE).read_text(encoding="utf-8"))
    output = Path(job.output)
    if output.exists():
        shutil.rmtree(output)
    output.mkdir(parents=True)
    suite_path = output / "prompt_suite.json"
    entries = prompt_suite(job.prompts, suite, job.dimensions, random_networks=networks.is_random)
    suite_path.write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
    argv = command(scorer, package, replace(job, output=output), suite_path)
    log.info("VBench on %d video(s) of %s, %s: %s", len(job.prompts), job.videos,
             f"{scorer.gpus} GPU(s)" if scorer.gpus else "the CPU", " ".join(argv[:6]))
    started = datetime.now()
    with open(output / LOG_FILE, "w", encoding="utf-8") as out:
        code = subprocess.run(argv, cwd=scorer.models, env=scorer_environ(scorer), stdout=out,
                              stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        tail = (output / LOG_FILE).read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
        raise AccuracyError(f"VBench exited with {code} after {(datetime.now() - started).seconds} s: "
                            f"{tail[0] if tail else 'no output'}", hint=f"its log is {output / LOG_FILE}")
    result = score_folder(output, job.dimensions)
    return replace(result, random_networks=networks.is_random)


_ENV_HINT = ("build VBench's environment with `cmx run \"get vbench-env\"` (recipes/get-vbench-env: vbench 0.1.5, "
             "torch, transformers 4.33.2, numpy<2) and give its interpreter as the scorer's python")
