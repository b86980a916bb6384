"""The roofline: each variant's achieved FLOP/s against its arithmetic intensity (FLOPs per DRAM
byte), under the device's memory roof and compute roof, as Nsight Compute's roofline chart draws it.

The per-launch rates come from ncu's SpeedOfLight_RooflineChart section, computed by the parser as
ncu computes them (orchestrator/parsers/ncu_rep.py ROOFLINE_RATES): achieved FP32 work = (FADD +
FMUL + 2 x FFMA thread instructions per cycle) x the SMSPs' clock, achieved traffic =
`dram__bytes.sum.per_second`, peak work = 2 x the FFMA peak per cycle x the SM clock, peak traffic =
`dram__bytes.sum.peak_sustained` x the DRAM clock (FP64 and FP16 alike).

A variant's point weighs each launch's rate by its duration (reports/kernels.py `time_weighted`),
as the table's other ncu readings: a rate weighted by duration is the variant's FLOPs (or bytes)
over its GPU time, so the point is its total FLOPs over its total DRAM bytes, never a median
across kernels. Its precision is the one with the most FLOPs; `pct_of_roof` is its FLOP/s over the
roof at its intensity, min(peak FLOP/s, intensity x peak DRAM bandwidth): for a memory-bound
kernel that is its DRAM bandwidth over the peak. ncu's sections count SIMT work only: a variant
whose declared FLOPs run on the tensor cores takes its point from them (declared_tensor_point).

Pure functions of the unified frame and the per-variant table; matplotlib is imported only when a
chart is drawn.

Example:
    >>> from orchestrator import load_run
    >>> run = load_run("gprof-runs/ncu-square")
    >>> run.table[["variant", "arithmetic_intensity", "achieved_gflop_s", "pct_of_roof"]]
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from reports.flops import rate
from reports.kernels import time_weighted

# precision -> (achieved, peak) metric of the unified frame (orchestrator/backends/ncu.py)
PRECISIONS: dict[str, tuple[str, str]] = {
    "fp32": ("fp32_flop_per_s", "peak_fp32_flop_per_s"),
    "fp64": ("fp64_flop_per_s", "peak_fp64_flop_per_s"),
    "fp16": ("fp16_flop_per_s", "peak_fp16_flop_per_s"),
}
TRAFFIC, PEAK_TRAFFIC = "dram_bytes_per_s", "peak_dram_bytes_per_s"

# the per-variant columns (reports/summary.py TABLE_COLUMNS takes them from here): % of the roof
# at the point's intensity, which precision's roof, GFLOP/s, FLOP per DRAM byte, and the roofs
ROOFLINE_COLUMNS = [
    "pct_of_roof",
    "roofline_precision",
    "pct_of_measured_roof",
    "achieved_gflop_s",
    "arithmetic_intensity",
    "roof_gflop_s",
    "roof_dram_gb_s",
    "measured_dram_gb_s",
]
# drawn in the chart and kept in JSON/CSV; the same on every row, so not repeated in the HTML table
CHART_ONLY = ["roofline_precision", "roof_gflop_s", "roof_dram_gb_s", "measured_dram_gb_s"]

SECTION = "SpeedOfLight_RooflineChart"


def point(
    rows: pd.DataFrame,
    measured_bytes_per_s: float | None = None,
    peak_flops: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The roofline columns (ROOFLINE_COLUMNS) of one variant's frame rows: NaN (and "" for the
    precision) when the rows hold no roofline rates or no DRAM traffic; a point without FLOPs
    keeps its roofs but has no intensity or % of roof (it is not on a FLOP roofline).
    `measured_bytes_per_s`: the GPU's attainable DRAM bandwidth (workloads/memory_roof.py), the
    second memory roof; `pct_of_measured_roof` is the variant's DRAM bytes/s over it.
    Where ncu counted more tensor-core FLOPs than SIMT ones (TENSOR_RATES), the point is the tensor
    cores': their FLOP/s against `peak_flops` (workload.json's datasheet peaks by unit, dense) for
    the format with the most; no % of roof where the datasheet gives no peak.

    Example:
        >>> point(frame[frame["variant"] == "mul"], 4.1e12)["pct_of_measured_roof"]
    """
    out: dict[str, Any] = dict.fromkeys(ROOFLINE_COLUMNS, np.nan)
    out["roofline_precision"] = ""
    if rows.empty:
        return out
    traffic, peak_traffic = time_weighted(rows, TRAFFIC), time_weighted(rows, PEAK_TRAFFIC)
    if measured_bytes_per_s and measured_bytes_per_s > 0 and traffic > 0:
        out.update(
            measured_dram_gb_s=measured_bytes_per_s / 1e9,
            pct_of_measured_roof=100.0 * traffic / measured_bytes_per_s,
        )
    work = {p: (time_weighted(rows, a), time_weighted(rows, pk)) for p, (a, pk) in PRECISIONS.items()}
    work = {p: w for p, w in work.items() if math.isfinite(w[0]) and math.isfinite(w[1]) and w[1] > 0}
    tensor = {u: time_weighted(rows, m) for u, m in TENSOR_RATES.items()}
    tensor = {u: w for u, w in tensor.items() if math.isfinite(w) and w > 0}
    if tensor and max(tensor.values()) > max((w[0] for w in work.values()), default=0.0):
        # the tensor counters stand without the roofline section: a capture with only them
        # still reads its TFLOP/s (no intensity without its DRAM bytes)
        unit = max(tensor, key=lambda u: tensor[u])
        out.update(
            _tensor_point(unit, tensor[unit], traffic, peak_traffic, rate((peak_flops or {}).get(unit)))
        )
        return out
    if not work or not (peak_traffic > 0) or not (traffic > 0):
        return out
    # the most FLOPs; fp32 first on a tie (dict order), as a kernel with no FLOPs at all
    precision = max(work, key=lambda p: work[p][0])
    achieved, peak = work[precision]
    out.update(roofline_precision=precision, roof_gflop_s=peak / 1e9, roof_dram_gb_s=peak_traffic / 1e9)
    if achieved > 0:
        intensity = achieved / traffic
        out.update(
            achieved_gflop_s=achieved / 1e9,
            arithmetic_intensity=intensity,
            pct_of_roof=100.0 * achieved / roof_at(intensity, peak, peak_traffic),
        )
    return out


