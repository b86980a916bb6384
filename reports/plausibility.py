"""Whether a variant's rate is one the device can reach: a row whose GB/s is above the memory's
roof by more than BW_MARGIN, or whose TFLOP/s is above the datasheet's peak for its unit, is
IMPOSSIBLE, with the rate, the roof and the likely causes in its note; it gets no speedup and the
run exits non-zero (orchestrator/table_errors.py). `report` of an old folder judges it again.

Why: a time can be wrong in ways no spread shows. Work launched on another stream leaves the
events around an empty stream; a result replayed from a cache does no work; a workload's
`bytes_moved` or `flops` may overstate what a call does. Each reads as a speedup at a rate the
hardware cannot give, and that rate is the one check that needs no knowledge of the cause.

The memory roof is the measured one (workloads/memory_roof.py) where the run has it, else the
datasheet's peak. A working set that fits in the L2 of a run that did not flush it (nsys,
torch-trace, proton) is read from the cache, legitimately above the DRAM roof: it is not judged,
and its note says the numbers are warm (WARM).
"""

from __future__ import annotations

import math
from typing import Any

from reports import flops
from reports.schema import IMPOSSIBLE

# a bandwidth this far above the memory's roof is no measurement error (the measured roof is a
# median of copies; a kernel may beat it by a few percent)
BW_MARGIN = 1.10
WARM = (
    "warm: its working set ({mib:,.1f} MiB) fits in the L2 ({l2:,.0f} MiB), which this backend does not "
    "flush, so its numbers are the cache's; `time` flushes the L2 before each call"
)
CAUSES = (
    "likely its work ran on another stream, a result was reused, or the workload's bytes_moved/flops "
    "overstate what a call does"
)


def judge(row: dict[str, Any], v: dict[str, Any], wman: dict[str, Any]) -> list[str]:
    """The note's clauses on the row's rates; sets its status IMPOSSIBLE where a rate is above
    what the device can do (a measured row only: ok or noisy)."""
    env = wman.get("env") or {}
    if wman.get("device") != "cuda":
        return []  # a CPU's caches hold small inputs at many times its DRAM rate, and it has no peak here
    clauses, over = [], []
    warm = _warm(v, wman, env)
    if warm:
        clauses.append(warm)
    ceiling, which = memory_ceiling(env)
    gbps = _num(row.get("achieved_gb_s"))
    if ceiling and gbps is not None and not warm and gbps * 1e9 > BW_MARGIN * ceiling:
        over.append(
            f"{gbps:,.0f} GB/s is {gbps * 1e9 / ceiling:.1f}x the {which} ({ceiling / 1e9:,.0f} GB/s)"
        )
    tflops = _num(row.get("tflop_s"))
    unit = v.get("flop_unit") or flops.counted_unit(row)
    peak = flops.unit_peak(unit, env)
    if peak and tflops is not None and tflops * 1e12 > peak:
        over.append(
            f"{tflops:,.1f} TFLOP/s is {tflops * 1e12 / peak:.1f}x the datasheet's {unit} peak "
            f"({peak / 1e12:,.1f} TFLOP/s)"
        )
    if over:
        if row.get("status") in ("ok", "noisy"):
            row["status"] = IMPOSSIBLE
        clauses.append(f"impossible: {'; '.join(over)}: {CAUSES}")
    return clauses


def memory_ceiling(env: dict[str, Any]) -> tuple[float | None, str]:
    """(bytes/s, what it is) of the memory roof a rate is judged against."""
    roof = env.get("memory_roof") if isinstance(env.get("memory_roof"), dict) else {}
    measured = flops.rate(roof.get("bytes_per_s"))
    if measured:
        return measured, "measured memory roof"
    peak = flops.rate(env.get("peak_bandwidth_bytes_per_s"))
    return (peak, "datasheet's memory peak") if peak else (None, "")


def _warm(v: dict[str, Any], wman: dict[str, Any], env: dict[str, Any]) -> str:
    """WARM's words where the variant's bytes fit in the L2 and the run did not flush it."""
    l2, moved = _num(env.get("l2_bytes")), _num(v.get("bytes_moved"))
    if wman.get("flush_l2") or not l2 or not moved or moved > l2:
        return ""
    return WARM.format(mib=moved / 2**20, l2=l2 / 2**20)


def _num(x: Any) -> float | None:
    """x as a finite float, None where it is not one."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None
