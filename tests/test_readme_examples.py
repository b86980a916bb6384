"""The README's example tables that name a committed run folder are that folder's report: a
change to a number, a column or the rendering fails here, not silently in the README."""

import re
from pathlib import Path

from conftest import run_cli

README = Path(__file__).resolve().parents[1] / "README.md"


def _block_after(marker: str) -> list[str]:
    text = README.read_text()
    at = text.index(marker)
    block = re.search(r"```\n(.*?)```", text[at:], re.S)
    return [line.rstrip() for line in block.group(1).splitlines() if line.strip()]


def test_the_kernel_clock_example_is_the_committed_folders_report(h200_run):
    folder = h200_run("time-square-kernel-clock", "h100")
    shown = _block_after("tests/fixtures/runs/h100/time-square-kernel-clock")
    res = run_cli("report", str(folder))
    assert res.returncode == 0, res.stderr
    rows = [line.rstrip() for line in res.stdout.splitlines()]
    # the header and every variant's row, as rendered today
    assert shown[0] in rows and len(shown) == 6
    for line in shown[1:]:
        assert line in rows, line
    assert "266.98" in shown[1] and "events us" in shown[0]
