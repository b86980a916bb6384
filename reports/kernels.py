"""Each variant's kernels one by one, and the time-weighted mean that sums them up.

A variant that launches several kernels (sum/numel: a reduction, then a one-element division)
has one row per kernel here: launches, GPU time per iteration, its share of the variant's GPU
time and, under ncu, its own DRAM/SM % of peak, occupancy and registers. The variant's row in
the main table weighs each launch's ncu reading by that launch's duration (`time_weighted`):
a median across different kernels would describe none of them (sum/numel's reduction reads
DRAM at 80% of peak, its division at 0.05%; their median, 40%, is neither).

Example:
    >>> from orchestrator import load_run
    >>> run = load_run("tests/fixtures/runs/h200/ncu-mean")
    >>> run.kernels[["variant", "kernel", "share_pct", "dram_pct_of_peak"]]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from reports import schema
from reports.names import short_kernel_name
from reports.schema import ALL_KERNELS
from reports.unify import ACTIVITY_METRIC

KERNEL_TIME = ACTIVITY_METRIC["kernel"]
ACTIVITIES = list(ACTIVITY_METRIC.values())

# the per-kernel table's columns, and the readings aggregated per kernel (reports/schema.py)
KERNEL_COLUMNS = [c.name for c in schema.columns(schema.KERNEL)]
PER_KERNEL = [c for c in schema.columns(schema.KERNEL) if c.source]
# ncu's per-launch readings that are time-weighted over launches (and a variant's kernels)
WEIGHTED = [c.source for c in schema.REPORT_COLUMNS if c.agg == schema.TIME_WEIGHTED]


def aggregate(rows: pd.DataFrame, col: schema.Column) -> float:
    """Column `col`'s value over `rows` (one variant's frame rows, or one kernel's): its source
    metric time-weighted over the launches, or reduced by `col.agg`; NaN where no row has it."""
    if col.agg == schema.TIME_WEIGHTED:
        return time_weighted(rows, col.source) * col.scale
    vals = rows.loc[rows["metric"] == col.source, "value"]
    return float(getattr(vals, col.agg)()) * col.scale if len(vals) else float("nan")


def time_weighted(rows: pd.DataFrame, metric: str) -> float:
    """The mean of `metric` over the launches in `rows` (one variant's frame rows, or one
    kernel's), each launch weighted by its duration (`kernel_time_ns`).

    A launch's reading pairs with its duration by position among the same kernel's rows (the
    parsers write each launch's rows together, in launch order). A kernel whose readings do not
    pair one to one with its durations weighs each reading by its mean launch time instead. NaN
    when no launch has the metric; the plain mean when none has a duration."""
    per = rows[(rows["metric"] == metric) & (rows["kernel"] != ALL_KERNELS)]
    if per.empty:
        return float("nan")
    times = rows[(rows["metric"] == KERNEL_TIME) & (rows["kernel"] != ALL_KERNELS)]
    durations = {k: g["value"].to_numpy(dtype="float64") for k, g in times.groupby("kernel", sort=False)}
    values, weights = [], []
    for kernel, g in per.groupby("kernel", sort=False):
        x = g["value"].to_numpy(dtype="float64")
        t = durations.get(kernel, np.empty(0))
        w = t if len(t) == len(x) else np.full(len(x), np.nanmean(t) if len(t) else np.nan)
        values.append(x)
        weights.append(w)
    x, w = np.concatenate(values), np.concatenate(weights)
    ok = np.isfinite(x)
    x, w = x[ok], w[ok]
    if x.size == 0:
        return float("nan")
    w = np.where(np.isfinite(w) & (w > 0), w, 0.0)
    return float((x * w).sum() / w.sum()) if w.sum() > 0 else float(x.mean())


def weighted_kernel_count(rows: pd.DataFrame) -> int:
    """How many distinct kernels of one variant's rows carry the time-weighted ncu readings."""
    per = rows[rows["metric"].isin(WEIGHTED) & (rows["kernel"] != ALL_KERNELS)]
    return int(per["kernel"].nunique())


def weighting_note(rows: pd.DataFrame) -> str:
    """The note of a variant whose ncu readings are time-weighted over several kernels ("" for one)."""
    n = weighted_kernel_count(rows)
    if n < 2:
        return ""
    return f"DRAM/SM %, occupancy: time-weighted over {n} kernels (--per-kernel shows each)"


def weighting_legend(frame: pd.DataFrame, variants: Iterable[str] | None = None) -> str | None:
    """A footer line naming the variants whose ncu readings are time-weighted over several
    kernels, or None when every variant has one kernel (or the frame has no ncu readings)."""
    if frame.empty:
        return None
    names = list(variants) if variants is not None else list(pd.unique(frame["variant"]))
    # only the rows weighted_kernel_count() looks at: a large run's frame has millions of others
    per = frame[frame["metric"].isin(WEIGHTED) & (frame["kernel"] != ALL_KERNELS)]
    by = {v: g for v, g in per.groupby("variant", sort=False)}
    multi = [(v, weighted_kernel_count(by[v])) for v in names if v in by]
    multi = [(v, n) for v, n in multi if n > 1]
    if not multi:
        return None
    which = ", ".join(f"{v} over {n} kernels" for v, n in multi)
    return (
        f"DRAM % peak, SM % peak and occupancy are time-weighted over a variant's kernels (each launch "
        f"weighted by its duration), never a median across different kernels: {which}; --per-kernel "
        f"(and report.html) shows each kernel's own"
    )


def kernel_table(frame: pd.DataFrame, wman: dict[str, Any]) -> pd.DataFrame:
    """One row per (variant, kernel) in the workload manifest's variant order: its kernels in
    launch order, then memsets and copies. `share_pct` is the kernel's part of the variant's GPU
    time (kernels, memsets and copies: it sums to 100 per variant); `time_us_per_iter` and
    `launches_per_iter` divide by the variant's iterations. The ncu columns are each kernel's
    time-weighted mean over its launches (registers: the most any launch used). Variants
    without GPU activity in the frame (CUDA-event timing, a CPU run) have no rows.

    Example:
        >>> kernel_table(run.frame, run.workload).query("variant == 'sum_div_numel'")
    """
    if frame.empty:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    by_variant = {v: g for v, g in frame.groupby("variant", sort=False)}
    rows = []
    for v in wman.get("variants", []):
        g = by_variant.get(v["name"])
        if g is None:
            continue
        g = g[g["kernel"] != ALL_KERNELS]
        act = g[g["metric"].isin(ACTIVITIES)]
        if act.empty:
            continue
        iters = v.get("iters") or wman.get("iters") or 1
        total = float(act["value"].sum())
        # kernels first, in launch order; then memsets and copies
        order = [(m, k) for m in ACTIVITIES for k in dict.fromkeys(act.loc[act["metric"] == m, "kernel"])]
        for metric, kernel in order:
            k = act[(act["metric"] == metric) & (act["kernel"] == kernel)]["value"]
            mine = g[g["kernel"] == kernel]
            row: dict[str, Any] = {
                "variant": v["name"],
                "kernel": short_kernel_name(kernel),
                "kernel_full": kernel,
                "launches": len(k),
                "launches_per_iter": len(k) / iters,
                "time_us_per_iter": float(k.sum()) / iters / 1e3,
                "share_pct": float(k.sum()) / total * 100 if total > 0 else np.nan,
            }
            if metric == KERNEL_TIME:
                row.update({c.name: aggregate(mine, c) for c in PER_KERNEL})
            rows.append(row)
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS)
