"""The report of every capture run (`exec`, `import`), its Launch.report: once
execution.execute ran its step (the profiler, or the copy of a capture), write the synthetic
workload.json and build the report, with the error that names what went wrong; run_request then
concludes the folder as a workload run's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.backends.program import ProgramBackend, frame_from_capture
from orchestrator.capture_manifest import OPEN_AT_STOP, stopped_inside, workload_manifest
from orchestrator.capture_request import SQLITE, ProgramRequest
from orchestrator.errors import (
    GprofError,
    InterruptedRunError,
    ParseError,
    ToolTimeoutError,
    interrupt_in,
)
from orchestrator.execution import Ending, reporting_error
from orchestrator.parsers import compressed
from orchestrator.parsers import nsys as ns
from orchestrator.results import build_report
from orchestrator.runfolder import WORKLOAD_MANIFEST, write_json


def _located(sqlite: Path) -> Path | None:
    """The run's export, or its .xz/.gz, if there is one."""
    for p in (sqlite, sqlite.with_name(sqlite.name + ".xz"), sqlite.with_name(sqlite.name + ".gz")):
        if p.is_file():
            return p
    return None


def _as_given(exc: GprofError, copy: Path | None, source: str) -> GprofError:
    """An error reading the run folder's copy of an imported capture, naming the file the user
    gave: theirs is the one to fix or take again (and the copy goes with the folder)."""
    if copy is None or not isinstance(exc, ParseError) or exc.path.resolve() != copy.resolve():
        return exc
    err = ParseError(source, exc.reason, hint=exc.hint)
    err.__cause__, err.log = exc, exc.log
    return err


def _unreported_too(error: GprofError, exc: GprofError) -> None:
    """The program failed (or was stopped) and its capture cannot be reported either: both said,
    and where it was stopped, why a range open then may be missing."""
    error.message += f"; {exc.message}"
    stopped = isinstance(error, (ToolTimeoutError, InterruptedRunError))
    error.hint = (f"{OPEN_AT_STOP}; " if stopped else "") + (error.hint or exc.hint or "")


def capture_report(
    rf,
    req: ProgramRequest,
    error: GprofError | None,
    *,
    source: str,
    borrowed: dict[str, Any] | None = None,
    manifest=None,
    copy: Path | None = None,
    parsed=None,
) -> Ending:
    """After the run's step (execute(): the profiler, or the copy of a capture; `error`, what
    went wrong there), write the synthetic workload.json (`manifest()`'s; by default the NVTX
    ranges of the folder's nsys export) and build the report (not written): how the run ends, as
    execution.workload_report says it for a workload run. `copy`: the folder's copy of an
    imported capture, which an error reading it names as the user's file (`source`). `parsed()`:
    the backend's Parsed of what `manifest()` already read (ncu's report), read once."""

    run, unreadable = None, False  # unreadable: the imported file itself could not be read
    located = _located(rf.path / SQLITE)
    handed: list = []  # the export nsys_manifest() read, handed on to the report: the file is read once

    def nsys_manifest() -> dict[str, Any]:

        with compressed.plain_file(located) as plain:
            # lean: what the manifest and the report use (a million-kernel capture read twice in
            # full took longer than `nsys stats` on it)
            export = ns.read_export(plain, lean=True)
            wman = workload_manifest(
                export,
                plain,
                req.filter,
                name=req.workload_name(),
                source=source,
                iters_per_range=req.iters or 1,
                borrowed=borrowed,
                compare_ranges=req.compare_ranges,
            )
        handed.append(export)
        return wman

    if manifest is None and located is not None:
        manifest = nsys_manifest
    if manifest is not None and (error is None or located is not None):
        try:
            run = _capture_report(rf, manifest, error, located, handed, parsed)
        except BaseException as raised:
            exc = _as_given(raised, copy, source) if isinstance(raised, GprofError) else raised
            if error is None and isinstance(exc, GprofError):
                unreadable = exc is not raised
            elif error is not None and isinstance(exc, GprofError) and not interrupt_in(exc):
                _unreported_too(error, exc)
            error = reporting_error(rf, exc, error)
    elif error is None:
        error = ParseError(rf.path, "the profiler left no report")
    status = "interrupted" if isinstance(error, InterruptedRunError) else "failed" if error else "ok"
    return Ending(run, status, error, unreadable)


def _capture_report(rf, manifest, error: GprofError | None, located: Path | None, handed: list, given=None):
    """The capture's workload.json written (`manifest()`'s), its Run built (not written)."""

    wman = manifest()
    if stopped_inside(wman, error):
        rf.manifest.setdefault("notes", []).append(OPEN_AT_STOP)
    write_json(rf.path / WORKLOAD_MANIFEST, wman, indent=1)
    parsed = given() if given is not None else None
    if handed:  # the rows from the export already in memory, by workload.json as written
        frame = frame_from_capture(located, rf.workload_manifest(), run=rf.path.name, export=handed.pop())
        parsed = ProgramBackend().with_frame(rf, frame)
    return build_report(rf, parsed, write=False)