# the units whose work runs on the tensor cores (workloads/devices.py FLOP_UNITS) -> the frame's
# metric of the FLOPs per second ncu counted on them (orchestrator/parsers/ncu_metrics.py
# TENSOR_FLOPS writes it under this name)
TENSOR_RATES: dict[str, str] = {
    u: f"tensor_{u.removesuffix('-tensor')}_flop_per_s"
    for u in ("bf16", "fp16", "tf32", "fp8", "fp64-tensor")
}
TENSOR_UNITS = tuple(TENSOR_RATES)


def _tensor_point(
    unit: str, achieved: float, traffic: float, peak_traffic: float, peak: float | None
) -> dict[str, Any]:
    """The roofline columns of tensor-core work at `achieved` FLOP/s over `traffic` DRAM bytes/s,
    against the unit's dense `peak` (no roof, no % of roof without one)."""
    out: dict[str, Any] = {
        "roofline_precision": unit if unit.endswith("-tensor") else f"{unit}-tensor",
        "achieved_gflop_s": achieved / 1e9,
    }
    if peak:
        out["roof_gflop_s"] = peak / 1e9
    if not (traffic > 0 and peak_traffic > 0):
        return out
    intensity = achieved / traffic
    out.update(arithmetic_intensity=intensity, roof_dram_gb_s=peak_traffic / 1e9)
    if peak:
        out["pct_of_roof"] = 100.0 * achieved / roof_at(intensity, peak, peak_traffic)
    return out


def declared_tensor_point(
    rows: pd.DataFrame, row: dict[str, Any], unit: Any, peak_flop_per_s: float | None
) -> dict[str, Any]:
    """The roofline columns of a variant whose work runs on the tensor cores, from the FLOPs it
    declares, or {} for any other. For a report without ncu's tensor FLOP counters (point takes
    them where it has them): ncu's roofline rates count SIMT instructions (FADD/FMUL/FFMA and
    their FP64 and FP16 kin), never the tensor cores' work, so a bf16 GEMM would sit a thousand
    times under the FP32 roof. A variant that declares its FLOPs in a tensor unit (`unit`: bf16,
    fp16, tf32, fp8) and has an ncu point gets its point from them: its TFLOP/s (the declared
    FLOPs over its kernel time, reports/flops.py) over ncu's DRAM bytes/s, against the
    datasheet's dense peak for that unit (`peak_flop_per_s`) and ncu's DRAM roof. Kept only where
    the declared work is above the work ncu counted (a kernel off the tensor cores keeps ncu's
    own point).

    Example (the H200's cuBLAS bf16 8192 matmul under ncu: 793 TFLOP/s declared, 80% of the roof):
        >>> declared_tensor_point(rows, row, "bf16", 989.4e12)["pct_of_roof"]
        80.16...
    """
    tflops, counted = row.get("tflop_s"), row.get("achieved_gflop_s")
    if unit not in TENSOR_UNITS or not peak_flop_per_s or not (isinstance(tflops, float) and tflops > 0):
        return {}
    if str(row.get("roofline_precision", "")).endswith("-tensor"):
        return {}  # ncu counted the tensor cores' work: its point stands
    traffic, peak_traffic = time_weighted(rows, TRAFFIC), time_weighted(rows, PEAK_TRAFFIC)
    if not (traffic > 0 and peak_traffic > 0):
        return {}  # no ncu point: not an ncu run, or one without the roofline section
    achieved = tflops * 1e12
    if isinstance(counted, float) and math.isfinite(counted) and counted * 1e9 >= achieved:
        return {}
    return _tensor_point(unit, achieved, traffic, peak_traffic, peak_flop_per_s)


