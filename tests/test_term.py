"""The terminal (reports/term.py, orchestrator/proc.py's Progress): when the table is coloured
(NO_COLOR, FORCE_COLOR, a TTY), that rich's table shows render.display_rows' cells, which cells
get which colour, that it keeps to the terminal's width; and the progress display: points done,
time left, a step's row, nothing off a terminal."""

from __future__ import annotations

import io
import os
import re
import sys
import time

import numpy as np
import pandas as pd
import pytest

from orchestrator import load_run, proc
from reports import render
from reports.term import to_text_colored, use_color

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# a styled stretch of text as rich writes it: its SGR codes, the text, a reset
STYLED = re.compile(r"\x1b\[([0-9;]+)m([^\x1b]*)\x1b\[0m")
GREEN, RED, YELLOW, DIM, BOLD = "32", "31", "33", "2", "1"
WIDE = 400  # no line of these tables wraps at this width


def plain(text: str) -> str:
    return ANSI.sub("", text)


def styled(line: str) -> list[tuple[str, str]]:
    """(SGR code, text) of each styled stretch of a line."""
    return [(code, text) for code, text in STYLED.findall(line) if text.strip()]


def cells(line: str) -> list[str]:
    """A table line's cells: rich puts three spaces between columns, a cell holds single ones."""
    return re.split(r"\s{2,}", plain(line).strip())


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def tty():
    """A real terminal: the writing end of a pseudo-terminal."""
    master, slave = os.openpty()
    stream = open(slave, "w")
    yield stream
    stream.close()
    os.close(master)


@pytest.fixture
def statuses() -> pd.DataFrame:
    """ok, failed and skipped variants, faster and slower than the baseline; a variant named "ok"
    labelled "failed", so only the status column may be coloured by its text."""
    return pd.DataFrame(
        {
            "variant": ["base", "fast", "slow", "ok", "gone"],
            "label": ["baseline", "fast one", "slow one", "failed", "skipped one"],
            "status": ["ok", "ok", "ok", "failed", "skipped"],
            "time_median_us": [100.0, 80.0, 125.0, np.nan, np.nan],
            "speedup_vs_baseline": [1.0, 1.25, 0.8, np.nan, np.nan],
            "note": ["", "", "high spread: IQR is 12% of the median", "RuntimeError: boom", "needs triton"],
        }
    )


# --- when ----------------------------------------------------------------------------------


def test_a_terminal_gets_colour(tty):
    assert tty.isatty()
    assert use_color(tty, environ={})


def test_no_color_turns_it_off(tty):
    assert not use_color(tty, environ={"NO_COLOR": "1"})
    assert not use_color(tty, environ={"NO_COLOR": "0"})  # any non-empty value (no-color.org)
    assert use_color(tty, environ={"NO_COLOR": ""})  # an empty one does not count
    assert not use_color(FakeTty(), environ={"NO_COLOR": "1", "FORCE_COLOR": "1"})  # and beats FORCE_COLOR


def test_a_pipe_or_file_gets_none(tmp_path):
    assert not use_color(io.StringIO(), environ={})
    with open(tmp_path / "out.txt", "w") as fh:
        assert not use_color(fh, environ={})
    read_end, write_end = os.pipe()
    with open(read_end), open(write_end, "w") as w:
        assert not use_color(w, environ={})
    assert not use_color(w, environ={})  # closed: isatty raises ValueError
    assert not use_color(object(), environ={})  # no isatty at all


def test_force_color_turns_it_on():
    assert use_color(io.StringIO(), environ={"FORCE_COLOR": "1"})
    assert not use_color(FakeTty(), environ={"FORCE_COLOR": "0"})
    assert use_color(FakeTty(), environ={"FORCE_COLOR": ""})  # empty: the terminal decides


def test_a_dumb_terminal_gets_none(tty):
    assert not use_color(tty, environ={"TERM": "dumb"})


