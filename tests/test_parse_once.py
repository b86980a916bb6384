"""The report phase asks a backend once: Backend.parse reads the run folder's files once and hands
back a Parsed (the frame, the tool's findings, its warnings, lost events), from which the report is
built; no reading is kept in a module between calls. On the committed H200 run folders."""

from __future__ import annotations

import pandas as pd

from orchestrator import backends
from orchestrator.backends.base import Parsed
from orchestrator.loading import load_run
from orchestrator.runfolder import RunFolder


def _counting(monkeypatch, module, name: str) -> list:
    """Count the calls of the real `module.name` (it still reads the real file)."""
    calls: list = []
    real = getattr(module, name)

    def wrapper(*a, **kw):
        calls.append(a[0] if a else kw)
        return real(*a, **kw)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_ncu_reads_its_report_once_into_one_parsed(h200_run, monkeypatch):
    from orchestrator.backends import ncu_tool

    folder = h200_run("ncu-square")
    loads = _counting(monkeypatch, ncu_tool, "load")
    parsed = backends.get("ncu").parse(RunFolder.open(folder))
    assert isinstance(parsed, Parsed) and len(loads) == 1
    rep = parsed.meta["report"]
    pd.testing.assert_frame_equal(parsed.findings, rep.rules)
    assert parsed.lost is None and len(parsed.findings) > 0
    assert set(parsed.frame["variant"].dropna()) >= {"torch_square", "mul", "pow"}
    # the report of the folder: the same single read, no report kept by the module for the next
    run = load_run(folder)
    assert len(loads) == 2 and len(run.findings) > 0
    load_run(folder)
    assert len(loads) == 3


def test_proton_reads_its_profile_once(h200_run, monkeypatch):
    from orchestrator.parsers import proton as reader

    folder = h200_run("proton-triton-mean", "h200-proton")
    reads = _counting(monkeypatch, reader, "read_profile")
    run = load_run(folder)
    assert len(reads) == 1  # the frame and the warnings from the one reading
    assert run.table["time_median_us"].notna().all()


def test_nsys_hands_its_lost_events_with_the_frame(h200_run):
    parsed = backends.get("nsys").parse(RunFolder.open(h200_run("nsys-sigint-lost", "h200-faults")))
    assert parsed.lost.startswith("nsys reported errors while processing the raw events")
    assert parsed.findings is None and parsed.warnings == []


def test_an_imported_ncu_report_is_read_once_for_its_workload_json_and_its_table(tmp_path, monkeypatch):
    from conftest import FIXTURES

    from orchestrator import import_capture
    from orchestrator.backends import ncu_tool

    loads = _counting(monkeypatch, ncu_tool, "load")
    run = import_capture(FIXTURES / "runs" / "h200" / "ncu-square" / "report.ncu-rep.xz", out=tmp_path / "i")
    assert len(loads) == 1 and run.status == "ok"
    assert list(run.table["variant"]) == ["torch_square", "mul", "pow", "triton", "numba"]