def roof_at(intensity: float, peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """The roof at an arithmetic intensity (FLOP/byte): the lower of the compute and memory roofs.

    Example:
        >>> roof_at(0.125, 67e12, 4.8e12)  # memory-bound: 0.125 x 4.8e12
        600000000000.0
    """
    return min(peak_flop_per_s, intensity * peak_bytes_per_s)


def limiting_roof(row: pd.Series) -> str:
    """ "memory" or "compute": which roof is lower at the row's intensity ("" without a point)."""
    ai, flops, bw = row.get("arithmetic_intensity"), row.get("roof_gflop_s"), row.get("roof_dram_gb_s")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (ai, flops, bw)):
        return ""
    return "memory" if ai * bw < flops else "compute"


def missing_note(collected: Sequence[str]) -> str:
    """The note of a report without roofline metrics, naming the options it was collected with.

    Example:
        >>> missing_note(["--section", "SpeedOfLight"])
        'no roofline metrics in this report: collected with --section SpeedOfLight; ...'
    """
    how = f"collected with {' '.join(collected)}" if collected else f"collected without {SECTION}"
    return (
        f"no roofline metrics in this report: {how}; the roofline and % of roof need --section {SECTION} "
        f"(in gprof-orch ncu's default sections, and in --set full)"
    )


def has_point(table: pd.DataFrame) -> np.ndarray:
    """Which rows of a per-variant table have a roofline point (a boolean per row)."""
    needed = ["arithmetic_intensity", "achieved_gflop_s", "roof_gflop_s", "roof_dram_gb_s"]
    if not set(needed + ["pct_of_roof", "roofline_precision"]) <= set(table.columns):
        return np.zeros(len(table), dtype=bool)
    num = table[needed].apply(pd.to_numeric, errors="coerce").to_numpy(dtype="float64")
    return (np.isfinite(num) & (num > 0)).all(axis=1)


def roofs(points: pd.DataFrame) -> tuple[float, dict[str, float]]:
    """The roofs drawn for these points: the memory roof (GB/s) and one compute roof (GFLOP/s) per
    precision, each the median over the points' own (the clocks differ a little between kernels;
    each point's % of roof is against the roof measured during its own kernels)."""
    bw = float(pd.to_numeric(points["roof_dram_gb_s"]).median())
    compute = {
        str(p): float(pd.to_numeric(g["roof_gflop_s"]).median())
        for p, g in points.groupby("roofline_precision", sort=False)
    }
    return bw, compute


def measured_roof(points: pd.DataFrame) -> float | None:
    """The measured memory roof (GB/s) of these points' run, or None when it was not measured."""
    if "measured_dram_gb_s" not in points.columns:
        return None
    got = pd.to_numeric(points["measured_dram_gb_s"], errors="coerce").dropna()
    return float(got.iloc[0]) if len(got) and got.iloc[0] > 0 else None


