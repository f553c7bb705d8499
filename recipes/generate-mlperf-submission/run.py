"""Package the results (cmx.mlperf.submission.package) and check the tree (cmx.mlperf.submission.check)."""

from cmx.mlperf.submission.package import package_and_check
from cmx.mlperf.submission.sources import PackageRequest


def run(ctx):
    i = ctx.inputs
    request = PackageRequest(results_dir=i["results_dir"], out_dir=i["out_dir"], submitter=i["submitter"],
                             division=i["division"], round=i["round"], system_file=i["system_file"],
                             calibration_file=i["calibration_file"], tar=i["tar"])
    return package_and_check(request, ctx.log)
