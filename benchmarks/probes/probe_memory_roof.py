#!/usr/bin/env python3
"""What DRAM bandwidth a kernel can reach on this GPU: copy, read-only and read-write kernels,
by CUDA events and (run under ncu) by ncu's own DRAM metrics, against the roofline's memory roof.

    python3 benchmarks/probes/probe_memory_roof.py --size 1e8                  # events, median of --reps
    ncu --profile-from-start off --csv --metrics "$(python3 benchmarks/probes/probe_memory_roof.py --metrics)" \\
        python3 benchmarks/probes/probe_memory_roof.py --size 1e8 --ncu          # one profiled call per kernel

The kernels: torch's device-to-device copy (read n, write n), torch.sum and torch.mean (read n),
torch.square (read n, write n), and the project's fast kernels: fast_mean, triton_square and the
CUDA fast_square. Bytes are the fewest each must move. With --ncu each kernel is called once
between cudaProfilerStart/Stop, after a warm-up, so ncu profiles exactly those calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# ncu's DRAM view of a kernel: duration, bytes each way, % of its peak, and the peak's parts
METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum.per_second",
    "dram__bytes.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
]


def kernels(torch, n: int):
    from workloads.kernels import cuda_square, triton_mean, triton_square

    x = torch.rand(n, device="cuda")
    y = torch.empty_like(x)
    cuda_square.build_extensions()
    item = x.element_size()
    # name -> (call, fewest bytes moved)
    return {
        "copy_d2d": (lambda: y.copy_(x), 2 * n * item),
        "torch.sum": (lambda: torch.sum(x), n * item),
        "torch.mean": (lambda: torch.mean(x), n * item),
        "fast_mean": (lambda: triton_mean.fast_mean(x), n * item),
        "torch.square": (lambda: torch.square(x), 2 * n * item),
        "triton_square": (lambda: triton_square.triton_square(x), 2 * n * item),
        "cuda_fast_square": (lambda: cuda_square.fast_square(x), 2 * n * item),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1e8", help="float32 elements (default 1e8)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--ncu", action="store_true", help="one call per kernel inside the profiler range")
    ap.add_argument("--metrics", action="store_true", help="print the ncu metric list and exit")
    args = ap.parse_args()
    if args.metrics:
        print(",".join(METRICS))
        return 0
    import torch

    n = int(float(args.size))
    ks = kernels(torch, n)
    for fn, _ in ks.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    if args.ncu:
        torch.cuda.profiler.start()
        for fn, _ in ks.values():
            fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(json.dumps({"order": list(ks)}))
        return 0
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    times: dict[str, list[float]] = {k: [] for k in ks}
    for r in range(args.reps):  # interleaved, the L2 flushed before each call
        for name, (fn, _) in ks.items():
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(100_000)  # the launch lands while the GPU sleeps
            a.record()
            fn()
            b.record()
            b.synchronize()
            times[name].append(a.elapsed_time(b) * 1e3)
    print(
        f"| kernel | median us | GB/s (fewest bytes) | n={n} float32, {args.reps} reps, {torch.cuda.get_device_name()} |"
    )
    print("| --- | ---: | ---: | --- |")
    for name, (_, nbytes) in ks.items():
        med = statistics.median(times[name])
        print(f"| {name} | {med:.2f} | {nbytes / med / 1e3:.0f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
