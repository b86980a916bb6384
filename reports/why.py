"""The "why" beside the "which": per variant, measured facts that explain its time.

Pure functions of the unified frame, the per-variant table, the workload manifest and (under
ncu) ncu's own rule results; nothing here is keyed to a variant's or kernel's name. Each
column comes from numbers a profiler measured:

- excess_traffic (ncu): DRAM bytes read + written per iteration (summed over the variant's
  kernels) over `bytes_moved`, the fewest bytes the operation must move. 1.0x is ideal; reading
  the input twice shows 2.0x. A little under 1.0x is normal: writes still in L2 when a kernel
  ends are not counted as DRAM traffic.
- gpu_idle_us_per_iter (nsys, torch-trace): the GPU's idle time between the variant's first
  and last GPU activity (gaps between consecutive activities, each range instance apart), per
  iteration. The lead-in before the first kernel and the final synchronize are not in it. A
  capture's range (exec/import) takes it from each instance apart, and the median instance's is
  the column, as the time column is the median's: a cold first step (154 ms of idle in the H100
  exec-train capture against 0.9 ms in a median step) is not spread over the others.
- host_bound (nsys, torch-trace): "host-bound" when the GPU waited for the host: the typical
  gap between iterations (median gap x gaps per iteration) exceeds HOST_BOUND_IDLE_FRACTION of
  the GPU time per iteration, i.e. the host's launch-to-launch interval is longer than the GPU's
  work. One startup gap does not make a variant host-bound; a gap before every launch does. A
  capture's range: the median over its instances of each instance's typical gap.
- extra_kernels_per_iter: launches per iteration beyond the fewest among the variants.
- why: one line built from the facts above, ncu's throughput and launch shape, and ncu's top
  finding (see `findings_table`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports import flops
from reports.demangle import function_name
from reports.names import short_kernel_name
from reports.schema import ALL_KERNELS, IDLE_PER_ITER, IDLE_TYPICAL_PER_ITER

WHY_COLUMNS = ["excess_traffic", "gpu_idle_us_per_iter", "host_bound", "extra_kernels_per_iter", "why"]

# the metric of one idle gap between consecutive GPU activities inside a variant's range (ns)
IDLE_GAP_METRIC = "gpu_idle_gap_ns"

# the GPU waited for the host on every iteration by more than this share of its own work
HOST_BOUND_IDLE_FRACTION = 0.10

# ncu's rule message types, most severe first (orchestrator/parsers/ncu_rep.py _MSG_TYPES)
SEVERITY_ORDER = {"error": 0, "warning": 1, "optimization": 2, "ok": 3, "none": 4}

FINDING_COLUMNS = [
    "variant",
    "kernel",
    "section",
    "rule",
    "severity",
    "title",
    "message",
    "estimated_speedup_pct",
    "speedup_type",
    "kernel_time_share",
    "variant_speedup_pct",
    "launches",
]


# --------------------------------------------------------------------------------------------
# ncu's findings


def findings_table(rules: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """ncu's rule results per variant, one row per (variant, kernel, rule, title), most
    important first within a variant.

    `rules` is `NcuReport.rules` (one row per kernel launch and rule). `estimated_speedup_pct`
    is ncu's estimate for that kernel (median over its launches); `variant_speedup_pct` weighs it
    by the kernel's share of the variant's GPU time (`kernel_time_ns` in `frame`), so a 99% gain
    on a 5 us helper kernel does not outrank a 20% gain on the 2 ms one. Order: severity
    (error, warning, optimization, ok), then variant_speedup_pct; but a SpeedOfLight finding that
    asks for a change on a kernel with half the variant's time or more comes first.

    Example:
        >>> rep = ncu_rep.read_report("run/report.ncu-rep")
        >>> findings_table(rep.rules, frame).groupby("variant").head(1)
    """
    if rules is None or rules.empty or "variant" not in rules:
        return pd.DataFrame(columns=FINDING_COLUMNS)
    r = rules[rules["variant"].notna()].copy()
    if r.empty:
        return pd.DataFrame(columns=FINDING_COLUMNS)
    r["title"] = r["title"].fillna("").astype(str)
    # ncu's CSV details page gives no titles: a rule's k-th message of one severity on a launch
    # is then the same finding on every launch (a rule may say two things, as LaunchConfiguration
    # does; SOLBottleneck says "ok" on one launch and asks for a change on another, in no fixed order)
    nth = r.groupby(["id", "section", "rule", "type"], sort=False, dropna=False).cumcount().astype(str)
    r["_key"] = r["title"].where(r["title"] != "", "#" + r["type"].astype(str) + nth)
    share = _kernel_time_share(frame)
    out = []
    for (variant, kernel, section, rule, _), g in r.groupby(
        ["variant", "kernel", "section", "rule", "_key"], sort=False, dropna=False
    ):
        title = str(g["title"].iloc[0])
        first = g.iloc[0]
        est = pd.to_numeric(g["estimated_speedup_pct"], errors="coerce")
        est_med = float(est.median()) if est.notna().any() else math.nan
        s = _share_for(share, variant, kernel)
        out.append(
            {
                "variant": variant,
                "kernel": kernel,
                "section": section,
                "rule": rule,
                "severity": first.get("type") or "none",
                "title": title,
                "message": str(first.get("message") or "").strip(),
                "estimated_speedup_pct": est_med,
                "speedup_type": first.get("speedup_type"),
                "kernel_time_share": s,
                "variant_speedup_pct": est_med * s if not math.isnan(est_med) else math.nan,
                "launches": len(g),
            }
        )
    t = pd.DataFrame(out, columns=FINDING_COLUMNS)
    t["_sev"] = t["severity"].map(SEVERITY_ORDER).fillna(len(SEVERITY_ORDER))
    # a finding with an estimated gain outranks any without one short of an error: ncu's
    # warnings without one are about the collection ("the optional metric ... could not be
    # found"), not about the kernel
    t["_sev"] = t["_sev"].where((t["_sev"] == 0) | t["variant_speedup_pct"].isna(), 0.5)
    t["_gain"] = t["variant_speedup_pct"].fillna(-1.0)
    # ncu's own bottleneck verdict (SpeedOfLight) on the kernel that takes most of the time comes
    # first when it asks for a change, as ncu's own report puts it first
    t["_head"] = ~(
        (t["section"] == "SpeedOfLight")
        & (t["_sev"] <= SEVERITY_ORDER["optimization"])
        & (t["kernel_time_share"] >= 0.5)
    )
    t = t.sort_values(
        ["variant", "_head", "_sev", "_gain"], ascending=[True, True, True, False], kind="stable"
    )
    order = {v: i for i, v in enumerate(dict.fromkeys(r["variant"]))}
    t = t.sort_values("variant", key=lambda s: s.map(order), kind="stable")
    return t.drop(columns=["_sev", "_gain", "_head"]).reset_index(drop=True)


def top_findings(findings: pd.DataFrame) -> dict[str, pd.Series]:
    """The first (most important) finding of each variant that has one."""
    if findings is None or findings.empty:
        return {}
    return {v: g.iloc[0] for v, g in findings.groupby("variant", sort=False)}


def finding_text(f: pd.Series) -> str:
    """One finding in a few words: `Tail Effect (LaunchStats/LaunchConfiguration, est. 20% faster)`."""
    name = f["title"] or f["rule"]
    where = f"{f['section']}/{f['rule']}"
    est = f.get("variant_speedup_pct")
    gain = (
        f", est. {est:.0f}% faster" if isinstance(est, float) and not math.isnan(est) and est >= 0.5 else ""
    )
    kernel = short_kernel_name(str(f["kernel"]))
    return f"{name} ({where}{gain}) on {kernel}" if name else f"{where} on {kernel}"


def _kernel_time_share(frame: pd.DataFrame) -> pd.DataFrame:
    k = frame[(frame["metric"] == "kernel_time_ns") & (frame["kernel"] != ALL_KERNELS)]
    if k.empty:
        return pd.DataFrame(columns=["variant", "kernel", "share"])
    s = k.groupby(["variant", "kernel"], sort=False)["value"].sum().reset_index()
    s["share"] = s["value"] / s.groupby("variant")["value"].transform("sum")
    return s


def _share_for(share: pd.DataFrame, variant: str, kernel: str) -> float:
    """The kernel's share of its variant's time; the frame names kernels in full (demangled), the
    rules by function name, so a full name that starts with or contains it matches."""
    if share.empty:
        return 1.0
    s = share[share["variant"] == variant]
    exact = s[s["kernel"] == kernel]
    if len(exact):
        return float(exact["share"].sum())
    hit = s[s["kernel"].map(lambda n: _function_of(n) == kernel)]
    return float(hit["share"].sum()) if len(hit) else 1.0


def _function_of(full: str) -> str:
    try:
        return function_name(full)
    except Exception:
        return full


# --------------------------------------------------------------------------------------------
# the columns


def why_columns(frame: pd.DataFrame, table: pd.DataFrame, wman: dict[str, Any]) -> pd.DataFrame:
    """The table with excess_traffic, gpu_idle_us_per_iter, host_bound, extra_kernels_per_iter
    added (NaN / "" where the backend does not measure them); `why` is left to `explain`."""
    table = table.copy()
    for c in WHY_COLUMNS:
        if c not in table:
            table[c] = "" if c in ("host_bound", "why") else np.nan
    if table.empty:
        return table
    by_variant = {v: g for v, g in frame.groupby("variant", sort=False)} if not frame.empty else {}
    iters_of = {v["name"]: v.get("iters") or wman.get("iters") or 1 for v in wman.get("variants", [])}
    for i, r in table.iterrows():
        g = by_variant.get(r["variant"])
        if g is None or r.get("status") not in ("ok", "noisy"):
            continue
        iters = float(iters_of.get(r["variant"], 1))
        dram = g.loc[(g["metric"] == "dram_bytes") & (g["kernel"] != ALL_KERNELS), "value"]
        moved = g.loc[g["metric"] == "bytes_moved", "value"]
        if len(dram) and len(moved) and moved.iloc[0] > 0:
            table.at[i, "excess_traffic"] = float(dram.sum()) / iters / float(moved.iloc[0])
        idle = _idle_per_iter(g, iters)
        if idle is not None:
            idle_us, typical_us = idle
            table.at[i, "gpu_idle_us_per_iter"] = idle_us
            gpu_us = r.get("time_median_us")
            if pd.notna(gpu_us) and gpu_us > 0 and typical_us > HOST_BOUND_IDLE_FRACTION * gpu_us:
                table.at[i, "host_bound"] = "host-bound"
    # the fewest among variants whose launches split into the iterations (not an incomplete one's)
    # and not a range that holds others: its launches are theirs too
    nested = {v["name"] for v in wman.get("variants", []) if v.get("holds")}
    if wman.get("baseline") is None:  # a program's ranges are its parts, not alternatives: no fewest
        return table
    lp = pd.to_numeric(table["launches_per_iter"], errors="coerce").where(
        (table["status"] == "ok") & ~table["variant"].isin(nested)
    )
    if lp.notna().any():
        table["extra_kernels_per_iter"] = lp - lp.min()
    return table


def _idle_per_iter(g: pd.DataFrame, iters: float) -> tuple[float, float] | None:
    """(idle us per iteration, typical idle us per iteration) of a variant's rows, None where
    its backend measures no idle gaps: the median instance's where the rows hold each instance's
    (a capture's range), else every gap over the iterations, the variant's ranges taken as one."""
    per_instance = g.loc[g["metric"] == IDLE_PER_ITER, "value"].to_numpy(dtype="float64")
    if len(per_instance):
        typical = g.loc[g["metric"] == IDLE_TYPICAL_PER_ITER, "value"].to_numpy(dtype="float64")
        return float(np.median(per_instance)) / 1e3, float(np.median(typical)) / 1e3
    gaps = g.loc[g["metric"] == IDLE_GAP_METRIC, "value"].to_numpy(dtype="float64")
    if not len(gaps):
        return None
    return float(gaps.sum()) / iters / 1e3, float(np.median(gaps)) * len(gaps) / iters / 1e3


def explain(
    table: pd.DataFrame, frame: pd.DataFrame, wman: dict[str, Any], findings: pd.DataFrame | None = None
) -> pd.Series:
    """One line per variant from the measured facts in the table and frame, and its top ncu
    finding. Empty for a variant with nothing measured.

    Example:
        "0.05x of torch.mean: 2.1% DRAM peak, 37.2% SM; grid of 10000 blocks x 4 warps, one
        block per row (10000 rows); ncu: Tail Effect (LaunchStats/LaunchConfiguration, ...)"
    """
    top = top_findings(findings) if findings is not None else {}
    base_name = next(
        (v.get("label", v["name"]) for v in wman.get("variants", []) if v["name"] == wman.get("baseline")),
        wman.get("baseline"),
    )
    shape = [int(s) for s in wman.get("shape") or [] if isinstance(s, (int, float))]
    by_variant = {v: g for v, g in frame.groupby("variant", sort=False)} if not frame.empty else {}
    lines = []
    for _, r in table.iterrows():
        g = by_variant.get(r["variant"])
        parts: list[str] = []
        if g is not None and r.get("status") in ("ok", "noisy"):
            parts = _facts(r, g, shape)
        head = ""
        sp = r.get("speedup_vs_baseline")
        if pd.notna(sp) and r["variant"] != wman.get("baseline") and parts:
            head = f"{sp:.2f}x of {base_name}: "
        f = top.get(r["variant"])
        if f is not None:
            parts.append("ncu: " + finding_text(f))
        lines.append(head + "; ".join(parts) if parts else "")
    return pd.Series(lines, index=table.index, dtype="object")


def _facts(r: pd.Series, g: pd.DataFrame, shape: list[int]) -> list[str]:
    # a compute-bound variant leads with its FLOP/s (reports/flops.py), its DRAM figures after
    compute = flops.why_lead(r)
    out: list[str] = [compute] if compute else []
    thr = []
    if pd.notna(r.get("dram_pct_of_peak")):
        thr.append(f"{r['dram_pct_of_peak']:.1f}% DRAM peak")
    if pd.notna(r.get("pct_of_measured_roof")):  # what this GPU's memory delivers in practice
        thr.append(f"{r['pct_of_measured_roof']:.0f}% of the measured memory roof")
    if pd.notna(r.get("sm_pct_of_peak")):
        thr.append(f"{r['sm_pct_of_peak']:.1f}% SM")
    if compute and not thr and flops.dram_figures(r):
        thr.append(flops.dram_figures(r))
    if thr:
        out.append(", ".join(thr))
    launch = _launch_shape(g, shape)
    if launch:
        out.append(launch)
    x = r.get("excess_traffic")
    if pd.notna(x) and (x >= 1.2 or x <= 0.8):
        out.append(f"DRAM traffic {x:.2f}x the fewest bytes")
    if r.get("host_bound") == "host-bound":
        out.append(
            f"host-bound: the GPU idles {r['gpu_idle_us_per_iter']:.1f} us/iter between launches "
            f"against {r['time_median_us']:.1f} us of GPU work"
        )
    elif (
        pd.notna(r.get("gpu_idle_us_per_iter"))
        and pd.notna(r.get("time_median_us"))
        and r["time_median_us"] > 0
    ):
        out.append(f"GPU idle {r['gpu_idle_us_per_iter']:.1f} us/iter inside the range")
    if pd.notna(r.get("launch_cpu_us")) and pd.notna(r.get("time_median_us")):
        out.append(f"launch calls {r['launch_cpu_us']:.1f} us CPU/iter")
    extra = r.get("extra_kernels_per_iter")
    if pd.notna(extra) and extra > 0:
        out.append(f"{extra:g} more kernel(s)/iter than the fewest")
    return out


def _launch_shape(g: pd.DataFrame, shape: list[int]) -> str:
    """Grid and block of the variant's longest-running kernel (ncu's LaunchStats)."""
    kt = g[(g["metric"] == "kernel_time_ns") & (g["kernel"] != ALL_KERNELS)]
    if kt.empty:
        return ""
    kernel = kt.groupby("kernel", sort=False)["value"].sum().idxmax()
    k = g[g["kernel"] == kernel]

    def val(metric: str) -> float:
        v = k.loc[k["metric"] == f"ncu:{metric}", "value"]
        return float(v.median()) if len(v) else math.nan

    grid, block = val("launch__grid_size"), val("launch__block_size")
    if math.isnan(grid) or math.isnan(block):
        return ""
    warps = block / 32
    text = (
        f"grid of {grid:.0f} blocks x {warps:.0f} warps"
        if block % 32 == 0
        else f"grid of {grid:.0f} blocks x {block:.0f} threads"
    )
    waves = val("launch__waves_per_multiprocessor")
    if not math.isnan(waves):
        text += f" ({waves:.3g} waves)"
    if shape and len(shape) >= 2 and grid == shape[0]:
        text += f", one block per row ({shape[0]} rows of {shape[1]})"
    elif shape and grid > 0:
        per_block = math.prod(shape) / grid
        text += f", {per_block:.3g} elements per block"
    return text
