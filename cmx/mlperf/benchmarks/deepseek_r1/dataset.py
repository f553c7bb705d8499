"""The deepseek-r1 eval set: read the MLCommons-processed pickle, check it, and add the reference's prompt ids.

The file is `mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl`, one of the two files of the MLCommons
R2 dataset https://inference.mlcommons-storage.org/metadata/deepseek-r1-datasets-fp8-eval.uri
(README.md, "Preprocessed & Calibration"): a pandas DataFrame, one row per sample, 4388 of them, an
ensemble of AIME, MATH500, GPQA, MMLU-Pro and LiveCodeBench (code_generation_lite). What the
reference reads (mlcommons/inference b66003e, language/deepseek-r1/):

- `text_input`: the prompt text (mlperf/utils.py `prepare_mlperf_dataset`), which the SUT wraps in
  the chat template and tokenizes (prompts.py);
- `gt_output`, or else `ground_truth`: the answer (eval_accuracy.py `process_mlperf_log_accuracy`);
  for LiveCodeBench rows it is the problem's `question_id`, whose tests the scorer looks up;
- `dataset`, or else `metric` with `_em` and `_` removed: the sub-dataset, which picks the scorer
  (the first of gpqa, mmlu_pro, math500, aime, livecodebench that is a substring of its lower case).

`with_prompt_ids` writes a copy with `tok_input` and `tok_input_len` made by the model's own chat
template (what the reference SUT computes at start-up); `load_deepseek` reads such a copy. Other
columns are kept and ignored. A pickle can run code when read: load only a file whose checksum was
checked (the get-dataset-deepseek-r1 recipe checks the md5 MLCommons lists) or one you made.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.frames import (
    check_lengths,
    require_columns,
    texts,
    token_arrays,
    write_frame,
)
from cmx.mlperf.benchmarks.kit.frames import (
    read_frame as read_any_frame,
)
from cmx.mlperf.benchmarks.kit.outputs import model_outputs
from cmx.mlperf.benchmarks.kit.samples import TokenSamples

if TYPE_CHECKING:
    import pandas as pd

    from cmx.execute.context import StepContext

SAMPLES = 4388  # constants.py dataset-size and performance-sample-count; mlperf.conf; README.md Reference Evals
FACTS = DatasetFacts(SAMPLES, what="deepseek-r1-format")  # what the dataset step fetches and checks
FILENAME = "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"  # README.md, Preprocessed & Calibration
# eval_accuracy.py DATASET_EVALUATORS, in its order: a row's dataset name picks the first key it contains
SUBSETS = ("gpqa", "mmlu_pro", "math500", "aime", "livecodebench")
PROMPT_COLUMNS = ("tok_input", "tok_input_len")
# beside the pickle: the LiveCodeBench problems (code_generation_lite rows) its code samples name
TESTS_FILE = "livecodebench_tests.jsonl"
_HINT = ("it is not the deepseek-r1 dataset pickle MLCommons publishes; get it with "
         "`cmx run \"get dataset deepseek-r1\"`")


def subset_of(name: str) -> str:
    """eval_accuracy.py `get_evaluator`: the first scorer whose key is in the lower-cased dataset name."""
    lower = str(name).lower()
    for key in SUBSETS:
        if key in lower:
            return key
    raise DatasetError(f"no scorer for dataset {name!r}: eval_accuracy.py knows {', '.join(SUBSETS)}", hint=_HINT)


@dataclass(frozen=True)
class DeepSeekDataset(TokenSamples):
    """The samples: prompt ids (the chat template applied), answers, and the sub-dataset of each."""

    token_ids: tuple[array[int], ...]  # array("i"): int32 ids of `tok_input`
    answers: tuple[object, ...]  # gt_output / ground_truth as stored (text, or a number for some AIME rows)
    datasets: tuple[str, ...]  # the dataset names as the reference derives them
    path: Path

    def reference(self, i: int) -> str:
        """The answer of sample i as text (a LiveCodeBench question_id for code rows)."""
        return str(self.answers[i])

    def answer(self, i: int) -> object:
        return self.answers[i]

    def subset(self, i: int) -> str:
        return subset_of(self.datasets[i])

    @property
    def tests_path(self) -> Path:
        """The LiveCodeBench problems the code samples are graded with (written beside the pickle)."""
        return self.path.with_name(TESTS_FILE)


def read_frame(path: Path | str) -> pd.DataFrame:
    """The pickle as a DataFrame with the columns the reference reads (DatasetError naming what is wrong)."""
    path = Path(path)
    frame = read_any_frame(path, hint=_HINT, get="get dataset deepseek-r1")
    require_columns(frame, path, ("text_input", ("gt_output", "ground_truth"), ("dataset", "metric")), hint=_HINT)
    texts(frame, "text_input", path, hint=_HINT)
    return frame


def dataset_names(frame: pd.DataFrame) -> list[str]:
    """eval_accuracy.py: `dataset`, else `metric` with '_em' and '_' removed; each must name a scorer."""
    if "dataset" in frame.columns:
        names = [str(v) for v in frame["dataset"].tolist()]
    else:
        names = [str(m).replace("_em", "").replace("_", "") for m in frame["metric"].tolist()]
    for row, name in enumerate(names):
        try:
            subset_of(name)
        except DatasetError as exc:
            raise DatasetError(f"row {row}: {exc.message}", hint=_HINT) from None
    return names


def answers_of(frame: pd.DataFrame) -> list[object]:
    """eval_accuracy.py: `gt_output` when the column exists, else `ground_truth`."""
    answers: list[object] = frame["gt_output" if "gt_output" in frame.columns else "ground_truth"].tolist()
    return answers


def with_prompt_ids(source: Path, dest: Path, tokenizer_dir: Path) -> Path:
    """Write `source` to `dest` with `tok_input`/`tok_input_len` made from `text_input` by the chat template
    of the tokenizer in `tokenizer_dir`, as the reference SUT makes its prompts."""
    from cmx.mlperf.benchmarks.deepseek_r1.prompts import chat_tokenizer

    frame = read_frame(source)
    dataset_names(frame)
    ids = chat_tokenizer(tokenizer_dir).encode(frame["text_input"].tolist())
    frame = frame.copy()
    frame["tok_input"] = ids
    frame["tok_input_len"] = [len(i) for i in ids]
    return write_frame(frame, dest, protocol=4)


def finish_dataset(step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
    """What get-dataset-deepseek-r1 outputs. A tiny set is made whole (its tests beside it); a download is
    moved to source/, LiveCodeBench's tests for its code rows are fetched beside it, and the copy the
    harness reads gets the prompt ids the model's chat template makes."""
    from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import fetch_tests

    if is_tiny:
        return DatasetMade(path, {"source": path, "tests": path.with_name(TESTS_FILE)})
    source = path.parent / "source" / path.name
    source.parent.mkdir(parents=True, exist_ok=True)
    path.replace(source)
    frame = read_frame(source)
    code_ids = sorted({str(a) for a, n in zip(answers_of(frame), dataset_names(frame), strict=True)
                       if subset_of(n) == "livecodebench"})
    tests = path.with_name(TESTS_FILE)
    fetch_tests(step, code_ids, tests)
    dest = with_prompt_ids(source, path, Path(model_outputs(step)["tokenizer_path"]))
    return DatasetMade(dest, {"source": source, "tests": tests})


