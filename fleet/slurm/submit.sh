#!/usr/bin/env bash
# Queue the soak on every node of a partition (one array task a node, exclusive), then
# the fleet verdict after it. The nodes that must answer are fixed here, before
# anything runs: a node whose task never started is then a failure, never a pass.
#
# Usage:
#   DSV4_HISTORY=postgresql://dsv4@history-db/dsv4 fleet/slurm/submit.sh [SBATCH_OPTION...]
# Environment (all optional but DSV4_HISTORY):
#   DSV4_PARTITION  the partition (default: Slurm's default one)
#   DSV4_NODES      the nodes, comma-separated (default: every node of the partition)
#   DSV4_RESULTS    where each node's reports and the verdict go (a shared folder)
#   DSV4_WAIT=1     wait for the verdict and exit with its code (for a CI step)
#   and what soak-array.sbatch and verdict.sbatch read (DSV4_SCENARIO, DSV4_DURATION,
#   DSV4_ROUNDS, DSV4_SERVER_IMAGE, DSV4_LOADGEN_IMAGE, DSV4_MODEL, DSV4_HF_TOKEN_FILE...).
# Extra arguments go to the array's sbatch (e.g. --gres=gpu:8 --time=12:00:00).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${DSV4_HISTORY:?set DSV4_HISTORY to the fleet history (postgresql://user@host/db)}"
partition=()
[ -n "${DSV4_PARTITION:-}" ] && partition=(--partition "$DSV4_PARTITION")
export DSV4_RESULTS=${DSV4_RESULTS:-$PWD/results}
mkdir -p "$DSV4_RESULTS"
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
export DSV4_SINCE=$stamp
export DSV4_NODES_FILE=${DSV4_NODES_FILE:-$DSV4_RESULTS/nodes-${stamp//:/}.txt}
if [ -n "${DSV4_NODES:-}" ]; then
  tr ',' '\n' <<<"$DSV4_NODES" | sed 's/ //g; /^$/d' > "$DSV4_NODES_FILE"
else
  sinfo --noheader --Node "${partition[@]}" --format '%N' | sort -u > "$DSV4_NODES_FILE"
fi
count=$(grep -c . "$DSV4_NODES_FILE" || true)
if [ "$count" -eq 0 ]; then
  echo "submit.sh: no nodes (DSV4_NODES empty and the partition lists none)" >&2
  exit 3
fi
array=$(sbatch --parsable "${partition[@]}" --array="0-$((count - 1))" \
  --output="$DSV4_RESULTS/soak-%A_%a.out" "$@" "$here/soak-array.sbatch")
array=${array%%;*}
wait_flag=()
[ "${DSV4_WAIT:-0}" = 1 ] && wait_flag=(--wait)
echo "submit.sh: soak array $array on $count node(s) ($DSV4_NODES_FILE); verdict after it"
set +e
verdict=$(sbatch --parsable "${partition[@]}" "${wait_flag[@]}" \
  --dependency="afterany:$array" --output="$DSV4_RESULTS/fleet-%j.out" \
  "$here/verdict.sbatch")
code=$?
set -e
echo "submit.sh: fleet verdict job ${verdict%%;*}; reports in $DSV4_RESULTS (fleet.md, fleet.xml)"
exit "$code"
