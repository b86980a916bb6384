"""The terminal table in colour, laid out by rich: status, speedup, verdict and note cells coloured,
columns wrapped to the terminal's width.

The cells are render.display_rows' (the headers and number formats of render.DISPLAY), so the
coloured table shows what the plain one (render.to_text, for pipes, files and NO_COLOR) shows.
rich is imported only when a coloured table is drawn, never at CLI start-up.

Example:
    >>> import sys
    >>> from reports.term import to_text_colored, use_color
    >>> text = to_text_colored(run.table, run.title(), run.footer(), color=use_color(sys.stdout))
    >>> click.echo(text, color=True)  # click strips escape codes off a non-TTY unless told not to
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import IO, Any

import pandas as pd

from reports import render

# a variant this much faster (or slower) than the baseline is shown green (or red)
SPEEDUP_FASTER = 1.05
SPEEDUP_SLOWER = 0.95

STATUS_STYLES = {
    "ok": "green",
    "failed": "red",
    "skipped": "yellow",
    "interrupted": "red",
    "timed out": "red",
    "noisy": "yellow",
    "incomplete": "red",
    "not saved": "red",
}
# `compare`'s verdict on B against A
VERDICT_STYLES = {"faster": "green", "slower": "red", "missing": "yellow"}


def use_color(stream: IO[Any] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to `stream` (default sys.stdout).

    In this order: a non-empty NO_COLOR turns colour off (https://no-color.org); FORCE_COLOR
    turns it on when non-empty ("0" or "false" turn it off); TERM=dumb turns it off; otherwise
    colour only when the stream is a terminal. Decided here rather than by rich's Console, whose
    NO_COLOR keeps bold and dim: with NO_COLOR the table is the plain one, free of escape codes."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    force = env.get("FORCE_COLOR")
    if force:
        return force.strip().lower() not in ("0", "false")
    if env.get("TERM") == "dumb":
        return False
    if stream is None:
        import sys

        stream = sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def to_text_colored(
    table: pd.DataFrame,
    title: str = "",
    footer: list[str] | None = None,
    *,
    color: bool = True,
    width: int | None = None,
) -> str:
    """The table drawn by rich: the title and header bold, the status column green / red / yellow
    (ok / failed / skipped), speedups above SPEEDUP_FASTER green and below SPEEDUP_SLOWER red, a
    compare verdict green / red / yellow (faster / slower / missing), notes dim and "warning:"
    footer lines yellow; no line wider than `width` (default: the terminal's, else 80) unless the
    table's numbers alone are wider. `color=False` gives render.to_text's plain text.

    Example:
        >>> print(to_text_colored(run.table, run.title(), run.footer(), color=use_color()))
    """
    if not color:
        return render.to_text(table, title, footer)
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    # the caller has decided on colour (use_color): the environment may not undo it here
    console = Console(
        file=buf,
        force_terminal=True,
        color_system="standard",
        no_color=False,
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    grid = _table(table)
    # never narrower than the table's least width: rich would crop cells, and a table wider than
    # the terminal (as the plain one is) loses nothing
    console.width = max(
        console.width, console.measure(grid, options=console.options.update_width(10**6)).minimum
    )
    if title:
        console.print(Text(title, style="bold"))
    console.print(grid)
    for line in footer or []:
        console.print(Text(line, style="yellow" if line.startswith("warning:") else ""))
    return buf.getvalue().rstrip("\n")


def _table(table: pd.DataFrame) -> Any:
    """A rich Table of display_rows' cells: numbers right-aligned
    and never wrapped, text wrapped where the terminal is narrow. Cells are Text, so a kernel's [brackets] stay text."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    headers, body = render.display_rows(table)
    # each header's column (a column nobody declared is shown under its own name)
    by_header = {h: c for c, h, _ in render.DISPLAY}
    columns = [by_header.get(h, h) for h in headers]
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="")
    for i, h in enumerate(headers):
        numeric = bool(body) and all(render.looks_numeric(r[i]) for r in body)
        # a narrow terminal wraps the text (notes, kernel names) between words, never the numbers
        out.add_column(
            Text.styled(h, "bold"), justify="right" if numeric else "left", no_wrap=numeric, overflow="fold"
        )
    speedups = (
        [_as_float(v) for v in table["speedup_vs_baseline"]] if "speedup_vs_baseline" in columns else []
    )
    for n, cells in enumerate(body):
        speedup = speedups[n] if speedups else None
        # styled spans, not a cell style: the colour stays on the text, off the padding
        out.add_row(*(Text.styled(s, _style(c, s, speedup)) for c, s in zip(columns, cells)))
    return out


def _style(column: str, text: str, speedup: float | None) -> str:
    if column == "status":
        return STATUS_STYLES.get(text, "")
    if column == "verdict":
        return VERDICT_STYLES.get(text, "")
    if column == "speedup_vs_baseline" and speedup is not None:
        return "green" if speedup > SPEEDUP_FASTER else "red" if speedup < SPEEDUP_SLOWER else ""
    return "dim" if column == "note" else ""


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
