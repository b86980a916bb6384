"""The compute side of a variant's row: TFLOP/s, % of the device's peak FLOP/s, % of the measured
compute roof, and whether it is compute- or memory-bound by its arithmetic intensity.

The FLOPs are what the workload declares for one call (its `flops`, workload.json's `flops` of each
variant, the frame's `flops` metric); where it declares none, what the Triton kernels'
launch_metadata declared under proton (`declared_flops*`, totals over the measured iterations),
else what PyTorch's FlopCounterMode counted of its operators on the runner's extra call
(`counted_flops`: matmuls, convolutions, attention).
The peak is the datasheet's for the variant's unit (workload.json's `flop_unit`: bf16, tf32,
fp32, ...; workloads/devices.py), the measured roof a large torch.matmul's at that unit
(workloads/compute_roof.py). The verdict sets the declared intensity (FLOPs over `bytes_moved`,
the fewest bytes the call must move) against the ridge point, peak FLOP/s over peak bandwidth:
above it the compute roof is the lower one, and the `why` line leads with the compute figures.
A workload that declares no FLOPs gets none of this: its row, its notes and its why line are as
before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports.schema import ALL_KERNELS

FLOPS = "flops"  # the frame's metric of one call's declared FLOPs
COUNTED = "counted_flops"  # one call's FLOPs as PyTorch's FlopCounterMode counts its operators
# proton's rows of the launch metadata's declared FLOPs (orchestrator/parsers/proton.py DECLARED)
LAUNCH_METADATA = (
    "declared_flops",
    "declared_flops8",
    "declared_flops16",
    "declared_flops32",
    "declared_flops64",
)
COLUMNS = (
    "tflop_s",
    "pct_of_peak_flops",
    "pct_of_measured_flops",
    "flops_per_byte",
    "ridge_flops_per_byte",
    "flops_source",
)


def flops_per_call(g: pd.DataFrame, iters: float) -> tuple[float, str]:
    """(FLOPs of one call, where from: "workload", "launch_metadata" or "pytorch") of a
    variant's rows, in that order of trust; (NaN, "") when none has any."""
    declared = g.loc[g["metric"] == FLOPS, "value"]
    if len(declared):
        return float(declared.iloc[0]), "workload"
    meta = g.loc[g["metric"].isin(LAUNCH_METADATA) & (g["kernel"] != ALL_KERNELS), "value"]
    if len(meta) and iters > 0:
        return float(meta.sum()) / iters, "launch_metadata"
    counted = g.loc[g["metric"] == COUNTED, "value"]
    if len(counted):
        return float(counted.iloc[0]), "pytorch"
    return math.nan, ""


def declared_against_counted(g: pd.DataFrame) -> str:
    """The note's clause where the workload declares FLOPs and PyTorch's FlopCounterMode counted
    more than 1% otherwise for one call; "" elsewhere."""
    declared = g.loc[g["metric"] == FLOPS, "value"]
    counted = g.loc[g["metric"] == COUNTED, "value"]
    if not (len(declared) and len(counted)) or not declared.iloc[0] > 0:
        return ""
    d, c = float(declared.iloc[0]), float(counted.iloc[0])
    if abs(c / d - 1) <= 0.01:
        return ""
    return f"FLOPs: the workload declares {d:.4g} a call, PyTorch's FlopCounterMode counts {c:.4g} ({c / d - 1:+.1%})"


def bound(
    flops: float, bytes_moved: float | None, peak_flop_per_s: float | None, peak_bytes_per_s: float | None
) -> str:
    """ "compute" where the intensity (flops / bytes_moved) is above the ridge point (peak FLOP/s
    over peak bytes/s), "memory" at or below it; "" where a number is missing.

    Example:
        >>> bound(2 * 8192**3, 3 * 8192**2 * 2, 989.4e12, 4.8e12)  # 2731 FLOP/byte, ridge 206
        'compute'
    """
    if not all(
        isinstance(x, (int, float)) and x > 0 for x in (flops, bytes_moved, peak_flop_per_s, peak_bytes_per_s)
    ):
        return ""
    return "compute" if flops / bytes_moved > peak_flop_per_s / peak_bytes_per_s else "memory"


