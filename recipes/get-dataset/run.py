"""Every get-dataset recipe's step: the benchmark is the extending recipe's `params: {benchmark: ...}`; the work is
in cmx.mlperf.benchmarks.kit.dataset_step (downloaded and checked: an R2 listing's md5, a sha256 when given, the
benchmark's own format check; or the tiny set generated) and in the benchmark's dataset side."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, ctx.params["benchmark"])
