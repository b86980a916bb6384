#!/usr/bin/env bash
# One batched call on the lent H200 (see README "Verifying on a GPU"): doctor, the GPU tests,
# every backend on every built-in workload, fixtures for tests/fixtures/, packed under $OUT.
#
#   ../shared/device/prepare.sh 'ncu-report==2026.3.1'     # once, here: builds .device/
#   device run (carry .device):  source .device/setup.sh && bash scripts/h200_session.sh [STAGES]
#
# STAGES (default: doctor tests time trace nsys ncu): also check (doctor --check), sigint (Ctrl-C
# during nsys), all (every backend on square and mean), sweep (triton-mean at three sizes)
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
if has check; then log "doctor --check"; g doctor --check | tail -5; fi
if has sigint; then
  log "SIGINT during nsys"
  # job control on: a non-interactive shell starts background jobs with SIGINT ignored, and
  # Python keeps it ignored (seen on the H200: the run went on to the end)
  set -m
  python3 -m orchestrator nsys square -v mul --iters 20000 -o "$RUNS/nsys-sigint" > "$OUT/sigint.log" 2>&1 &
  pid=$!
  for _ in $(seq 120); do grep -q '"status": "ok"' "$RUNS/nsys-sigint/workload.json" 2>/dev/null && break; sleep 0.5; done
  sleep 1; kill -INT $pid; wait $pid; echo "exit code $?"; set +m
  tail -4 "$OUT/sigint.log"
  python3 -c "import json; print('status:', json.load(open('$RUNS/nsys-sigint/manifest.json'))['status'])"
  ls "$RUNS/nsys-sigint"; g report "$RUNS/nsys-sigint" 2>&1 | head -8
fi
if has all; then
  for w in mean square; do log "all $w"; g all "$w" -o "$RUNS/all-$w"; done
fi
if has sweep; then log "sweep triton-mean"; g time triton-mean --size 1e6,1e7,1e8 -o "$RUNS/sweep-triton-mean"; fi
# pack: the run folders without the bulky nsys-rep (the sqlite export is what tests read)
log pack
(cd "$RUNS" && find . -name '*.nsys-rep' -delete; tar cf - . | xz -T0 -6 > "$OUT/runs.tar.xz")
ls -la "$OUT"
