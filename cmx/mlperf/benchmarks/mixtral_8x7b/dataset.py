"""The mixtral-8x7b eval set: load the MLCommons-processed pickle (OpenOrca, GSM8K and MBXP rows) and check its format.

The file is `09292024_mixtral_15k_mintoken2_v1.pkl` (language/mixtral-8x7b/README.md, "Get Dataset"),
a pandas DataFrame pickle of 15,000 rows: 5,000 sampled from each of OpenOrca (GPT-4 answers),
GSM8K (few-shot, "The answer is N.") and MBXP (code in six languages). Its columns, as
standalone_infer/hf_eval_all.py prints a row: dataset, id, question, input, ref_output, gt_output,
tok_input, tok_ref_output, stop_sequence, tok_stop_sequence, tok_input_len, tok_ref_output_len.

What the reference reads (mlcommons/inference b66003e, language/mixtral-8x7b/):
- dataset.py `load_processed_dataset`: `tok_input` (fed to the model as it is), `input`, `dataset`;
- evaluate-accuracy.py: `dataset` (OpenOrca and GSM8K by name, anything else is scored as
  MBXP), `gt_output` (the OpenOrca answer, the GSM8K number, the MBXP test code), and for MBXP
  `id` = "<language>_<entry point>" (`create_mbxp_dict`: `row["id"].split("_", 1)`).

Those columns are required, `dataset` must be one of the three names, and `tok_input_len`, where
present, must equal the length of `tok_input`. Other columns are allowed and ignored.

A pickle can run code when it is read: load only a file whose checksum was checked (the
get-dataset-mixtral-8x7b recipe checks the md5 MLCommons' R2 list holds) or one you made.
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

SAMPLES = 15000  # README.md --total-sample-count 15000; constants.py dataset-size; mlperf.conf perf count
# the name when the R2 listing is not read: the file of README.md's wget alternative
FACTS = DatasetFacts(SAMPLES, default_name="09292024_mixtral_15k_mintoken2_v1.pkl")
SUBSETS = ("OpenOrca", "GSM8K", "MBXP")  # the `dataset` column's values
REQUIRED_COLUMNS = ("dataset", "id", "input", "tok_input", "gt_output")
# the real file's columns in its order (standalone_infer/hf_eval_all.py); the tiny dataset writes them all
COLUMNS = ("dataset", "id", "question", "input", "ref_output", "gt_output", "tok_input", "tok_ref_output",
           "stop_sequence", "tok_stop_sequence", "tok_input_len", "tok_ref_output_len")
_TEXT_COLUMNS = ("dataset", "id", "input", "gt_output")
_HINT = ("it is not the mixtral-8x7b dataset pickle MLCommons publishes; get it with "
         "`cmx run \"get dataset mixtral-8x7b\"`")


@dataclass(frozen=True)
class MixtralDataset(TextSamples):
    """The processed samples: prompts as token ids, and per sample its subset, id and ground truth."""

    subsets: tuple[str, ...]  # OpenOrca, GSM8K or MBXP
    ids: tuple[str, ...]
    inputs: tuple[str, ...]
    token_ids: tuple[array[int], ...]  # array("i"): int32 ids of `tok_input`
    references: tuple[str, ...]  # gt_output: the OpenOrca answer, the GSM8K number, or the MBXP test code
    path: Path

    def subset(self, i: int) -> str:
        return self.subsets[i]

    def sample_id(self, i: int) -> str:
        return self.ids[i]


def mbxp_language(sample_id: str) -> tuple[str, str]:
    """(language, entry point) of an MBXP row's id, split as create_mbxp_dict splits it: at the first "_"."""
    language, _, entry_point = sample_id.partition("_")
    return language, entry_point


def load_mixtral(path: Path | str) -> MixtralDataset:
    """Read the dataset pickle and check every column the reference reads. Raises DatasetError naming the
    file, the column and the first bad row."""
    path = Path(path)
    frame = read_frame(path, hint=_HINT, get="get dataset mixtral-8x7b")
    require_columns(frame, path, REQUIRED_COLUMNS, hint=_HINT)
    subsets, ids, inputs, references = (texts(frame, c, path, hint=_HINT) for c in _TEXT_COLUMNS)
    for row, (subset, sample_id) in enumerate(zip(subsets, ids, strict=True)):
        if subset not in SUBSETS:
            raise DatasetError(f"{path}: row {row}: dataset {subset!r} is none of {', '.join(SUBSETS)}", hint=_HINT)
        if subset == "MBXP" and not all(mbxp_language(sample_id)):
            raise DatasetError(f"{path}: row {row}: the MBXP id {sample_id!r} is not <language>_<entry point>",
                               hint=_HINT)
    token_ids = token_arrays(frame["tok_input"].tolist(), path, "tok_input", hint=_HINT)
    if "tok_input_len" in frame.columns:  # not read by the reference, but wrong only in a damaged file
        check_lengths(token_ids, frame["tok_input_len"].tolist(), path, column="tok_input",
                      length_column="tok_input_len")
    return MixtralDataset(tuple(subsets), tuple(ids), tuple(inputs), token_ids, tuple(references), path)


__all__ = [
    "COLUMNS",
    "FACTS",
    "REQUIRED_COLUMNS",
    "SAMPLES",
    "SUBSETS",
    "MixtralDataset",
    "load_mixtral",
    "mbxp_language",
]
