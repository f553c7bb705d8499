"""Package the results (cmx.mlperf.submission.package) and check the tree (cmx.mlperf.submission.check)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.submission.package import package_and_check
from cmx.mlperf.submission.sources import PackageRequest


def run(ctx: StepContext) -> dict[str, Any]:
    i = ctx.inputs
    request = PackageRequest(results_dir=i["results_dir"], out_dir=i["out_dir"], submitter=i["submitter"],
                             division=i["division"], round=i["round"], system_file=i["system_file"],
                             calibration_file=i["calibration_file"], tar=i["tar"],
                             scenarios=tuple(i["scenarios"].split(",")) if i["scenarios"] else ())
    return package_and_check(request, ctx.log)
