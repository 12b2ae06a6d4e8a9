#!/usr/bin/env bash
# nginx, for CI (tests/loadgen/test_transport_real_servers.py puts a throwaway nginx,
# its own config, prefix and pid file, in front of uvicorn as a streaming reverse proxy):
#   nginx-light  Debian  the nginx binary (bookworm: 1.22)
# The package would start its own nginx service on port 80; the test starts its own on
# a free port and stops it by its pid, so the service is kept from starting while the
# package installs (a policy-rc.d of our own, removed afterwards; one already there is
# kept). Under CI (CI or DSV4_QUAL_REQUIRE_NGINX set) the test fails without it.
set -euo pipefail

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy"
      chmod +x "$policy"
      trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      nginx-light >/dev/null
  else
    echo "nginx-tools: no root or no apt-get: install Debian's nginx-light package" >&2
    exit 1
  fi
fi

PATH="$PATH:/usr/sbin" nginx -v 2>&1 | head -n 1