def roofline_svg(
    table: pd.DataFrame,
    *,
    id_prefix: str = "roofline",
    labels: Sequence[str] | None = None,
    palette: Sequence[str] = ("#0072B2",),
    aria: str = "",
) -> str:
    """An inline SVG (for an HTML page) of the table's roofline points: log-log, the memory roof and
    the compute roof(s), each variant a marker labelled with its name (`labels`, one per table row;
    default the variant) and % of roof, a dashed line from it up to the roof at its intensity.
    Element ids start with `id_prefix`: `-roof-memory`, `-roof-fp32`, `-point-<i>`, `-gap-<i>`,
    `-label-<i>` (i counts the plotted rows, in table order). "" when no row has a point.

    Example:
        >>> svg = roofline_svg(run.table, id_prefix="ncu-roofline")
    """
    mask = has_point(table)
    if not mask.any():
        return ""
    import matplotlib
    from matplotlib.figure import Figure

    pts = table[mask]
    names = [str(n) for n, keep in zip(labels if labels is not None else table["variant"], mask) if keep]
    ai = pd.to_numeric(pts["arithmetic_intensity"]).to_numpy(dtype="float64")
    gflops = pd.to_numeric(pts["achieved_gflop_s"]).to_numpy(dtype="float64")
    bw, compute = roofs(pts)
    limits = _chart_limits(ai, gflops, bw, compute)

    # text as <text> (labels a reader and a test can read), ids that do not change between runs
    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": id_prefix,
            "font.size": 9,
            "font.sans-serif": ["DejaVu Sans", "Arial"],
        }
    ):
        fig = Figure(figsize=(6.4, 4.4), layout="constrained")
        ax = _log_axes(fig, limits)
        _draw_roofs(ax, bw, compute, limits, id_prefix, measured_roof(pts))
        texts = _draw_points(ax, pts, names, palette, id_prefix)
        fig.draw_without_rendering()  # lays the axes out: the points' place on the page is known
        _draw_labels(fig, ax, ai, gflops, texts, palette, id_prefix)
        ax.legend(loc="lower right", fontsize=8, frameon=True)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _inline(buf.getvalue(), id_prefix, aria)


def _chart_limits(
    ai: np.ndarray, gflops: np.ndarray, bw: float, compute: dict[str, float]
) -> tuple[float, float, float, float]:
    """The axes' limits (x_lo, x_hi, y_lo, y_hi), whole powers of ten: room left of and below
    the points for their labels, which stack downwards, and past every ridge point."""
    ridges = [peak / bw for peak in compute.values()]
    x_lo = 10.0 ** math.floor(math.log10(min(ai.min() / 3, min(ridges) / 100)))
    x_hi = 10.0 ** math.ceil(math.log10(max(ai.max(), max(ridges)) * 10))
    y_hi = 10.0 ** math.ceil(math.log10(max(compute.values()) * 1.5))
    y_lo = 10.0 ** math.floor(math.log10(min(gflops.min() / 5, x_lo * bw)))
    return x_lo, x_hi, y_lo, y_hi


