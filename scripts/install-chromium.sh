#!/usr/bin/env bash
# Installs Debian's `chromium` package, which tests/test_html.py drives headless (marker
# `browser`) to render the HTML report, read its DOM and console, and take a screenshot.
#
#   Usage: scripts/install-chromium.sh
#
# - Idempotent: nothing is done when /usr/bin/chromium already exists.
# - Only this machine's own apt sources are used; none is added.
# - Needs root: run it as root, or as a user with sudo. Debian (or a derivative that packages
#   `chromium`) with apt-get.
# - Installs as little as it can: `chromium` and the libraries it depends on, none of the
#   packages apt merely recommends (fonts, upower, the sandbox helper, ...), with
#   --no-install-recommends. Packages already installed are not upgraded unless chromium's own
#   dependencies need a newer version (--no-upgrade covers only the named package: apt has no
#   switch that holds back the dependencies a new package needs). Nothing is removed
#   (--no-remove aborts instead). No service is started or restarted while it runs: a
#   policy-rc.d that answers 101 ("action forbidden") is put in place for the install when the
#   machine has none, and taken away afterwards.
# The last line on stdout is the path of the browser; progress goes to stderr.
set -euo pipefail

readonly CHROMIUM=/usr/bin/chromium

log() { printf 'install-chromium: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -x $CHROMIUM ]]; then
  log "already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  echo "$CHROMIUM"
  exit 0
fi

command -v apt-get >/dev/null || die "apt-get is needed (Debian or a derivative)"
if [[ $(id -u) == 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  die "run as root or install sudo"
fi

readonly POLICY=/usr/sbin/policy-rc.d
placed_policy=0
remove_policy() {
  if ((placed_policy)); then
    "${as_root[@]}" rm -f "$POLICY" || log "warning: could not remove $POLICY"
  fi
}
trap remove_policy EXIT
if [[ ! -e $POLICY ]]; then
  # invoke-rc.d asks this before it starts, stops or restarts a service: 101 = forbidden
  printf '#!/bin/sh\n# placed by gprof-orch scripts/install-chromium.sh for its apt-get install\nexit 101\n' |
    "${as_root[@]}" tee "$POLICY" >/dev/null || die "cannot write $POLICY"
  "${as_root[@]}" chmod 755 "$POLICY"
  placed_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
apt_install=(apt-get install -y -qq --no-install-recommends --no-upgrade --no-remove
             -o Dpkg::Options::=--force-confold chromium)
log "apt-get update"
"${as_root[@]}" apt-get update -qq >&2 || die "apt-get update failed"
log "apt-get would do (simulated first):"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive "${apt_install[@]}" --simulate 2>&1 |
  awk '/^Inst /{n++; if ($3 ~ /^\[/) up++} END {printf "install-chromium: %d package(s), %d of them upgrades\n", n, up}' >&2 || true
log "${apt_install[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive "${apt_install[@]}" >&2 || die "apt-get install chromium failed"

[[ -x $CHROMIUM ]] || die "$CHROMIUM is missing after the install"
"$CHROMIUM" --version >/dev/null 2>&1 || die "$CHROMIUM does not run"
log "installed: $("$CHROMIUM" --version 2>/dev/null)"
echo "$CHROMIUM"
