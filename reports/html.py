"""One self-contained HTML page for per-variant tables, with plots drawn as inline SVG.

The page opens offline: CSS is inline, plots are SVG written here in Python, and nothing is
loaded from anywhere (no script, font, image or stylesheet URL). All text is escaped.

Example:
    >>> from orchestrator import load_run
    >>> from reports.html import write_html
    >>> run = load_run("gprof-runs/time-square")
    >>> write_html("report.html", run.title(), [("time", run.table)], notes=run.footer())
"""
from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from reports import render, roofline
from reports.term import SPEEDUP_FASTER, SPEEDUP_SLOWER, VERDICT_STYLES

SWEEP_COLUMNS = ("variant", "numel", "dtype", "time_median_us", "achieved_gb_s")

# Okabe-Ito: told apart by colour-blind readers too; each series also gets its own marker
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")
MARKERS = ("circle", "square", "diamond", "triangle")
DASHES = ("", "6 3", "2 3", "8 3 2 3")

_DISPLAY = {c: (h, f) for c, h, f in render.DISPLAY}
_CHAR_PX = 7.0  # rough width of one character of the 12px plot font, for laying out labels

CSS = """
:root { --fg: #1f2328; --muted: #59636e; --bg: #ffffff; --alt: #f6f8fa; --line: #d1d9e0;
  --bar: #4c78a8; --whisker: #1f2328; --ok: #1a7f37; --failed: #cf222e; --skipped: #9a6700;
  color-scheme: light dark; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --alt: #161b22; --line: #3d444d;
    --bar: #6b9bd1; --whisker: #e6edf3; --ok: #3fb950; --failed: #f85149; --skipped: #d29922; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1600px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 20px; margin: 0 0 12px; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
nav ul { margin: 0 0 8px; padding-left: 20px; }
a { color: var(--bar); }
.gprof-meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 12px;
  font-size: 13px; }
.gprof-meta dt { color: var(--muted); }
.gprof-meta dd { margin: 0; overflow-wrap: anywhere; }
.gprof-notes { margin: 0 0 12px; padding-left: 20px; color: var(--muted); font-size: 13px; }
.gprof-notes .warning { color: var(--skipped); }
.gprof-explain { margin: 0 0 8px; color: var(--muted); font-size: 13px; max-width: 70em; }
.gprof-plots { display: flex; flex-wrap: wrap; gap: 12px 24px; margin: 8px 0 12px; }
figure.gprof-plot { margin: 0; flex: 1 1 520px; max-width: 640px; }
figure.gprof-plot figcaption { font-size: 13px; font-weight: 600; margin-bottom: 2px; }
figure.gprof-plot svg { display: block; width: 100%; height: auto; }
svg text { fill: var(--fg); font: 12px system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif; }
svg .axis-title, svg .missing { fill: var(--muted); }
svg .missing { font-style: italic; }
svg .grid { stroke: var(--line); stroke-width: 1; }
svg .axis { stroke: var(--muted); stroke-width: 1; }
svg .bar { fill: var(--bar); }
svg text.inside { fill: #ffffff; }
svg .whisker { stroke: var(--whisker); stroke-width: 1.5; }
svg .ref { stroke: var(--failed); stroke-width: 1.5; stroke-dasharray: 5 4; }
svg .ref-label { fill: var(--failed); }
svg .series { fill: none; stroke-width: 2; }
figure.gprof-roofline svg text { fill: #1f2328; }
.gprof-table-wrap { overflow-x: auto; margin: 4px 0 8px; }
table.gprof-table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; }
.gprof-table th, .gprof-table td { padding: 4px 8px; border-bottom: 1px solid var(--line);
  text-align: left; vertical-align: top; }
.gprof-table thead th { background: var(--alt); font-weight: 600; white-space: nowrap; }
.gprof-table tbody th { font-weight: 600; white-space: nowrap; }
.gprof-table tbody tr:nth-child(even) { background: var(--alt); }
.gprof-table td.num, .gprof-table th.num { text-align: right; }
.gprof-table td.num { white-space: nowrap; }
.gprof-table td.text { white-space: nowrap; }
.gprof-table td.long { white-space: normal; }
.gprof-table td.long div { min-width: 12em; max-width: 22em; overflow-wrap: anywhere; }
.gprof-table .status-ok { color: var(--ok); font-weight: 600; }
.gprof-table .status-failed { color: var(--failed); font-weight: 600; }
.gprof-table .status-skipped { color: var(--skipped); font-weight: 600; }
.gprof-table .faster { color: var(--ok); font-weight: 600; }
.gprof-table .slower { color: var(--failed); font-weight: 600; }
.gprof-table td.note { color: var(--muted); }
.empty { color: var(--muted); font-style: italic; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
@media print { .gprof-section, figure.gprof-plot { break-inside: avoid; } }
"""


