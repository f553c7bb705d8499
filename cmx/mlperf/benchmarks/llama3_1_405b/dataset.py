"""The llama3.1-405b eval set: load the MLCommons-processed pickle and check its format.

The file is the one MLCommons' R2 downloader fetches from
https://inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.uri (README.md,
"Preprocessed"): a pandas DataFrame pickle, one row per sample, 8313 of them, drawn from several
long-context sets (summaries, needle-in-a-haystack, question answering). The reference reads these
columns (mlcommons/inference b66003e, language/llama3.1-405b/):

- `input` (the prompt text), `tok_input` (its token ids, which the SUT feeds to vLLM as they are)
  and `tok_input_len` (their number): dataset.py `load_processed_dataset`;
- `gt_output` (the reference answer) and `metric` (which scorer grades the sample: `rouge`,
  `niah_em` or `qa_em`): evaluate-accuracy.py `get_groundtruth`.

Other columns are allowed and ignored. The token ids are kept as int32 arrays (the prompts are
long: a list of Python ints per row would cost several GB).

A pickle can run code when it is read: load only a file whose checksum was checked (the
get-dataset-llama3-405b recipe checks the md5 MLCommons lists) or one you made.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.base import DatasetError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.frames import (
    check_lengths,
    read_frame,
    require_columns,
    texts,
    token_arrays,
)
from cmx.mlperf.benchmarks.kit.samples import TextSamples

SAMPLES = 8313  # dataset.py / SUT_VLLM.py total_sample_count; constants.py dataset-size; mlperf.conf perf count
FACTS = DatasetFacts(SAMPLES, default_name="llama3.1-405b-dataset.pkl")  # what the dataset step fetches
TEXT_COLUMNS = ("input", "gt_output", "metric")
REQUIRED_COLUMNS = ("input", "tok_input", "tok_input_len", "gt_output", "metric")
METRICS = ("rouge", "niah_em", "qa_em")  # evaluate-accuracy.py `metrics`: the scorers a row can name
_HINT = ("it is not the llama3.1-405b dataset pickle MLCommons publishes; get it with "
         "`cmx run \"get dataset llama3.1-405b\"`")


@dataclass(frozen=True)
class Llama405bDataset(TextSamples):
    """The processed samples: prompts as token ids, reference answers and the scorer of each."""

    inputs: tuple[str, ...]
    token_ids: tuple[array[int], ...]  # array("i"): int32 ids of `tok_input`
    references: tuple[str, ...]
    metrics: tuple[str, ...]  # rouge, niah_em or qa_em per sample
    path: Path

    def metric(self, i: int) -> str:
        """The scorer of sample i (`metric`): rouge, niah_em or qa_em."""
        return self.metrics[i]


def load_llama405b(path: Path | str) -> Llama405bDataset:
    """Read the dataset pickle and check every column the reference reads. Raises DatasetError naming the
    file, the column and the first bad row."""
    path = Path(path)
    frame = read_frame(path, hint=_HINT, get="get dataset llama3.1-405b")
    require_columns(frame, path, REQUIRED_COLUMNS, hint=_HINT)
    inputs, references, metrics = (texts(frame, c, path, hint=_HINT) for c in TEXT_COLUMNS)
    for row, metric in enumerate(metrics):
        if metric not in METRICS:
            raise DatasetError(f"{path}: row {row}: metric {metric!r} is none of {', '.join(METRICS)} (the "
                               "scorers of evaluate-accuracy.py)", hint=_HINT)
    token_ids = token_arrays(frame["tok_input"].tolist(), path, "tok_input", hint=_HINT)
    check_lengths(token_ids, frame["tok_input_len"].tolist(), path, column="tok_input", length_column="tok_input_len")
    return Llama405bDataset(tuple(inputs), token_ids, tuple(references), tuple(metrics), path)


__all__ = ["FACTS", "METRICS", "REQUIRED_COLUMNS", "SAMPLES", "Llama405bDataset", "load_llama405b"]
