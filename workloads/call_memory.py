"""The memory one call of a variant takes: measured on one extra call after the warm-up and
before anything is timed or profiled (outside every NVTX range and record_function the
profilers attribute), so no timing holds it. Kept in workload.json's variant entry under
`memory`, in bytes and counts.

On CUDA the figures are the caching allocator's own counters (torch.cuda.memory_stats): what
PyTorch's allocator hands out, not what the driver holds, and nothing of other processes. On
the CPU they are torch.profiler's `[memory]` records (profile_memory=True) of that call.
"""

from __future__ import annotations

import time
from typing import Any

from workloads.manifest import Manifest


def measure_all(spec, variants, x, entries: dict[str, dict], man: Manifest) -> None:
    """One extra call of each ready variant, its memory into its entry's `memory` and the FLOPs
    PyTorch counts of its operators into `counted_flops` (FlopCounterMode: mm, bmm, addmm,
    convolutions, attention; a Triton or extension kernel counts 0, and leaves no figure). A call
    that raises here leaves the variant as it is (its timing decides) and says why in `memory`."""
    from torch.utils.flop_counter import FlopCounterMode

    for v in variants:
        t0 = time.perf_counter()
        counter = FlopCounterMode(display=False)
        try:
            with counter:
                mem = cuda_call(v.fn, x) if spec.device == "cuda" else cpu_call(v.fn, x)
        except Exception as exc:
            mem = {"error": f"{type(exc).__name__}: {exc}"}
        mem["measure_s"] = round(time.perf_counter() - t0, 3)
        entries[v.name]["memory"] = mem
        counted = counter.get_total_flops()
        if counted > 0 and "error" not in mem:
            entries[v.name].update(counted_flops=int(counted), counted_flops_source=COUNTED_BY)
    man.save()


# where a variant's counted FLOPs come from (workload.json's `counted_flops_source`)
COUNTED_BY = "torch.utils.flop_counter.FlopCounterMode"


def result_bytes(out: Any) -> int:
    """Bytes of the tensor(s) a call returned (a tuple, list or dict of them too), each storage
    counted once: what must stay allocated after the call."""
    import torch

    seen: dict[int, int] = {}

    def walk(o: Any) -> None:
        if isinstance(o, torch.Tensor):
            s = o.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
        elif isinstance(o, (tuple, list)):
            for i in o:
                walk(i)
        elif isinstance(o, dict):
            for i in o.values():
                walk(i)

    walk(out)
    return sum(seen.values())


def cuda_call(fn, x) -> dict[str, Any]:
    """One call under the caching allocator's counters: peak above what was allocated before it,
    bytes and allocations requested, the result's bytes, and whether the allocator reserved new
    memory from the driver for it."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_stats()
    out = fn(x)
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats()  # read while `out` is alive: the result is part of the peak

    def delta(key: str) -> int:
        return int(after.get(key, 0) - before.get(key, 0))

    return {
        "source": "cuda-caching-allocator",
        "peak_bytes": int(after["allocated_bytes.all.peak"] - before["allocated_bytes.all.current"]),
        "allocated_bytes": delta("allocated_bytes.all.allocated"),
        "allocations": delta("allocation.all.allocated"),
        "result_bytes": result_bytes(out),
        "reserved_new": delta("segment.all.allocated") > 0 or delta("reserved_bytes.all.allocated") > 0,
        "reserved_bytes": delta("reserved_bytes.all.allocated"),
    }


def cpu_call(fn, x) -> dict[str, Any]:
    """One call under torch.profiler with profile_memory: its `[memory]` records in order
    (positive an allocation, negative a free) give the bytes and allocations requested and the
    peak of their running sum."""
    from torch.autograd.profiler import profile

    # the profiler's CPU-only state (no Kineto): the same `[memory]` records as torch.profiler's,
    # without the second Kineto takes to start once in a process (1.1 s of the CPU `time square`)
    with profile(use_kineto=False, profile_memory=True) as prof:
        out = fn(x)
    records = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.kineto_results.events()
        if e.name() == "[memory]" and e.nbytes()
    )
    running = peak = allocated = allocations = 0
    for _, n in records:
        running += n
        peak = max(peak, running)
        if n > 0:
            allocated += n
            allocations += 1
    return {
        "source": "torch.profiler",
        "peak_bytes": peak,
        "allocated_bytes": allocated,
        "allocations": allocations,
        "result_bytes": result_bytes(out),
    }
