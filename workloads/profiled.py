"""The `profile` and `torch-trace` modes of the runner: each variant's measured iterations run
plainly inside its NVTX range and record_function, for an outside profiler (nsys, ncu) to
observe, or under torch.profiler, whose Chrome trace is written beside workload.json."""

from __future__ import annotations

import os
import time

from workloads.environment import sync
from workloads.manifest import measuring, record_failure
from workloads.nvtx_ranges import RANGE_PREFIX

TRACE = "trace.json"
ITER_LABEL = "iter"


def _run_variant_block(spec, v, x, ranges) -> None:
    """The measured block: one NVTX range and one record_function around `iters` calls."""
    import torch

    label = RANGE_PREFIX + v.name
    ranges.push(label)
    try:
        with torch.profiler.record_function(label):
            for _ in range(spec.iters):
                with torch.profiler.record_function(ITER_LABEL):
                    v.fn(x)
            sync(spec.device)
    finally:
        ranges.pop()


def run_profiled(spec, variants, x, entries, ranges, man) -> None:
    for v in variants:
        e = entries[v.name]
        measuring(e, man)
        try:
            t0 = time.perf_counter_ns()
            _run_variant_block(spec, v, x, ranges)
            e.update(status="ok", wall_ns=time.perf_counter_ns() - t0)
        except Exception as exc:
            record_failure(e, exc)
        man.save()


def run_torch_trace(spec, variants, x, entries, ranges, man) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if spec.device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    trace_path = spec.out / TRACE
    man.data["trace"] = TRACE

    def on_ready(prof) -> None:
        prof.export_chrome_trace(str(trace_path))

    # step 0 is the profiler's own warm-up (CUPTI set-up costs land there, unrecorded);
    # step 1 records the measured blocks
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
        on_trace_ready=on_ready,
    ) as prof:
        for v in variants:
            v.fn(x)
        sync(spec.device)
        prof.step()
        run_profiled(spec, variants, x, entries, ranges, man)
        prof.step()
    if not trace_path.exists():
        import errno
        import shutil

        # torch.profiler fails silently where the disk is full: name that, not a missing trace
        if shutil.disk_usage(spec.out).free < 2**20:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(trace_path))
        raise RuntimeError("torch.profiler wrote no trace")
