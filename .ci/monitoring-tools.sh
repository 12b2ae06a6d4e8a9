#!/usr/bin/env bash
# Prometheus and promtool, for CI (tests/static/test_monitoring.py checks
# docker/monitoring with promtool; tests/loadgen/test_metrics_prometheus.py has a real
# Prometheus scrape a soak and evaluate the alert rules):
#   prometheus  Debian  both binaries (bookworm: 2.42)
# The package would start its own Prometheus service; the tests start theirs on a free
# port and stop it by its pid, so the service is kept from starting while the package
# installs (a policy-rc.d of our own, removed afterwards; one already there is kept).
# Under CI (CI or DSV4_QUAL_REQUIRE_PROMETHEUS set) the tests fail without them.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy"
      chmod +x "$policy"
      trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      prometheus >/dev/null
  else
    echo "monitoring-tools: no root or no apt-get: install Debian's prometheus package" >&2
    exit 1
  fi
fi

prometheus --version 2>&1 | head -n 1
promtool --version 2>&1 | head -n 1
