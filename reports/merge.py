"""One table across backends, sweeps over sizes, and the comparison of two runs."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from reports.summary import sample_stats

# backend -> the merged column its median goes to
TIME_COLUMNS = {"time": "events_us", "torch-trace": "torch_trace_us", "nsys": "nsys_us", "ncu": "ncu_us"}
DISAGREE = 0.10  # backends whose medians differ by more than this are flagged

# why two backends' numbers differ, named where the flag is raised
REASONS = {
    "time": "CUDA events time the whole call: launch latency and gaps between kernels are included",
    "ncu": "ncu replays each kernel alone, serialised, with caches flushed (--cache-control all)"
           " and its own clock setting (--clock-control)",
    "torch-trace": "torch.profiler sums kernel durations only (no launch gaps)",
    "nsys": "nsys sums kernel durations only (no launch gaps)",
}

MERGED_COLUMNS = ["variant", "label", "kernels", "launches_per_iter", "same_kernel_as", "events_us",
                  "torch_trace_us", "nsys_us", "ncu_us", "dram_pct_of_peak", "sm_pct_of_peak", "bound",
                  "achieved_gb_s", "pct_of_peak_bw", "speedup_vs_baseline", "agreement"]


def merged_table(tables: Mapping[str, pd.DataFrame], baseline: str | None = None, *,
                 on_gpu: bool = True) -> pd.DataFrame:
    """tables: backend -> its per-variant table (reports.summary.variant_table). One row per
    variant with each backend's median, ncu's DRAM/SM %, the kernels, and an agreement flag
    (on a GPU only: on the CPU the backends time different things, host wall time with or
    without a profiler attached)."""
    variants: list[str] = []
    for t in tables.values():
        variants += [v for v in t["variant"] if v not in variants]
    rows = []
    for v in variants:
        row: dict[str, Any] = {"variant": v}
        for backend, t in tables.items():
            r = t[t["variant"] == v]
            if r.empty:
                continue
            r = r.iloc[0]
            row.setdefault("label", r.get("label"))
            if r.get("status") != "ok":
                row["agreement"] = f"{backend}: {r.get('status')} ({r.get('note') or ''})"
                continue
            row[TIME_COLUMNS[backend]] = r.get("time_median_us")
            # kernels: a backend that names them (nsys first: it sees every launch)
            if backend in ("nsys", "torch-trace", "ncu") and not row.get("kernels") and r.get("kernels"):
                row["kernels"] = r.get("kernels")
                row["launches_per_iter"] = r.get("launches_per_iter")
                row["same_kernel_as"] = r.get("same_kernel_as")
            if backend == "ncu":
                for c in ("dram_pct_of_peak", "sm_pct_of_peak", "bound"):
                    row[c] = r.get(c)
        rows.append(row)
    out = pd.DataFrame(rows, columns=MERGED_COLUMNS)
    # the reference time: events where measured, else the first kernel-duration backend
    ref_col = next((c for c in ("events_us", "nsys_us", "torch_trace_us", "ncu_us")
                    if c in out and out[c].notna().any()), None)
    out["agreement"] = [a if isinstance(a, str) else agreement(row) if on_gpu else "-"
                         for a, (_, row) in zip(out["agreement"], out.iterrows())]
    if ref_col:
        base = out.loc[out["variant"] == baseline, ref_col] if baseline else pd.Series(dtype=float)
        if len(base) and pd.notna(base.iloc[0]):
            out["speedup_vs_baseline"] = base.iloc[0] / out[ref_col]
    return out


def agreement(row: Mapping[str, Any]) -> str:
    """'ok' when every backend's median is within 10% of the others, else which disagree and why."""
    vals = {b: row.get(col) for b, col in TIME_COLUMNS.items() if pd.notna(row.get(col))}
    if len(vals) < 2:
        return "-"
    lo_b, lo = min(vals.items(), key=lambda kv: kv[1])
    hi_b, hi = max(vals.items(), key=lambda kv: kv[1])
    if hi <= lo * (1 + DISAGREE):
        return "ok"
    why = "; ".join(REASONS[b] for b in (hi_b, lo_b) if b in ("time", "ncu")) or REASONS[hi_b]
    return f"DISAGREE: {hi_b} {hi / lo - 1:+.0%} over {lo_b} ({why})"


def legend(on_gpu: bool) -> str:
    """What each time column of the merged table measured (the `all` footer). On the CPU the
    `time` backend reads the host clock: there are no CUDA events."""
    if on_gpu:
        return ("events = CUDA events per call (time); torch-trace / nsys = kernel durations per iteration; "
                "ncu = kernel duration under replay. agreement flags medians >10% apart.")
    return ("events = host clock (perf_counter) per call (time; a CPU run has no CUDA events); torch-trace / "
            "nsys = host wall-clock time per iteration under each profiler. agreement is not judged on the CPU.")


def sweep_table(points: list[tuple[int, str, pd.DataFrame]]) -> pd.DataFrame:
    """points: (numel, dtype, per-variant table) -> long table of time and GB/s against size."""
    rows = []
    for numel, dtype, t in points:
        for _, r in t.iterrows():
            rows.append({"numel": numel, "dtype": dtype, "variant": r["variant"], "status": r["status"],
                         "time_median_us": r.get("time_median_us"), "time_iqr_us": r.get("time_iqr_us"),
                         "achieved_gb_s": r.get("achieved_gb_s"), "pct_of_peak_bw": r.get("pct_of_peak_bw"),
                         "speedup_vs_baseline": r.get("speedup_vs_baseline")})
    return pd.DataFrame(rows)


def compare_runs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, table_a: pd.DataFrame,
                 table_b: pd.DataFrame) -> pd.DataFrame:
    """Per variant in both runs: medians, B/A ratio, and whether the difference is larger than
    the runs' own spread (|mB - mA| > IQR_A + IQR_B, the samples' interquartile ranges)."""
    rows = []
    for v in [v for v in table_a["variant"] if v in set(table_b["variant"])]:
        a = frame_a.loc[(frame_a.variant == v) & (frame_a.metric == "time_ns"), "value"].to_numpy()
        b = frame_b.loc[(frame_b.variant == v) & (frame_b.metric == "time_ns"), "value"].to_numpy()
        sa, sb = sample_stats(a), sample_stats(b)
        ratio = sb["median"] / sa["median"] if sa["median"] else np.nan
        diff = abs(sb["median"] - sa["median"])
        # one sample has no spread to weigh the change against: never called beyond it
        significant = bool(diff > sa["iqr"] + sb["iqr"]) if np.isfinite(diff) and min(sa["n"], sb["n"]) > 1 else False
        rows.append({"variant": v, "a_median_us": sa["median"] / 1e3, "b_median_us": sb["median"] / 1e3,
                     "a_iqr_us": sa["iqr"] / 1e3, "b_iqr_us": sb["iqr"] / 1e3, "ratio_b_over_a": ratio,
                     "change_pct": (ratio - 1) * 100, "beyond_spread": significant,
                     "verdict": ("slower" if ratio > 1 else "faster") if significant else
                     "same within spread" if min(sa["n"], sb["n"]) > 1 else "n=1: no spread to judge by"})
    return pd.DataFrame(rows)
