"""Rendering the per-variant table: terminal text, CSV, JSON and Markdown."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from reports import schema
from reports.formats import FORMATS  # noqa: F401 (render.FORMATS: the formats render() takes)
from reports.names import MAX_LEN

INT_OR_3G, PCT, SIG3 = schema.INT_OR_3G, schema.PCT, schema.SIG3


def __getattr__(name: str):
    # DISPLAY is read live: a backend registers its merged column when it is first imported
    if name == "DISPLAY":
        return [(c.name, c.header, c.fmt) for c in schema.REPORT_COLUMNS]
    raise AttributeError(name)


def _fmt(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if fmt == "{}":
        return str(value) if str(value) else "-"
    if fmt in (INT_OR_3G, PCT, SIG3):
        try:
            x = float(value)
        except (TypeError, ValueError):
            return str(value)
        if fmt == PCT:
            return f"{x:.2g}" if 0 < abs(x) < 0.1 else f"{x:.1f}"
        if fmt == SIG3:
            return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
        return f"{x:.0f}" if math.isfinite(x) and x == round(x) else f"{x:.3g}"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


# the per-kernel breakdown (reports/kernels.py, --per-kernel): its title under the main table
KERNELS_TITLE = (
    "per kernel: launches, GPU time per iteration, share of the variant's GPU time; "
    "ncu: each kernel's DRAM/SM % of peak and occupancy, time-weighted over its launches"
)


def display_rows(table: pd.DataFrame, *, max_width: int = 60) -> tuple[list[str], list[list[str]]]:
    """The table's headers and formatted cells, as every text renderer shows them: declared
    columns in the schema's order, then undeclared ones; empty columns dropped, long cells cut
    to `max_width` (a kernel name never below names.MAX_LEN)."""
    declared = {c.name: c for c in schema.REPORT_COLUMNS}
    # declared columns in the schema's order; one nobody declared is shown too, never dropped
    cols = [
        (c.name, c.header, c.fmt) for c in schema.REPORT_COLUMNS if c.shown and c.name in table.columns
    ] + [(c, c, "{}") for c in table.columns if c not in declared]
    cols = [(c, h, f) for c, h, f in cols if not (table[c].isna() | (table[c].astype(str) == "")).all()]
    # a column shown only above a threshold (the check's errors), where some row is above it
    above = {c.name: c.shown_above for c in schema.REPORT_COLUMNS if c.shown_above is not None}
    cols = [
        (c, h, f)
        for c, h, f in cols
        if c not in above or (pd.to_numeric(table[c], errors="coerce") > above[c]).any()
    ]
    headers = [h for _, h, _ in cols]
    body = []
    for _, r in table.iterrows():
        cells = []
        for c, _, f in cols:
            s = _fmt(r[c], f)
            # one short kernel name is never cut (names.MAX_LEN)
            width = max(max_width, MAX_LEN) if c in ("kernels", "kernel", "operator") else max_width
            cells.append(s if len(s) <= width else s[: width - 3] + "...")
        body.append(cells)
    return headers, body


def to_text(table: pd.DataFrame, title: str = "", footer: list[str] | None = None) -> str:
    """The table as aligned plain text (numbers right-aligned), under `title`, with the footer
    lines after it."""
    headers, body = display_rows(table)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    numeric = [all(looks_numeric(r[i]) for r in body) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)
        ).rstrip()

    out = [title] if title else []
    out += [line(headers), line(["-" * w for w in widths])] + [line(r) for r in body]
    out += footer or []
    return "\n".join(out)


def looks_numeric(s: str) -> bool:
    """How a text table aligns a cell: numbers ("1.25x" too) and "-" to the right."""
    try:
        float(s.rstrip("x"))
        return True
    except ValueError:
        return s == "-"


def to_markdown(table: pd.DataFrame, title: str = "", footer: list[str] | None = None) -> str:
    """The table as a Markdown table (pipes in cells escaped), under a `### title`, with the
    footer lines after it."""
    headers, body = display_rows(table, max_width=200)
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    out = [f"### {title}", ""] if title else []
    out.append("| " + " | ".join(headers) + " |")
    out.append("|" + "|".join(" --- " for _ in headers) + "|")
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in body]
    if footer:
        out += [""] + footer
    return "\n".join(out) + "\n"


def to_json(
    table: pd.DataFrame, meta: dict[str, Any] | None = None, *, kernels: pd.DataFrame | None = None
) -> str:
    """{"meta", "variants"}; with `kernels`, the per-kernel breakdown beside them as "kernels"."""
    doc = {"meta": meta or {}, "variants": json.loads(table.to_json(orient="records"))}
    if kernels is not None:
        doc["kernels"] = json.loads(kernels.to_json(orient="records"))
    return json.dumps(doc, indent=1)


def render_kernels(kernels: pd.DataFrame, fmt: str) -> str:
    """The per-kernel breakdown (--per-kernel) as a table or in markdown; render() puts it under
    the main table after a blank line. JSON: to_json(kernels=...); CSV: to_csv_with_kernels."""
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


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary name beside `path`, moved over it once written: a write cut short (Ctrl-C, a
    full disk) leaves the file as it was, whole, and no temporary behind."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_all(
    table: pd.DataFrame,
    frame: pd.DataFrame,
    folder: Path,
    *,
    title: str,
    footer: list[str],
    doc: dict[str, Any],
) -> dict[str, Path]:
    """report.csv/.md from the table, report.json (`doc`: the run's JSON document, what --json
    prints), the frame as frame.parquet, and as frame.csv where wants_frame_csv(); each file
    replaced whole (`gprof-orch report` stopped part-way leaves every file whole)."""
    paths = {
        "parquet": folder / "frame.parquet",
        "csv": folder / "report.csv",
        "json": folder / "report.json",
        "markdown": folder / "report.md",
    }
    csv = wants_frame_csv(len(frame))
    try:
        # dictionary pages for the text columns only: the values are mostly distinct, and trying
        # them in a dictionary first was a fifth of the write on a 9,000,000-row frame
        with replacing(paths["parquet"]) as tmp:
            frame.to_parquet(tmp, index=False, use_dictionary=[c for c in frame.columns if c != "value"])
    except ImportError:  # pyarrow is a dependency; without it the frame is kept as CSV, whatever its size
        del paths["parquet"]
        (folder / "frame.parquet").unlink(missing_ok=True)  # an earlier report's would disagree
        csv = True
    if csv:
        paths["frame"] = folder / "frame.csv"
        with replacing(paths["frame"]) as tmp:
            frame.to_csv(tmp, index=False)
    else:  # an earlier report's frame.csv would no longer agree with frame.parquet
        (folder / "frame.csv").unlink(missing_ok=True)
    with replacing(paths["csv"]) as tmp:
        table.to_csv(tmp, index=False)
    with replacing(paths["json"]) as tmp:
        tmp.write_text(json.dumps(doc, indent=1))
    with replacing(paths["markdown"]) as tmp:
        tmp.write_text(to_markdown(table, title, footer))
    return paths


def render(
    table: pd.DataFrame,
    fmt: str,
    *,
    title: str = "",
    footer: list[str] | None = None,
    meta: dict[str, Any] | None = None,
    kernels: pd.DataFrame | None = None,
) -> str:
    """The table in `fmt`; with `kernels` (--per-kernel), the per-kernel breakdown under it
    (JSON: a "kernels" list beside "variants")."""
    if fmt == "json":
        return to_json(table, meta, kernels=kernels)
    if fmt == "csv":
        return table.to_csv(index=False) if kernels is None else to_csv_with_kernels(table, kernels)
    if fmt == "markdown":
        out = to_markdown(table, title, footer)
    else:
        out = to_text(table, title, footer)
    if kernels is not None:  # markdown ends in a newline, the text table does not
        out += ("\n" if fmt == "markdown" else "\n\n") + render_kernels(kernels, fmt)
    return out


def to_csv_with_kernels(table: pd.DataFrame, kernels: pd.DataFrame) -> str:
    """The variant table and the per-kernel breakdown as one CSV table (two tables one after the
    other read as one, the second header a row of data): the variant rows, then the kernel rows,
    `table` first saying which ("variants" or "kernels"); the columns of both, each once, in the
    schema's order (a kernel row's launches/iter, DRAM %, ... are that kernel's own)."""
    # whole-number columns stay whole where the other table leaves them empty (3, not 3.0)
    ints = {c for f in (table, kernels) for c in f.columns if pd.api.types.is_integer_dtype(f[c])}
    parts = [
        f.astype({c: "Int64" for c in ints if c in f}).assign(table=name)
        for f, name in ((table, "variants"), (kernels, "kernels"))
    ]
    order = {c.name: i for i, c in enumerate(schema.REPORT_COLUMNS)}
    cols = [
        "table",
        *sorted(dict.fromkeys([*table.columns, *kernels.columns]), key=lambda c: order.get(c, len(order))),
    ]
    # reindexed, not indexed: with no kernel rows (a CPU run, CUDA-event timing) the kernels'
    # columns are in no part left to concatenate, and the header still names them, empty
    return (
        pd.concat([p for p in parts if not p.empty] or parts[:1], ignore_index=True)
        .reindex(columns=cols)
        .to_csv(index=False)
    )
