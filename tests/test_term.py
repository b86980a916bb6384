"""Colour in the terminal table (reports/term.py): when it is used (NO_COLOR, FORCE_COLOR, a
TTY), which cells get it, and that stripping it gives render.to_text's text exactly."""
from __future__ import annotations

import io
import os

import numpy as np
import pandas as pd
import pytest

from orchestrator import load_run
from reports import render
from reports.term import RESET, STYLES, strip_ansi, to_text_colored, use_color

GREEN, RED, YELLOW, DIM, BOLD = (STYLES[s] for s in ("green", "red", "yellow", "dim", "bold"))


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
    return pd.DataFrame({
        "variant": ["base", "fast", "slow", "ok", "gone"],
        "label": ["baseline", "fast one", "slow one", "failed", "skipped one"],
        "status": ["ok", "ok", "ok", "failed", "skipped"],
        "time_median_us": [100.0, 80.0, 125.0, np.nan, np.nan],
        "speedup_vs_baseline": [1.0, 1.25, 0.8, np.nan, np.nan],
        "note": ["", "", "high spread: IQR is 12% of the median", "RuntimeError: boom", "needs triton"],
    })


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


def test_stripped_of_colour_it_is_to_text(h200_run, statuses):
    cases = [(statuses, "title", ["warning: slow: noisy", "a plain footer"]), (statuses.iloc[:0], "", None)]
    for name in ("time-square", "nsys-mean"):
        run = load_run(h200_run(name))
        cases.append((run.table, run.title(), run.footer()))
    for table, title, footer in cases:
        plain = render.to_text(table, title, footer)
        colored = to_text_colored(table, title, footer, color=True)
        assert strip_ansi(colored) == plain
        # every line keeps its visible width, so the columns stay aligned
        assert [len(strip_ansi(line)) for line in colored.split("\n")] == [len(line) for line in plain.split("\n")]
        if len(table):
            assert colored != plain


def test_without_colour_it_is_to_text(statuses):
    assert to_text_colored(statuses, "t", ["f"], color=False) == render.to_text(statuses, "t", ["f"])


def test_status_speedup_and_note_cells(statuses):
    lines = to_text_colored(statuses, "title", ["warning: slow: noisy", "done"], color=True).split("\n")
    title, header, rule, base, fast, slow, ok, gone, warning, done = lines
    assert title == f"{BOLD}title{RESET}"
    assert f"{BOLD}variant{RESET}" in header and f"{BOLD}speedup{RESET}" in header
    assert "\x1b" not in rule
    assert f"{GREEN}ok{RESET}" in base and f"{GREEN}1.25x{RESET}" in fast and f"{RED}0.80x{RESET}" in slow
    assert f"{GREEN}ok{RESET}" not in ok and f"{RED}failed{RESET}" in ok
    assert ok.startswith("ok ") and "  failed  " in ok  # the variant and label named ok / failed stay plain
    assert f"{YELLOW}skipped{RESET}" in gone
    assert "1.00x" in base and f"m1.00x{RESET}" not in base  # within 5% of the baseline: plain
    assert f"{DIM}high spread: IQR is 12% of the median{RESET}" in slow and f"{DIM}RuntimeError: boom{RESET}" in ok
    assert f"{DIM}-{RESET}" in base  # an empty note is "-", dim too
    assert warning == f"{YELLOW}warning: slow: noisy{RESET}" and done == "done"


def test_a_compare_verdict():
    if "verdict" not in {c for c, _, _ in render.DISPLAY}:
        pytest.skip("render.DISPLAY has no verdict column")
    table = pd.DataFrame({"variant": ["a", "b", "c"], "ratio_b_over_a": [0.8, 1.3, 1.0],
                          "verdict": ["faster", "slower", "same within spread"]})
    lines = to_text_colored(table, color=True).split("\n")
    assert f"{GREEN}faster{RESET}" in lines[2] and f"{RED}slower{RESET}" in lines[3] and "\x1b" not in lines[4]
    assert strip_ansi("\n".join(lines)) == render.to_text(table)


def test_colour_goes_on_the_text_not_the_padding(statuses):
    for line in to_text_colored(statuses, color=True).split("\n"):
        for code in (GREEN, RED, YELLOW, DIM, BOLD):
            start = line.find(code)
            if start >= 0:
                assert line[start + len(code)] != " " and line[line.index(RESET, start) - 1] != " "
