"""The GPU's attainable FLOP/s per unit, measured: the compute roof that a GEMM actually reaches here.

A datasheet peak (workloads/devices.py) is what the tensor cores could do at their boost clock;
a large cuBLAS GEMM is what they do in practice (power and clock limits take their share), as the
measured memory roof (workloads/memory_roof.py) is for DRAM. So "% of the measured FLOP roof"
tells a kernel as fast as this GPU's GEMM from one that is short of it, where "% of peak FLOP/s"
mixes that gap with the datasheet's. The probe: torch.matmul of two N x N matrices at the unit's
dtype (tf32: float32 with allow_tf32 on; fp32: off), the median of REPS calls by CUDA events,
after one warm-up call.

Measured once per GPU (by UUID), torch and CUDA version and unit, and kept in
`$GPROF_ORCH_CACHE/compute-roof.json` (default ~/.cache/gprof-orch), beside the memory roof: a run
pays up to a second per unit the first time and reads a file after. Run before any variant's
range opens, only for the units of variants that declare their FLOPs.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

N = 8192
REPS = 10
# unit -> (torch dtype name, allow_tf32); fp64 is left out: cuBLAS runs float64 on the tensor
# cores (DMMA), above the FP64 peak of the plain pipes it would be set against; fp8 too: torch.matmul
# takes no float8
PROBES = {
    "bf16": ("bfloat16", False),
    "fp16": ("float16", False),
    "tf32": ("float32", True),
    "fp32": ("float32", False),
    "fp64-tensor": ("float64", False),
}


def method(unit: str) -> str:
    dtype, tf32 = PROBES[unit]
    how = " (allow_tf32 on)" if tf32 else " (allow_tf32 off)" if dtype == "float32" else ""
    return f"torch.matmul of two {N}x{N} {dtype} matrices{how}, median of {REPS} calls by CUDA events"


def cache_file() -> Path:
    root = os.environ.get("GPROF_ORCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gprof-orch")
    return Path(root) / "compute-roof.json"


def measure(torch, index: int, unit: str) -> dict[str, Any]:
    """The probe GEMM's FLOP/s for `unit` on CUDA device `index`."""
    dtype, tf32 = PROBES[unit]
    dev = torch.device("cuda", index)
    a = torch.randn(N, N, device=dev, dtype=getattr(torch, dtype))
    b = torch.randn(N, N, device=dev, dtype=getattr(torch, dtype))
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        with torch.cuda.device(dev):
            torch.matmul(a, b)
            times = []
            for _ in range(REPS):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.matmul(a, b)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)  # s
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    del a, b
    torch.cuda.empty_cache()  # the variants' memory columns see none of the probe's blocks
    return {"flop_per_s": 2.0 * N**3 / statistics.median(times), "method": method(unit)}


def _key(torch, index: int, unit: str) -> str:
    props = torch.cuda.get_device_properties(index)
    return f"{getattr(props, 'uuid', props.name)}|torch {torch.__version__}|cuda {torch.version.cuda}|{unit}"


def attainable(torch, index: int, units: list[str]) -> tuple[dict[str, dict[str, Any]], str]:
    """({unit: the measurement}, where they came from) for CUDA device `index`: the cache's
    entries, else new measurements, written to the cache. Units without a probe are left out;
    never raises: a run goes on without a measured roof, and the second value says why."""
    path = cache_file()
    wanted = [u for u in dict.fromkeys(units) if u in PROBES]
    try:
        cache = json.loads(path.read_text()) if path.exists() else {}
        cache = cache if isinstance(cache, dict) else {}
        keys = {u: _key(torch, index, u) for u in wanted}
        new = {u: measure(torch, index, u) for u in wanted if not isinstance(cache.get(keys[u]), dict)}
    except Exception as exc:
        return {}, f"the compute roof was not measured ({type(exc).__name__}: {exc})"
    got = {u: new.get(u) or cache[keys[u]] for u in wanted}
    if not new:
        return got, f"measured earlier ({path})"
    try:
        cache.update({keys[u]: m for u, m in new.items()})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(path)  # atomic: two runs at once never leave half a file
        return got, "measured by this run"
    except OSError as exc:
        return got, f"measured by this run (not cached: {exc})"
