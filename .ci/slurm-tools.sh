#!/usr/bin/env bash
# The Slurm the fleet's tests start on this machine (fleet/slurm/one-machine.sh, through
# tests/support/slurm.py: munged, slurmctld and one slurmd per node, `slurmd -N`, in a
# temp folder of their own):
#   slurm-wlm   Debian   slurmctld, slurmd, sbatch, sinfo, scontrol
#   munge       Debian   munged (Slurm's authentication)
# With DSV4_QUAL_REQUIRE_SLURM=1 or CI set, those tests fail rather than skip when the
# binaries are missing.
set -euo pipefail

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
    || ! command -v munged >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      slurm-wlm munge >/dev/null
  else
    echo "slurm-tools: no root or no apt-get: install slurm-wlm and munge" >&2
    exit 1
  fi
fi
slurmctld -V
munged --version
