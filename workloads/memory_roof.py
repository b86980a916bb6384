"""The GPU's attainable DRAM bandwidth, measured: the memory roof that kernels actually reach here.

A datasheet peak (workloads/devices.py) and ncu's `dram__bytes.sum.peak_sustained` are what the
memory could do in theory. On the H200, no kernel reaches more than about 87% of the first (a
device-to-device copy, torch's and ours alike: docs/roofline-h200.md), so "% of peak" alone
cannot tell a kernel that is as fast as the memory allows from one that is 13% short. As the
Empirical Roofline Toolkit does, the roof a kernel can reach is measured: the faster of a
device-to-device copy (read and write) and a read-only sum, over buffers four times the L2, the
median of REPS calls by CUDA events, each after a GPU sleep so the launch is not timed.

Measured once per GPU (by UUID), torch and CUDA version, and kept in
`$GPROF_ORCH_CACHE/memory-roof.json` (default ~/.cache/gprof-orch): a run pays about 0.1 s
the first time and reads a file after. Run outside any profiled range, so that ncu (which profiles
only the variants' NVTX ranges) does not replay it.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

PROBE_BYTES = 256 << 20  # per buffer: 4x the H200's 60 MiB L2, 2 buffers for the copy
REPS = 10
SLEEP_CYCLES = 200_000  # the GPU sleep before each call: its launch lands inside it
METHOD = (
    f"the faster of a device-to-device copy and a read-only torch.sum over {PROBE_BYTES >> 20} MiB "
    f"float32 buffers, median of {REPS} calls by CUDA events"
)


def cache_file() -> Path:
    root = os.environ.get("GPROF_ORCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gprof-orch")
    return Path(root) / "memory-roof.json"


def measure(torch, index: int) -> dict[str, Any]:
    """The copy's and the sum's bytes/s on CUDA device `index`, and the faster of the two."""
    dev = torch.device("cuda", index)
    x = torch.ones(PROBE_BYTES // 4, device=dev, dtype=torch.float32)
    y = torch.empty_like(x)
    kernels = {"copy": (lambda: y.copy_(x), 2 * PROBE_BYTES), "read": (lambda: torch.sum(x), PROBE_BYTES)}
    out: dict[str, Any] = {}
    with torch.cuda.device(dev):
        for name, (fn, nbytes) in kernels.items():
            fn()
            times = []
            for _ in range(REPS):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(SLEEP_CYCLES)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 1e3)  # s
            out[f"{name}_bytes_per_s"] = nbytes / statistics.median(times)
    best = max(kernels, key=lambda k: out[f"{k}_bytes_per_s"])
    out.update(bytes_per_s=out[f"{best}_bytes_per_s"], kernel=best, method=METHOD)
    return out


def _key(torch, index: int) -> str:
    props = torch.cuda.get_device_properties(index)
    return f"{getattr(props, 'uuid', props.name)}|torch {torch.__version__}|cuda {torch.version.cuda}"


def attainable(torch, index: int) -> tuple[dict[str, Any] | None, str]:
    """(the measurement, where it came from) for CUDA device `index`: the cache's entry, else a
    new measurement, written to the cache. (None, why) when it cannot be had; never raises: a
    run goes on without a measured roof."""
    path = cache_file()
    try:
        key = _key(torch, index)
        cache = json.loads(path.read_text()) if path.exists() else {}
        if isinstance(cache, dict) and isinstance(cache.get(key), dict):
            return cache[key], f"measured earlier ({path})"
        got = measure(torch, index)
    except Exception as exc:
        return None, f"the memory roof was not measured ({type(exc).__name__}: {exc})"
    try:
        cache = cache if isinstance(cache, dict) else {}
        cache[key] = got
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(path)  # atomic: two runs at once never leave half a file
        return got, "measured by this run"
    except OSError as exc:
        return got, f"measured by this run (not cached: {exc})"