def load_deepseek(path: Path | str) -> DeepSeekDataset:
    """Read a pickle that `with_prompt_ids` wrote and check every column the harness and the scorer read."""
    path = Path(path)
    frame = read_frame(path)
    if any(c not in frame.columns for c in PROMPT_COLUMNS):
        raise DatasetError(f"{path} has no prompt ids (tok_input): they are made from text_input by the model's chat "
                           "template", hint="use the file get-dataset-deepseek-r1 outputs, which holds them")
    names = dataset_names(frame)
    answers = answers_of(frame)
    token_ids = token_arrays(frame["tok_input"].tolist(), path, "tok_input", hint=_HINT)
    check_lengths(token_ids, frame["tok_input_len"].tolist(), path, column="tok_input", length_column="tok_input_len",
                  hint="the file is damaged or was edited; make it again")
    return DeepSeekDataset(token_ids, tuple(answers), tuple(names), path)


__all__ = [
    "FACTS",
    "FILENAME",
    "PROMPT_COLUMNS",
    "SAMPLES",
    "SUBSETS",
    "TESTS_FILE",
    "DeepSeekDataset",
    "answers_of",
    "dataset_names",
    "finish_dataset",
    "load_deepseek",
    "read_frame",
    "subset_of",
    "with_prompt_ids",
]
