#!/usr/bin/env bash
# The PostgreSQL server binaries the history's tests start a throwaway cluster with
# (tests/support/postgres.py: initdb + postgres, as `nobody` when run as root):
#   postgresql   Debian   initdb, postgres (in /usr/lib/postgresql/<major>/bin)
# psycopg (the client) is a dependency of the project itself. With
# DSV4_QUAL_REQUIRE_POSTGRES=1 or CI set, those tests fail rather than skip when the
# binaries are missing.
set -euo pipefail

have() {
  command -v "$1" >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/$1" >/dev/null
}

if ! have initdb || ! have postgres; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      postgresql >/dev/null
  else
    echo "postgres-tools: no root or no apt-get: install PostgreSQL's server (initdb, postgres)" >&2
    exit 1
  fi
fi

bin=$(command -v postgres || ls -d /usr/lib/postgresql/*/bin/postgres | sort -V | tail -n 1)
"$bin" --version
python -c 'import psycopg; print("psycopg", psycopg.__version__, "libpq", psycopg.pq.version())'
