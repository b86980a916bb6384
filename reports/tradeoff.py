"""The time-against-memory chart of the HTML report: one point per variant, x its peak MiB (one
extra call's memory, workloads/call_memory.py), y its median time: the trade-off between a
variant that is fast and one that holds less memory (a fused kernel against temporaries).

Drawn with matplotlib as reports/plots.py draws the others (inline SVG, stable bytes)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from reports import plots


def time_memory_figure(prefix: str, name: str, labels: list[str], table: pd.DataFrame) -> str:
    """The chart's `<figure>`; "" where fewer than one variant has both a peak MiB and a median."""
    if not (plots.has_values(table, "peak_mib") and plots.has_values(table, "time_median_us")):
        return ""
    x, y = plots.floats(table["peak_mib"]), plots.floats(table["time_median_us"])
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return ""
    points = [(lab, float(a), float(b)) for lab, a, b, k in zip(labels, x, y, ok) if k]
    aria = f"{name}: median time against peak memory per variant. " + "; ".join(
        f"{lab} {plots.num(a)} MiB, {plots.num(b)} us" for lab, a, b in points
    )
    return plots.chart(
        "time_vs_memory",
        "Median time against peak memory (lower left: fast and small)",
        lambda: scatter_svg(points, prefix=f"{prefix}-tradeoff", aria=aria),
        what="time-against-memory",
    )


def scatter_svg(points: list[tuple[str, float, float]], *, prefix: str, aria: str) -> str:
    """One labelled point per (label, peak MiB, median us); both axes from 0. Ids:
    `<prefix>-point-<i>`."""
    from matplotlib.figure import Figure

    with plots._rc(prefix):
        fig = Figure(figsize=(plots.WIDTH_IN, 3.2), layout="constrained")
        ax = fig.add_subplot()
        for i, (lab, mib, us) in enumerate(points):
            ax.plot([mib], [us], "o", color=plots.BAR, gid=f"{prefix}-point-{i}")
            ax.annotate(plots._clip(lab, 24), (mib, us), xytext=(4, 4), textcoords="offset points")
        top_x = max(p[1] for p in points)
        top_y = max(p[2] for p in points)
        ax.set_xlim(0, top_x * 1.25 if top_x > 0 and math.isfinite(top_x) else 1)
        ax.set_ylim(0, top_y * 1.2 if top_y > 0 and math.isfinite(top_y) else 1)
        ax.set_xlabel("peak MiB (one call)")
        ax.set_ylabel("median us")
        return plots._svg(fig, prefix, aria)
