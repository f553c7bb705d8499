"""The pure parts of --slurm: the command line the job runs, and the sbatch directives (no cluster needed)."""

from __future__ import annotations

from cmx.cli.slurm_options import without_slurm_args
from cmx.slurm.script import SlurmOptions


def test_the_job_runs_the_command_line_less_slurm_and_its_options() -> None:
    args = ["--registry", "r.yaml", "run", "app x _y", "--input", "time=5", "--slurm", "--partition", "gpu",
            "--time=10", "--gpus-per-node", "8", "-i", "nodes=2", "--json", "--nodes", "2", "--mem=64G",
            "--job-name", "n", "--account", "a", "--cpus-per-task", "4", "--context", "device=cuda"]
    assert without_slurm_args(args, drop=("--json",)) == [
        "--registry", "r.yaml", "run", "app x _y", "--input", "time=5", "-i", "nodes=2", "--context", "device=cuda"]


def test_only_the_options_given_become_directives() -> None:
    assert SlurmOptions().directives() == []
    assert SlurmOptions(partition="gpu", time="1:00:00", gpus_per_node="h100:8", nodes=1, cpus_per_task=16,
                        account="mlperf", mem="64G").directives() == [
        "--partition=gpu", "--account=mlperf", "--time=1:00:00", "--gpus-per-node=h100:8", "--nodes=1",
        "--cpus-per-task=16", "--mem=64G"]
