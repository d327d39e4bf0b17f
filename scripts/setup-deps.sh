#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
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
  libcurl4-openssl-dev libcriterion-dev zlib1g-dev libmicrohttpd-dev
  curl openssl python3-aiohttp python3-httpx python3-uvicorn python3-fastapi python3-protobuf python3-uvloop python3-requests
  nginx-light wrk golang-go nodejs valgrind
  lintian chromium scdoc man-db
  libpython3.11-testsuite libglib2.0-tests
  python3-grpcio nghttp2-client nghttp2-server python3-hypercorn python3-h2 iproute2
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

# The URI of the system's own main archive for its release, read from its apt
# sources: one-line entries ("deb [options] URI SUITE COMPONENT...") in
# sources.list and sources.list.d/*.list, and deb822 paragraphs (Types:,
# URIs:, Suites:, Components:, Enabled:) in sources.list.d/*.sources. The
# first entry of type deb whose suite is RELEASE and whose components
# include main wins. Prints nothing when there is none.
system_archive_uri() {   # system_archive_uri RELEASE
  local release=$1 f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    uri=$(awk -v rel="$release" '
      { sub(/#.*/, ""); gsub(/\[[^]]*\]/, " ") }
      $1 == "deb" && $3 == rel { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    uri=$(awk -v rel="$release" '
      function words(list, w) {
        gsub(/^[ \t]+|[ \t]+$/, "", list)
        return split(list, w, /[ \t]+/)
      }
      function has(list, word,   n, i, w) {
        n = words(list, w)
        for (i = 1; i <= n; i++) if (w[i] == word) return 1
        return 0
      }
      function check(   u) {
        if (has(f["types"], "deb") && has(f["suites"], rel) && has(f["components"], "main") &&
            tolower(f["enabled"]) != "no" && words(f["uris"], u) > 0 && u[1] != "") {
          print u[1]; found = 1
        }
        delete f
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { check(); if (found) exit; next }
      /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }   # a continuation line
      {
        key = tolower($0); sub(/:.*/, "", key)
        val = $0; sub(/^[^:]*:[ \t]*/, "", val)
        f[key] = val
      }
      END { if (!found) check() }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
}

# Debian 13 packages, unpacked privately: fetch_trixie DEST PACKAGE... unpacks
# the packages' files under DEST, once (a stamp names the set).
fetch_trixie() {
  local dest=$1; shift
  local pkgs=("$@")
  local stamp="$dest/.stamp-${pkgs[*]// /_}"
  [ -f "$stamp" ] && return 0
  echo "setup-deps: fetching ${pkgs[*]} from Debian 13"
  # The same mirror the system already uses for its own release, other suite.
  local release archive
  release=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
  archive=$(system_archive_uri "$release")
  if [ -z "$release" ] || [ -z "$archive" ]; then
    echo "setup-deps: no apt source of type deb for the ${release:-(unknown)} main archive in" \
         "/etc/apt/sources.list or /etc/apt/sources.list.d; cannot fetch ${pkgs[*]}" >&2
    exit 1
  fi
  local aptdir=/var/cache/nemolens-apt
  $SUDO mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial" "$aptdir/etc/preferences.d" "$dest"
  $SUDO tee "$aptdir/sources.list" >/dev/null <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive trixie main
SRC
  : | $SUDO tee "$aptdir/status" >/dev/null
  local aptopts=(-o Dir::Etc::SourceList="$aptdir/sources.list"
           -o Dir::Etc::SourceParts=/dev/null
           -o Dir::Etc::Preferences="$aptdir/etc/preferences"
           -o Dir::Etc::PreferencesParts="$aptdir/etc/preferences.d"
           -o Dir::State::Lists="$aptdir/lists"
           -o Dir::State::Status="$aptdir/status"
           -o Dir::Cache="$aptdir"
           -o APT::Get::List-Cleanup=0)
  $SUDO apt-get "${aptopts[@]}" update -qq
  local tmp deb
  tmp=$(mktemp -d)
  (cd "$tmp" && $SUDO apt-get "${aptopts[@]}" download "${pkgs[@]}" >/dev/null)
  for deb in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$deb" "$dest"; done
  rm -rf "$tmp"
  $SUDO touch "$stamp"
}

fetch_trixie "$PREFIX" opentelemetry-proto victoria-metrics python3-opentelemetry-proto
# Debian 13's aiohttp and httpx, for the Python adapter's tests only: a tree
# of their own (never on the path of anything else), used by Debian 12's
# interpreter in pure-Python mode (their C extensions are built for 3.13).
fetch_trixie "$PREFIX/python-trixie" python3-aiohttp python3-yarl python3-multidict python3-frozenlist \
  python3-aiosignal python3-aiohappyeyeballs python3-propcache python3-httpx python3-httpcore

# Debian 12's Prometheus (the server and promtool), the scraper of
# nemolens-run's /metrics in the tests: unpacked, never installed, since the
# package would start a system service. The system's own sources have it.
fetch_own() {   # fetch_own DEST PACKAGE...
  local dest=$1; shift
  local stamp="$dest/.stamp-$*"
  stamp=${stamp// /_}
  [ -f "$stamp" ] && return 0
  echo "setup-deps: fetching $* from Debian 12"
  local tmp deb
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download "$@" >/dev/null)
  $SUDO mkdir -p "$dest"
  for deb in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$deb" "$dest"; done
  rm -rf "$tmp"
  $SUDO touch "$stamp"
}
fetch_own "$PREFIX/prometheus" prometheus
echo "setup-deps: ok (Debian 13 packages under $PREFIX, Prometheus under $PREFIX/prometheus)"
