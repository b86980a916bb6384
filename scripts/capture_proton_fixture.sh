#!/usr/bin/env bash
# The proton backend's fixtures, in one call on a GPU machine (an H200) (about 2 min):
#
#   device run (carry .device):  source .device/setup.sh && bash scripts/capture_proton_fixture.sh
#   then, here:  python scripts/import_h200_runs.py <files_at>/proton-runs.tar.xz \
#                  --dest tests/fixtures/runs/h200-proton
#
# 1. `gprof-orch proton triton-mean --size 1e6`: run folder proton-triton-mean/ (torch.mean, the
#    lecture's Triton mean, the fast one; their kernels and per-iteration time).
# 2. `gprof-orch proton proton-axpy --workload-file tests/fixtures/workloads/proton_axpy.py
#    --size 1e6`: proton-axpy/ (a Triton kernel whose launch_metadata declares FLOPs and bytes,
#    beside two torch ops a call).
# 3. Only where torch.mean's kernels are missing from 1's profile (proton's CUPTI, from triton's
#    wheel, not seeing the CUDA 13 runtime's launches): 1 again with TRITON_CUPTI_LIB_PATH at
#    torch's own CUPTI, proton-triton-mean-torch-cupti/, to know whether that is the cause.
# 4. The same triton-mean under nsys, same session and size: nsys-triton-mean-1e6/, what
#    tests/test_proton.py checks proton's kernel times against (skipped where nsys is missing).
# Each run's exit code, the versions (triton, torch, nvtx, driver) and what our reader makes of
# each proton.hatchet go to $OUT/proton-capture.txt; the run folders to $OUT/proton-runs.tar.xz.
set -uo pipefail
OUT=${OUT:-/tmp/gprof-out}
mkdir -p "$OUT"
RUNS=/tmp/gprof-proton
rm -rf "$RUNS"; mkdir -p "$RUNS"
g() { python3 -m orchestrator "$@"; }
log() { echo "=== $* ($(date -u +%H:%M:%S))" >&2; }
SIZE=${PROTON_SIZE:-1e6}

# `gprof-orch proton` once the CLI has the command; the Python API (same backend, same folder) before
proton() {
  local name=$1; shift
  log "proton $name"
  if g proton --help > /dev/null 2>&1; then
    g proton "$@" -o "$RUNS/$name" 2>&1 | tail -15
    echo "proton $name: exit ${PIPESTATUS[0]}"
  else
    python3 scripts/capture_proton_fixture.py profile "$RUNS/$name" "$@"
  fi
}

{
  log versions
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 scripts/capture_proton_fixture.py versions

  proton proton-triton-mean triton-mean --size "$SIZE"
  proton proton-axpy proton-axpy --workload-file tests/fixtures/workloads/proton_axpy.py --size "$SIZE"

  if ! python3 scripts/capture_proton_fixture.py has-torch-kernels "$RUNS/proton-triton-mean"; then
    cupti=$(python3 scripts/capture_proton_fixture.py torch-cupti)
    echo "torch's CUPTI: ${cupti:-none found}"
    [ -n "$cupti" ] && ls -la "$cupti" | grep -i cupti
    if [ -n "$cupti" ]; then
      TRITON_CUPTI_LIB_PATH=$cupti proton proton-triton-mean-torch-cupti triton-mean --size "$SIZE"
    fi
  fi

  if command -v nsys > /dev/null; then
    log "nsys triton-mean"
    g nsys triton-mean --size "$SIZE" -o "$RUNS/nsys-triton-mean-1e6" 2>&1 | tail -12
    echo "nsys triton-mean: exit ${PIPESTATUS[0]}"
  else
    echo "no nsys on PATH: no nsys-triton-mean-1e6/"
  fi

  for run in "$RUNS"/proton-*; do
    log "read $(basename "$run")"
    ls -la "$run" "$run/logs"
    tail -5 "$run"/logs/workload.stderr.log
    head -c 1500 "$run/proton.hatchet"; echo
    python3 scripts/capture_proton_fixture.py summary "$run"
  done
} 2>&1 | tee "$OUT/proton-capture.txt"

log pack
(cd "$RUNS" && tar cf - . | xz -T0 -6 > "$OUT/proton-runs.tar.xz")
ls -la "$OUT"
