"""The model and dataset recipes' outputs as Python reads them: the Python side of a contract the YAML declares.

Every get-ml-model recipe declares the outputs of `recipes/get-ml-model/recipe.yaml` (its `eos_token_ids` and
`architecture` where its model.py reports them: `ModelFolder.reports`), and every get-dataset recipe those of
`recipes/get-dataset/recipe.yaml` (plus what its benchmark's `finish_dataset` adds). The runner checks each
output a step returns against the type its recipe declares and publishes a path as a string, so a step that
reads a dep's outputs (`ctx.deps.model.outputs`, a Mapping of Any) reads them through `model_outputs` and
`dataset_outputs`, typed. tests/mlperf/benchmarks/test_kit_outputs.py checks every recipe's declaration
against these TypedDicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from typing_extensions import NotRequired

if TYPE_CHECKING:
    from cmx.execute.context import StepContext


class ModelOutputs(TypedDict):
    """A get-ml-model step's outputs (kit.model.ModelFolder.outputs() before the runner publishes them)."""

    path: str  # the model folder
    name: str  # the repository id, the folder's name, or tiny-<model>-random-seedN
    revision: str  # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str  # what it runs in (bfloat16, float16), or the weights' own format
    precision: str  # bf16, fp16, fp8, or the checkpoint's quantization method
    tokenizer_path: str  # the folder holding the tokenizer (the model folder)
    eos_token_id: int
    is_tiny: bool  # the tiny random-weight model: results mean nothing
    eos_token_ids: NotRequired[list[int]]  # every id generation stops at, where the recipe reports it
    architecture: NotRequired[str]  # config.json's architectures[0], where the recipe reports it


class DatasetOutputs(TypedDict):
    """A get-dataset step's outputs (kit.dataset_step.dataset_step's, with what `finish_dataset` adds)."""

    path: str  # the dataset file or folder the benchmark's loader reads
    rows: int
    is_tiny: bool  # generated samples: accuracy results mean nothing
    source: NotRequired[str]  # deepseek-r1: the download as MLCommons publishes it
    tests: NotRequired[str]  # deepseek-r1: LiveCodeBench's tests for its code rows
    performance_rows: NotRequired[int]  # gpt-oss-120b: the rows of its performance set


def model_outputs(ctx: StepContext, name: str = "model") -> ModelOutputs:
    """The outputs of the step's model dep (`as: model`)."""
    # a cast, not a check: the runner checked each output against its recipe's declaration, and a test
    # (tests/mlperf/benchmarks/test_kit_outputs.py) checks every declaration against ModelOutputs
    return cast("ModelOutputs", ctx.deps[name].outputs)


def dataset_outputs(ctx: StepContext, name: str = "dataset") -> DatasetOutputs:
    """The outputs of the step's dataset dep (`as: dataset`)."""
    return cast("DatasetOutputs", ctx.deps[name].outputs)


__all__ = ["DatasetOutputs", "ModelOutputs", "dataset_outputs", "model_outputs"]
