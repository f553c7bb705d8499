#!/usr/bin/env python3
"""Whole-process speed of cmx on a synthetic registry of 1,000 recipes.

    .venv/bin/python bench/plan_speed.py            # table, 15 runs per figure
    .venv/bin/python bench/plan_speed.py --runs 31  # more runs
    .venv/bin/python bench/plan_speed.py --json     # figures as JSON on stdout
    .venv/bin/python bench/plan_speed.py --cm /tmp/cm-bench/bin/cm  # and side by side with CM (bench/setup-cm.sh)

It builds a throw-away cmx home in a temp folder (registry.yaml, 1,000 recipes, cache/,
runs/), checks that the 15-step query really plans as a 15-deep chain and that its second
run is served from the cache, then times whole processes (the `cmx` console script, as a
user starts it) and prints the median of each against its budget and against the floor,
`python -c pass` on the same interpreter.

A benchmark, not a test: it never fails on a timing. It exits 0 whether or not a figure is
over budget (OVER is printed), and non-zero only when cmx itself fails or the synthetic
registry does not plan as intended.

With --cm (a `cm` that bench/setup-cm.sh set up), it also times MLCommons CM's cached
`cm run script --tags=get,python3 --quiet` in the same rounds as cmx's cached runs (a one-step
detection in this checkout's own registry, and the 15-deep synthetic chain) and prints cmx/CM
(side_by_side.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import side_by_side  # bench/ is sys.path[0] when this file runs as a script

CHAIN = 15  # synth-l00 -> synth-l01 -> ... -> synth-l14
HELPERS = 5  # synth-h0 .. synth-h4: leaves shared by several chain levels (diamonds)
FIND_TAG = "dataset"
CHAIN_QUERY = "synth chain lvl-00 _fast _cuda"

# budgets for whole processes, medians, in seconds (see docs and the brief of this script)
BUDGETS = {
    "help": 0.05,
    "find": 0.07,
    "plan-cold": 0.5,
    "plan-warm": 0.15,
    "run-cached": 0.2,
}
REFERENCE = ("MLCFlow cached trivial run ~4.8 s, CM cached 20-script llama2 chain ~1.4 s "
             "(measured on this kind of machine)")


# --------------------------------------------------------------------------------------------
# the synthetic registry
# --------------------------------------------------------------------------------------------

def q(value: object) -> str:
    """A YAML scalar: JSON strings are valid double-quoted YAML scalars."""
    return json.dumps(value)


RUN_PY_CHAIN = '''\
"""Synthetic chain step: adds its samples to the value of the next level."""


def run(ctx):
    value = int(ctx.inputs["samples"])
    for name in ctx.deps:
        value += int(ctx.deps[name].outputs.get("value", 0))
    return {"value": value, "label": str(ctx.inputs["label"]), "device": str(ctx.context.get("device", "none"))}
'''

RUN_PY_HELPER = '''\
"""Synthetic helper: a leaf that several chain levels share."""


def run(ctx):
    return {"value": int(ctx.inputs["n"]), "tool": str(ctx.inputs["tool"])}
'''


CHAIN_WHEN = 'samples > 0 and mode != "debug"'
HELPER_WHEN = 'device != "rocm" or precision == "fp16"'


def chain_recipe(level: int, templates: bool) -> str:
    name = f"synth-l{level:02d}"
    lines = [
        f"name: {name}",
        f"summary: Synthetic benchmark chain, level {level} of {CHAIN} (depends on level {level + 1})"
        if level < CHAIN - 1 else f"summary: Synthetic benchmark chain, level {level} of {CHAIN} (the bottom)",
        f"tags: [synth, chain, lvl-{level:02d}, bench, mlperf, inference]",
        "context: [device, precision]",
        "inputs:",
        "  samples: {type: int, default: 1024, help: number of samples to process}",
        "  scale: {type: float, default: 1.0, help: scale factor}",
        f"  label: {{type: str, default: {q(f'l{level:02d}')}, help: a label passed down the chain}}",
        "  mode: {type: choice, choices: [full, quick, debug], default: full, help: how thorough}",
        "  verbose: {type: bool, default: false}",
        f"  url: {{type: url, default: {q(f'https://example.org/synth/{name}.tar.gz')}}}",
        "variations:",
        "  speed:",
        "    full: {default: true}",
        "    fast: {inputs: {samples: 8, mode: quick}, summary: a few samples only}",
        "    medium: {inputs: {samples: 128}}",
        "  device:",
        "    cpu: {default: true, context: {device: cpu}}",
        "    cuda: {context: {device: cuda}, docker: {apt: [cuda-toolkit]}}",
        "    rocm: {context: {device: rocm}, docker: {apt: [rocm-dev]}}",
    ]
    if level % 2 == 0:  # a third group on every other level
        lines += [
            "  precision:",
            "    fp32: {default: true, context: {precision: fp32}}",
            "    fp16: {context: {precision: fp16}}",
            "    int8: {context: {precision: int8}, inputs: {scale: 0.5}}",
        ]
    lines.append("deps:")
    if level < CHAIN - 1:
        label = (q(f"{{{{ inputs.label }}}}-to-l{level + 1:02d}") if templates
                 else q(f"l{level:02d}-to-l{level + 1:02d}"))
        lines += [
            f"  - tags: synth chain lvl-{level + 1:02d}",
            f"    with: {{samples: {q('{{ inputs.samples }}')}, label: {label}, verbose: false}}",
            f"    when: {q(CHAIN_WHEN)}",
            "    as: next",
        ]
    helper = level % HELPERS
    lines += [
        f"  - tags: synth helper h{helper}" + (" _quick" if level % 2 else ""),
        f"    when: {q(HELPER_WHEN)}",
        "    as: helper",
    ]
    lines += [
        "cache: true",
        "outputs:",
        "  value: {type: int, help: sum of samples down the chain}",
        "  label: {type: str}",
        "  device: {type: str}",
        "docker:",
        "  pip: [numpy]",
    ]
    return "\n".join(lines) + "\n"


def helper_recipe(index: int) -> str:
    return "\n".join([
        f"name: synth-h{index}",
        f"summary: Synthetic helper {index}, shared by several levels of the chain",
        f"tags: [synth, helper, h{index}, tools]",
        "context: [device]",
        "inputs:",
        "  n: {type: int, default: 4}",
        f"  tool: {{type: str, default: {q(f'tool-{index}')}}}",
        "variations:",
        "  kind:",
        "    std: {default: true}",
        "    quick: {inputs: {n: 1}, summary: the quick variant}",
        "    thorough: {inputs: {n: 16}}",
        "  arch:",
        "    x86: {default: true}",
        "    arm: {inputs: {tool: arm-tool}}",
        "cache: true",
        "outputs:",
        "  value: {type: int}",
        "  tool: {type: str}",
    ]) + "\n"


DATASETS = ["openorca", "imagenet", "squad", "cnndm", "coco", "librispeech", "kits19", "criteo", "mmlu",
            "gsm8k", "openimages", "igbh", "cognata", "waymo", "nuscenes", "mlperf-sd", "laion", "pile", "c4",
            "wikitext", "longbench", "ruler", "humaneval", "mbpp", "arc", "hellaswag", "truthfulqa", "dolly"]
MODELS = ["llama2-70b", "llama2-7b", "llama3-8b", "llama3-405b", "mixtral-8x7b", "gptj-6b", "bert-large",
          "resnet50", "retinanet", "3d-unet", "dlrm-v2", "sdxl", "rnnt", "deepseek-r1", "whisper-large",
          "pointpainting", "rgat", "mobilenet", "efficientnet", "t5-base", "opt-1.3b", "falcon-7b",
          "mistral-7b", "qwen2-7b", "gemma-7b", "phi-3-mini", "stable-diffusion-v1.5", "vit-base"]
PACKAGES = ["numpy", "pandas", "torch", "torchvision", "transformers", "tokenizers", "datasets", "accelerate",
            "onnx", "onnxruntime", "scipy", "nltk", "rouge-score", "evaluate", "pycocotools", "opencv-python",
            "pillow", "tqdm", "protobuf", "sentencepiece", "absl-py", "pybind11", "cmake", "ninja", "vllm",
            "triton", "safetensors", "huggingface-hub", "mlcommons-loadgen", "psutil", "pydantic", "requests"]
SYSTEM = ["cpu", "gpu", "os", "rocm", "cuda", "cudnn", "tensorrt", "nvidia-driver", "amdgpu-driver", "numa",
          "memory", "disk", "docker", "python", "compiler", "gcc", "llvm", "mpi", "rccl", "nccl"]
UTILS = ["git", "wget", "curl", "cmake", "ninja", "unzip", "zstd", "pigz", "rsync", "jq", "numactl", "sox",
         "libsndfile", "ffmpeg", "openssl", "gflags", "glog", "libjpeg", "libpng", "hwloc"]
IMPLS = ["reference", "nvidia", "amd", "intel", "qualcomm", "redhat", "mlcommons-python", "mlcommons-cpp"]
EXTRA_TAGS = ["cpu", "cuda", "rocm", "fp16", "bf16", "int8", "llm", "vision", "nlp", "speech",
              "recommendation", "loadgen", "submission", "reference", "nvidia", "amd", "intel", "onnx",
              "pytorch", "tensorflow", "vllm", "tensorrt", "offline", "server", "preprocess", "accuracy",
              "performance", "compliance", "docker", "native", "prebuilt", "src", "tiny", "full", "v4.1",
              "v5.0", "v5.1", "edge", "datacenter", "calibration", "quantization"]

FAMILIES: list[tuple[str, list[str], list[str]]] = [
    ("get-dataset", ["get", "dataset"], DATASETS),
    ("get-preprocessed-dataset", ["get", "dataset", "preprocessed"], DATASETS),
    ("get-ml-model", ["get", "ml-model", "model"], MODELS),
    ("get-python-package", ["get", "python-package", "pip"], PACKAGES),
    ("detect", ["detect", "system"], SYSTEM),
    ("get-sys-util", ["get", "sys-util", "generic"], UTILS),
    ("install", ["install", "build"], UTILS + PACKAGES),
    ("app-mlperf-inference", ["app", "mlperf", "inference"], MODELS),
    ("benchmark-program", ["benchmark", "program"], MODELS),
    ("run-mlperf-inference-accuracy", ["run", "mlperf", "accuracy"], MODELS),
]

# variation groups a noise recipe may have: (group, [(option, needs input, sets input value, sets context)])
GROUPS: list[tuple[str, list[tuple[str, str | None, object, dict]]]] = [
    ("device", [("cpu", None, None, {"device": "cpu"}), ("cuda", None, None, {"device": "cuda"}),
                ("rocm", None, None, {"device": "rocm"}), ("tpu", None, None, {"device": "tpu"})]),
    ("precision", [("fp32", None, None, {"precision": "fp32"}), ("fp16", None, None, {"precision": "fp16"}),
                   ("bf16", None, None, {"precision": "bf16"}), ("int8", "scale", 0.5, {"precision": "int8"})]),
    ("size", [("full", None, None, {}), ("tiny", "samples", 16, {}), ("small", "samples", 256, {}),
              ("medium", "samples", 4096, {})]),
    ("version", [("latest", None, None, {}), ("pinned", "version", "1.2.3", {}),
                 ("nightly", "version", "nightly", {})]),
    ("backend", [("pytorch", None, None, {"backend": "pytorch"}),
                 ("onnxruntime", None, None, {"backend": "onnxruntime"}),
                 ("tensorflow", None, None, {"backend": "tensorflow"}),
                 ("vllm-backend", None, None, {"backend": "vllm"})]),
    ("source", [("prebuilt", None, None, {}), ("from-src", "branch", "main", {}), ("wheel", "branch", "release", {})]),
]

NOISE_INPUTS: dict[str, tuple[str, object]] = {  # name -> (type, default)
    "samples": ("int", 24576),
    "scale": ("float", 1.0),
    "version": ("str", "latest"),
    "branch": ("str", "main"),
    "url": ("url", None),  # default filled per recipe
    "sha256": ("str", None),
    "threads": ("int", 8),
    "verbose": ("bool", False),
    "target_qps": ("float", 100.0),
    "scenario": ("choice", "Offline"),
    "install_dir": ("path", "/opt/synth"),
    "batch_size": ("int", 1),
}


@dataclass
class Noise:
    name: str
    tags: list[str]
    inputs: dict[str, tuple[str, object]] = field(default_factory=dict)


def noise_recipes(count: int, rng: random.Random) -> list[tuple[Noise, str, str | None]]:
    """(recipe, recipe.yaml text, run.py text or None) for `count` realistic noise recipes."""
    made: list[Noise] = []
    out: list[tuple[Noise, str, str | None]] = []
    names: set[str] = set()
    for i in range(count):
        prefix, fam_tags, items = FAMILIES[i % len(FAMILIES)]
        item = items[(i // len(FAMILIES)) % len(items)]
        name = f"{prefix}-{item}".replace(".", "-")
        n = 2
        while name in names:
            name = f"{prefix}-{item}-v{n}".replace(".", "-")
            n += 1
        names.add(name)
        extra = rng.sample(EXTRA_TAGS, rng.randint(1, 3))
        tags = list(dict.fromkeys([*fam_tags, *item.replace(".", "-").split("-")[:1], item.replace(".", "-"),
                                   *extra]))
        # inputs: the ones the chosen variation groups need, plus a few more
        groups = rng.sample(GROUPS, rng.randint(2, 3))
        wanted = {opt[1] for _, opts in groups for opt in opts if opt[1]}
        wanted |= set(rng.sample(sorted(NOISE_INPUTS), rng.randint(2, 4)))
        if prefix in ("get-dataset", "get-ml-model"):
            wanted |= {"url", "sha256"}
        rec = Noise(name, tags)
        for key in sorted(wanted):
            typ, default = NOISE_INPUTS[key]
            if key == "url":
                default = f"https://example.org/{name}/{item}.tar.gz"
            elif key == "sha256":
                default = f"{rng.getrandbits(256):064x}"
            rec.inputs[key] = (typ, default)
        ctx_keys = sorted({k for _, opts in groups for opt in opts for k in opt[3]}
                          & {"device", "precision", "backend"})
        ctx_keys = [k for k in ctx_keys if rng.random() < 0.7]
        summary = f"{prefix.replace('-', ' ')} {item} (synthetic noise recipe {i})"
        lines = [f"name: {name}",
                 f"summary: {q(summary)}",
                 f"tags: [{', '.join(tags)}]"]
        if ctx_keys:
            lines.append(f"context: [{', '.join(ctx_keys)}]")
        lines.append("inputs:")
        for key, (typ, default) in rec.inputs.items():
            if typ == "choice":
                lines.append(f"  {key}: {{type: choice, choices: [Offline, Server, SingleStream], "
                             f"default: {default}, help: LoadGen scenario}}")
            else:
                lines.append(f"  {key}: {{type: {typ}, default: {q(default)}, help: {q(key.replace('_', ' '))}}}")
        lines.append("variations:")
        for group, options in groups:
            lines.append(f"  {group}:")
            k = rng.randint(3, len(options))  # a default and 2-3 more
            for j, (opt, need, value, ctx) in enumerate(options[:k]):
                parts = []
                if j == 0:
                    parts.append("default: true")
                if need:
                    parts.append(f"inputs: {{{need}: {q(value)}}}")
                if ctx:
                    parts.append("context: {" + ", ".join(f"{a}: {b}" for a, b in ctx.items()) + "}")
                if j == 1 and rng.random() < 0.3:
                    parts.append(f"summary: {q(f'{opt} build of {item}')}")
                lines.append(f"    {opt}: {{{', '.join(parts)}}}")
        if rng.random() < 0.15:
            lines += ["flags:", "  debug-log: {inputs: {verbose: true}}" if "verbose" in rec.inputs
                      else "  debug-log: {summary: more logging}"]
        # deps on recipes made before (so that the noise is a DAG too), by tags that pick one
        deps = []
        for target in rng.sample(made, min(len(made), rng.randint(0, 3))):
            dep = [f"  - tags: {target.tags[0]} {target.name}"]
            passable = [(k, v) for k, v in target.inputs.items() if v[0] in ("int", "str", "bool")]
            if passable and rng.random() < 0.6:
                passed, (_, value) = rng.choice(passable)
                dep.append(f"    with: {{{passed}: {q(value)}}}")
            if ctx_keys and rng.random() < 0.4:
                dep.append(f"    when: {q(ctx_keys[0] + ' != ' + q('none'))}")
            elif "verbose" in rec.inputs and rng.random() < 0.3:
                dep.append("    when: not verbose")
            deps.extend(dep)
        if deps:
            lines.append("deps:")
            lines.extend(deps)
        kind = rng.random()
        run_py = None
        if kind < 0.8:
            run_py = ("def run(ctx):\n    return {" +
                      f"{q('value')}: 1, {q('name')}: {q(name)}" + "}\n")
            if "url" in rec.inputs and "sha256" in rec.inputs and rng.random() < 0.5:
                lines.append("cache: {key: [inputs.url, inputs.sha256]}")
            elif kind < 0.7:
                lines.append("cache: true")
            lines += ["outputs:", "  value: {type: int}", "  name: {type: str, help: the recipe that made it}"]
        if rng.random() < 0.3:
            lines += ["docker:", f"  apt: [{rng.choice(UTILS)}]", f"  pip: [{q(rng.choice(PACKAGES) + '>=1')}]"]
        made.append(rec)
        out.append((rec, "\n".join(lines) + "\n", run_py))
    return out


def make_home(root: Path, total: int, seed: int, templates: bool) -> None:
    recipes = root / "recipes"
    recipes.mkdir(parents=True)
    (root / "registry.yaml").write_text("sources:\n  - name: synth\n    path: recipes\n", encoding="utf-8")

    def write(name: str, yaml_text: str, run_py: str | None) -> None:
        folder = recipes / name
        folder.mkdir()
        (folder / "recipe.yaml").write_text(yaml_text, encoding="utf-8")
        if run_py is not None:
            (folder / "run.py").write_text(run_py, encoding="utf-8")

    for level in range(CHAIN):
        write(f"synth-l{level:02d}", chain_recipe(level, templates), RUN_PY_CHAIN)
    for index in range(HELPERS):
        write(f"synth-h{index}", helper_recipe(index), RUN_PY_HELPER)
    for rec, text, run_py in noise_recipes(total - CHAIN - HELPERS, random.Random(seed)):
        write(rec.name, text, run_py)


# --------------------------------------------------------------------------------------------
# running and timing
# --------------------------------------------------------------------------------------------

def find_cmx() -> Path:
    """The console script next to the interpreter running this bench (as a user starts it)."""
    for candidate in (Path(sys.prefix) / "bin" / "cmx", Path(sys.executable).parent / "cmx"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("cmx")
    if found:
        return Path(found)
    sys.exit("bench: no `cmx` console script found next to this interpreter or on PATH; "
             "install cmx (`make` or `pip install -e .`) and run this with that interpreter")


def script_python(script: Path) -> str:
    """The interpreter in the console script's #! line (the floor must use the same one)."""
    try:
        first = script.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return sys.executable
    if first.startswith("#!"):
        exe = first[2:].strip().split()[0]
        if os.path.isfile(exe):
            return exe
    return sys.executable


