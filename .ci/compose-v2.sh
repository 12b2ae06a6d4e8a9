#!/usr/bin/env bash
# Compose v2 and buildx as Docker CLI plugins, from Debian's packages of a newer suite
# (bookworm's docker-compose is the old Python v1, which knows neither `config
# --profiles` nor `!reset`; bookworm has no buildx). Both are static Go binaries: the
# .debs are downloaded with an apt state of their own and unpacked into one folder, so
# the system's apt sources, lists and installed packages stay as they were.
#
# Env:
#   DSV4_QUAL_DOCKER_PLUGINS  the plugins folder (default $DSV4_QUAL_CACHE/docker-cli-plugins,
#                             DSV4_QUAL_CACHE defaulting to $HOME/.cache/dsv4-qual);
#                             point DOCKER_CONFIG's cli-plugins at it, or run the binaries as they are
#   DSV4_QUAL_PLUGIN_SUITE    the Debian suite to take them from (default trixie)
#   DSV4_QUAL_DEBIAN_MIRROR   the Debian mirror (default http://deb.debian.org/debian)
# Output: progress on stderr; the plugins folder alone on the last line of stdout.
set -euo pipefail

SUITE=${DSV4_QUAL_PLUGIN_SUITE:-trixie}
MIRROR=${DSV4_QUAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
DIR=${DSV4_QUAL_DOCKER_PLUGINS:-${DSV4_QUAL_CACHE:-$HOME/.cache/dsv4-qual}/docker-cli-plugins}
PACKAGES=(docker-compose docker-buildx)
# `!reset` / `!override` in override files need Compose 2.24 or later.
MIN_COMPOSE=2.24

log() { echo "compose-v2: $*" >&2; }

usable() {
  local version
  [[ -x $DIR/docker-compose && -x $DIR/docker-buildx ]] || return 1
  version=$("$DIR/docker-compose" version --short 2>/dev/null) || return 1
  [[ $(printf '%s\n%s\n' "$MIN_COMPOSE" "${version%%-*}" | sort -V | head -n 1) == "$MIN_COMPOSE" ]]
}

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9

if usable; then
  log "reusing $DIR"
else
  log "downloading ${PACKAGES[*]} from Debian $SUITE into $DIR"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/parts" "$work/debs"
  echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main" >"$work/sources.list"
  apt_own=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
           -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
           -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1" -q)
  apt-get "${apt_own[@]}" update >&2
  (cd "$work/debs" && apt-get "${apt_own[@]}" download "${PACKAGES[@]}" >&2)
  for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
  done
  install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" \
    "$work/root/usr/libexec/docker/cli-plugins/docker-buildx" "$DIR/"
  usable || { log "the unpacked docker-compose is not Compose >= $MIN_COMPOSE"; exit 1; }
fi

log "$("$DIR/docker-compose" version), $("$DIR/docker-buildx" version)"
echo "$DIR"
