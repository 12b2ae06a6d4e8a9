#!/usr/bin/env bash
# What the `docker` test tier needs on the machine, for CI (run as root):
#   docker.io    Debian  dockerd, containerd, runc and a docker CLI; the tier starts its
#                        own daemon (own data root, no iptables, no default bridge)
#   debootstrap  Debian  makes the stand-in base images' root file system (no registry)
#   Compose v2 + buildx  .ci/compose-v2.sh (static binaries from a newer Debian suite)
# Without root or apt-get nothing is installed and the tier skips, unless
# DSV4_QUAL_REQUIRE_DOCKER=1 makes that a failure.
# Output: progress on stderr; the CLI plugins folder alone on the last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "docker-tools: installing ${missing[*]}" >&2
    { apt-get update -q \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
             "${missing[@]}"; } >&2
  else
    echo "docker-tools: no root or no apt-get; cannot install ${missing[*]}" >&2
    exit 1
  fi
fi
echo "docker-tools: $(dockerd --version), debootstrap $(dpkg-query -W -f='${Version}' debootstrap)" >&2
bash .ci/compose-v2.sh
