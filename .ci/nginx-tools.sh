#!/usr/bin/env bash
# nginx, for CI (tests/loadgen/engine/test_transport_real_servers.py puts a throwaway nginx,
# its own config, prefix and pid file, in front of uvicorn as a streaming reverse proxy):
#   nginx-light  Debian  the nginx binary (bookworm: 1.22)
# The package would start its own nginx service on port 80; the test starts its own on
# a free port and stops it by its pid, so it installs without its service
# (apt-no-service.sh). Under CI (CI or DSV4_QUAL_REQUIRE_NGINX set) the test fails without it.
set -euo pipefail

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  bash "$(dirname "$0")/apt-no-service.sh" nginx-tools nginx-light
fi

PATH="$PATH:/usr/sbin" nginx -v 2>&1 | head -n 1
