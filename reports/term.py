"""Colour for the terminal table: status, speedup and note cells, when the stream takes it.

The text is laid out by reports.render.to_text first; colour is added to the padded cells
afterwards, so stripping the escape codes gives back to_text's output character for character.

Example:
    >>> import sys
    >>> from reports.term import to_text_colored, use_color
    >>> text = to_text_colored(run.table, run.title(), run.footer(), color=use_color(sys.stdout))
    >>> click.echo(text, color=True)  # click strips escape codes off a non-TTY unless told not to
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import IO, Any

import pandas as pd

from reports import render

# a variant this much faster (or slower) than the baseline is shown green (or red)
SPEEDUP_FASTER = 1.05
SPEEDUP_SLOWER = 0.95

RESET = "\x1b[0m"
STYLES = {"bold": "\x1b[1m", "dim": "\x1b[2m", "red": "\x1b[31m", "green": "\x1b[32m", "yellow": "\x1b[33m"}
STATUS_STYLES = {"ok": "green", "failed": "red", "skipped": "yellow", "interrupted": "red", "timed out": "red",
                 "noisy": "yellow", "incomplete": "red"}
# `compare`'s verdict on B against A
VERDICT_STYLES = {"faster": "green", "slower": "red", "missing": "yellow"}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def use_color(stream: IO[Any] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to `stream` (default sys.stdout).

    In this order: a non-empty NO_COLOR turns colour off (https://no-color.org); FORCE_COLOR
    turns it on when non-empty ("0" or "false" turn it off); TERM=dumb turns it off; otherwise
    colour only when the stream is a terminal."""
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


def paint(text: str, *styles: str) -> str:
    """`text` wrapped in the escape codes of `styles` (names in STYLES); unchanged without styles."""
    codes = "".join(STYLES[s] for s in styles)
    return f"{codes}{text}{RESET}" if codes and text else text


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def to_text_colored(table: pd.DataFrame, title: str = "", footer: list[str] | None = None, *,
                    color: bool = True) -> str:
    """render.to_text's table, with the status column green / red / yellow (ok / failed /
    skipped), speedups above SPEEDUP_FASTER green and below SPEEDUP_SLOWER red, a compare
    verdict green / red / yellow (faster / slower / missing), notes dim,
    the header bold and "warning:" footer lines yellow. `color=False` gives to_text's text.

    Example:
        >>> print(to_text_colored(run.table, run.title(), run.footer(), color=use_color()))
    """
    plain = render.to_text(table, title, footer)
    if not color:
        return plain
    headers, body = render.display_rows(table)
    lines = plain.split("\n")
    head = title.count("\n") + 1 if title else 0
    # to_text writes the header, then a rule of dashes as wide as each column, then one line a row
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[head + 1])]
    col_of = {c: headers.index(h) for c, h, _ in render.DISPLAY if h in headers}
    styled = {}
    for i, (_, row) in enumerate(table.iterrows()):
        styles: dict[int, tuple[str, ...]] = {}
        if "status" in col_of:
            s = STATUS_STYLES.get(body[i][col_of["status"]])
            if s:
                styles[col_of["status"]] = (s,)
        if "verdict" in col_of and body[i][col_of["verdict"]] in VERDICT_STYLES:
            styles[col_of["verdict"]] = (VERDICT_STYLES[body[i][col_of["verdict"]]],)
        if "speedup_vs_baseline" in col_of:
            v = _as_float(row["speedup_vs_baseline"])
            if v > SPEEDUP_FASTER:
                styles[col_of["speedup_vs_baseline"]] = ("green",)
            elif v < SPEEDUP_SLOWER:
                styles[col_of["speedup_vs_baseline"]] = ("red",)
        if "note" in col_of:
            styles[col_of["note"]] = ("dim",)
        styled[head + 2 + i] = styles
    out = []
    for n, line in enumerate(lines):
        if n < head:
            out.append(paint(line, "bold"))
        elif n == head:
            out.append(_paint_cells(line, spans, {k: ("bold",) for k in range(len(spans))}))
        elif n in styled:
            out.append(_paint_cells(line, spans, styled[n]))
        elif n > head + 1 + len(body) and line.startswith("warning:"):
            out.append(paint(line, "yellow"))
        else:
            out.append(line)
    return "\n".join(out)


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _paint_cells(line: str, spans: list[tuple[int, int]], styles: dict[int, tuple[str, ...]]) -> str:
    """Colour the text of the cells at `spans` (column positions of the laid-out line), leaving the
    padding around it plain so the columns stay where they are."""
    out, pos = [], 0
    for k, (a, b) in enumerate(spans):
        if k not in styles or a >= len(line):
            continue
        cell = line[a:b]
        core = cell.strip(" ")
        if not core:
            continue
        start = a + cell.index(core)
        out += [line[pos:start], paint(core, *styles[k])]
        pos = start + len(core)
    out.append(line[pos:])
    return "".join(out)