def render_html(title: str, sections: Sequence[tuple[str, pd.DataFrame]], *, sweep: pd.DataFrame | None = None,
                meta: dict[str, Any] | None = None, notes: Sequence[str] | None = None,
                kernels: pd.DataFrame | None = None, findings: pd.DataFrame | None = None) -> str:
    """The whole page as one string: for each (name, per-variant table) a bar chart of the median
    time with IQR whiskers, a bar chart of % of peak bandwidth (when the table has it) and the
    table; then, for `sweep` (long form: variant, numel, dtype, time_median_us, achieved_gb_s),
    time and GB/s against size, one line per variant; then `kernels`, the per-kernel breakdown
    (reports.kernels.kernel_table), as its own section (id "kernels"); then `findings`, ncu's rule
    results (reports.why.findings_table), with each variant's one-line explanation (id "findings").

    Tables may hold any subset of reports.summary.TABLE_COLUMNS, or other columns (a merged
    table): every column with a value is shown, known ones with the terminal table's headers and
    formats, empty ones are left out, missing values show as "-".

    Example:
        >>> page = render_html("square on H200", [("time", run.table)], meta={"run": run.path.name},
        ...                    notes=run.footer())
    """
    body: list[str] = [f"<h1>{_esc(title)}</h1>"]
    if meta:
        body.append(_meta_html(meta))
    if notes:
        warn = ' class="warning"'
        body.append('<ul class="gprof-notes">' + "".join(
            f'<li{warn if str(n).startswith("warning") else ""}>{_esc(n)}</li>' for n in notes) + "</ul>")
    toc = [(f"section-{i}", str(name)) for i, (name, _) in enumerate(sections, 1)]
    if sweep is not None:
        toc.append(("sweep", "size sweep"))
    if kernels is not None:
        toc.append(("kernels", "per kernel"))
    if findings is not None and not findings.empty:
        toc.append(("findings", "why: ncu's findings"))
    if len(toc) > 1:
        body.append("<nav><ul>" + "".join(f'<li><a href="#{a}">{_esc(n)}</a></li>' for a, n in toc) + "</ul></nav>")
    for i, (name, table) in enumerate(sections, 1):
        body.append(_section_html(f"section-{i}", str(name), table))
    if sweep is not None:
        body.append(_sweep_html(sweep))
    if kernels is not None:
        body.append(kernels_html(kernels))
    if findings is not None and not findings.empty:
        body.append(findings_html(findings, sections[0][1] if sections else None))
    body.append("<footer>Made by gprof-orch. Self-contained: opens offline.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


def write_html(path: str | Path, title: str, sections: Sequence[tuple[str, pd.DataFrame]], *,
               sweep: pd.DataFrame | None = None, meta: dict[str, Any] | None = None,
               notes: Sequence[str] | None = None, kernels: pd.DataFrame | None = None,
               findings: pd.DataFrame | None = None) -> Path:
    """Write render_html(...) to `path` (UTF-8, parent folders created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(title, sections, sweep=sweep, meta=meta, notes=notes, kernels=kernels,
                                findings=findings),
                    encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# sections and tables


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _floats(series: pd.Series) -> np.ndarray:
    """The column as float64, NaN where a value is missing or not a number."""
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _meta_html(meta: dict[str, Any]) -> str:
    def text(v: Any) -> str:
        return json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else str(v)

    return '<dl class="gprof-meta">' + "".join(
        f"<dt>{_esc(k)}</dt><dd>{_esc(text(v))}</dd>" for k, v in meta.items()) + "</dl>"


def _section_html(anchor: str, name: str, table: pd.DataFrame) -> str:
    out = [f'<section class="gprof-section" id="{anchor}">', f"<h2>{_esc(name)}</h2>"]
    if table.empty:
        out.append('<p class="empty">no variants</p></section>')
        return "\n".join(out)
    labels = _row_labels(table)
    plots = []
    if _has_values(table, "time_median_us"):
        plots.append(_time_plot(name, labels, table))
    if _has_values(table, "pct_of_peak_bw"):
        plots.append(_peak_bw_plot(name, labels, table))
    chart = _roofline_html(anchor, name, labels, table)
    if chart.startswith("<figure"):
        plots.append(chart)
    if plots:
        out.append('<div class="gprof-plots">' + "\n".join(plots) + "</div>")
    if chart and not chart.startswith("<figure"):
        out.append(chart)
    out.append(table_html(table.drop(columns=roofline.CHART_ONLY, errors="ignore"), caption=name))
    out.append("</section>")
    return "\n".join(out)


def _roofline_html(anchor: str, name: str, labels: list[str], table: pd.DataFrame) -> str:
    """The roofline figure of an ncu table (reports/roofline.py, drawn by matplotlib); a line saying
    why there is none for an ncu variant table without one; "" for other tables (a merged table
    carries no roofline columns)."""
    mask = roofline.has_point(table)
    if not mask.any():
        ncu = _has_values(table, "dram_pct_of_peak") or _has_values(table, "sm_pct_of_peak")
        if not ncu or "roof_dram_gb_s" not in table.columns:
            return ""
        why = ("no variant executed floating-point instructions: no point on the FLOP roofline"
               if _has_values(table, "roof_dram_gb_s") else
               f"no roofline: this report holds no roofline metrics (ncu's {roofline.SECTION} section was not "
               "collected)")
        return f'<p class="empty gprof-roofline-missing">{_esc(why)}</p>'
    shown = table[mask]
    aria = (f"{name}: roofline, performance in GFLOP/s against arithmetic intensity in FLOP per DRAM byte, "
            "log-log, with the memory and compute roofs. " + "; ".join(
                f"{lab}: {r.arithmetic_intensity:.3g} FLOP/byte, {r.achieved_gflop_s:.1f} GFLOP/s, "
                f"{r.pct_of_roof:.1f}% of the {roofline.limiting_roof(r)} roof"
                for lab, (_, r) in zip([lab for lab, k in zip(labels, mask) if k], shown.iterrows())))
    try:
        svg = roofline.roofline_svg(table, id_prefix=f"{anchor}-roofline", labels=labels, palette=PALETTE, aria=aria)
    except ImportError as exc:
        if not (exc.name or "").startswith("matplotlib"):
            raise
        # a dependency missing where the run was taken (a GPU image): the measurements and % of roof
        # stand, the chart says what it needs
        return ('<p class="empty gprof-roofline-missing">no roofline chart: matplotlib is not installed here '
                "(pip install matplotlib; gprof-orch report FOLDER draws it); % of roof is in the table</p>")
    return _figure("roofline", "Roofline (log-log): GFLOP/s against FLOP per DRAM byte; dashed: the distance "
                               "to the roof at the variant's intensity", svg, extra_class="gprof-roofline")


def kernels_html(kernels: pd.DataFrame) -> str:
    """The per-kernel section: each variant's kernels with their launches, time per iteration,
    share of the variant's GPU time and (ncu) their own DRAM/SM % of peak, occupancy, registers."""
    out = ['<section class="gprof-section" id="kernels">', "<h2>Per kernel</h2>",
           '<p class="gprof-explain">Each variant\'s kernels (then memsets and copies): launches, GPU time per '
           "iteration and its share of the variant's GPU time; under ncu each kernel's own DRAM/SM % of peak and "
           "occupancy, time-weighted over its launches, and registers. A variant's ncu readings in the table "
           "above are time-weighted over these kernels, never a median across different kernels.</p>"]
    if kernels.empty:
        out.append('<p class="empty">no kernels: this run saw none (CUDA-event timing times whole calls; a CPU '
                   "run has no GPU kernels)</p>")
    else:
        out.append(table_html(kernels, caption="per kernel"))
    out.append("</section>")
    return "\n".join(out)


def _has_values(table: pd.DataFrame, col: str) -> bool:
    return col in table.columns and bool(np.isfinite(_floats(table[col])).any())


def _row_labels(table: pd.DataFrame) -> list[str]:
    """Variant names, made unique with the columns that tell rows of a merged table apart."""
    if "variant" in table.columns:
        labels = ["-" if _missing(v) else str(v) for v in table["variant"]]
    else:
        labels = [str(i) for i in table.index]
    if len(set(labels)) < len(labels):
        extra = [c for c in ("backend", "run", "workload", "numel", "dtype", "label") if c in table.columns]
        for c in extra:
            labels = [f"{lab} [{v}]" for lab, v in zip(labels, table[c].astype(str))]
            if len(set(labels)) == len(labels):
                break
        if len(set(labels)) < len(labels):
            labels = [f"{lab} #{i}" for i, lab in enumerate(labels, 1)]
    return labels


def _column_format(col: str, series: pd.Series) -> tuple[str, Callable[[Any], str], bool]:
    """(header, cell formatter, numeric?) for one column: the terminal table's header and format
    for known columns, also as a prefix of a merged table's column ('time_median_us_nsys');
    for other numeric columns as many decimals as the column's magnitude calls for."""
    known = _DISPLAY.get(col)
    suffix = ""
    if known is None:
        prefix = max((c for c in _DISPLAY if col.startswith(c) and len(col) > len(c) and col[len(c)] in "_@:. /"),
                     key=len, default=None)
        if prefix is not None:
            known, suffix = _DISPLAY[prefix], col[len(prefix) + 1:]
    if known is not None:
        header, fmt = known
        header = f"{header} [{suffix}]" if suffix else header
        return header, lambda v, f=fmt: "-" if _missing(v) else render._fmt(v, f), fmt != "{}"
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        return col, lambda v: "-" if _missing(v) or str(v) == "" else str(v), False
    return col, _number_formatter(series), True


def _number_formatter(series: pd.Series) -> Callable[[Any], str]:
    vals = _floats(series)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0 or np.all(vals == np.round(vals)) and np.abs(vals).max() < 1e15:
        decimals = 0
    else:
        big = np.abs(vals).max()
        decimals = 0 if big >= 1000 else 1 if big >= 100 else 2 if big >= 10 else 3 if big >= 0.01 else None

    def fmt(v: Any) -> str:
        if _missing(v):
            return "-"
        try:
            x = float(v)
        except (TypeError, ValueError):
            return str(v)
        if not math.isfinite(x):
            return "-" if math.isnan(x) else str(x)
        return f"{x:.{decimals}f}" if decimals is not None else f"{x:.3g}"

    return fmt


def table_html(table: pd.DataFrame, caption: str = "") -> str:
    """The table as `<table class="gprof-table">`, columns with no value at all left out."""
    cols = [c for c in table.columns
            if not (table[c].isna() | (table[c].astype(str) == "")).all()]
    formats = {c: _column_format(str(c), table[c]) for c in cols}
    texts = {c: [formats[c][1](v) for v in table[c]] for c in cols}
    # text that would make a column wider than this wraps inside a bounded box
    long = {c for c in cols if not formats[c][2] and max(map(len, texts[c]), default=0) > 28}
    speedups = _floats(table["speedup_vs_baseline"]) if "speedup_vs_baseline" in cols else None
    num = ' class="num"'
    head = "".join(f'<th scope="col" title="{_esc(c)}"{num if formats[c][2] else ""}>'
                   f"{_esc(formats[c][0])}</th>" for c in cols)
    rows = []
    for i, (_, r) in enumerate(table.iterrows()):
        cells = []
        for c in cols:
            numeric = formats[c][2]
            text = texts[c][i]
            classes = ["num" if numeric else "long" if c in long else "text"]
            if c == "status" and text in ("ok", "failed", "skipped"):
                classes.append(f"status-{text}")
            elif c == "speedup_vs_baseline" and speedups is not None:
                if speedups[i] > SPEEDUP_FASTER:
                    classes.append("faster")
                elif speedups[i] < SPEEDUP_SLOWER:
                    classes.append("slower")
            elif c == "verdict" and text in VERDICT_STYLES:
                classes.append(text)
            elif c == "note":
                classes.append("note")
            tag = "th scope=\"row\"" if c == "variant" else "td"
            inner = f"<div>{_esc(text)}</div>" if c in long else _esc(text)
            cells.append(f'<{tag} class="{" ".join(classes)}">{inner}</{tag.split()[0]}>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption hidden>{_esc(caption)}</caption>" if caption else ""
    return (f'<div class="gprof-table-wrap"><table class="gprof-table">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>")


# ---------------------------------------------------------------------------------------------
# per-section bar charts


def _time_plot(name: str, labels: list[str], table: pd.DataFrame) -> str:
    med = _floats(table["time_median_us"])
    iqr = (_floats(table["time_iqr_us"])
           if "time_iqr_us" in table.columns else None)
    status = table["status"].astype(str).tolist() if "status" in table.columns else [""] * len(table)
    tips, spoken = [], []
    for lab, m, q in zip(labels, med, iqr if iqr is not None else [math.nan] * len(med)):
        t = f"{lab}: median {_num(m)} us" + (f", IQR {_num(q)} us" if math.isfinite(q) else "")
        tips.append(t)
        spoken.append(t.replace(": median", ""))
    whisker = iqr is not None and bool(np.isfinite(iqr).any())
    axis = "median time (us)" + ("; whisker: IQR, centred on the median" if whisker else "")
    svg = _hbar_svg(labels, med, errors=iqr, status=status, tips=tips, value_text=lambda v: f"{_num(v)} us",
                    axis_title=axis, aria=f"{name}: median time per variant in microseconds"
                    + (" with IQR whiskers" if whisker else "") + ". " + "; ".join(spoken))
    return _figure("time_median_us", "Median time per variant (shorter is faster)", svg)


def _peak_bw_plot(name: str, labels: list[str], table: pd.DataFrame) -> str:
    pct = _floats(table["pct_of_peak_bw"])
    gbs = (_floats(table["achieved_gb_s"])
           if "achieved_gb_s" in table.columns else np.full(len(pct), np.nan))
    status = table["status"].astype(str).tolist() if "status" in table.columns else [""] * len(table)
    tips = [f"{lab}: {p:.1f}% of peak bandwidth" + (f", {g:.0f} GB/s" if math.isfinite(g) else "")
            if math.isfinite(p) else f"{lab}: no value" for lab, p, g in zip(labels, pct, gbs)]
    svg = _hbar_svg(labels, pct, status=status, tips=tips, value_text=lambda v: f"{v:.1f}%",
                    axis_title="% of peak DRAM bandwidth (dashed line: 100%)", ref=100.0, ref_label="peak",
                    aria=f"{name}: achieved bandwidth per variant as a percentage of the peak, with a line "
                         f"at 100 percent. " + "; ".join(tips))
    return _figure("pct_of_peak_bw", "Achieved bandwidth, % of peak (longer is better)", svg)


def _figure(plot: str, caption: str, svg: str, *, extra_class: str = "") -> str:
    cls = f"gprof-plot {extra_class}".strip()
    return (f'<figure class="{cls}" data-plot="{_esc(plot)}"><figcaption>{_esc(caption)}</figcaption>'
            f"{svg}</figure>")


def _num(v: float) -> str:
    """A plot label: 4 significant digits at most, 2 decimals at most."""
    if not math.isfinite(v):
        return "-"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


def _hbar_svg(labels: list[str], values: np.ndarray, *, status: list[str], tips: list[str],
              value_text: Callable[[float], str], axis_title: str, aria: str, errors: np.ndarray | None = None,
              ref: float | None = None, ref_label: str = "") -> str:
    width, row_h, bar_h, top, bottom = 600, 24, 14, 22 if ref is not None else 10, 44
    shown = [_clip(lab, 30) for lab in labels]
    left = min(230, max(70, int(max(len(s) for s in shown) * _CHAR_PX) + 14))
    right = 78
    plot_w = width - left - right
    errs = errors if errors is not None else np.full(len(values), np.nan)
    half = np.where(np.isfinite(errs), errs / 2, 0.0)
    ends = (values + half)[np.isfinite(values)]
    vmax = max([float(ends.max()) if ends.size else 0.0] + ([ref] if ref is not None else []))
    top_v, ticks = _linear_ticks(vmax * 1.02 if vmax > 0 else 1.0)
    height = top + row_h * len(labels) + bottom

    def x(v: float) -> float:
        return left + plot_w * max(0.0, v) / top_v

    out = [f'<svg role="img" aria-label="{_esc(aria)}" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" preserveAspectRatio="xMinYMin meet">']
    y0, y1 = top, top + row_h * len(labels)
    for t in ticks:
        out.append(f'<line class="grid" x1="{x(t):.1f}" y1="{y0}" x2="{x(t):.1f}" y2="{y1}"/>')
        out.append(f'<text x="{x(t):.1f}" y="{y1 + 15}" text-anchor="middle">{_esc(_tick_label(t))}</text>')
    out.append(f'<line class="axis" x1="{left}" y1="{y0}" x2="{left}" y2="{y1}"/>')
    out.append(f'<line class="axis" x1="{left}" y1="{y1}" x2="{left + plot_w}" y2="{y1}"/>')
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{y1 + 34}" text-anchor="middle">'
               f"{_esc(axis_title)}</text>")
    for i, (lab, full, v, e, st, tip) in enumerate(zip(shown, labels, values, errs, status, tips)):
        cy = top + row_h * i + row_h / 2
        out.append(f'<g><title>{_esc(tip)}</title>')
        out.append(f'<text x="{left - 8}" y="{cy + 4:.1f}" text-anchor="end">{_esc(lab)}</text>')
        if not math.isfinite(v):
            why = st if st in ("failed", "skipped") else "no value"
            out.append(f'<text class="missing" x="{left + 6}" y="{cy + 4:.1f}">{_esc(why)}</text></g>')
            continue
        out.append(f'<rect class="bar" x="{left}" y="{cy - bar_h / 2:.1f}" width="{x(v) - left:.1f}" '
                   f'height="{bar_h}"/>')
        end = x(v)
        if math.isfinite(e) and e > 0:
            lo, hi = x(v - e / 2), x(v + e / 2)
            out.append(f'<line class="whisker" x1="{lo:.1f}" y1="{cy:.1f}" x2="{hi:.1f}" y2="{cy:.1f}"/>')
            for xx in (lo, hi):
                out.append(f'<line class="whisker" x1="{xx:.1f}" y1="{cy - 5:.1f}" x2="{xx:.1f}" y2="{cy + 5:.1f}"/>')
            end = max(end, hi)
        label = value_text(v)
        if end == x(v) and x(v) - left > len(label) * _CHAR_PX + 10:
            # no whisker: the value sits inside the bar's end, clear of a reference line beyond it
            out.append(f'<text class="inside" x="{end - 5:.1f}" y="{cy + 4:.1f}" text-anchor="end">'
                       f"{_esc(label)}</text></g>")
        else:
            out.append(f'<text x="{end + 5:.1f}" y="{cy + 4:.1f}">{_esc(label)}</text></g>')
    if ref is not None:
        out.append(f'<line class="ref" x1="{x(ref):.1f}" y1="{y0 - 6}" x2="{x(ref):.1f}" y2="{y1}"/>')
        out.append(f'<text class="ref-label" x="{x(ref):.1f}" y="{y0 - 9}" text-anchor="middle">'
                   f"{_esc(ref_label)}</text>")
    out.append("</svg>")
    return "".join(out)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _linear_ticks(vmax: float, n: int = 5) -> tuple[float, list[float]]:
    """A round top of the axis at or above vmax, and the ticks from 0 up to it."""
    raw = vmax / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag * (1 + 1e-9))
    count = math.ceil(vmax / step - 1e-9)
    return step * count, [step * i for i in range(count + 1)]


def _log_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """Whole decades around [lo, hi], ticks at each decade (and at 2 and 5 when they are few)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b += 1
    ticks = [10.0 ** k for k in range(a, b + 1)]
    if b - a <= 2:
        ticks = sorted(ticks + [m * 10.0 ** k for k in range(a, b) for m in (2, 5)])
    return 10.0 ** a, 10.0 ** b, ticks


def _tick_label(v: float, sci_from: float = 1e5) -> str:
    """'0.5', '200', '1e6', '2.5e7': plain below `sci_from`, powers of ten from it on."""
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < sci_from:
        return f"{v:g}"
    e = math.floor(math.log10(abs(v)))
    m = round(v / 10 ** e, 2)
    return f"{m:g}e{e}"


# ---------------------------------------------------------------------------------------------
# the size sweep


class _SeriesStyle(NamedTuple):
    color: str
    marker: str
    dash: str


def _sweep_html(sweep: pd.DataFrame) -> str:
    missing = [c for c in ("variant", "numel") if c not in sweep.columns]
    if missing:
        raise ValueError(f"the sweep frame lacks {', '.join(missing)} (it needs {', '.join(SWEEP_COLUMNS)})")
    out = ['<section class="gprof-section" id="sweep">', "<h2>Size sweep</h2>"]
    data = sweep.copy()
    data["numel"] = _floats(data["numel"])
    # one colour a variant; with several dtypes, one marker and dash pattern a dtype
    variants = list(dict.fromkeys(data["variant"].astype(str)))
    dtypes = list(dict.fromkeys(data["dtype"].astype(str))) if "dtype" in data.columns else []
    multi_dtype = len(dtypes) > 1
    keys = ["variant", "dtype"] if multi_dtype else ["variant"]
    plots = []
    for col, plot, caption, ylabel, ylog in (
            ("time_median_us", "sweep_time", "Median time against size (log-log)", "median time (us)", True),
            ("achieved_gb_s", "sweep_gb_s", "Achieved bandwidth against size", "GB/s", False)):
        if not _has_values(data, col):
            continue
        series = []
        for key, g in data.groupby(keys, sort=False):
            variant = str(key[0])
            dtype = str(key[1]) if multi_dtype else ""
            g = g.assign(_y=_floats(g[col]))
            g = g[(g["numel"] > 0) & np.isfinite(g["_y"]) & ((g["_y"] > 0) if ylog else True)].sort_values("numel")
            if not len(g):
                continue
            v, d = variants.index(variant), dtypes.index(dtype) if multi_dtype else 0
            style = _SeriesStyle(PALETTE[v % len(PALETTE)], MARKERS[(d if multi_dtype else v) % len(MARKERS)],
                                 DASHES[d % len(DASHES)])
            series.append((f"{variant} ({dtype})" if multi_dtype else variant, g["numel"].to_numpy(),
                           g["_y"].to_numpy(), style))
        if series:
            aria = (f"{caption}: {ylabel} against size in elements, one line per variant: "
                    + "; ".join(f"{n} from {_num(ys[0])} at {xs[0]:.0f} to {_num(ys[-1])} at {xs[-1]:.0f} elements"
                                for n, xs, ys, _ in series))
            plots.append(_figure(plot, caption, _line_svg(series, ylog=ylog, xlabel="size (elements)",
                                                          ylabel=ylabel, aria=aria)))
    if plots:
        out.append('<div class="gprof-plots">' + "\n".join(plots) + "</div>")
    else:
        out.append('<p class="empty">no sweep points with a size and a value</p>')
    if _has_values(data, "time_median_us"):
        index = ["numel", "dtype"] if "dtype" in data.columns else ["numel"]
        wide = data.pivot_table(index=index, columns="variant", values="time_median_us", aggfunc="median",
                                sort=False).sort_index().reset_index()
        wide.columns = [str(c) if c in index else f"{c} us" for c in wide.columns]
        out.append(table_html(wide, caption="median time (us) by size"))
    out.append("</section>")
    return "\n".join(out)


def _marker(kind: str, x: float, y: float, color: str, tip: str) -> str:
    r = 3.5
    tip = f"<title>{_esc(tip)}</title>"
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}">{tip}</circle>'
    if kind == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}" fill="{color}">{tip}</rect>'
    if kind == "diamond":
        d = r * 1.35
        pts = f"{x:.1f},{y - d:.1f} {x + d:.1f},{y:.1f} {x:.1f},{y + d:.1f} {x - d:.1f},{y:.1f}"
    else:
        d = r * 1.3
        pts = f"{x:.1f},{y - d:.1f} {x + d:.1f},{y + d * 0.8:.1f} {x - d:.1f},{y + d * 0.8:.1f}"
    return f'<polygon points="{pts}" fill="{color}">{tip}</polygon>'


def _line_svg(series: list[tuple[str, np.ndarray, np.ndarray, _SeriesStyle]], *, ylog: bool, xlabel: str, ylabel: str,
              aria: str) -> str:
    names = [_clip(n, 24) for n, _, _, _ in series]
    legend_w = min(200, max(90, int(max(len(n) for n in names) * _CHAR_PX) + 34))
    width = 600
    left, right, top, bottom = 62, legend_w + 12, 12, 46
    height = max(300, top + bottom + 18 * len(series) + 20)
    plot_w, plot_h = width - left - right, height - top - bottom
    xs_all = np.concatenate([s[1] for s in series])
    ys_all = np.concatenate([s[2] for s in series])
    x_lo, x_hi, x_ticks = _log_ticks(float(xs_all.min()), float(xs_all.max()))
    if ylog:
        y_lo, y_hi, y_ticks = _log_ticks(float(ys_all.min()), float(ys_all.max()))
    else:
        y_lo, (y_hi, y_ticks) = 0.0, _linear_ticks(float(ys_all.max()) * 1.02 if ys_all.max() > 0 else 1.0)

    def px(v: float) -> float:
        return left + plot_w * (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def py(v: float) -> float:
        if ylog:
            frac = (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo))
        else:
            frac = (v - y_lo) / (y_hi - y_lo)
        return top + plot_h * (1 - frac)

    out = [f'<svg role="img" aria-label="{_esc(aria)}" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" preserveAspectRatio="xMinYMin meet">']
    for t in x_ticks:
        out.append(f'<line class="grid" x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + plot_h}"/>')
        out.append(f'<text x="{px(t):.1f}" y="{top + plot_h + 15}" text-anchor="middle">'
                   f"{_esc(_tick_label(t, sci_from=1e3 if x_hi >= 1e5 else 1e5))}</text>")
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{left}" y1="{py(t):.1f}" x2="{left + plot_w}" y2="{py(t):.1f}"/>')
        out.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_esc(_tick_label(t))}</text>')
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}"/>')
    out.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>')
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{top + plot_h + 34}" '
               f'text-anchor="middle">{_esc(xlabel)} (log)</text>')
    out.append(f'<text class="axis-title" x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{_esc(ylabel)}{" (log)" if ylog else ""}</text>')
    for i, ((name, xs, ys, style), short) in enumerate(zip(series, names)):
        color, marker = style.color, style.marker
        dash = f' stroke-dasharray="{style.dash}"' if style.dash else ""
        pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(xs, ys))
        out.append(f'<g><title>{_esc(name)}</title><polyline class="series" stroke="{color}"{dash} points="{pts}"/>')
        for a, b in zip(xs, ys):
            out.append(_marker(marker, px(a), py(b), color, f"{name}: {_num(b)} {ylabel} at {a:.0f} elements"))
        out.append("</g>")
        lx, ly = left + plot_w + 16, top + 8 + 18 * i
        out.append(f'<g><title>{_esc(name)}</title><line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"{dash}/>{_marker(marker, lx + 9, ly, color, name)}'
                   f'<text x="{lx + 24}" y="{ly + 4}">{_esc(short)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def findings_html(findings: pd.DataFrame, table: pd.DataFrame | None = None) -> str:
    """ncu's rule results per variant (severity, rule, title, estimated speedup, message), under
    the variant's one-line explanation (the table's `why`), most important first."""
    why = dict(zip(table["variant"], table["why"])) if table is not None and "why" in table else {}
    out = ['<section id="findings"><h2>why: ncu\'s findings</h2>']
    for variant, g in findings.groupby("variant", sort=False):
        out.append(f'<h3 class="finding-variant">{_esc(variant)}</h3>')
        if why.get(variant):
            out.append(f'<p class="why">{_esc(why[variant])}</p>')
        rows = []
        for r in g.itertuples(index=False):
            est = "-" if _missing(r.estimated_speedup_pct) else f"{r.estimated_speedup_pct:.1f}"
            var = "-" if _missing(r.variant_speedup_pct) else f"{r.variant_speedup_pct:.1f}"
            rows.append(f"<tr><td>{_esc(r.severity)}</td><td>{_esc(r.section)}/{_esc(r.rule)}</td>"
                        f"<td>{_esc(r.title)}</td><td>{_esc(r.kernel)}</td><td class=\"num\">{est}</td>"
                        f"<td class=\"num\">{var}</td><td>{_esc(r.message)}</td></tr>")
        out.append('<table class="findings"><thead><tr><th>severity</th><th>section/rule</th><th>title</th>'
                   '<th>kernel</th><th>est. speedup % (kernel)</th><th>est. speedup % (variant)</th>'
                   '<th>message</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")
    out.append("</section>")
    return "\n".join(out)