def columns(
    row: dict[str, Any],
    g: pd.DataFrame,
    v: dict[str, Any],
    env: dict[str, Any],
    median_ns: float,
    iters: float,
) -> str:
    """Fills the row's compute columns (COLUMNS) and, where ncu has not, its `bound`; returns where
    its FLOPs come from ("" when none: nothing is filled)."""
    flops, source = flops_per_call(g, iters)
    unit = v.get("flop_unit")
    if not source and median_ns > 0:
        flops, unit = counted_per_call(row, median_ns)
        source = "ncu" if unit else ""
    if not source or not median_ns > 0:
        return ""
    row["tflop_s"] = flops / median_ns / 1e3  # FLOPs per ns / 1e3 = TFLOP/s
    row["flops_source"] = source
    peak = unit_peak(unit, env)
    roof = rate(
        _dict(_dict(env.get("compute_roof")).get(unit)).get("flop_per_s") if isinstance(unit, str) else None
    )
    row["pct_of_peak_flops"] = row["tflop_s"] * 1e14 / peak if peak else np.nan
    row["pct_of_measured_flops"] = row["tflop_s"] * 1e14 / roof if roof else np.nan
    moved = g.loc[g["metric"] == "bytes_moved", "value"]
    moved = float(moved.iloc[0]) if len(moved) else None
    bw = env.get("peak_bandwidth_bytes_per_s")
    if moved:
        row["flops_per_byte"] = flops / moved
    if peak and bw:
        row["ridge_flops_per_byte"] = peak / bw
    verdict = bound(flops, moved, peak, bw)
    if verdict and not (isinstance(row.get("bound"), str) and row["bound"]):
        row["bound"] = verdict
    return source


def counted_per_call(row: dict[str, Any], median_ns: float) -> tuple[float, str]:
    """(FLOPs of one call, unit) from the tensor-core FLOPs ncu counted (the row's roofline point,
    reports/roofline.py), for a variant that declares none; (NaN, "") without them. An ncu
    variant's time is its kernels' time, so the rate over it is the count over the call."""
    unit, achieved = counted_unit(row), row.get("achieved_gflop_s")
    if not unit or not (isinstance(achieved, float) and achieved > 0):
        return math.nan, ""
    return achieved * median_ns, unit  # GFLOP/s x ns = FLOPs


def counted_unit(row: dict[str, Any]) -> str:
    """The unit (workloads/devices.py) of the tensor-core FLOPs ncu counted for a row, from its
    roofline precision ("bf16-tensor" -> "bf16"); "" where its point is not the tensor cores'."""
    precision = str(row.get("roofline_precision") or "")
    if not precision.endswith("-tensor"):
        return ""
    return precision if precision == "fp64-tensor" else precision.removesuffix("-tensor")


def unit_peak(unit: Any, env: dict[str, Any]) -> float | None:
    """The datasheet's peak FLOP/s (workloads/devices.py) for a unit (workload.json's
    `flop_unit`), None where the unit or the device has none."""
    return rate(_dict(env.get("peak_flops")).get(unit) if isinstance(unit, str) else None)


def _dict(x: Any) -> dict:
    """x where it is a mapping, else {}: workload.json's env as written, or left out by an older run."""
    return x if isinstance(x, dict) else {}


def rate(x: Any) -> float | None:
    """A rate as workload.json holds it: a finite number above 0, else None (no peak)."""
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
    return float(x) if ok else None


def why_lead(r: pd.Series) -> str:
    """The why line's first clause for a compute-bound variant with declared FLOPs ("" for any
    other): its TFLOP/s and % of peak FLOP/s, % of the measured compute roof, and its intensity
    against the ridge. The DRAM figures follow it (reports/why.py)."""
    tflops = r.get("tflop_s")
    if r.get("bound") != "compute" or not (isinstance(tflops, float) and math.isfinite(tflops)):
        return ""
    parts = [f"{tflops:,.0f} TFLOP/s" if tflops >= 100 else f"{tflops:.3g} TFLOP/s"]
    if pd.notna(r.get("pct_of_peak_flops")):
        parts.append(f"{r['pct_of_peak_flops']:.1f}% of peak FLOP/s")
    if pd.notna(r.get("pct_of_measured_flops")):
        parts.append(f"{r['pct_of_measured_flops']:.0f}% of the measured FLOP roof")
    if pd.notna(r.get("tensor_active_pct")):
        parts.append(f"tensor cores active {r['tensor_active_pct']:.0f}% of cycles")
    extra = counted_over_declared(r)
    if extra:
        parts.append(extra)
    text = "compute-bound: " + ", ".join(parts)
    ai, ridge = r.get("flops_per_byte"), r.get("ridge_flops_per_byte")
    if pd.notna(ai) and pd.notna(ridge):
        text += f" ({ai:,.0f} FLOP/byte, above the ridge at {ridge:,.0f})"
    return text


