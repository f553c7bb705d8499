"""The gpt-oss-120b sets: the MLCommons folder (performance, accuracy and TEST07 sets), each file read and checked.

MLCommons publishes one folder, fetched from
https://inference.mlcommons-storage.org/metadata/gpt-oss-data.uri (mlcommons/mlperf-automations,
script/get-dataset-mlperf-inference-gpt-oss/meta.yaml, the r2-downloader variation; the reference's
README.md sends you to that script). It holds several DataFrames, each a Parquet file (the
reference's README.md recommends it) or a pickle (still read, "for backward compatibility"):

- the performance set, `perf/perf_eval_ref.parquet` (6396 rows, reasoning_effort low: README.md
  "Compliance Testing"; mlperf.conf performance_sample_count_override 6396);
- the accuracy set, `acc_eval_ref.parquet` (4395 rows, reasoning_effort high; mlperf.conf
  accuracy_sample_count_override 4395). The name is the one published v6.1 submissions use
  (MangoBoost's closed gpt-oss-120b README in mlcommons/inference_results_v6.1); the reference's
  README.md example passes `acc_eval_inputs.parquet`, which is accepted too;
- TEST07's GPQA set, `acc/acc_eval_compliance_gpqa.parquet` (990 rows; README.md "Compliance Testing").

Each is looked for under its subfolder (perf/, acc/), as README.md writes the paths, and then at
the top of the folder, where MangoBoost's reproduction finds the three files.

The columns the reference reads (mlcommons/inference b66003e, language/gpt-oss-120b/):
`input_tokens` (or, before v4.0, `tok_input`): the prompt as token ids, already in the harmony
chat format with its reasoning effort (utils/tokenization.py `load_tokenized_dataset`);
`dataset` (aime25, gpqa_diamond, livecodebench_v6: which scorer grades the row) and
`ground_truth` (the answer: an integer for AIME, a letter for GPQA, the LiveCodeBench
question_id), read by eval_mlperf_accuracy.py. Other columns are allowed and ignored.

A pickle can run code when it is read: load only a file whose checksum was checked (the
get-dataset-gpt-oss-120b recipe checks the md5 MLCommons lists) or one you made.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.frames import read_frame, require_columns, token_arrays
from cmx.mlperf.benchmarks.kit.samples import TokenSamples

if TYPE_CHECKING:
    from cmx.execute.context import StepContext

PERFORMANCE_FILE = "perf/perf_eval_ref"        # README.md, "Compliance Testing" (TEST09's set)
ACCURACY_FILE = "acc/acc_eval_ref"             # published submissions' name (see above)
ACCURACY_ALIASES = ("acc/acc_eval_inputs",)    # README.md, "Evaluate the accuracy" (--reference-data)
TEST07_FILE = "acc/acc_eval_compliance_gpqa"   # README.md, "Compliance Testing" (TEST07's set)
SUFFIXES = (".parquet", ".pkl")                # utils/tokenization.py: parquet, else pickle
PERFORMANCE_SAMPLES = 6396  # mlperf.conf gpt-oss-120b.*.performance_sample_count_override
ACCURACY_SAMPLES = 4395     # mlperf.conf gpt-oss-120b.*.accuracy_sample_count_override
# a folder: every file of the R2 listing; `rows` counts the accuracy set, a tiny set has the performance set's
FACTS = DatasetFacts(ACCURACY_SAMPLES, what="gpt-oss-120b-format", default_name="gpt-oss-data",
                     tiny_rows=PERFORMANCE_SAMPLES, whole_listing=True)
TOKEN_COLUMNS = ("input_tokens", "tok_input")  # v4.0+ name first, as load_tokenized_dataset looks
_HINT = "it is not a gpt-oss-120b set MLCommons publishes; get them with `cmx run \"get dataset gpt-oss-120b\"`"


@dataclass(frozen=True)
class GptOssDataset(TokenSamples):
    """One set: prompts as token ids, the sub-dataset of each row and its ground truth."""

    token_ids: tuple[array[int], ...]  # array("i"): int32 prompt ids
    datasets: tuple[str, ...]     # the `dataset` column, lower-cased as validate_dataset_name does
    truths: tuple[str, ...]       # `ground_truth` as text ("" where the reference has NaN/None)
    path: Path

    def reference(self, i: int) -> str:
        """Row i's ground truth as text: an integer, a letter or a LiveCodeBench question_id."""
        return self.truths[i]

    def dataset(self, i: int) -> str:
        return self.datasets[i]


