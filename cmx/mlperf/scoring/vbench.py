"""VBench's score of a folder of videos: its per-dimension results read as VBench writes them and averaged into
`vbench_score` as MLPerf's reference does.

VBench runs in an environment of its own (it pins transformers 4.33.2 and numpy below 2: recipes/get-vbench-env);
cmx runs it there and reads only the JSON it leaves, so this module is standard library only.

What VBench writes (vbench 0.1.5 on PyPI, vbench/__init__.py `VBench.evaluate`, and launch/evaluate.py, which names
the run `results_<%Y-%m-%d-%H:%M:%S>`): one `<name>_eval_results.json` in the output folder, a JSON object mapping
each dimension to the pair its `compute_<dimension>` returned, `[average, [per-video results]]`. Where
VBench runs on several processes (the reference launches it with `torch.distributed.run --nproc_per_node=8`), the
average is recomputed from every process's per-video results: for subject_consistency, dynamic_degree and
motion_smoothness the mean of the per-video `video_results`, for appearance_style the mean of `cur_sim`, for
background_consistency `sum(video_sim) / sum(cnt_per_video)`, for scene `sum(success_frame_count) /
sum(frame_count)` (each dimension's module, `compute_<dimension>`). cmx takes VBench's average as it stands, as the
reference does, and does not redo VBench's arithmetic.

How the reference averages it (mlcommons/inference b66003e, text_to_video/wan-2.2-t2v-a14b/run_evaluation.py):
`main` asks VBench for six dimensions (the `--dimensions` default, `REFERENCE_DIMENSIONS` below); `parse_results`
takes the last of `sorted(glob("results_*_eval_results.json"))` (lines 35 to 40), walks `sorted(results.items())`,
adds each dimension's first element (`value[0]`) when it is a number, and divides the total by the count (lines 59
to 69). It prints that mean,
a fraction, with four decimals. The checker's target for `vbench_score` is 99 % of 70.48
(tools/submission/submission_checker/constants.py), the same mean in percent, so `vbench_score` is 100 times it,
unrounded (the checker compares the number it reads with the target, and a rounded value could cross it).

Where cmx is stricter than `parse_results`: that one skips a dimension whose value is not a number and averages
whatever dimensions the file holds; cmx refuses a file whose dimensions are not exactly the ones asked for, or
whose average is not a finite number, because either would give a score of some other average.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.loadgen.accuracy_log import AccuracyError
from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt, parse_accuracy_txt

# run_evaluation.py's `--dimensions` default, in its order (b66003e, lines 99 to 109)
REFERENCE_DIMENSIONS: tuple[str, ...] = ("subject_consistency", "dynamic_degree", "motion_smoothness",
                                         "appearance_style", "scene", "background_consistency")
RESULTS_GLOB = "results_*_eval_results.json"  # parse_results' glob; launch/evaluate.py's `results_<time>` name
SCORE_KEY = "vbench_score"  # the key the checker's ACC_PATTERN["vbench_score"] reads in accuracy.txt


@dataclass(frozen=True)
class VBenchResult:
    """VBench's average of each dimension (a fraction, as VBench writes it) and their mean in percent."""

    dimensions: dict[str, float]
    vbench_score: float
    source: Path  # the results file read
    random_networks: bool = False  # scored with random-weight networks (get-vbench-networks _tiny): meaningless

    def as_dict(self) -> dict[str, float | int]:
        """accuracy.txt's dict: `vbench_score` first (the one value the checker reads), then each dimension."""
        return {SCORE_KEY: float(self.vbench_score), **{d: float(v) for d, v in self.dimensions.items()}}


def latest_results(folder: Path) -> Path:
    """The results file parse_results reads: the last of the folder's `results_*_eval_results.json` in name order,
    which is the newest, since VBench names each after the time it started."""
    found = sorted(Path(folder).glob(RESULTS_GLOB))
    if not found:
        raise AccuracyError(f"{folder} holds no VBench results ({RESULTS_GLOB})",
                            hint="run VBench with --output_path pointing at this folder; its log says why it stopped")
    return found[-1]