def cmx_revision(python: str, env: dict[str, str], cwd: Path) -> str:
    """cmx's version, and the git commit of its checkout when it is one (+dirty when edited)."""
    try:
        # cwd: a folder with no cmx/ in it (`python -c` puts the working folder first on sys.path, the console
        # script does not), so this names the cmx the timed processes import
        found = subprocess.run([python, "-c", "import cmx, os; print(cmx.__version__); "
                                "print(os.path.dirname(os.path.dirname(cmx.__file__)))"],
                               env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
        version, root = found.stdout.split("\n")[:2]
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
        if rev:
            dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "cmx"], capture_output=True,
                                   text=True, timeout=30).stdout.strip()
            return f"{version}, commit {rev}{'+dirty' if dirty else ''}"
        return version
    except (OSError, ValueError, subprocess.SubprocessError):
        return "version unknown"


@dataclass
class Bench:
    home: Path
    cmx: Path
    python: str
    env: dict[str, str]
    quiet: bool

    def call(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(argv, env=self.env, cwd=self.home, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise BenchError(f"`{' '.join(argv)}` exited with status {proc.returncode}\n"
                             f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
        return proc

    def cmx_json(self, *args: str) -> object:
        proc = self.call([str(self.cmx), *args, "--json"], check=False)
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise BenchError(f"`cmx {' '.join(args)} --json` exited {proc.returncode} without JSON\n"
                             f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}") from None

    def time(self, argv: list[str], runs: int,
             before: Callable[[], None] | None = None) -> tuple[list[float], list[float]]:
        """Wall-clock seconds of `runs` whole processes, and the CPU seconds (user + system) of each."""
        walls, cpus = [], []
        for i in range(runs + 1):  # the first is a warm-up: OS caches, .pyc files
            if before:
                before()
            try:
                elapsed, cpu = side_by_side.timed(argv, self.env, self.home)
            except side_by_side.SetupError as exc:
                raise BenchError(str(exc)) from None
            if i:
                walls.append(elapsed)
                cpus.append(cpu)
        return walls, cpus

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def longest_chain(steps: list[dict], root: str) -> list[str]:
    """The longest path of step ids from the root down the deps (the plan is a DAG)."""
    deps = {s["id"]: s["deps"] for s in steps}
    best: dict[str, list[str]] = {}

    def walk(sid: str) -> list[str]:
        if sid not in best:
            below = [walk(d) for d in deps.get(sid, [])]
            best[sid] = [sid, *max(below, key=len, default=[])]
        return best[sid]

    sys.setrecursionlimit(max(1000, 4 * len(steps) + 100))
    return walk(root)


def sanity(b: Bench) -> dict:
    """Check the synthetic registry plans and caches as intended; return the facts."""
    facts: dict = {}
    plan = b.cmx_json("plan", CHAIN_QUERY)
    if not isinstance(plan, dict) or "steps" not in plan:
        raise BenchError(f"`cmx plan {CHAIN_QUERY!r} --json` did not give a plan: {json.dumps(plan)[:2000]}")
    steps = plan["steps"]
    chain = longest_chain(steps, plan["root"])
    shared = sum(1 for s in steps if sum(s["id"] in t["deps"] for t in steps) > 1)
    by_id = {s["id"]: s for s in steps}
    facts["plan_steps"] = len(steps)
    facts["plan_longest_chain"] = len(chain)
    facts["plan_chain"] = [by_id[s]["recipe"] for s in chain]
    facts["plan_shared_steps"] = shared
    facts["plan_edges"] = sum(len(s["deps"]) for s in steps)
    if len(chain) < CHAIN:
        raise BenchError(f"the plan of {CHAIN_QUERY!r} has a longest chain of {len(chain)} steps, "
                         f"not {CHAIN}: {' -> '.join(chain)}")
    b.say(f"plan {CHAIN_QUERY!r}: {len(steps)} steps, {facts['plan_edges']} edges, "
          f"{shared} steps shared by several parents (diamonds)")
    b.say(f"  longest chain: {len(chain)} steps: {' -> '.join(facts['plan_chain'])}")

    first = b.cmx_json("run", CHAIN_QUERY)
    if not isinstance(first, dict) or not first.get("ok"):
        raise BenchError(f"the first run of {CHAIN_QUERY!r} failed: {json.dumps(first)[:3000]}")
    first_counts = _counts(first["steps"])
    b.say(f"first run (fills the cache): {_show_counts(first_counts)}, {first['seconds']:.2f}s inside cmx")
    second = b.cmx_json("run", CHAIN_QUERY)
    if not isinstance(second, dict) or not second.get("ok"):
        raise BenchError(f"the second run of {CHAIN_QUERY!r} failed: {json.dumps(second)[:3000]}")
    counts = _counts(second["steps"])
    root_status = second["steps"].get(second["root"], {}).get("status")
    facts["first_run_statuses"] = first_counts
    facts["cached_run_statuses"] = counts
    facts["cached_run_root_status"] = root_status
    facts["cached_run_outputs"] = second.get("outputs")
    executed = {k: v for k, v in counts.items() if k not in ("cached", "not-needed")}
    if executed or root_status != "cached":
        raise BenchError(f"the second run of {CHAIN_QUERY!r} is not fully cached: {_show_counts(counts)}, "
                         f"root {root_status}")
    all_cached = counts.get("cached", 0) == len(second["steps"])
    facts["cached_run_all_steps_cached"] = all_cached
    note = ("every step reported cached" if all_cached else
            "nothing ran; steps below a cached step are reported 'not-needed' (not looked up: "
            "the runner stops its walk at the first cached step)")
    b.say(f"second run: {_show_counts(counts)} of {len(second['steps'])} steps, root {root_status}; {note}; "
          f"outputs {json.dumps(second.get('outputs'))}")
    return facts


def _counts(steps: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in steps.values():
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    return dict(sorted(counts.items()))


def _show_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no steps"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="timed runs per figure (median reported; default 15)")
    ap.add_argument("--recipes", type=int, default=1000, help="recipes in the synthetic registry (default 1000)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the noise recipes")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    ap.add_argument("--keep", action="store_true", help="keep the temp cmx home (its path is printed)")
    ap.add_argument("--no-pyc", action="store_true",
                    help="time with PYTHONDONTWRITEBYTECODE=1 (cmx compiled from source by every process); "
                         "by default bytecode is cached under the temp folder, as for a user")
    ap.add_argument("--templates", action="store_true",
                    help="chain deps pass a real jinja2 template in `with:` (resolve then imports jinja2)")
    ap.add_argument("--cm", type=Path, metavar="PATH/TO/cm",
                    help="also time CM's cached `cm run script --tags=get,python3 --quiet` side by side with "
                         "cmx's cached runs (set it up with bench/setup-cm.sh)")
    ap.add_argument("--cm-repos", metavar="DIR",
                    help="CM's home for --cm (default: $CM_REPOS, else cm-repos/ beside the cm virtualenv)")
    ap.add_argument("--mlc", type=Path, metavar="PATH/TO/mlc",
                    help="also time MLCFlow's cached `mlc run script --tags=get,python3 --quiet` (its scripts "
                         "come from GitHub: see bench/README.md)")
    ap.add_argument("--mlc-repos", metavar="DIR",
                    help="MLCFlow's home for --mlc (default: $MLC_REPOS, else mlc-repos/ beside the mlc virtualenv)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.recipes < CHAIN + HELPERS:
        ap.error(f"--runs must be >= 1 and --recipes >= {CHAIN + HELPERS}")
    tools = []
    for tool, exe, given in ((side_by_side.CM, args.cm, args.cm_repos), (side_by_side.MLC, args.mlc, args.mlc_repos)):
        if exe is None:
            continue
        if not os.access(exe, os.X_OK):
            ap.error(f"{exe}: not an executable" + ("; bench/setup-cm.sh makes one (/tmp/cm-bench/bin/cm)"
                                                  if tool is side_by_side.CM else ""))
        try:
            tools.append((tool, exe, side_by_side.home_of(tool, exe, given)))
        except side_by_side.SetupError as exc:
            ap.error(str(exc))

    cmx = find_cmx()
    python = script_python(cmx)
    tmp = Path(tempfile.mkdtemp(prefix="cmx-bench-"))
    home = tmp / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMX_")}
    env.update(CMX_HOME=str(home), CMX_CACHE=str(home / "cache"), CMX_RUNS=str(home / "runs"))
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    if args.no_pyc:  # every process compiles cmx (an editable install has no .pyc) from source
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:  # as users see it: bytecode cached (in the temp folder, so the checkout stays clean)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    b = Bench(home, cmx, python, env, quiet=args.json)
    try:
        started = time.perf_counter()
        make_home(home, args.recipes, args.seed, args.templates)
        b.say(f"synthetic cmx home: {home} ({args.recipes} recipes, made in {time.perf_counter() - started:.2f}s)")
        b.say(f"cmx: {cmx} ({cmx_revision(python, env, tmp)})  python: {python} ({platform.python_version()})")
        b.say("bytecode: " + ("not written (PYTHONDONTWRITEBYTECODE=1): cmx is compiled from source every time"
                              if args.no_pyc else f"cached under {env['PYTHONPYCACHEPREFIX']}"))
        facts = sanity(b)
        found = b.call([str(cmx), "find", FIND_TAG, "--json"])
        facts["find_matches"] = len(json.loads(found.stdout))
        b.say(f"`cmx find {FIND_TAG}` matches {facts['find_matches']} recipes")
        load_before = os.getloadavg()[0]
        results = measure(b, args.runs)
        load_after = os.getloadavg()[0]
        cached_imports = imports(b, [str(cmx), "run", CHAIN_QUERY, "--progress", "none"])
        side = None
        if tools:
            chain = side_by_side.Command(f"cmx run <{CHAIN}-deep> (all cached, synthetic)",
                                         (str(cmx), "run", CHAIN_QUERY, "--progress", "none"), env, home)
            side = side_by_side.compare(str(cmx), python, Path(__file__).resolve().parents[1], tmp, env, chain,
                                        tools, args.runs, b.say)
            side["load_1min_after"] = os.getloadavg()[0]
    except (BenchError, side_by_side.SetupError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        print(f"bench: the synthetic home is kept at {home}", file=sys.stderr)
        return 2
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    floor = results[0]["median_s"]
    for r in results:
        r["ratio_floor"] = r["median_s"] / floor if floor else None
        budget = r["budget_s"]
        r["ratio_budget"] = r["median_s"] / budget if budget else None
        r["verdict"] = None if budget is None else ("PASS" if r["median_s"] <= budget else "OVER")
    if args.json:
        print(json.dumps({
            "recipes": args.recipes, "runs": args.runs, "query": CHAIN_QUERY, "find_tag": FIND_TAG,
            "cmx": str(cmx), "python": python, "python_version": platform.python_version(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                        "load_1min_before": load_before, "load_1min_after": load_after},
            "sanity": facts, "measurements": results, "reference_not_measured": REFERENCE,
            "cached_run_imports": cached_imports,
            "side_by_side": side,
            "home": str(home) if args.keep else None,
        }, indent=2))
        return 0
    print()
    print(f"whole processes, median of {args.runs} runs (after one warm-up each); "
          f"{args.recipes} recipes; {os.cpu_count()} CPUs; Python {platform.python_version()}")
    print(table(results))
    busy = max(load_before, load_after) > 0.5 * (os.cpu_count() or 1)
    print(f"load average (1 min) {load_before:.2f} before, {load_after:.2f} after timing"
          + (" -- BUSY MACHINE: other processes compete for the CPUs; wall figures are inflated" if busy else ""))
    print("(median s: the figure judged against the budget, wall clock of the whole process; "
          "cpu s: median user+system CPU of the process, steadier on a busy machine)")
    heaviest = ", ".join(f"{h['module']} {h['cumulative_ms']:.0f} ms" for h in cached_imports["heaviest"])
    print(f"the cached run imports {cached_imports['modules']} modules ({cached_imports['cmx_modules']} of cmx), "
          f"{cached_imports['self_ms']:.0f} ms of import time in all (under -X importtime, which slows it); "
          f"heaviest first-level imports: {heaviest}")
    if side:
        print()
        print(f"side by side with {' and '.join(side['tools'])}, median of {args.runs} rounds (every command once "
              f"a round, after one warm-up round); every side served from its cache (checked before and after)")
        print(side_by_side.table(side))
        print(f"load average (1 min) {side['load_1min_after']:.2f} after the side-by-side timing")
    over = [r["name"] for r in results if r["verdict"] == "OVER"]
    print()
    print(f"OVER BUDGET: {', '.join(over)}" if over else "all figures within budget")
    if not side:
        print(f"for reference (not measured here): {REFERENCE}; --cm times CM here (bench/setup-cm.sh)")
    if args.keep:
        print(f"synthetic home kept at {home}")
    return 0


def measure(b: Bench, runs: int) -> list[dict]:
    cmx = str(b.cmx)
    index_dir = b.home / "cache" / ".index"

    def drop_index() -> None:
        shutil.rmtree(index_dir, ignore_errors=True)

    figures = [
        ("python -c pass (floor)", None, [b.python, "-c", "pass"], None),
        ("cmx --help", "help", [cmx, "--help"], None),
        (f"cmx find {FIND_TAG} (warm index)", "find", [cmx, "find", FIND_TAG], None),
        (f"cmx plan <{CHAIN}-deep> (cold index)", "plan-cold", [cmx, "plan", CHAIN_QUERY], drop_index),
        (f"cmx plan <{CHAIN}-deep> (warm index)", "plan-warm", [cmx, "plan", CHAIN_QUERY], None),
        # --registry (the home's own file) takes the full path: click, resolution, the cache look-up; no memo
        (f"cmx run <{CHAIN}-deep> (all cached, resolved)", "run-cached",
         [cmx, "--registry", str(b.home / "registry.yaml"), "run", CHAIN_QUERY, "--progress", "none"], None),
        (f"cmx run <{CHAIN}-deep> (all cached, memo)", "run-cached", [cmx, "run", CHAIN_QUERY, "--progress", "none"],
         None),
    ]
    out = []
    for label, budget_key, argv, before in figures:
        b.say(f"timing {label} ...")
        samples, cpus = b.time(argv, runs, before)
        out.append({
            "name": label, "command": argv, "budget_s": BUDGETS.get(budget_key) if budget_key else None,
            "median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "cpu_median_s": statistics.median(cpus),
            "samples_s": [round(s, 5) for s in samples], "cpu_samples_s": [round(s, 5) for s in cpus],
        })
    return out


def imports(b: Bench, argv: list[str]) -> dict:
    """What one process of `argv` (a cmx command) imports, from `python -X importtime`: the count of modules,
    cmx's among them, and the heaviest first-level imports by cumulative time."""
    proc = b.call([b.python, "-X", "importtime", *argv])
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, self_us, cumulative_us, name = line.replace("import time:", "|", 1).split("|")
        rows.append((name[1:].rstrip(), int(self_us), int(cumulative_us)))  # nested imports are indented
    top = sorted((r for r in rows if not r[0].startswith(" ")), key=lambda r: -r[2])[:8]
    return {"modules": len(rows), "cmx_modules": sum(1 for n, *_ in rows if n.strip().startswith("cmx")),
            "self_ms": round(sum(r[1] for r in rows) / 1000, 1),
            "heaviest": [{"module": n, "cumulative_ms": round(c / 1000, 1)} for n, _, c in top]}


def table(results: list[dict]) -> str:
    head = ("measurement", "median s", "min s", "max s", "cpu s", "budget s", "x budget", "x floor", "verdict")
    rows = []
    for r in results:
        rows.append((
            r["name"], f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['max_s']:.3f}", f"{r['cpu_median_s']:.3f}",
            "-" if r["budget_s"] is None else f"{r['budget_s']:.2f}",
            "-" if r["ratio_budget"] is None else f"{r['ratio_budget']:.2f}",
            f"{r['ratio_floor']:.1f}" if r["ratio_floor"] else "-",
            r["verdict"] or "(floor)",
        ))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
