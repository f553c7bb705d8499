"""Runs as Slurm batch jobs: `cmx run --slurm` renders an sbatch script that runs the same query on a node,
`cmx jobs` follows the jobs cmx submitted, and their states decide what of their results may be trusted.

The nodes must see the cache and the run records at the same paths as the submitting host (shared
storage): the job reuses the cache and writes its run record where `cmx jobs` looks for it.
"""

from __future__ import annotations

from cmx.errors import CmxError


class SlurmError(CmxError):
    """Slurm is not usable here (no sbatch on PATH), or a Slurm command failed."""
