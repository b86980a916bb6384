#!/usr/bin/env bash
# Installs Debian's `chromium` package, which tests/test_html.py drives headless (marker
# `browser`) to render the HTML report, read its DOM and console, and take a screenshot.
#
#   Usage: scripts/install-chromium.sh
#
# - Idempotent: nothing is done when /usr/bin/chromium already exists.
# - Only this machine's own apt sources are used; none is added.
# - Needs: Debian (or a derivative that packages `chromium`) with apt-get, as root or with sudo.
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

export DEBIAN_FRONTEND=noninteractive
log "apt-get update"
"${as_root[@]}" apt-get update -qq >&2 || die "apt-get update failed"
log "apt-get install chromium"
"${as_root[@]}" apt-get install -y -qq chromium >&2 || die "apt-get install chromium failed"

[[ -x $CHROMIUM ]] || die "$CHROMIUM is missing after the install"
"$CHROMIUM" --version >/dev/null 2>&1 || die "$CHROMIUM does not run"
log "installed: $("$CHROMIUM" --version 2>/dev/null)"
echo "$CHROMIUM"
