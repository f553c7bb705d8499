#!/usr/bin/env bash
# Slurm for the tests: Debian's slurm-wlm and munge, installed when missing, and munge's key.
# The daemons are not started here: tests/slurm/conftest.py starts munged, slurmctld and slurmd
# (a single-node cluster on localhost, with its own slurm.conf) and stops them after the tests,
# as root. Idempotent: what is already there is kept.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export PATH="$PATH:/usr/sbin:/sbin"
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
   || ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq slurm-wlm munge >/dev/null
fi
if ! $SUDO test -f /etc/munge/munge.key; then
  $SUDO mungekey --create --keyfile /etc/munge/munge.key
  $SUDO chown munge:munge /etc/munge/munge.key
  $SUDO chmod 0400 /etc/munge/munge.key
fi
echo "$(slurmd -V) and $(munged --version 2>&1 | awk '{print $1}') are installed"