def set_file(folder: Path, stem: str, aliases: tuple[str, ...] = ()) -> Path:
    """The file of one set in the MLCommons folder: `<stem>.parquet`, else `.pkl`, in its subfolder or at the top."""
    folder = Path(folder)
    for name in (stem, *aliases):
        for place in (name, name.rsplit("/", 1)[-1]):
            for suffix in SUFFIXES:
                candidate = folder / (place + suffix)
                if candidate.is_file():
                    return candidate
    raise DatasetError(f"{folder} has no {stem}.parquet (nor {stem}.pkl, nor at its top)",
                       hint="give the folder MLCommons' gpt-oss dataset download makes")


def finish_dataset(step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
    """What get-dataset-gpt-oss-120b outputs: the folder of the sets (in a download, where the R2 listing put
    them, with the LiveCodeBench problems of --input lcb_path linked in), each set checked, and the
    performance set's rows (the accuracy set's are `rows`)."""
    from cmx.mlperf.benchmarks.gpt_oss_120b.livecodebench import FOLDER, read_problems

    folder = path if is_tiny else sets_folder(path)
    if not is_tiny:
        lcb = step.inputs["lcb_path"]
        if lcb is not None:
            read_problems(Path(lcb))  # refused now if it holds no code_generation_lite problems
            (folder / FOLDER).symlink_to(Path(lcb).resolve(), target_is_directory=True)
        else:
            step.log.warning("no --input lcb_path: the LiveCodeBench rows cannot be graded until %s holds "
                             "LiveCodeBench's code_generation_lite release_v6 files", folder / FOLDER)
    performance = load_set(folder, "performance")
    load_set(folder, "test07")
    if not is_tiny and len(performance) != PERFORMANCE_SAMPLES:
        step.log.warning("%s has %d performance rows, not the official %d", folder, len(performance),
                         PERFORMANCE_SAMPLES)
    return DatasetMade(folder, {"performance_rows": len(performance)})


def sets_folder(download: Path) -> Path:
    """The folder holding the sets (perf/ and acc/, or the files themselves; the R2 listing may nest them)."""
    found = sorted(p.parent.parent if p.parent.name == "perf" else p.parent
                   for p in download.rglob(PurePosixPath(PERFORMANCE_FILE).name + ".*"))
    if not found:
        raise DatasetError(f"the download in {download} has no {PERFORMANCE_FILE}.parquet",
                           hint="the R2 dataset's layout changed; compare it with language/gpt-oss-120b/README.md")
    return found[0]


def load_set(folder: Path, mode: str = "accuracy") -> GptOssDataset:
    """The set a test reads: performance (and TEST09) the performance set, accuracy the accuracy set, TEST07 its own."""
    stem = {"performance": PERFORMANCE_FILE, "accuracy": ACCURACY_FILE, "test07": TEST07_FILE,
            "test09": PERFORMANCE_FILE}.get(mode)
    if stem is None:
        raise DatasetError(f"gpt-oss-120b has no set for the {mode!r} test",
                           hint="its tests are performance, accuracy, test07 and test09")
    return load_file(set_file(folder, stem, ACCURACY_ALIASES if stem == ACCURACY_FILE else ()))


def load_file(path: Path) -> GptOssDataset:
    """Read one set's DataFrame (Parquet or pickle) and check the columns the reference reads."""
    path = Path(path)
    frame = read_frame(path, hint=_HINT, get="get dataset gpt-oss-120b")
    token_column, _, _ = require_columns(frame, path, (TOKEN_COLUMNS, "dataset", "ground_truth"), hint=_HINT)
    ids = token_arrays(frame[token_column].tolist(), path, token_column, hint=_HINT)
    datasets = tuple(_dataset_name(path, i, v) for i, v in enumerate(frame["dataset"].tolist()))
    truths = tuple(_truth(v) for v in frame["ground_truth"].tolist())
    return GptOssDataset(ids, datasets, truths, path)


def _dataset_name(path: Path, row: int, value: object) -> str:
    # eval_accuracy.py validate_dataset_name: empty is an error, the rest lower-cased
    if value is None or value != value or not str(value):
        raise DatasetError(f"{path}: row {row} names no dataset", hint=_HINT)
    return str(value).lower()


def _truth(value: object) -> str:
    if value is None or value != value:  # NaN: the reference scores the row as wrong
        return ""
    return str(value)


__all__ = [
    "ACCURACY_FILE",
    "ACCURACY_SAMPLES",
    "FACTS",
    "PERFORMANCE_FILE",
    "PERFORMANCE_SAMPLES",
    "TEST07_FILE",
    "GptOssDataset",
    "finish_dataset",
    "load_file",
    "load_set",
    "set_file",
    "sets_folder",
]
