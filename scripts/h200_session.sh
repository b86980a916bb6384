#!/usr/bin/env bash
# One batched call on a GPU machine (an H200 or H100; see README "Verifying on a GPU"): doctor, the GPU tests,
# every backend on every built-in workload, fixtures for tests/fixtures/, packed under $OUT.
#
#   ../shared/device/prepare.sh 'ncu-report==2026.3.1'     # once, here: builds .device/
#   device run (carry .device):  source .device/setup.sh && bash scripts/h200_session.sh [STAGES]
#
# STAGES (default: doctor tests time trace nsys ncu); also: check (doctor --check), sigint (Ctrl-C
# during nsys and ncu), nsys-limit (how many launches nsys processes), nsys-flush (the same past
# the limit with --cuda-flush-interval), gpu-sleep (time with and without --gpu-sleep), all
# (every backend on square and mean), timetests (the time backend's GPU tests only), sweep (triton-mean at three sizes), timers (the time backend's
# timers and stop rule), fidelity (benchmarks/bench_fidelity.py; FIDELITY_WORKLOADS, FIDELITY_TIMERS),
# exec (a training script and nested ranges under `exec nsys`, checked against nsys stats), roofline
# (scripts/capture_roofline_fixture.sh), cluster (sweeps through --cluster local-cuda), launch-report
# (the fast Triton mean under nsys, Triton's launch against the cached one), probe (CUDA square configs,
# launch bench, memory roof), measured-roof (ncu fixtures with the
# measured roof, ncu tests, launch bench x2), launch (launch GPU tests, launch bench x LAUNCH_RUNS),
# kclock (the kernel clock: cupti-python, its tests, CUPTI's host cost; KCLOCK_TESTS_ONLY=1: the time GPU
# tests on it), cupti (cupti-python installed first: every later stage on the kernel clock), square-wall (the default
# time square's wall time, the clock on and off), wall-ab (the same, an older commit's copy
# (WALL_OLD) against this tree, interleaved), goals (the timing goals: A/A at 1e8 and noise at 1e6, on the defaults), cuda13-nsys (CUPTI names of nsys's unknown runtime calls; exec nsys training with lazy and eager module loading), throttle (a GEMM hammer beside `time`), nsys2025 (ncu's nsys + importer),
# programs (a PyTorch program, unchanged, under the plain exec nsys and exec ncu, against nvtx_kern_sum),
# integrity (tests/fixtures/workloads/fooling.py's variants under time, nsys, torch-trace and ncu, and their GPU tests)
set -uo pipefail
OUT=${OUT:-/tmp/gprof-out}
mkdir -p "$OUT"
stages=${*:-doctor tests time trace nsys ncu}
# one folder (and one pack) per call: a second call in the same session keeps the first's runs
tag=${stages// /-}
RUNS=/tmp/gprof-runs/$tag
rm -rf "$RUNS"; mkdir -p "$RUNS"
g() { python3 -m orchestrator "$@"; }
log() { echo "=== $* ($(date -u +%H:%M:%S))" >&2; }
has() { [[ " $stages " == *" $1 "* ]]; }

cupti_setup() {
  # cupti-python from .device/cupti (the image lacks it; its own cuda.bindings serves when no
  # cuda_bindings wheel is carried); exported, so every later stage runs on the kernel clock
  [[ -n ${CUPTI_READY:-} ]] && return
  log "cupti-python"
  python3 -c "import cuda.bindings as b; print('image cuda.bindings', b.__version__)" 2>&1 | tail -1
  if ls .device/cupti/cuda_bindings*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps --no-index --target /tmp/cupti .device/cupti/*.whl
  else
    python3 -m pip install -q --no-deps --no-index --target /tmp/cupti $(ls .device/cupti/*.whl)
  fi
  export PYTHONPATH=/tmp/cupti:$PYTHONPATH CUPTI_READY=1
  python3 -c "from cupti import cupti; print('cupti-python ok', cupti.get_timestamp())" 2>&1 | tail -1
}
# cupti: the kernel clock for every stage after it (first, before doctor and the tests)
if has cupti || has kclock; then cupti_setup; fi
if has doctor; then log doctor; g doctor; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; fi
if has tests; then
  log "gpu tests"
  k=(); [[ -n ${PYTEST_K:-} ]] && k=(-k "$PYTEST_K")  # e.g. "not cluster" where dask is not carried
  python3 -m pytest -q -m "gpu or nsys or ncu" "${k[@]}" -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu-tests.log" | tail -25
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
if has timetests; then
  # the time backend's GPU tests alone (blocking timer, spin timeout, CUDA graphs, NVML, kernel clock)
  log "time GPU tests"
  python3 -m pytest -q -p no:cacheprovider -m "gpu or nsys or ncu" tests/test_timers_gpu.py tests/test_gpu_e2e.py 2>&1 \
    | tee "$OUT/time-gpu-tests.log" | tail -15
fi
if has timers; then
  # the time backend's timers (blocking, sleep, none), adaptive sampling, and the default run's wall time
  log "timer tests"
  python3 -m pytest -q -p no:cacheprovider tests/test_timers_gpu.py tests/test_gpu_e2e.py 2>&1 | tee "$OUT/timer-tests.log" | tail -15
  log "time square (defaults)"
  s=$(date +%s%N); g time square -o "$RUNS/time-square-default" | tail -9; e=$(date +%s%N)
  echo "time square wall: $(( (e - s) / 1000000 )) ms"
  for i in 1 2 3; do g time square --size 1e8 -v mul --format csv -o "$RUNS/aa-$i" | grep -E '^(torch_square|mul),'; done
fi
if has kclock; then
  g doctor 2>&1 | grep -i cupti
  log "kernel clock tests"
  python3 -m pytest -q -p no:cacheprovider tests/test_timers_gpu.py -k "kernel_clock or driver_event" 2>&1 | tee "$OUT/kclock-tests.log" | tail -8
  if [[ -n ${KCLOCK_TESTS_ONLY:-} ]]; then
    log "time GPU tests, on the kernel clock by default"
    python3 -m pytest -q -p no:cacheprovider -m "gpu or nsys or ncu" tests/test_timers_gpu.py tests/test_gpu_e2e.py 2>&1 \
      | tee "$OUT/kclock-gpu-tests.log" | tail -12
  else
  log "CUPTI overhead probe"
  python3 benchmarks/probes/probe_cupti_overhead.py --rounds "${KCLOCK_ROUNDS:-3}" --out "$OUT/cupti-overhead.json" 2>/dev/null
  log "CPU us with and without --kernel-clock"
  for i in 1 2 3; do for kc in off on; do
    a=(--no-kernel-clock); [[ $kc == on ]] && a=(--kernel-clock)
    g time square --size 1e6 "${a[@]}" -o "$RUNS/cpu-$i-$kc" >/dev/null 2>&1
    python3 - "$RUNS/cpu-$i-$kc/report.json" "$i" "$kc" <<'PY' | tee -a "$OUT/kclock-cpu.txt"
import json, sys
for r in json.load(open(sys.argv[1]))["variants"]:
    print(sys.argv[2], sys.argv[3], r["variant"], r.get("time_median_us"), r.get("events_median_us"), r.get("cpu_median_us"), r.get("samples"))
PY
  done; done
  s=$(date +%s%N); g time square --kernel-clock -o "$RUNS/time-square-kc" | tail -12; e=$(date +%s%N)
  echo "time square --kernel-clock wall: $(( (e - s) / 1000000 )) ms"
  fi
fi
if has square-wall; then
  # the `time` goal: the default `time square` takes no longer than 16 s; the clock on and off, interleaved
  # and where it goes: the runner's phases and each variant's warm-up and measurement (workload.json)
  for i in $(seq "${WALL_RUNS:-2}"); do for kc in --kernel-clock --no-kernel-clock; do
    s=$(date +%s%N); g time square "$kc" -o "$RUNS/wall-$i$kc" >/dev/null 2>&1; e=$(date +%s%N)
    echo "time square $kc wall: $(( (e - s) / 1000000 )) ms" | tee -a "$OUT/square-wall.txt"
    python3 - "$RUNS/wall-$i$kc" <<'PY' | tee -a "$OUT/square-wall.txt"
import json, sys
w = json.load(open(sys.argv[1] + "/workload.json")); m = json.load(open(sys.argv[1] + "/manifest.json"))
print("  gprof-orch", m.get("wall_s"), "s (report", m.get("report_s"), "s); runner", w.get("phases_s"))
for v in w["variants"]:
    print("   ", v["name"], "setup", v.get("setup_s"), "warm_up", v.get("warm_up_s"), "measure", v.get("measure_s"), "samples", v.get("samples"))
PY
  done; done
fi
if has wall-ab; then
  # the `time` wall-time goal side by side: the default `time square` on the old code (WALL_OLD, a
  # copy of an earlier commit's orchestrator/, workloads/ and reports/, carried) and on this tree,
  # interleaved, WALL_RUNS times each; warm caches (one untimed run of each first)
  old=${WALL_OLD:-ab-old}
  [[ -d $old || ! -f .ab-old.tar.xz ]] || { mkdir -p "$old" && tar xJf .ab-old.tar.xz -C "$old"; }
  for i in 0 $(seq "${WALL_RUNS:-3}"); do for which in old new; do
    dir=.; [[ $which == old ]] && dir=$old
    # the copy first on the path, for the runner's own process too
    s=$(date +%s%N); (cd "$dir" && PYTHONPATH=$PWD:$PYTHONPATH python3 -m orchestrator time square -o "$RUNS/ab-$i-$which" \
      >/dev/null 2>&1); rc=$?; e=$(date +%s%N)
    [[ $i == 0 ]] && continue
    # phases_s is in the new runner's workload.json only: proof of which code ran
    ph=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('phases_s'))" "$RUNS/ab-$i-$which/workload.json" 2>&1 | tail -1)
    echo "run $i $which: rc $rc, wall $(( (e - s) / 1000000 )) ms, phases $ph" | tee -a "$OUT/wall-ab.txt"
  done; done
fi
if has goals; then
  # the `time` goals (median against nsys, spread) as the defaults run them: three processes of `time square --size 1e8`
  # (A/A), every built-in variant at 1e6 with --max-noise 0.5 (noise_pct), the default wall time
  rows() { python3 - "$@" <<'PY'
import json, sys
tag = sys.argv[2]
# each clock's step as its samples show it (the smallest gap between two readings): the floor
# of noise_pct (workloads/stopping.py) is half of it
steps = {}
for v in json.load(open(sys.argv[1] + "/workload.json"))["variants"]:
    for key in ("kernel_samples_ns", "event_samples_ns", "time_samples_ns"):
        xs = sorted({x for x in v.get(key) or [] if x is not None})
        gaps = [b - a for a, b in zip(xs, xs[1:])]
        steps.setdefault(v["name"], []).append(f"{key.split('_')[0]} step {min(gaps):.1f} ns" if gaps else f"{key.split('_')[0]} -")
for r in json.load(open(sys.argv[1] + "/report.json"))["variants"]:
    print(tag, r["variant"], r.get("status"), r.get("time_median_us"), r.get("events_median_us"),
          r.get("noise_pct"), r.get("samples"), r.get("cpu_median_us"), ", ".join(steps.get(r["variant"], [])),
          (r.get("note") or "")[:90], sep=" | ")
PY
  }
  for i in 1 2 3; do
    log "A/A $i: time square --size 1e8"; g time square --size 1e8 -o "$RUNS/aa-$i" >/dev/null 2>&1
    rows "$RUNS/aa-$i" "aa-$i" | tee -a "$OUT/goals.txt"
  done
  for w in square mean triton-mean load-inline-square; do
    log "noise: time $w --size 1e6 --max-noise 0.5"; g time $w --size 1e6 --max-noise 0.5 -o "$RUNS/noise-$w" >/dev/null 2>&1
    rows "$RUNS/noise-$w" "noise-$w" | tee -a "$OUT/goals.txt"
  done
fi
if has fidelity; then
  log "fidelity matrix: ${FIDELITY_WORKLOADS:=square,mean,triton-mean,slow-host-mean}"
  python3 benchmarks/bench_fidelity.py --out "$OUT/fidelity-${FIDELITY_TAG:-all}" --workloads "$FIDELITY_WORKLOADS" \
    --timers "${FIDELITY_TIMERS-blocking,sleep,none,warm}" ${FIDELITY_ARGS:-} 2>&1 | tail -60
fi
if has exec; then
  # exec nsys: a user's own training script, and the nested-range program, under `exec nsys`; each
  # range's launches and GPU ns checked against `nsys stats -r nvtx_kern_sum` on the same export
  log "exec nsys: scripts/train_small.py"
  g exec nsys --ranges '*@' -o "$RUNS/exec-train" -- python3 scripts/train_small.py --steps 20 2>&1 | tee "$OUT/exec-train.txt" | cut -c1-220
  python3 scripts/check_kern_sum.py "$RUNS/exec-train" 2>&1 | tee -a "$OUT/exec-train.txt"
  log "exec nsys: nested ranges"
  g exec nsys --ranges '*@' -o "$RUNS/exec-nested" -- python3 tests/fixtures/nsys/h200_nested_nvtx0210/program.py 2>&1 \
    | tee "$OUT/exec-nested.txt" | cut -c1-220
  python3 scripts/check_kern_sum.py "$RUNS/exec-nested" 2>&1 | tee -a "$OUT/exec-nested.txt"
fi
if has roofline; then
  # roofline: ncu with SpeedOfLight_RooflineChart on the built-ins, its cost, and ncu's details CSV
  log "roofline capture"; ROOFLINE_TIMING_REPS=${ROOFLINE_TIMING_REPS:-1} bash scripts/capture_roofline_fixture.sh 2>&1 | tail -40
fi
if has cluster; then
  # --cluster on one GPU: the same sweep serial and on a local-cuda cluster (one worker, GPU=1),
  # then nsys and ncu points through the cluster; each point's manifest names its GPU
  for how in serial cluster; do
    flag=(); [[ $how == cluster ]] && flag=(--cluster local-cuda)
    log "time sweep triton-mean, $how"
    s=$(date +%s%N); g time triton-mean --size 1e6,1e7,1e8 -v torch_mean,triton_fast "${flag[@]}" \
      -o "$RUNS/sweep-$how" 2>&1 | grep -v '^saved' | tail -12; e=$(date +%s%N)
    echo "time sweep $how wall: $(( (e - s) / 1000000 )) ms"
  done
  log "nsys sweep via local-cuda"; g nsys triton-mean --size 1e6,1e7 -v torch_mean,triton_fast --cluster local-cuda \
    -o "$RUNS/nsys-sweep-cluster" 2>&1 | tail -6
  log "ncu sweep via local-cuda"; g ncu triton-mean --size 1e6,1e7 -v torch_mean,triton_fast --cluster local-cuda \
    -o "$RUNS/ncu-sweep-cluster" 2>&1 | tail -6
  python3 - "$RUNS" <<'PY'
import json, pathlib, sys
for m in sorted(pathlib.Path(sys.argv[1]).glob("*-cluster/*/manifest.json")):
    d = json.loads(m.read_text())
    print(m.parent.parent.name, m.parent.name, d.get("status"), json.dumps(d.get("placement")))
PY
fi
if has launch-report; then
  # the cached launch's before/after: the fast Triton mean under nsys with Triton's own launch (plain) and the cached one
  for mode in plain fast; do
    log "nsys triton-mean 1e7, launch $mode"
    GPROF_ORCH_TRITON_LAUNCH=$mode g nsys triton-mean --size 1e7 -v torch_mean,triton_fast -o "$RUNS/launch-$mode" \
      2>&1 | tee "$OUT/launch-$mode.txt" | grep -v '^saved'
  done
fi
if has check; then log "doctor --check"; g doctor --check | tail -5; fi
# sigint_case NAME TOOL CONDITION [ARGS]: TOOL square (torch_square, mul, pow) into $RUNS/NAME,
# SIGINT to gprof-orch once CONDITION (python, on the workload.json dict `w`) holds
sigint_case() {
  local name=$1 run="$RUNS/$1" tool=$2 cond=$3; shift 3
  log "SIGINT during $tool: $name"
  # job control on: a non-interactive shell starts background jobs with SIGINT ignored, and
  # Python keeps it ignored (seen on the H200: the run went on to the end)
  set -m
  python3 -m orchestrator "$tool" square -v mul,pow "$@" -o "$run" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    python3 -c "import json,sys; w=json.load(open('$run/workload.json')); sys.exit(not ($cond))" 2>/dev/null && break
    sleep 0.1
  done
  echo "SIGINT at $(date -u +%H:%M:%S.%N | cut -c1-12)"; kill -INT $pid; wait $pid; echo "exit code $?"; set +m
  tail -6 "$OUT/$name.log"
  echo "processes left: $(ps -eo pid,args | grep -c "[s]igint-")"
  python3 -c "import json; print('status:', json.load(open('$run/manifest.json'))['status'])"
  ls "$run"; g report "$run" 2>&1 | head -12
}
if has sigint; then
  # while the workload measures its second variant: the workload is stopped, nsys keeps all
  mul_done="any(v['name'] == 'mul' and v['status'] == 'ok' for v in w['variants'])"
  # 4e8 float32 (~0.8 ms a call) x 2000: ~1.6 s a variant, 6000 launches in all (nsys 2023.4.4
  # fails to process 60,000: see nsys-limit)
  sigint_case nsys-sigint-measuring nsys "$mul_done" --size 4e8 --iters 2000
  # once the workload has ended, while nsys writes its report: gprof-orch waits for it
  sigint_case nsys-sigint-writing nsys "w['status'] == 'ok'" --size 4e8 --iters 2000
  # under ncu (each kernel replayed): the workload is stopped, ncu saves the kernels it profiled
  sigint_case ncu-sigint-measuring ncu "$mul_done" --iters 30
fi
if has nsys-limit; then
  # how many launches nsys processes here, with gprof-orch's default --cuda-flush-interval=1000
  # (nsys 2023.4.4's own default, 0, failed at 20,000: see docs/nsight-facts.md)
  for case in "torch_square 40000" "mul,pow 20000" "torch_square 100000"; do
    set -- $case
    name="nsys-limit-${1//,/-}-$2"
    log "nsys limit: $name"
    g nsys square -v "$1" --iters "$2" -o "$RUNS/$name" > "$OUT/$name.log" 2>&1
    echo "$name: exit $?; $(grep -ho 'Errors occurred[^*]*\|AnalysisFailed' "$RUNS/$name"/logs/nsys-profile.* | sort -u | tr '\n' ' ')"
    grep -E "^(torch_square|mul|pow) " "$OUT/$name.log" | cut -c1-160
  done
fi
if has nsys-flush; then
  # does a CUDA flush interval get nsys 2023.4.4 past the limit? 20,000 launches, one variant
  for ms in 100 1000; do
    log "nsys 20000 launches, --cuda-flush-interval=$ms"
    g nsys square -v torch_square --iters 20000 --nsys-arg=--cuda-flush-interval=$ms -o "$RUNS/nsys-flush-$ms" \
      > "$OUT/nsys-flush-$ms.log" 2>&1
    echo "flush $ms ms: exit $?"; head -3 "$OUT/nsys-flush-$ms.log"
  done
fi
if has gpu-sleep; then
  # the time backend with and without the GPU sleep that keeps the host's launch out of the timing
  for us in 0 100; do
    log "time, --gpu-sleep $us"
    g time triton-square --size 1e6,1e7,1e8 --iters 200 --gpu-sleep $us -o "$RUNS/gpu-sleep-$us" 2>&1 | grep -v "^saved"
    g time triton-mean -v triton_fast --size 1e6,1e8 --iters 200 --gpu-sleep $us -o "$RUNS/gpu-sleep-mean-$us" 2>&1 \
      | grep -v "^saved"
  done
fi
if has all; then
  for w in mean square; do log "all $w"; g all "$w" -o "$RUNS/all-$w"; done
fi
if has sweep; then log "sweep triton-mean"; g time triton-mean --size 1e6,1e7,1e8 -o "$RUNS/sweep-triton-mean"; fi
if has probe; then
  # the CUDA square's configs per size, the cached calls' host and GPU time against
  # torch, and what DRAM bandwidth any kernel reaches here (events and ncu)
  log "cuda square config sweep"
  python3 benchmarks/bench_kernels.py --sweep-only --sweep-families cuda_square_fast --sweep-sizes 1e5,1e6,1e7,1e8 \
    --sweep-reps 300 --out "$OUT/sweep-cuda-square.md" 2>&1 | tail -4
  log "launch bench"
  python3 benchmarks/bench_launch.py --out "$OUT/launch.json" 2>&1 | grep -E "^\|" | head -60
  log "memory roof (events)"
  python3 benchmarks/probes/probe_memory_roof.py --size 1e8 | tee "$OUT/roof-events.md"
  log "memory roof (ncu)"
  ncu --profile-from-start off --csv --metrics "$(python3 benchmarks/probes/probe_memory_roof.py --metrics)" \
    python3 benchmarks/probes/probe_memory_roof.py --size 1e8 --ncu > "$OUT/roof-ncu.csv" 2> "$OUT/roof-ncu.err"
  echo "ncu exit $?"; grep -c '"' "$OUT/roof-ncu.csv"
  log "ncu on the built-ins with the measured roof"
  for w in ${PROBE_NCU:-square load-inline-square triton-mean mean}; do g ncu $w -o "$RUNS/ncu-roof-$w" 2>&1 | grep -v "^saved" | tail -12; done
fi
if has measured-roof; then
  # run folders with the measured memory roof for tests/fixtures/runs/h200-measured-roof
  # (ncu's own ncu_report of 2025.3.1 crashes reading its reports here: carry the ncu-report wheel),
  # the ncu GPU tests, and the launch bench twice more for the host-time ranges
  for w in ${MEASURED_ROOF_WORKLOADS:-square triton-mean load-inline-square}; do
    log "ncu $w"; g ncu $w -o "$RUNS/ncu-$w" 2>&1 | grep -v "^saved" | tail -14
  done
  log "ncu and roofline GPU tests"
  python3 -m pytest -q -m "gpu or ncu" -p no:cacheprovider tests/test_import_ncu.py tests/test_roofline.py 2>&1 | tail -5
  for i in 1 2; do
    log "launch bench $i"
    python3 benchmarks/bench_launch.py --out "$OUT/launch-$i.json" 2>&1 | grep -E "^\| 1e" | grep -v plain
  done
fi
if has launch; then
  # the fast kernels' host side: the launch tests on the GPU, then the launch bench LAUNCH_RUNS times
  # (its breakdown times each step of the cached calls alone)
  log "launch and kernel GPU tests"
  python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_launch.py tests/test_kernels.py 2>&1 | tail -4
  for i in $(seq "${LAUNCH_RUNS:-2}"); do
    log "launch bench $i"
    python3 benchmarks/bench_launch.py --out "$OUT/launch-$i.json" 2>&1 | grep -E "^\| (1e|step|  |cuda|torch|triton)" | grep -v "plain |"
  done
fi
if has cuda13-nsys; then
  # exec nsys on CUDA 13: which runtime calls nsys 2023.4.4 does not know, and whether the training
  # script under `exec nsys` keeps its events when CUDA loads every module up front (no lazy
  # loading calls during the run)
  log "CUPTI names of the unknown runtime indices"; python3 benchmarks/probes/probe_cupti_cbid.py 468 486
  for mode in ${MODULE_LOADING-LAZY EAGER}; do
    log "exec nsys train_small, CUDA_MODULE_LOADING=$mode"
    CUDA_MODULE_LOADING=$mode g exec nsys --ranges '*@' -o "$RUNS/exec-train-$mode" -- python3 scripts/train_small.py \
      --steps 20 2>&1 | tee "$OUT/exec-train-$mode.txt" | cut -c1-200 | tail -12
    grep -ho "Unknown runtime API function index: [0-9]*" "$RUNS/exec-train-$mode"/logs/* 2>/dev/null | sort | uniq -c
    python3 scripts/check_kern_sum.py "$RUNS/exec-train-$mode" 2>&1 | tee -a "$OUT/exec-train-$mode.txt" | tail -12
  done
  # the steady state only: 3 warm-up steps outside nsys's capture (cudaProfilerStart after them)
  log "exec nsys train_small, capture from cudaProfilerStart"
  g exec nsys --ranges '*@' --nsys-arg=--capture-range=cudaProfilerApi --nsys-arg=--capture-range-end=stop \
    -o "$RUNS/exec-train-steady" -- python3 scripts/train_small.py --steps 20 --warmup 3 2>&1 \
    | tee "$OUT/exec-train-steady.txt" | cut -c1-200 | tail -12
  grep -ho "Unknown runtime API function index: [0-9]*" "$RUNS/exec-train-steady"/logs/* 2>/dev/null | sort | uniq -c
  python3 scripts/check_kern_sum.py "$RUNS/exec-train-steady" 2>&1 | tee -a "$OUT/exec-train-steady.txt" | tail -12
fi
if has throttle; then
  # throttling: does a GPU made to throttle (a second process running bf16 GEMMs at full power)
  # get its variants flagged? The same run without the hammer beside it.
  log "time square, quiet"
  g time square --size 1e8 -v torch_square,triton --iters 300 -o "$RUNS/throttle-quiet" 2>&1 | grep -v "^saved" | tail -6
  python3 - > "$OUT/hammer.log" 2>&1 <<'PY' &
import time, torch
a = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
t = time.time()
while time.time() - t < 45:
    for _ in range(20): c = a @ b
    torch.cuda.synchronize()
PY
  hp=$!; sleep 8
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv
  log "time square, hammered"
  g time square --size 1e8 -v torch_square,triton --iters 300 -o "$RUNS/throttle-hammer" 2>&1 | grep -v "^saved" | tail -8
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv
  kill $hp 2>/dev/null; wait $hp 2>/dev/null
  python3 -c "
import json,sys
for r in ('throttle-quiet','throttle-hammer'):
    m=json.load(open('$RUNS/'+r+'/workload.json'))
    for v in m.get('variants',[]):
        c=v.get('clocks') or []
        print(r, v['name'], v.get('clock_note'), [(x['sm_mhz'], x['power_w'], x['reasons']) for x in c][:6])
"
fi
if has nsys2025; then
  # does ncu's own nsys (2025, no importer of its own) make a .qdstrm that 2023.4.4's importer reads?
  n25=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64 2>/dev/null | head -1)
  log "nsys from $n25"
  "$n25/nsys" --version; "$n25/nsys" profile -t cuda,nvtx -o /tmp/n25 --force-overwrite true \
    python3 -c "import torch; x=torch.rand(10**6,device='cuda'); [torch.square(x) for _ in range(50)]; torch.cuda.synchronize()" 2>&1 | tail -5
  ls -la /tmp/n25* 2>&1
  imp=$(ls /tmp/nsys/host-linux-x64/QdstrmImporter 2>/dev/null)
  [[ -n $imp && -f /tmp/n25.qdstrm ]] && "$imp" -i /tmp/n25.qdstrm 2>&1 | tail -5 && ls -la /tmp/n25*
fi
if has programs; then
  # a new user's PyTorch program, unchanged, under the plain `exec nsys` and `exec ncu`: every
  # range against nsys's own nvtx_kern_sum; the same program's instances under ncu; then the
  # tests that hold both, and the nsys workloads parsed from this nsys's exports
  log "exec nsys nested_steps ($(nsys --version 2>&1 | tail -1))"
  g exec nsys -o "$RUNS/exec-nested-steps" -- python3 tests/fixtures/programs/nested_steps.py 2>&1 | cut -c1-220 | tail -14
  python3 scripts/check_kern_sum.py "$RUNS/exec-nested-steps" 2>&1 | tail -8
  log "exec ncu nested_steps"
  g exec ncu -o "$RUNS/exec-ncu-nested-steps" -- python3 tests/fixtures/programs/nested_steps.py 2>&1 | cut -c1-220 | tail -8
  log "exec nsys train_small (no warm-up capture range)"
  g exec nsys -o "$RUNS/exec-train" -- python3 scripts/train_small.py --steps 20 2>&1 | cut -c1-220 | tail -10
  python3 scripts/check_kern_sum.py "$RUNS/exec-train" 2>&1 | tail -8
  log "nsys square"; g nsys square -o "$RUNS/nsys-square" 2>&1 | cut -c1-220 | tail -10
  log "program tests"
  python3 -m pytest -q -p no:cacheprovider -m "gpu or nsys or ncu" tests/test_gpu_programs.py tests/test_import_ncu.py \
    tests/test_h200_programs.py 2>&1 | tee "$OUT/program-tests.log" | tail -15
fi
if has integrity; then
  # variants built to fool each timer (tests/fixtures/workloads/fooling.py) under every backend:
  # honest, side stream, cached; no GPU work; bytes overstated 50x. No ok row may read faster than honest.
  f=(--workload-file tests/fixtures/workloads/fooling.py)
  show() { cut -c1-260 | grep -v '^saved:' | tail -"${1:-12}"; }
  if [[ -z ${INTEGRITY_NO_TIME:-} ]]; then
  log "time fooling (events)"; g time fooling "${f[@]}" --no-kernel-clock -o "$RUNS/time-fooling-events" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  log "time fooling (kernel clock)"; g time fooling "${f[@]}" -o "$RUNS/time-fooling" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  log "time fooling_view"; g time fooling_view "${f[@]}" -o "$RUNS/time-fooling-view" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  log "time fooling_inflated"; g time fooling_inflated "${f[@]}" -o "$RUNS/time-fooling-inflated" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  fi
  if [[ -z ${INTEGRITY_NO_FOOLING:-} ]]; then
  for b in ${INTEGRITY_BACKENDS:-nsys torch-trace ncu}; do
    log "$b fooling"; g "$b" fooling "${f[@]}" -o "$RUNS/$b-fooling" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
    log "$b fooling_view"; g "$b" fooling_view "${f[@]}" -o "$RUNS/$b-fooling-view" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  done
  fi
  if [[ -z ${INTEGRITY_NO_GEMM:-} ]]; then
  # a user's GEMM that declares no FLOPs: PyTorch's FlopCounterMode counts them
  u=(--workload-file tests/fixtures/workloads/gemm_undeclared.py --dtype bfloat16)
  log "time gemm_undeclared"; g time gemm_undeclared "${u[@]}" -o "$RUNS/time-gemm-undeclared" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  log "ncu gemm_undeclared"; g ncu gemm_undeclared "${u[@]}" -o "$RUNS/ncu-gemm-undeclared" 2>&1 | show; echo "rc ${PIPESTATUS[0]}"
  fi
  if [[ -z ${INTEGRITY_NO_TESTS:-} ]]; then
  log "integrity GPU tests"
  python3 -m pytest -q -p no:cacheprovider -m "gpu or nsys or ncu" tests/test_integrity.py 2>&1 \
    | tee "$OUT/integrity-tests.log" | tail -15
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_flops.py -k undeclared 2>&1 | tail -5
  fi
fi
# pack: the run folders without the bulky nsys-rep (the sqlite export is what tests read)
log pack
(cd "$RUNS" && find . -name '*.nsys-rep' -delete; tar cf - . | xz -T0 -6 > "$OUT/runs-$tag.tar.xz")
ls -la "$OUT"