def _log_axes(fig, limits: tuple[float, float, float, float]):
    """The chart's log-log axes within limits, ticked at powers of ten (_tick), gridded and labelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    x_lo, x_hi, y_lo, y_hi = limits
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ticks = FuncFormatter(lambda v, _: _tick(v))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(ticks)
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.grid(True, which="major", color="#d1d9e0", linewidth=0.6)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    return ax


def _draw_roofs(
    ax,
    bw: float,
    compute: dict[str, float],
    limits: tuple[float, float, float, float],
    id_prefix: str,
    measured: float | None = None,
) -> None:
    """The memory roof up to the highest ridge point, then each precision's flat compute roof;
    the measured memory roof (what a copy or a sum reaches on this GPU) dotted beneath, up to
    where it meets the highest compute roof."""
    x_lo, x_hi = limits[0], limits[1]
    top = max(peak / bw for peak in compute.values())
    ax.plot(
        [x_lo, top],
        [x_lo * bw, top * bw],
        color="#59636e",
        linewidth=2,
        label=f"memory roof: {bw:,.0f} GB/s",
        gid=f"{id_prefix}-roof-memory",
    )
    if measured:
        reach = max(compute.values()) / measured
        ax.plot(
            [x_lo, reach],
            [x_lo * measured, reach * measured],
            color="#9a6700",
            linewidth=1.5,
            linestyle=":",
            label=f"measured memory roof: {measured:,.0f} GB/s",
            gid=f"{id_prefix}-roof-measured",
        )
    for (precision, peak), dash in zip(compute.items(), itertools.cycle(("-", "--", ":", "-."))):
        ax.plot(
            [peak / bw, x_hi],
            [peak, peak],
            color="#1f2328",
            linewidth=2,
            linestyle=dash,
            label=f"{precision.upper()} roof: {peak:,.0f} GFLOP/s",
            gid=f"{id_prefix}-roof-{precision}",
        )


def _draw_points(
    ax, pts: pd.DataFrame, names: list[str], palette: Sequence[str], id_prefix: str
) -> list[str]:
    """Each point's marker and its dashed line up to its own roof; returns the points' label texts."""
    ai = pd.to_numeric(pts["arithmetic_intensity"]).to_numpy(dtype="float64")
    gflops = pd.to_numeric(pts["achieved_gflop_s"]).to_numpy(dtype="float64")
    pct = pd.to_numeric(pts["pct_of_roof"]).to_numpy(dtype="float64")
    own_peak = pd.to_numeric(pts["roof_gflop_s"]).to_numpy(dtype="float64")
    own_bw = pd.to_numeric(pts["roof_dram_gb_s"]).to_numpy(dtype="float64")
    texts = []
    for i, (x, y, p, name, peak, roof_bw) in enumerate(zip(ai, gflops, pct, names, own_peak, own_bw)):
        color = palette[i % len(palette)]
        # up to the variant's own roof, the one its % of roof is against
        ax.plot(
            [x, x],
            [y, roof_at(x, peak, roof_bw)],
            color=color,
            linewidth=1,
            linestyle=(0, (3, 2)),
            gid=f"{id_prefix}-gap-{i}",
        )
        ax.plot(
            [x],
            [y],
            marker="os^Dv<>p"[i % 8],
            markersize=7,
            color=color,
            linestyle="none",
            gid=f"{id_prefix}-point-{i}",
        )
        texts.append(f"{name}: {p:.1f}% of {'memory' if x * roof_bw < peak else 'compute'} roof")
    return texts


def _draw_labels(
    fig, ax, ai: np.ndarray, gflops: np.ndarray, texts: list[str], palette: Sequence[str], id_prefix: str
) -> None:
    """The points' labels, right of them and stacked where they would overlap (_label_offsets),
    a label moved off its point tied to it by a line. The axes must be laid out first."""
    at = ax.transData.transform(np.column_stack([ai, gflops])) * 72.0 / fig.dpi
    for i, ((dx, dy), (px, py)) in enumerate(zip(_label_offsets(at, texts), at)):
        ax.annotate(
            texts[i],
            (ai[i], gflops[i]),
            xytext=(dx, dy),
            textcoords="offset points",
            color="#1f2328",
            fontsize=8.5,
            va="center",
            gid=f"{id_prefix}-label-{i}",
            arrowprops={
                "arrowstyle": "-",
                "color": palette[i % len(palette)],
                "linewidth": 0.6,
                "relpos": (0.0, 0.5),
                "shrinkA": 1,
                "shrinkB": 3,
            }
            if abs(dy) > 9
            else None,
        )


def _label_offsets(
    at: np.ndarray, texts: list[str], *, line: float = 12.0, gap: float = 16.0, char: float = 5.0
) -> list[tuple[float, float]]:
    """Offsets (points) of labels placed right of their points (`at`, in points on the page), each
    pushed down below any label it would overlap: points that sit together (one kernel under three
    names) get a column of labels, each tied to its point by a line."""
    order = sorted(range(len(texts)), key=lambda i: -at[i][1])
    placed: list[tuple[float, float, float]] = []  # (x0, x1, y) of the labels so far
    out: dict[int, tuple[float, float]] = {}
    for i in order:
        x0 = at[i][0] + gap
        x1 = x0 + char * len(texts[i])
        y = at[i][1] + 4.0
        moved = True
        while moved:
            moved = False
            for a0, a1, ay in placed:
                if x0 < a1 and a0 < x1 and abs(y - ay) < line:
                    y, moved = ay - line, True
        placed.append((x0, x1, y))
        out[i] = (gap, y - at[i][1])
    return [out[i] for i in range(len(texts))]


def _tick(v: float) -> str:
    """'0.01', '100', '1e4': plain between 1e-3 and 1e4, powers of ten outside."""
    if v <= 0:
        return ""
    if 1e-3 <= v < 1e4:
        return f"{v:g}"
    return f"1e{round(math.log10(v))}"


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^")]+)')


def _inline(svg: str, prefix: str, aria: str) -> str:
    """matplotlib's SVG document made fit to sit inside an HTML page: no XML prolog, DOCTYPE,
    namespace URLs, metadata or comments; no <style> (matplotlib's `*{...}` rule would restyle
    the whole page); every id prefixed, so two charts on one page never share one; role="img"
    with `aria` as its label."""
    from html import escape

    svg = svg[svg.index("<svg") :]
    svg = f'<svg role="img" aria-label="{escape(aria, quote=True)}"' + svg[len("<svg") :]
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg)
    svg = re.sub(r"<style[^>]*>.*?</style>|<metadata>.*?</metadata>|<!--.*?-->", "", svg, flags=re.S)
    svg = svg.replace("xlink:href=", "href=")
    svg = _ID.sub(
        lambda m: f'id="{m.group(1) if m.group(1).startswith(prefix) else f"{prefix}-{m.group(1)}"}"', svg
    )
    svg = _REF.sub(
        lambda m: f"{m.group(1)}{m.group(2) if m.group(2).startswith(prefix) else f'{prefix}-{m.group(2)}'}",
        svg,
    )
    return re.sub(r"\n\s*\n", "\n", svg).strip()
