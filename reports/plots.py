"""The HTML report's charts, drawn by matplotlib's object API (no pyplot) into inline SVG: per
variant the median time with its IQR and the % of peak bandwidth as horizontal bars, and the ncu
roofline (reports/roofline.py); for a size sweep, time and GB/s against size, a line per variant.

Each chart is a `<figure class="gprof-plot" data-plot=...>` around an `<svg role="img">` whose
aria-label reads the values out. Text stays text (svg.fonttype none) and every id carries the
chart's prefix and is the same from one build to the next (svg.hashsalt), so a page is the same
bytes each time and a reader, or a test, finds the labels. matplotlib is imported when a chart is
drawn, never at CLI start-up; where it is missing the page says so in the chart's place.

Example:
    >>> from reports import plots
    >>> page_part = plots.time_figure("section-1", "time", ["torch_square", "triton"], run.table)
"""

from __future__ import annotations

import functools
import html
import io
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from reports import roofline

# Okabe-Ito: told apart by colour-blind readers too; each series also gets its own marker
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")
MARKERS = ("o", "s", "D", "^")
DASHES = ("-", "--", ":", "-.")
BAR, INK, MUTED, REF, GRID = "#4c78a8", "#1f2328", "#59636e", "#cf222e", "#d1d9e0"

# text as <text> elements in the page's font; no mathtext, so a "$" in a variant's name stays one
RC = {
    "svg.fonttype": "none",
    "font.size": 9,
    "font.sans-serif": ["DejaVu Sans", "Arial"],
    "text.parse_math": False,
    "text.color": INK,
    "axes.labelcolor": INK,
    "axes.edgecolor": MUTED,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "xtick.labelcolor": INK,
    "ytick.labelcolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
WIDTH_IN = 6.4


class Series(NamedTuple):
    """One line of a sweep chart: its name (in the legend), its points, and how it is drawn."""

    name: str
    xs: np.ndarray
    ys: np.ndarray
    color: str
    marker: str
    dash: str


def floats(series: pd.Series) -> np.ndarray:
    """The column as float64, NaN where a value is missing or not a number."""
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def has_values(table: pd.DataFrame, col: str) -> bool:
    """Whether the table has the column `col` with at least one finite number in it."""
    return col in table.columns and bool(np.isfinite(floats(table[col])).any())


def num(v: float) -> str:
    """A chart's value label: 4 significant digits at most, 2 decimals at most."""
    if not math.isfinite(v):
        return "-"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


def chart(
    plot: str, caption: str, draw: Callable[[], str], *, what: str = "", extra_class: str = "", more: str = ""
) -> str:
    """A `<figure>` around draw()'s SVG; where matplotlib is missing (a GPU image set up without
    it) a line saying so instead: the measurements stand, only the chart needs it."""
    try:
        svg = draw()
    except ImportError as exc:
        if not (exc.name or "").startswith("matplotlib"):
            raise
        return (
            f'<p class="empty gprof-{what or "plot"}-missing">no {what or plot} chart: matplotlib is not '
            f"installed here (pip install matplotlib; gprof-orch report FOLDER draws it){more}</p>"
        )
    cls = f"gprof-plot {extra_class}".strip()
    return (
        f'<figure class="{cls}" data-plot="{html.escape(plot)}"><figcaption>{html.escape(caption)}'
        f"</figcaption>{svg}</figure>"
    )


# ---------------------------------------------------------------------------------------------
# a section's charts


def time_figure(prefix: str, name: str, labels: list[str], table: pd.DataFrame) -> str:
    """Median time per variant, with the IQR as a whisker centred on the median."""
    med = floats(table["time_median_us"])
    iqr = floats(table["time_iqr_us"]) if "time_iqr_us" in table.columns else np.full(len(med), np.nan)
    spoken = [
        f"{lab} {num(m)} us" + (f", IQR {num(q)} us" if math.isfinite(q) else "")
        for lab, m, q in zip(labels, med, iqr)
    ]
    whisker = bool(np.isfinite(iqr).any())
    aria = (
        f"{name}: median time per variant in microseconds"
        + (" with IQR whiskers" if whisker else "")
        + ". "
        + "; ".join(spoken)
    )
    xlabel = "median time (us)" + ("; whisker: IQR, centred on the median" if whisker else "")
    return chart(
        "time_median_us",
        "Median time per variant (shorter is faster)",
        lambda: bars_svg(
            labels,
            med,
            errors=iqr,
            status=_status(table),
            value_text=lambda v: f"{num(v)} us",
            xlabel=xlabel,
            prefix=f"{prefix}-time",
            aria=aria,
        ),
    )


def peak_bw_figure(prefix: str, name: str, labels: list[str], table: pd.DataFrame) -> str:
    """Achieved bandwidth per variant as a % of the peak, with a line at 100%."""
    pct = floats(table["pct_of_peak_bw"])
    gbs = floats(table["achieved_gb_s"]) if "achieved_gb_s" in table.columns else np.full(len(pct), np.nan)
    spoken = [
        f"{lab}: {p:.1f}% of peak bandwidth" + (f", {g:.0f} GB/s" if math.isfinite(g) else "")
        if math.isfinite(p)
        else f"{lab}: no value"
        for lab, p, g in zip(labels, pct, gbs)
    ]
    aria = (
        f"{name}: achieved bandwidth per variant as a percentage of the peak, with a line at 100 percent. "
        + "; ".join(spoken)
    )
    return chart(
        "pct_of_peak_bw",
        "Achieved bandwidth, % of peak (longer is better)",
        lambda: bars_svg(
            labels,
            pct,
            status=_status(table),
            value_text=lambda v: f"{v:.1f}%",
            ref=100.0,
            ref_label="peak",
            xlabel="% of peak DRAM bandwidth (dashed line: 100%)",
            prefix=f"{prefix}-peak-bw",
            aria=aria,
        ),
    )


def roofline_figure(prefix: str, name: str, labels: list[str], table: pd.DataFrame) -> str:
    """The roofline figure of an ncu table (reports/roofline.py); a line saying why there is none
    for an ncu variant table without one; "" for other tables (a merged table carries no
    roofline columns)."""
    mask = roofline.has_point(table)
    if not mask.any():
        ncu = has_values(table, "dram_pct_of_peak") or has_values(table, "sm_pct_of_peak")
        if not ncu or "roof_dram_gb_s" not in table.columns:
            return ""
        why = (
            "no variant executed floating-point instructions: no point on the FLOP roofline"
            if has_values(table, "roof_dram_gb_s")
            else f"no roofline: this report holds no roofline metrics (ncu's {roofline.SECTION} section was not "
            "collected)"
        )
        return f'<p class="empty gprof-roofline-missing">{html.escape(why)}</p>'
    shown = [(lab, r) for lab, keep, (_, r) in zip(labels, mask, table.iterrows()) if keep]
    aria = (
        f"{name}: roofline, performance in GFLOP/s against arithmetic intensity in FLOP per DRAM byte, "
        "log-log, with the memory and compute roofs. "
        + "; ".join(
            f"{lab}: {r.arithmetic_intensity:.3g} FLOP/byte, {r.achieved_gflop_s:.1f} GFLOP/s, "
            f"{r.pct_of_roof:.1f}% of the {roofline.limiting_roof(r)} roof"
            for lab, r in shown
        )
    )
    return chart(
        "roofline",
        "Roofline (log-log): GFLOP/s against FLOP per DRAM byte; dashed: the distance to the "
        "roof at the variant's intensity",
        lambda: roofline.roofline_svg(
            table, id_prefix=f"{prefix}-roofline", labels=labels, palette=PALETTE, aria=aria
        ),
        what="roofline",
        extra_class="gprof-roofline",
        more="; % of roof is in the table",
    )


def _status(table: pd.DataFrame) -> list[str]:
    return table["status"].astype(str).tolist() if "status" in table.columns else [""] * len(table)


def sweep_figures(data: pd.DataFrame) -> list[str]:
    """Time (log-log) and GB/s against size: one colour a variant; with several dtypes, one marker
    and dash pattern a dtype. `data["numel"]` is numeric."""
    variants = list(dict.fromkeys(data["variant"].astype(str)))
    dtypes = list(dict.fromkeys(data["dtype"].astype(str))) if "dtype" in data.columns else []
    multi = len(dtypes) > 1
    out = []
    for col, plot, caption, ylabel, ylog in (
        ("time_median_us", "sweep_time", "Median time against size (log-log)", "median time (us)", True),
        ("achieved_gb_s", "sweep_gb_s", "Achieved bandwidth against size", "GB/s", False),
    ):
        if not has_values(data, col):
            continue
        series = []
        for key, g in data.groupby(["variant", "dtype"] if multi else ["variant"], sort=False):
            y = floats(g[col])
            keep = (floats(g["numel"]) > 0) & np.isfinite(y) & ((y > 0) if ylog else True)
            g = g.assign(_y=y)[keep].sort_values("numel")
            if len(g):
                v, d = variants.index(str(key[0])), dtypes.index(str(key[1])) if multi else 0
                series.append(
                    Series(
                        f"{key[0]} ({key[1]})" if multi else str(key[0]),
                        g["numel"].to_numpy(),
                        g["_y"].to_numpy(),
                        PALETTE[v % len(PALETTE)],
                        MARKERS[(d if multi else v) % len(MARKERS)],
                        DASHES[d % len(DASHES)],
                    )
                )
        if series:
            aria = f"{caption}: {ylabel} against size in elements, one line per variant: " + "; ".join(
                f"{s.name} from {num(s.ys[0])} at {s.xs[0]:.0f} to {num(s.ys[-1])} at {s.xs[-1]:.0f} elements"
                for s in series
            )
            out.append(
                chart(
                    plot,
                    caption,
                    functools.partial(
                        lines_svg,
                        series,
                        ylog=ylog,
                        xlabel="size (elements)",
                        ylabel=ylabel,
                        prefix=plot.replace("_", "-"),
                        aria=aria,
                    ),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# drawing


def bars_svg(
    labels: Sequence[str],
    values: np.ndarray,
    *,
    status: Sequence[str],
    value_text: Callable[[float], str],
    xlabel: str,
    prefix: str,
    aria: str,
    errors: np.ndarray | None = None,
    ref: float | None = None,
    ref_label: str = "",
) -> str:
    """Horizontal bars, the first label on top, each with its value after the bar (or after its
    whisker, `errors` wide and centred on the value); a row without a value says "failed",
    "skipped" or "no value"; `ref` a dashed line. Ids: `<prefix>-bar-<i>`, `<prefix>-value-<i>`."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    n, rows = len(labels), np.arange(len(labels))
    ok = np.isfinite(values)
    half = np.full(n, np.nan) if errors is None else np.where(errors > 0, errors / 2, np.nan)
    ends = np.where(np.isfinite(half), values + half, values)
    top = max([float(np.max(ends[ok])) if ok.any() else 0.0] + ([ref] if ref is not None else []))
    with _rc(prefix):
        fig = Figure(figsize=(WIDTH_IN, 1.0 + 0.3 * n), layout="constrained")
        ax = fig.add_subplot()
        for i, bar in zip(rows[ok], ax.barh(rows[ok], values[ok], height=0.6, color=BAR)):
            bar.set_gid(f"{prefix}-bar-{i}")
        whisker = ok & np.isfinite(half)
        if whisker.any():
            ax.errorbar(
                values[whisker],
                rows[whisker],
                xerr=half[whisker],
                fmt="none",
                ecolor=INK,
                elinewidth=1.5,
                capsize=4,
            )
        for i in rows:
            text, style = (
                (value_text(values[i]), "normal")
                if ok[i]
                else (status[i] if status[i] in ("failed", "skipped") else "no value", "italic")
            )
            ax.annotate(
                text,
                (ends[i] if ok[i] else 0.0, i),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                style=style,
                color=INK if ok[i] else MUTED,
                gid=f"{prefix}-value-{i}",
            )
        if ref is not None:
            ax.axvline(ref, color=REF, linestyle="--", linewidth=1.5, gid=f"{prefix}-ref")
            ax.annotate(
                ref_label,
                (ref, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                color=REF,
            )
        ax.set_yticks(rows, labels=[_clip(lab, 30) for lab in labels])
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_xlim(0, top * 1.02 if top > 0 else 1.0)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick(v)))
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", color=GRID, linewidth=0.6)
        ax.set_axisbelow(True)
        return _svg(fig, prefix, aria)


def lines_svg(
    series: Sequence[Series], *, ylog: bool, xlabel: str, ylabel: str, prefix: str, aria: str
) -> str:
    """Lines with markers over a log x axis (and a log y axis with `ylog`), the legend to the
    right. Ids: `<prefix>-series-<i>`."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    with _rc(prefix):
        fig = Figure(figsize=(WIDTH_IN, 3.6), layout="constrained")
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log" if ylog else "linear")
        for i, s in enumerate(series):
            ax.plot(
                s.xs,
                s.ys,
                color=s.color,
                marker=s.marker,
                linestyle=s.dash,
                linewidth=2,
                markersize=5,
                label=_clip(s.name, 24),
                gid=f"{prefix}-series-{i}",
            )
        logs = [(ax.xaxis, np.concatenate([s.xs for s in series]))]
        if ylog:
            logs.append((ax.yaxis, np.concatenate([s.ys for s in series])))
        for axis, v in logs:
            # a span of two decades or less gets 2 and 5 between them, or it would show one or two ticks
            few = math.log10(v.max() / v.min()) <= 2
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if few else (1.0,)))
            axis.set_major_formatter(FuncFormatter(lambda t, _: _tick(t)))
            axis.set_minor_formatter(NullFormatter())
        if not ylog:
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda t, _: _tick(t)))
        ax.set_xlabel(f"{xlabel} (log)")
        ax.set_ylabel(ylabel + (" (log)" if ylog else ""))
        ax.grid(True, which="major", color=GRID, linewidth=0.6)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
        return _svg(fig, prefix, aria)


def _rc(prefix: str) -> Any:
    import matplotlib

    return matplotlib.rc_context({**RC, "svg.hashsalt": prefix})


def _svg(fig: Any, prefix: str, aria: str) -> str:
    """The figure as SVG made fit for the page by roofline's _inline (no prolog or <style>, every
    id prefixed); no date or creator, so the same chart is the same bytes."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return roofline._inline(buf.getvalue(), prefix, aria)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _tick(v: float) -> str:
    """'0', '0.5', '200', '2e4', '1e8': plain from 1e-3 to below 1e4, else a power of ten."""
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        return f"{v:g}"
    e = math.floor(math.log10(abs(v)))
    return f"{round(v / 10**e, 2):g}e{e}"