def test_the_environment_is_read_by_default(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(FakeTty())


# --- what ----------------------------------------------------------------------------------


def test_the_table_shows_display_rows_cells(h200_run, statuses):
    cases = [(statuses, "title", ["warning: slow: noisy", "a plain footer"])]
    for name in ("time-square", "nsys-mean"):
        run = load_run(h200_run(name))
        cases.append((run.table, run.title(), run.footer()))
    for table, title, footer in cases:
        headers, body = render.display_rows(table)
        lines = to_text_colored(table, title, footer, color=True, width=WIDE).split("\n")
        n_title = title.count("\n") + 1
        assert [plain(line) for line in lines[:n_title]] == title.split("\n")
        assert cells(lines[n_title]) == headers
        assert set(plain(lines[n_title + 1])) == {"\u2500"}  # the rule under the header
        assert [cells(line) for line in lines[n_title + 2 : n_title + 2 + len(body)]] == body
        assert [plain(line) for line in lines[n_title + 2 + len(body) :]] == footer
        assert lines != render.to_text(table, title, footer).split("\n")


def test_without_colour_it_is_to_text(statuses):
    assert to_text_colored(statuses, "t", ["f"], color=False) == render.to_text(statuses, "t", ["f"])


def test_no_color_gives_no_escape_codes(tty, statuses):
    text = to_text_colored(statuses, "t", ["warning: w"], color=use_color(tty, environ={"NO_COLOR": "1"}))
    assert "\x1b" not in text and text == render.to_text(statuses, "t", ["warning: w"])


def test_status_speedup_and_note_cells(statuses):
    lines = to_text_colored(statuses, "title", ["warning: slow: noisy", "done"], width=WIDE).split("\n")
    title, header, rule, base, fast, slow, ok, gone, warning, done = lines
    assert styled(title) == [(BOLD, "title")]
    assert styled(header) == [(BOLD, h) for h in render.display_rows(statuses)[0]]
    assert "\x1b" not in rule
    assert (
        (GREEN, "ok") in styled(base) and (GREEN, "1.25x") in styled(fast) and (RED, "0.80x") in styled(slow)
    )
    assert (GREEN, "ok") not in styled(ok) and (RED, "failed") in styled(ok)
    assert cells(ok)[:2] == ["ok", "failed"] and ok.startswith(
        "ok "
    )  # the variant and label named ok / failed stay plain
    assert (YELLOW, "skipped") in styled(gone)
    assert "1.00x" in cells(base) and not [
        t for _, t in styled(base) if t == "1.00x"
    ]  # within 5% of the baseline: plain
    assert (DIM, "high spread: IQR is 12% of the median") in styled(slow) and (
        DIM,
        "RuntimeError: boom",
    ) in styled(ok)
    assert (DIM, "-") in styled(base)  # an empty note is "-", dim too
    assert styled(warning) == [(YELLOW, "warning: slow: noisy")] and done == "done"


def test_a_compare_verdict():
    if "verdict" not in {c for c, _, _ in render.DISPLAY}:
        pytest.skip("render.DISPLAY has no verdict column")
    table = pd.DataFrame(
        {
            "variant": ["a", "b", "c"],
            "ratio_b_over_a": [0.8, 1.3, 1.0],
            "verdict": ["faster", "slower", "same within spread"],
        }
    )
    lines = to_text_colored(table, color=True, width=WIDE).split("\n")
    assert (
        (GREEN, "faster") in styled(lines[2])
        and (RED, "slower") in styled(lines[3])
        and "\x1b" not in lines[4]
    )
    assert [cells(line) for line in lines[2:]] == render.display_rows(table)[1]


def test_colour_goes_on_the_text_not_the_padding(statuses):
    for line in to_text_colored(statuses, color=True, width=WIDE).split("\n"):
        for _, text in styled(line):
            assert text == text.strip()


def test_a_kernel_name_in_brackets_stays_text():
    table = pd.DataFrame({"variant": ["[bold]x[/bold]"], "kernels": ["void k<[red]T[/red]>(float*)"]})
    assert cells(to_text_colored(table, width=WIDE).split("\n")[2]) == [
        "[bold]x[/bold]",
        "void k<[red]T[/red]>(float*)",
    ]


# --- how wide ------------------------------------------------------------------------------


def test_the_width_is_kept_by_wrapping_text(statuses):
    note = "high spread: IQR is 12% of the median"
    for width in (66, 72):
        colored = to_text_colored(statuses, "title", ["done"], width=width)
        text = plain(colored)
        assert max(len(line) for line in text.split("\n")) <= width
        dim = " ".join(t for line in colored.split("\n") for code, t in styled(line) if code == DIM)
        assert note not in text and note in " ".join(dim.split())  # wrapped, every word kept in order
        assert all(n in text.split() for n in ("100.00", "80.00", "125.00", "1.25x", "0.80x"))


def test_too_narrow_a_terminal_loses_nothing(statuses):
    """Numbers never wrap: the table is then wider than asked, as the plain one is, but whole."""
    text = plain(to_text_colored(statuses, width=30))
    words = text.split()
    for row in render.display_rows(statuses)[1]:
        for cell in row:
            for word in cell.split():
                assert any(word.startswith(w) or w in word for w in words), word
    assert all(n in words for n in ("100.00", "80.00", "125.00", "1.25x", "0.80x"))


def test_the_terminal_width_by_default(statuses, monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    assert max(len(line) for line in plain(to_text_colored(statuses)).split("\n")) <= 72
    monkeypatch.setenv("COLUMNS", "200")
    assert (
        max(len(line) for line in plain(to_text_colored(statuses)).split("\n")) < 200
    )  # no wider than it needs


# --- progress ------------------------------------------------------------------------------


class Counting(proc.Progress):
    def detail(self) -> str:
        return "running: gpu0 1"


@pytest.fixture
def stderr_tty(monkeypatch):
    """Makes sys.stderr a terminal that keeps what is written to it, and returns it; called in
    the test, as pytest sets its own capturing sys.stderr after the fixtures."""
    monkeypatch.delenv("GPROF_NO_PROGRESS", raising=False)
    monkeypatch.setattr(proc, "PROGRESS_FIRST_DRAW_S", 0.05)

    def attach() -> FakeTty:
        stream = FakeTty()
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return attach


def test_progress_shows_points_done_and_time_left(stderr_tty):
    err = stderr_tty()
    with Counting("points", total=4) as bar:
        for _ in range(4):
            with proc.Progress("workload (python)"):
                time.sleep(0.4)
            bar.advance()
        time.sleep(0.4)
    out = plain(err.getvalue())
    assert {"0/4", "1/4", "2/4", "3/4", "4/4"} <= set(re.findall(r"\b\d/4\b", out))
    assert "-:--:-- left" in out  # before the first point is done
    # after one point of ~0.4 s, three left: about 0:00:01
    lefts = re.findall(r"(\d+):(\d\d):(\d\d) left", out)
    assert lefts and all(int(h) == 0 and int(m) == 0 and int(s) <= 3 for h, m, s in lefts)
    assert "workload (python)" in out and "running: gpu0 1" in out
    assert proc._DISPLAY is None  # the display is closed with its last row
    # transient: the last frame is erased (ESC [2K), nothing is left on the line
    assert "\x1b[2K" in err.getvalue()[-20:] and plain(err.getvalue()).rsplit("\r", 1)[-1].strip() == ""


def test_a_quick_step_draws_nothing(stderr_tty, monkeypatch):
    monkeypatch.setattr(proc, "PROGRESS_FIRST_DRAW_S", 0.5)
    err = stderr_tty()
    with proc.Progress("version") as step:
        assert step.enabled
    time.sleep(0.6)
    assert err.getvalue() == "" and proc._DISPLAY is None


def test_progress_stays_off_a_pipe_and_with_gprof_no_progress(monkeypatch):
    monkeypatch.delenv("GPROF_NO_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not proc.Progress("x").enabled
    monkeypatch.setattr(sys, "stderr", FakeTty())
    assert proc.Progress("x").enabled
    monkeypatch.setenv("GPROF_NO_PROGRESS", "1")
    with proc.Progress("x", total=2) as bar:
        bar.advance()
    assert not bar.enabled and sys.stderr.getvalue() == ""


def test_a_failing_detail_keeps_the_last_one(stderr_tty):
    calls = []

    class Flaky(proc.Progress):
        def detail(self) -> str:
            calls.append(1)
            if len(calls) > 1:
                raise ConnectionError("scheduler gone")
            return "running: w0 1"

    err = stderr_tty()
    with Flaky("points", total=1):
        time.sleep(1.3)
    frames = [f for f in plain(err.getvalue()).split("\r") if f.strip()]
    assert len(calls) > 1 and "running: w0 1" in frames[-1]