def dimension_scores(results: Mapping[str, object], source: Path | str = "VBench's results") -> dict[str, float]:
    """Each dimension's average from VBench's results object: the first element of its `[average, per-video]`."""
    scores: dict[str, float] = {}
    for dimension, value in results.items():
        if not isinstance(value, list) or not value:
            raise AccuracyError(f"{source}: {dimension} is {type(value).__name__}, not VBench's [average, per-video]",
                                hint="read a file VBench's evaluate wrote (<name>_eval_results.json)")
        average = value[0]
        # a bool is an int to Python, and parse_results would add it; VBench never writes one
        if isinstance(average, bool) or not isinstance(average, (int, float)) or not math.isfinite(average):
            raise AccuracyError(f"{source}: the average of {dimension} is {average!r}, not a finite number",
                                hint="VBench stopped part-way on that dimension; see its log and run it again")
        scores[dimension] = float(average)
    return scores


def aggregate(scores: Mapping[str, float], dimensions: Iterable[str] = REFERENCE_DIMENSIONS,
              source: Path | str = "VBench's results") -> float:
    """`vbench_score`: the mean of the dimensions' averages in percent, added in the reference's order (the
    dimensions sorted by name) and divided by their count, as parse_results does, then times 100."""
    wanted = sorted(set(dimensions))
    if not wanted:
        raise AccuracyError("no VBench dimension to average", hint="ask for the reference's six dimensions")
    missing = [d for d in wanted if d not in scores]
    extra = sorted(set(scores) - set(wanted))
    if missing or extra:
        said = "; ".join(part for part in (f"lacks {', '.join(missing)}" if missing else "",
                                           f"also holds {', '.join(extra)}" if extra else "") if part)
        raise AccuracyError(f"{source} {said}: vbench_score averages exactly {', '.join(wanted)}",
                            hint="run VBench with --dimension and these names only, into an empty output folder")
    total = 0.0
    for dimension in wanted:  # sorted(results.items()): float addition's order is the reference's
        total += scores[dimension]
    return 100 * (total / len(wanted))


def read_results(path: Path, dimensions: Iterable[str] = REFERENCE_DIMENSIONS) -> VBenchResult:
    """One VBench results file, its dimensions checked and averaged."""
    try:
        results = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccuracyError(f"{path} does not exist", hint="run VBench first") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AccuracyError(f"{path} is not JSON: {exc}",
                            hint="VBench did not finish writing it; run it again") from None
    if not isinstance(results, dict):
        raise AccuracyError(f"{path} holds a {type(results).__name__}, not VBench's object of dimensions",
                            hint="read a file VBench's evaluate wrote (<name>_eval_results.json)")
    dimensions = tuple(dimensions)
    scores = dimension_scores(results, path)
    score = aggregate(scores, dimensions, path)
    return VBenchResult({d: scores[d] for d in sorted(scores)}, score, Path(path))


def score_folder(folder: Path, dimensions: Iterable[str] = REFERENCE_DIMENSIONS) -> VBenchResult:
    """VBench's output folder scored as run_evaluation.py scores it: its newest results file, averaged."""
    return read_results(latest_results(folder), dimensions)


def write_accuracy_txt(path: Path, result: VBenchResult, log_sha256: str) -> Path:
    """accuracy.txt for `result`: `'vbench_score': N` on the result line the checker matches, then `hash=` with
    the accuracy log's sha256 (truncate_accuracy_log.py's line)."""
    text = format_accuracy_txt(result, log_sha256)
    # repr writes a score below 1e-4 as 5e-05 and a negative one with its sign, which the checker's `([\d.]+)`
    # reads as another number or not at all (a random-weight scorer can land there): refuse rather than mislead
    if parse_accuracy_txt(text).get(SCORE_KEY) != result.vbench_score:
        raise AccuracyError(f"vbench_score {result.vbench_score!r} cannot be written as the checker reads it "
                            "(digits and a point only)",
                            hint=f"the dimensions' averages in {result.source} are out of VBench's range; see them")
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    return path
