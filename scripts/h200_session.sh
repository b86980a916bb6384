#!/usr/bin/env bash
# One batched call on the lent H200 (see README "Verifying on a GPU"): doctor, the GPU tests,
# every backend on every built-in workload, fixtures for tests/fixtures/, packed under $OUT.
#
#   ../shared/device/prepare.sh 'ncu-report==2026.3.1'     # once, here: builds .device/
#   device run (carry .device):  source .device/setup.sh && bash scripts/h200_session.sh [STAGES]
#
# STAGES (default: all): doctor tests time trace nsys ncu
set -uo pipefail
OUT=${OUT:-/tmp/gprof-out}
mkdir -p "$OUT"
RUNS=/tmp/gprof-runs
rm -rf "$RUNS"; mkdir -p "$RUNS"
stages=${*:-doctor tests time trace nsys ncu}
g() { python3 -m orchestrator "$@"; }
log() { echo "=== $* ($(date -u +%H:%M:%S))" >&2; }
has() { [[ " $stages " == *" $1 "* ]]; }

if has doctor; then log doctor; g doctor; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; fi
if has tests; then
  log "gpu tests"
  python3 -m pytest -q -m "gpu or nsys or ncu" -p no:cacheprovider tests 2>&1 | tail -25
fi
if has time; then
  for w in square mean; do log "time $w"; g time "$w" -o "$RUNS/time-$w"; done
fi
if has trace; then
  for w in mean square; do log "torch-trace $w"; g torch-trace "$w" -o "$RUNS/torch-trace-$w"; done
fi
if has nsys; then
  for w in square mean triton-mean load-inline-square; do
    log "nsys $w"; g nsys "$w" -o "$RUNS/nsys-$w"
  done
fi
if has ncu; then
  for w in triton-mean square mean load-inline-square; do
    log "ncu $w"; g ncu "$w" -o "$RUNS/ncu-$w"
  done
fi
# pack: the run folders without the bulky nsys-rep (the sqlite export is what tests read)
log pack
(cd "$RUNS" && find . -name '*.nsys-rep' -delete; tar cf - . | xz -T0 -6 > "$OUT/runs.tar.xz")
ls -la "$OUT"
