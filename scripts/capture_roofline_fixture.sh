#!/usr/bin/env bash
# The roofline and findings-CSV fixtures, in one call on a GPU machine (an H200) (about 4 min):
#
#   ../shared/device/prepare.sh 'ncu-report==2026.3.1' matplotlib contourpy cycler fonttools kiwisolver \
#     pillow pyparsing                                       # once, here: builds .device/ (the roofline
#                                                            # chart of report.html needs matplotlib)
#   device run (carry .device):  source .device/setup.sh && bash scripts/capture_roofline_fixture.sh
#   then, here:  python scripts/import_h200_runs.py <files_at>/roofline-runs.tar.xz \
#                  --dest tests/fixtures/runs/h200-roofline \
#                  --only ncu-square,ncu-mean,ncu-triton-mean,ncu-load-inline-square
#
# 1. `gprof-orch ncu` on the four built-in workloads with the default sections, which now include
#    SpeedOfLight_RooflineChart: run folders ncu-<workload>/ (tests/test_roofline.py reads them).
# 2. The cost of that section: `ncu triton-mean` and `ncu square` with the sections of before
#    (timing-before-*/) and with today's (timing-after-*/), alternated, twice each; every run's
#    wall time (manifest.json wall_s) and ncu's passes per kernel (logs/ncu.log) into
#    $OUT/roofline-timing.txt, with the ratio. The bound (orchestrator/backends/ncu.py): 2x.
# 3. ncu's own CSV exports of each fixture report, kept xz-compressed in its folder (tests/conftest.py's
#    h200_run unpacks them): ncu-raw.csv (--page raw), ncu-details.csv (--page details: the rule
#    results the findings' CSV fallback reads), ncu-details-all.csv (--page details --print-details
#    all) and ncu-details-rules.csv (--print-rule-details, where this ncu has the option).
set -uo pipefail
OUT=${OUT:-/tmp/gprof-out}
mkdir -p "$OUT"
RUNS=/tmp/gprof-roofline
rm -rf "$RUNS"; mkdir -p "$RUNS"
g() { python3 -m orchestrator "$@"; }
log() { echo "=== $* ($(date -u +%H:%M:%S))" >&2; }
NCU=$(command -v ncu) || { echo "no ncu on PATH" >&2; exit 1; }
# the default of before this change: no SpeedOfLight_RooflineChart (--section drops the default
# --metrics, so they are named too)
BEFORE=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
        --section SchedulerStats --metrics dram__bytes_read.sum,dram__bytes_write.sum)

log doctor
g doctor | head -20
"$NCU" --version | tail -1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

for w in square mean triton-mean load-inline-square; do
  log "ncu $w"
  g ncu "$w" -o "$RUNS/ncu-$w" 2>&1 | tail -12
  echo "ncu $w: exit ${PIPESTATUS[0]}"
done

passes() { grep -ho '[0-9]* passes' "$1/logs/ncu.log" 2>/dev/null | sort | uniq -c | tr -s ' \n' ' '; }
wall() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]+'/manifest.json')).get('wall_s'))" "$1"; }
{
  echo "ncu wall time, sections of before (no SpeedOfLight_RooflineChart) against today's defaults"
  for w in triton-mean square; do
    for i in $(seq "${ROOFLINE_TIMING_REPS:-2}"); do
      log "timing $w $i"
      g ncu "$w" "${BEFORE[@]}" -o "$RUNS/timing-before-$w-$i" > /dev/null 2>&1
      g ncu "$w" -o "$RUNS/timing-after-$w-$i" > /dev/null 2>&1
      b=$(wall "$RUNS/timing-before-$w-$i"); a=$(wall "$RUNS/timing-after-$w-$i")
      ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}')" "$a" "$b" 2>&1)
      echo "$w run $i: before $b s ($(passes "$RUNS/timing-before-$w-$i")),"\
           "after $a s ($(passes "$RUNS/timing-after-$w-$i")), ratio $ratio (bound: 2)"
    done
  done
} | tee "$OUT/roofline-timing.txt"

for w in square mean triton-mean load-inline-square; do
  run="$RUNS/ncu-$w"
  [ -f "$run/report.ncu-rep" ] || { echo "ncu-$w: no report.ncu-rep" >&2; continue; }
  log "ncu --import $w"
  "$NCU" --import "$run/report.ncu-rep" --csv --page raw > "$run/ncu-raw.csv" 2> "$run/ncu-raw.err"
  "$NCU" --import "$run/report.ncu-rep" --csv --page details > "$run/ncu-details.csv" 2> "$run/ncu-details.err"
  "$NCU" --import "$run/report.ncu-rep" --csv --page details --print-details all \
    > "$run/ncu-details-all.csv" 2> "$run/ncu-details-all.err"
  "$NCU" --import "$run/report.ncu-rep" --csv --page details --print-rule-details \
    > "$run/ncu-details-rules.csv" 2> "$run/ncu-details-rules.err" || echo "ncu-$w: --print-rule-details failed"
  for f in "$run"/ncu-*.csv; do
    echo "$(basename "$f"): $(wc -l < "$f") lines; header: $(head -c 400 "$f" | head -1)"
    grep -c ',"OPT",\|,"WRN",\|,"INF",\|,"ERR",' "$f" | sed 's/^/  rule rows: /'
    xz -9 -f "$f"
  done
  find "$run" -name 'ncu-*.err' -empty -delete
  head -3 "$run"/ncu-*.err 2>/dev/null
done

# pack: the run folders (import_h200_runs.py keeps what a report is rebuilt from); the timing
# runs without their reports (their manifests and logs say what the table above says)
log pack
(cd "$RUNS" && find . -path './timing-*' -name '*.ncu-rep' -delete
 tar cf - . | xz -T0 -6 > "$OUT/roofline-runs.tar.xz")
ls -la "$OUT"
