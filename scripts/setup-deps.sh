#!/usr/bin/env bash
# Installs everything the build, the tests and the main job need, from Debian
# packages only. Idempotent: packages already present are not touched again.
#
# A few packages exist only in Debian 13 (trixie): the OTLP .proto files, the
# VictoriaMetrics backend and the Python OTLP decoder. They are fetched with
# `apt-get download` through a private apt configuration kept under
# /var/cache/nemolens-apt, so the system's own sources stay unchanged, and
# unpacked into /opt/nemolens-deps (no dpkg database changes).
set -euo pipefail

PREFIX=${NEMOLENS_DEPS_PREFIX:-/opt/nemolens-deps}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

# Debian 12 packages: build, unit tests, integration targets.
PKGS=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libunwind-dev libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libcriterion-dev zlib1g-dev
  curl openssl python3-aiohttp python3-uvicorn python3-fastapi python3-protobuf
  nginx-light wrk golang-go
  libpython3.11-testsuite libglib2.0-tests
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian 13 packages, unpacked privately.
TRIXIE_PKGS=(opentelemetry-proto victoria-metrics python3-opentelemetry-proto)
stamp="$PREFIX/.stamp-${TRIXIE_PKGS[*]// /_}"
if [ ! -f "$stamp" ]; then
  echo "setup-deps: fetching ${TRIXIE_PKGS[*]} from Debian 13"
  aptdir=/var/cache/nemolens-apt
  $SUDO mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial" "$aptdir/etc/preferences.d" "$PREFIX"
  $SUDO tee "$aptdir/sources.list" >/dev/null <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
SRC
  : | $SUDO tee "$aptdir/status" >/dev/null
  aptopts=(-o Dir::Etc::SourceList="$aptdir/sources.list"
           -o Dir::Etc::SourceParts=/dev/null
           -o Dir::Etc::Preferences="$aptdir/etc/preferences"
           -o Dir::Etc::PreferencesParts="$aptdir/etc/preferences.d"
           -o Dir::State::Lists="$aptdir/lists"
           -o Dir::State::Status="$aptdir/status"
           -o Dir::Cache="$aptdir"
           -o APT::Get::List-Cleanup=0)
  $SUDO apt-get "${aptopts[@]}" update -qq
  tmp=$(mktemp -d)
  (cd "$tmp" && $SUDO apt-get "${aptopts[@]}" download "${TRIXIE_PKGS[@]}" >/dev/null)
  for deb in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$deb" "$PREFIX"; done
  rm -rf "$tmp"
  $SUDO touch "$stamp"
fi
echo "setup-deps: ok (Debian 13 packages under $PREFIX)"
