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


class _NoObserver:
    def variant(self, label):
        import contextlib

        return contextlib.nullcontext()

    def iteration(self):
        import contextlib

        return contextlib.nullcontext()


_observer = _NoObserver()


def observe(observer) -> None:
    """Let an in-process profiler mark the `profile` mode's measured block (the proton child,
    workloads/proton_child.py, whose proton sees no `gprof`-domain NVTX range). `observer.variant(label)`
    returns a context entered just inside the variant's NVTX range `label` (`variant:<name>`),
    `observer.iteration()` one entered around each measured call, inside its
    record_function("iter"). None puts back the default, which marks nothing."""
    global _observer
    _observer = _NoObserver() if observer is None else observer


def _run_variant_block(spec, v, x, ranges) -> None:
    """The measured block: one NVTX range and one record_function around `iters` calls."""
    import torch

    label = RANGE_PREFIX + v.name
    ranges.push(label)
    try:
        with _observer.variant(label), torch.profiler.record_function(label):
            # inside the variant's range: emit_nvtx names the iterations and operators, not it
            with op_ranges(spec):
                for _ in range(spec.iters):
                    with torch.profiler.record_function(ITER_LABEL), _observer.iteration():
                        v.fn(x)
            sync(spec.device)
    finally:
        ranges.pop()


def op_ranges(spec):
    """`spec.ops` (nsys --ops): torch.autograd.profiler.emit_nvtx, an NVTX range (default domain)
    per aten operator and per `iter`, so that nsys puts each kernel under its operator; else
    nothing. A CPU-only PyTorch has no NVTX: workloads/op_nvtx.py's observer pushes the same
    ranges (RuntimeError where it cannot be built)."""
    import contextlib

    import torch

    if not spec.ops:
        return contextlib.nullcontext()
    if spec.device == "cuda":
        return torch.autograd.profiler.emit_nvtx()
    from torch.autograd.profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

    # emit_nvtx synchronizes CUDA on entry, which a CPU run has not got: its profiler, started as
    # emit_nvtx starts it (NVTX state, no shapes)
    config = ProfilerConfig(ProfilerState.NVTX, False, False, False, False, False, _ExperimentalConfig())

    @contextlib.contextmanager
    def cpu_nvtx():
        torch.autograd.profiler._enable_profiler(config, set())
        try:
            yield
        finally:
            torch.autograd.profiler._disable_profiler()

    if torch.version.cuda is None:  # no NVTX in this PyTorch: the same ranges from an observer
        # why lazy: it builds a C++ hook, only a PyTorch without CUDA needs it
        from workloads import op_nvtx

        return op_nvtx.ranges()
    return cpu_nvtx()


def torch_cpu_only() -> bool:
    import torch

    return torch.version.cuda is None


def check_op_ranges(spec, man) -> None:
    """Whether the operators' NVTX ranges can be emitted here, said in workload.json's `ops`
    before any variant is measured (a CPU-only PyTorch has no NVTX: the run goes on without)."""
    if not spec.ops:
        return
    try:
        with op_ranges(spec):
            pass
        via = "record-function observer" if spec.device != "cuda" and torch_cpu_only() else "emit_nvtx"
        man.data["ops"] = {"nvtx": True, "via": via}
    except RuntimeError as exc:
        man.data["ops"] = {"nvtx": False, "reason": str(exc)}


def run_profiled(spec, variants, x, entries, ranges, man) -> None:
    check_op_ranges(spec, man)
    if spec.ops and not man.data["ops"]["nvtx"]:
        from dataclasses import replace

        spec = replace(spec, ops=False)
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
