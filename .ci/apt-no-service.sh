#!/usr/bin/env bash
# Install Debian packages whose own service must not start: the tests start their own
# server on a free port and stop it by its pid. The services are kept from starting
# while the packages install (a policy-rc.d of our own, removed afterwards; one already
# there is kept). Needs root and apt-get.
#   usage: bash .ci/apt-no-service.sh WHO PACKAGE...   (WHO names the caller in errors)
set -euo pipefail
who=$1
shift
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "$who: no root or no apt-get: install Debian's $* package" >&2
  exit 1
fi
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
