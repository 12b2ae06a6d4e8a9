#!/usr/bin/env bash
# Prometheus and promtool, for CI (tests/static/test_monitoring.py checks
# docker/monitoring with promtool; tests/loadgen/observe/test_metrics_prometheus.py has a real
# Prometheus scrape a soak and evaluate the alert rules):
#   prometheus  Debian  both binaries (bookworm: 2.42)
# The package would start its own Prometheus service; the tests start theirs on a free
# port and stop it by its pid, so it installs without its service (apt-no-service.sh).
# Under CI (CI or DSV4_QUAL_REQUIRE_PROMETHEUS set) the tests fail without them.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  bash "$(dirname "$0")/apt-no-service.sh" monitoring-tools prometheus
fi

prometheus --version 2>&1 | head -n 1
promtool --version 2>&1 | head -n 1
