"""Rendering the per-variant table: terminal text, CSV, JSON and Markdown."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from reports.names import MAX_LEN

FORMATS = ("table", "csv", "json", "markdown")

# a count: whole numbers print whole (20000, not 2e+04), others to 3 significant digits
INT_OR_3G = "int-or-3g"
# a percentage: one decimal, and 2 significant digits below 0.1 (a 0.048% DRAM reading is not "0.0")
PCT = "pct"

# what a person sees: column -> (header, format)
DISPLAY = [
    ("run", "run", "{}"),  # a child run of an `all` or sweep folder (its per-kernel rows)
    ("numel", "size", "{:.0f}"),
    ("dtype", "dtype", "{}"),
    ("variant", "variant", "{}"),
    ("label", "label", "{}"),
    ("status", "status", "{}"),
    ("kernels", "kernels", "{}"),
    ("kernels_full", "kernels (full names)", "{}"),
    ("kernel", "kernel", "{}"),
    ("kernel_full", "kernel (full name)", "{}"),
    ("launches", "launches", INT_OR_3G),
    ("launches_per_iter", "launches/iter", INT_OR_3G),
    ("time_us_per_iter", "us/iter", "{:.2f}"),
    ("share_pct", "share %", PCT),
    ("events_us", "events us", "{:.2f}"),
    ("torch_trace_us", "torch-trace us", "{:.2f}"),
    ("nsys_us", "nsys us", "{:.2f}"),
    ("ncu_us", "ncu us", "{:.2f}"),
    ("a_median_us", "A median us", "{:.2f}"),
    ("b_median_us", "B median us", "{:.2f}"),
    ("a_iqr_us", "A IQR us", "{:.2f}"),
    ("b_iqr_us", "B IQR us", "{:.2f}"),
    ("ratio_b_over_a", "B/A", "{:.3f}"),
    ("change_pct", "change %", "{:+.1f}"),
    ("a_pct_of_peak_bw", "A % peak BW", "{:.1f}"),
    ("b_pct_of_peak_bw", "B % peak BW", "{:.1f}"),
    ("peak_bw_change_pct", "% peak BW change", "{:+.1f}"),
    ("verdict", "verdict", "{}"),
    ("time_median_us", "median us", "{:.2f}"),
    ("time_iqr_us", "IQR us", "{:.2f}"),
    ("time_min_us", "min us", "{:.2f}"),
    ("time_cv_pct", "CV %", "{:.1f}"),
    ("samples", "n", "{:.0f}"),
    ("noise_pct", "noise %", "{:.2f}"),
    ("cpu_median_us", "CPU us", "{:.1f}"),
    ("launch_cpu_us", "launch CPU us", "{:.1f}"),
    ("gpu_busy_pct", "GPU busy %", "{:.0f}"),
    ("achieved_gb_s", "GB/s", "{:.0f}"),
    ("pct_of_peak_bw", "% peak BW", "{:.1f}"),
    ("dram_pct_of_peak", "DRAM % peak", PCT),
    ("sm_pct_of_peak", "SM % peak", PCT),
    ("pct_of_roof", "% of roof", PCT),
    ("achieved_gflop_s", "GFLOP/s", "{:.1f}"),
    ("arithmetic_intensity", "FLOP/byte", "{:.3g}"),
    ("achieved_occupancy_pct", "occupancy %", PCT),
    ("registers_per_thread", "regs", "{:.0f}"),
    ("bound", "bound", "{}"),
    ("excess_traffic", "DRAM/min bytes", "{:.2f}x"),
    ("gpu_idle_us_per_iter", "GPU idle us/iter", "{:.1f}"),
    ("host_bound", "host-bound", "{}"),
    ("extra_kernels_per_iter", "extra kernels/iter", INT_OR_3G),
    ("why", "why", "{}"),
    ("speedup_vs_baseline", "speedup", "{:.2f}x"),
    ("same_kernel_as", "same kernel as", "{}"),
    ("agreement", "agreement", "{}"),
    ("note", "note", "{}"),
]


def _fmt(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if fmt == "{}":
        return str(value) if str(value) else "-"
    if fmt in (INT_OR_3G, PCT):
        try:
            x = float(value)
        except (TypeError, ValueError):
            return str(value)
        if fmt == PCT:
            return f"{x:.2g}" if 0 < abs(x) < 0.1 else f"{x:.1f}"
        return f"{x:.0f}" if math.isfinite(x) and x == round(x) else f"{x:.3g}"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


# kept in the JSON and CSV, left out of the terminal and Markdown tables: the CV (standard
# deviation over the mean) is pulled up by one outlier, and beside the IQR it reads as a
# contradiction (CV 420%, IQR 7%) that the note on high spread already settles
# The full kernel names (hundreds of characters each) stay in the JSON, CSV and HTML; the
# terminal and Markdown show the short ones. The roofline's GFLOP/s and FLOP/byte are in the HTML
# (beside its chart), JSON and CSV; the terminal shows their verdict, % of roof.
NOT_SHOWN = {"time_cv_pct", "kernels_full", "kernel_full", "why", "achieved_gflop_s", "arithmetic_intensity"}

# the per-kernel breakdown (reports/kernels.py, --per-kernel): its title under the main table
KERNELS_TITLE = ("per kernel: launches, GPU time per iteration, share of the variant's GPU time; "
                 "ncu: each kernel's DRAM/SM % of peak and occupancy, time-weighted over its launches")


def display_rows(table: pd.DataFrame, *, max_width: int = 60) -> tuple[list[str], list[list[str]]]:
    cols = [(c, h, f) for c, h, f in DISPLAY if c in table.columns and c not in NOT_SHOWN
            and not (table[c].isna() | (table[c].astype(str) == "")).all()]
    headers = [h for _, h, _ in cols]
    body = []
    for _, r in table.iterrows():
        cells = []
        for c, _, f in cols:
            s = _fmt(r[c], f)
            # one short kernel name is never cut (names.MAX_LEN)
            width = max(max_width, MAX_LEN) if c in ("kernels", "kernel") else max_width
            cells.append(s if len(s) <= width else s[: width - 3] + "...")
        body.append(cells)
    return headers, body


def to_text(table: pd.DataFrame, title: str = "", footer: list[str] | None = None) -> str:
    headers, body = display_rows(table)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    numeric = [all(_looks_numeric(r[i]) for r in body) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    out = [title] if title else []
    out += [line(headers), line(["-" * w for w in widths])] + [line(r) for r in body]
    out += footer or []
    return "\n".join(out)


def _looks_numeric(s: str) -> bool:
    try:
        float(s.rstrip("x"))
        return True
    except ValueError:
        return s == "-"


def to_markdown(table: pd.DataFrame, title: str = "", footer: list[str] | None = None) -> str:
    headers, body = display_rows(table, max_width=200)
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    out = [f"### {title}", ""] if title else []
    out.append("| " + " | ".join(headers) + " |")
    out.append("|" + "|".join(" --- " for _ in headers) + "|")
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in body]
    if footer:
        out += [""] + footer
    return "\n".join(out) + "\n"


def to_json(table: pd.DataFrame, meta: dict[str, Any] | None = None, *, kernels: pd.DataFrame | None = None) -> str:
    """{"meta", "variants"}; with `kernels`, the per-kernel breakdown beside them as "kernels"."""
    doc = {"meta": meta or {}, "variants": json.loads(table.to_json(orient="records"))}
    if kernels is not None:
        doc["kernels"] = json.loads(kernels.to_json(orient="records"))
    return json.dumps(doc, indent=1)


def render_kernels(kernels: pd.DataFrame, fmt: str) -> str:
    """The per-kernel breakdown (--per-kernel) in a text format: table, markdown or csv; render()
    puts it under the main table after a blank line. JSON: to_json(kernels=...)."""
    if fmt == "csv":
        return kernels.to_csv(index=False)
    title = KERNELS_TITLE
    if not any(c in kernels and kernels[c].notna().any() for c in ("dram_pct_of_peak", "sm_pct_of_peak")):
        title = title.split("; ncu:")[0]
    if kernels.empty:
        empty = "no kernels: this run saw none (CUDA-event timing times whole calls, a CPU run has no GPU kernels)"
        return f"### {title}\n\n{empty}\n" if fmt == "markdown" else f"{title}\n{empty}"
    if fmt == "markdown":
        return to_markdown(kernels, title)
    return to_text(kernels, title)


# frame.csv is written beside frame.parquet only below this many rows, or when asked
# (GPROF_FRAME_CSV=1; =0: never): a 3,000,000-kernel nsys capture made a 930 MB frame.csv that
# took longer to write than the rest of the report (docs/scale-cpu.md)
FRAME_CSV_MAX_ROWS = 100_000
FRAME_CSV_ENV = "GPROF_FRAME_CSV"


def wants_frame_csv(rows: int) -> bool:
    """Whether a frame of `rows` rows is also written as frame.csv: $GPROF_FRAME_CSV (1/yes/true:
    always, 0/no/false: never), else under FRAME_CSV_MAX_ROWS rows."""
    ask = os.environ.get(FRAME_CSV_ENV, "").strip().lower()
    if ask in ("1", "yes", "true"):
        return True
    if ask in ("0", "no", "false"):
        return False
    return rows < FRAME_CSV_MAX_ROWS


def write_all(table: pd.DataFrame, frame: pd.DataFrame, folder: Path, *, title: str, footer: list[str],
              meta: dict[str, Any]) -> dict[str, Path]:
    """report.csv/.json/.md, the frame as frame.parquet, and as frame.csv where wants_frame_csv()."""
    paths = {"parquet": folder / "frame.parquet", "csv": folder / "report.csv", "json": folder / "report.json",
             "markdown": folder / "report.md"}
    csv = wants_frame_csv(len(frame))
    try:
        # dictionary pages for the text columns only: the values are mostly distinct, and trying
        # them in a dictionary first was a fifth of the write on a 9,000,000-row frame
        frame.to_parquet(paths["parquet"], index=False, use_dictionary=[c for c in frame.columns if c != "value"])
    except ImportError:  # pyarrow is a dependency; without it the frame is kept as CSV, whatever its size
        del paths["parquet"]
        (folder / "frame.parquet").unlink(missing_ok=True)  # an earlier report's would disagree
        csv = True
    if csv:
        paths["frame"] = folder / "frame.csv"
        frame.to_csv(paths["frame"], index=False)
    else:  # an earlier report's frame.csv would no longer agree with frame.parquet
        (folder / "frame.csv").unlink(missing_ok=True)
    table.to_csv(paths["csv"], index=False)
    paths["json"].write_text(to_json(table, meta))
    paths["markdown"].write_text(to_markdown(table, title, footer))
    return paths


def render(table: pd.DataFrame, fmt: str, *, title: str = "", footer: list[str] | None = None,
           meta: dict[str, Any] | None = None, kernels: pd.DataFrame | None = None) -> str:
    """The table in `fmt`; with `kernels` (--per-kernel), the per-kernel breakdown under it
    (JSON: a "kernels" list beside "variants")."""
    if fmt == "json":
        return to_json(table, meta, kernels=kernels)
    if fmt == "csv":
        out = table.to_csv(index=False)
    elif fmt == "markdown":
        out = to_markdown(table, title, footer)
    else:
        out = to_text(table, title, footer)
    if kernels is not None:  # csv and markdown end in a newline, the text table does not
        out += ("\n" if fmt in ("csv", "markdown") else "\n\n") + render_kernels(kernels, fmt)
    return out