def counted_over_declared(r: pd.Series) -> str:
    """Where ncu counted the tensor cores' FLOPs and the workload declares its own: how far the
    count is off the declared work, past 1% ("" within it). Above: the tensor cores did work the
    result does not need (a tile that runs past the matrix's edge: cuBLAS's 320-row tiles over
    8192 rows count 1.6% more); below: part of the work ran off the tensor cores."""
    counted, declared = r.get("achieved_gflop_s"), r.get("tflop_s")
    tensor = str(r.get("roofline_precision") or "").endswith("-tensor")
    if not (tensor and r.get("flops_source") == "workload" and pd.notna(counted) and pd.notna(declared)):
        return ""
    if not (counted > 0 and declared > 0):
        return ""
    ratio = counted / (declared * 1e3)
    if ratio > 1.01:
        why = "tile work past the edges, or repeated"
        return f"ncu counted {100 * (ratio - 1):.1f}% more tensor FLOPs than declared ({why})"
    if ratio < 0.99:
        why = "work off the tensor cores, or a count declared too high"
        return f"ncu counted {100 * (1 - ratio):.1f}% fewer tensor FLOPs than declared ({why})"
    return ""


def dram_figures(r: pd.Series) -> str:
    """The achieved bandwidth from the fewest bytes, after a compute lead where ncu gave none."""
    gbps = r.get("achieved_gb_s")
    if not pd.notna(gbps):
        return ""
    pct = r.get("pct_of_peak_bw")
    return f"{gbps:,.0f} GB/s" + (f", {pct:.1f}% peak BW" if pd.notna(pct) else "")


def footer_lines(table: pd.DataFrame, w: dict[str, Any]) -> list[str]:
    """The lines under the table on the compute columns: what % peak FLOP/s is against (the
    datasheet's figure and unit, named), or why it is empty, and the measured compute roof."""
    if "tflop_s" not in table or not table["tflop_s"].notna().any():
        return []
    env = w.get("env") or {}
    measured = set(table.loc[table["tflop_s"].notna(), "variant"])
    declared = [
        v["flop_unit"]
        for v in w.get("variants", [])
        if isinstance(v.get("flop_unit"), str) and v["name"] in measured
    ]
    counted = [counted_unit(r) for r in table.to_dict("records") if r.get("flops_source") == "ncu"]
    units = list(dict.fromkeys(declared + counted))
    names, peaks = _dict(env.get("flop_units")), _dict(env.get("peak_flops"))
    source = env.get("peak_flops_source", "")
    lines = []
    known = [u for u in units if rate(peaks.get(u))]
    if known:
        against = ", ".join(f"{peaks[u] / 1e12:,.0f} TFLOP/s ({source}: {names.get(u, u)})" for u in known)
        tail = "" if counted else "; TFLOP/s counts the FLOPs each variant declares"
        lines.append(f"% peak FLOP/s against {against}{tail}")
    if w.get("device") == "cpu":
        lines.append(
            "% peak FLOP/s left empty: no peak FLOP/s for a CPU run; TFLOP/s is the FLOPs of each variant's "
            "call over its median"
        )
    elif [u for u in units if u not in known]:
        missing = ", ".join(names.get(u, u) for u in units if u not in known)
        lines.append(f"no peak FLOP/s for {missing} ({source}): % peak FLOP/s left empty")
    sources = table.get("flops_source", pd.Series(dtype=object))
    meta = table.loc[sources == "launch_metadata", "variant"]
    if len(meta):
        lines.append(
            f"TFLOP/s of {', '.join(meta)} from the FLOPs its Triton kernels' launch_metadata declares "
            "(the workload declares none)"
        )
    by_torch = table.loc[sources == "pytorch", "variant"]
    if len(by_torch):
        lines.append(
            f"TFLOP/s of {', '.join(by_torch)} from the FLOPs PyTorch's FlopCounterMode counted of its "
            "operators on one call (the workload declares none)"
        )
    counted = table.loc[sources == "ncu", "variant"]
    if len(counted):
        lines.append(
            f"TFLOP/s of {', '.join(counted)} from the tensor-core FLOPs ncu counted "
            "(sm__ops_path_tensor_*; the workload declares none)"
        )
    roofs = _dict(env.get("compute_roof"))
    shown = [u for u in units if rate(_dict(roofs.get(u)).get("flop_per_s"))]
    if shown and table.get("pct_of_measured_flops", pd.Series(dtype=float)).notna().any():
        lines.append(
            "% of measured FLOP roof against "
            + ", ".join(
                f"{roofs[u]['flop_per_s'] / 1e12:,.0f} TFLOP/s for {u} ({roofs[u].get('method', '')})"
                for u in shown
            )
        )
    return lines
