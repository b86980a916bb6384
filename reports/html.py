"""One self-contained HTML page for per-variant tables, with charts as inline SVG.

The page opens offline: CSS is inline, the charts are matplotlib's SVG inlined (reports/plots.py),
and nothing is loaded from anywhere (no script, font, image or stylesheet URL). All text is escaped.

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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reports import plots, render, roofline
from reports.operators import TITLE
from reports.term import SPEEDUP_FASTER, SPEEDUP_SLOWER, VERDICT_STYLES

SWEEP_COLUMNS = ("variant", "numel", "dtype", "time_median_us", "achieved_gb_s")


CSS = """
:root { --fg: #1f2328; --muted: #59636e; --bg: #ffffff; --alt: #f6f8fa; --line: #d1d9e0;
  --bar: #4c78a8; --ok: #1a7f37; --failed: #cf222e; --skipped: #9a6700;
  color-scheme: light dark; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --alt: #161b22; --line: #3d444d;
    --bar: #6b9bd1; --ok: #3fb950; --failed: #f85149; --skipped: #d29922; }
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
/* matplotlib draws on white: the chart keeps its card in the dark scheme too */
figure.gprof-plot svg { display: block; width: 100%; height: auto; background: #ffffff; border-radius: 4px; }
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


def render_html(
    title: str,
    sections: Sequence[tuple[str, pd.DataFrame]],
    *,
    sweep: pd.DataFrame | None = None,
    meta: dict[str, Any] | None = None,
    notes: Sequence[str] | None = None,
    kernels: pd.DataFrame | None = None,
    findings: pd.DataFrame | None = None,
    drawn: Mapping[tuple[str, str, str], str] | None = None,
    ops: pd.DataFrame | None = None,
) -> str:
    """The whole page as one string: for each (name, per-variant table) a bar chart of the median
    time with IQR whiskers, a bar chart of % of peak bandwidth (when the table has it) and the
    table; then, for `sweep` (long form: variant, numel, dtype, time_median_us, achieved_gb_s),
    time and GB/s against size, one line per variant; then `kernels`, the per-kernel breakdown
    (reports.kernels.kernel_table), as its own section (id "kernels"); then `findings`, ncu's rule
    results (reports.why.findings_table), with each variant's one-line explanation (id "findings").
    `drawn`: sections already drawn by draw_section (a cluster's client draws each point's as it
    lands); one whose table has changed since is drawn again.

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
        body.append(
            '<ul class="gprof-notes">'
            + "".join(f"<li{warn if str(n).startswith('warning') else ''}>{_esc(n)}</li>" for n in notes)
            + "</ul>"
        )
    toc = [(f"section-{i}", str(name)) for i, (name, _) in enumerate(sections, 1)]
    if sweep is not None:
        toc.append(("sweep", "size sweep"))
    if kernels is not None:
        toc.append(("kernels", "per kernel"))
    if findings is not None and not findings.empty:
        toc.append(("findings", "why: ncu's findings"))
    if ops is not None and not ops.empty:
        toc.append(("operators", "operators"))
    if len(toc) > 1:
        body.append(
            "<nav><ul>" + "".join(f'<li><a href="#{a}">{_esc(n)}</a></li>' for a, n in toc) + "</ul></nav>"
        )
    for i, (name, table) in enumerate(sections, 1):
        anchor = f"section-{i}"
        # the table's every value is the key (a few ms a section): only where some were drawn ahead
        ahead = drawn.get(_section_key(anchor, str(name), table)) if drawn else None
        body.append(ahead or _section_html(anchor, str(name), table))
    if sweep is not None:
        body.append(_sweep_html(sweep))
    if kernels is not None:
        body.append(kernels_html(kernels))
    if findings is not None and not findings.empty:
        body.append(findings_html(findings, sections[0][1] if sections else None))
    if ops is not None and not ops.empty:
        body.append(operators_html(ops))
    body.append("<footer>Made by gprof-orch. Self-contained: opens offline.</footer>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )


def write_html(
    path: str | Path,
    title: str,
    sections: Sequence[tuple[str, pd.DataFrame]],
    *,
    sweep: pd.DataFrame | None = None,
    meta: dict[str, Any] | None = None,
    notes: Sequence[str] | None = None,
    kernels: pd.DataFrame | None = None,
    findings: pd.DataFrame | None = None,
    drawn: Mapping[tuple[str, str, str], str] | None = None,
    ops: pd.DataFrame | None = None,
) -> Path:
    """Write render_html(...) to `path` (UTF-8, parent folders created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(
        title,
        sections,
        sweep=sweep,
        meta=meta,
        notes=notes,
        kernels=kernels,
        findings=findings,
        drawn=drawn,
        ops=ops,
    )
    with render.replacing(path) as tmp:  # a write cut short leaves the page as it was
        tmp.write_text(page, encoding="utf-8")
    return path


def draw_section(drawn: dict[tuple[str, str, str], str], index: int, name: str, table: pd.DataFrame) -> None:
    """Draw the page's section `index` (1-based, in the order render_html numbers them) for the
    table `name` into `drawn`, ahead of the page: its charts are most of a page's cost (matplotlib,
    about 0.15 s each), and a cluster's client draws them while the other points still run."""
    key = _section_key(f"section-{index}", str(name), table)
    drawn[key] = _section_html(key[0], key[1], table)


def _section_key(anchor: str, name: str, table: pd.DataFrame) -> tuple[str, str, str]:
    """A drawn section's key: its anchor, name and the table's every value (a table that changed
    is drawn again)."""
    return anchor, name, table.to_json(orient="split", default_handler=str)


# ---------------------------------------------------------------------------------------------
# sections and tables


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _meta_html(meta: dict[str, Any]) -> str:
    def text(v: Any) -> str:
        return json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else str(v)

    return (
        '<dl class="gprof-meta">'
        + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(text(v))}</dd>" for k, v in meta.items())
        + "</dl>"
    )


def _section_html(anchor: str, name: str, table: pd.DataFrame) -> str:
    out = [f'<section class="gprof-section" id="{anchor}">', f"<h2>{_esc(name)}</h2>"]
    if table.empty:
        out.append('<p class="empty">no variants</p></section>')
        return "\n".join(out)
    labels = _row_labels(table)
    charts = []
    if plots.has_values(table, "time_median_us"):
        charts.append(plots.time_figure(anchor, name, labels, table))
    if plots.has_values(table, "pct_of_peak_bw"):
        charts.append(plots.peak_bw_figure(anchor, name, labels, table))
    # why lazy: it imports matplotlib, only a page with memory figures needs it
    from reports.tradeoff import time_memory_figure

    tradeoff = time_memory_figure(anchor, name, labels, table)
    if tradeoff:
        charts.append(tradeoff)
    roof = plots.roofline_figure(anchor, name, labels, table)
    if roof.startswith("<figure"):
        charts.append(roof)
    if charts:
        out.append('<div class="gprof-plots">' + "\n".join(charts) + "</div>")
    if roof and not roof.startswith("<figure"):  # why there is no roofline, under the charts
        out.append(roof)
    out.append(table_html(table.drop(columns=roofline.CHART_ONLY, errors="ignore"), caption=name))
    out.append("</section>")
    return "\n".join(out)


def kernels_html(kernels: pd.DataFrame) -> str:
    """The per-kernel section: each variant's kernels with their launches, time per iteration,
    share of the variant's GPU time and (ncu) their own DRAM/SM % of peak, occupancy, registers."""
    out = [
        '<section class="gprof-section" id="kernels">',
        "<h2>Per kernel</h2>",
        '<p class="gprof-explain">Each variant\'s kernels (then memsets and copies): launches, GPU time per '
        "iteration and its share of the variant's GPU time; under ncu each kernel's own DRAM/SM % of peak and "
        "occupancy, time-weighted over its launches, and registers. A variant's ncu readings in the table "
        "above are time-weighted over these kernels, never a median across different kernels.</p>",
    ]
    if kernels.empty:
        out.append(
            '<p class="empty">no kernels: this run saw none (CUDA-event timing times whole calls; a CPU '
            "run has no GPU kernels)</p>"
        )
    else:
        out.append(table_html(kernels, caption="per kernel"))
    out.append("</section>")
    return "\n".join(out)


def operators_html(ops: pd.DataFrame) -> str:
    """The operator section (reports/operators.py): each variant's operator tree, indented by
    depth, with its calls, Self CPU and Self CUDA per iteration."""

    shown = ops.drop(columns=["path"]).assign(operator=ops["operator"].str.replace("  ", "\u2003"))
    return "\n".join(
        [
            '<section class="gprof-section" id="operators">',
            "<h2>Operators</h2>",
            f'<p class="gprof-explain">{_esc(TITLE)}.</p>',
            table_html(shown, caption="operators"),
            "</section>",
        ]
    )


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
    display = {c: (h, f) for c, h, f in render.DISPLAY}  # read live: backends register theirs
    known = display.get(col)
    suffix = ""
    if known is None:
        prefix = max(
            (c for c in display if col.startswith(c) and len(col) > len(c) and col[len(c)] in "_@:. /"),
            key=len,
            default=None,
        )
        if prefix is not None:
            known, suffix = display[prefix], col[len(prefix) + 1 :]
    if known is not None:
        header, fmt = known
        header = f"{header} [{suffix}]" if suffix else header
        return header, lambda v, f=fmt: "-" if _missing(v) else render._fmt(v, f), fmt != "{}"
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        return col, lambda v: "-" if _missing(v) or str(v) == "" else str(v), False
    return col, _number_formatter(series), True


def _number_formatter(series: pd.Series) -> Callable[[Any], str]:
    vals = plots.floats(series)
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
    cols = [c for c in table.columns if not (table[c].isna() | (table[c].astype(str) == "")).all()]
    formats = {c: _column_format(str(c), table[c]) for c in cols}
    texts = {c: [formats[c][1](v) for v in table[c]] for c in cols}
    # text that would make a column wider than this wraps inside a bounded box
    long = {c for c in cols if not formats[c][2] and max(map(len, texts[c]), default=0) > 28}
    speedups = plots.floats(table["speedup_vs_baseline"]) if "speedup_vs_baseline" in cols else None
    num = ' class="num"'
    head = "".join(
        f'<th scope="col" title="{_esc(c)}"{num if formats[c][2] else ""}>{_esc(formats[c][0])}</th>'
        for c in cols
    )
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
            tag = 'th scope="row"' if c == "variant" else "td"
            inner = f"<div>{_esc(text)}</div>" if c in long else _esc(text)
            cells.append(f'<{tag} class="{" ".join(classes)}">{inner}</{tag.split()[0]}>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption hidden>{_esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="gprof-table-wrap"><table class="gprof-table">{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>"
    )


# ---------------------------------------------------------------------------------------------
# the size sweep


def _sweep_html(sweep: pd.DataFrame) -> str:
    missing = [c for c in ("variant", "numel") if c not in sweep.columns]
    if missing:
        raise ValueError(f"the sweep frame lacks {', '.join(missing)} (it needs {', '.join(SWEEP_COLUMNS)})")
    out = ['<section class="gprof-section" id="sweep">', "<h2>Size sweep</h2>"]
    data = sweep.copy()
    data["numel"] = plots.floats(data["numel"])
    charts = plots.sweep_figures(data)
    if charts:
        out.append('<div class="gprof-plots">' + "\n".join(charts) + "</div>")
    else:
        out.append('<p class="empty">no sweep points with a size and a value</p>')
    if plots.has_values(data, "time_median_us"):
        index = ["numel", "dtype"] if "dtype" in data.columns else ["numel"]
        wide = (
            data.pivot_table(
                index=index, columns="variant", values="time_median_us", aggfunc="median", sort=False
            )
            .sort_index()
            .reset_index()
        )
        wide.columns = [str(c) if c in index else f"{c} us" for c in wide.columns]
        out.append(table_html(wide, caption="median time (us) by size"))
    out.append("</section>")
    return "\n".join(out)


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
            rows.append(
                f"<tr><td>{_esc(r.severity)}</td><td>{_esc(r.section)}/{_esc(r.rule)}</td>"
                f'<td>{_esc(r.title)}</td><td>{_esc(r.kernel)}</td><td class="num">{est}</td>'
                f'<td class="num">{var}</td><td>{_esc(r.message)}</td></tr>'
            )
        out.append(
            '<table class="findings"><thead><tr><th>severity</th><th>section/rule</th><th>title</th>'
            "<th>kernel</th><th>est. speedup % (kernel)</th><th>est. speedup % (variant)</th>"
            "<th>message</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
    out.append("</section>")
    return "\n".join(out)
