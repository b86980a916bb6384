"""The report of every capture run (`exec`, `import`), the program backends' report hook
(Backend.report of backends/program.py and backends/program_ncu.py, which say how the capture's
workload.json is made and read): once execution.execute ran the run's step (the profiler, or the
copy of a capture), write the synthetic workload.json and build the report, with the error that
names what went wrong; run_request then concludes the folder as a workload run's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.capture_manifest import OPEN_AT_STOP, stopped_inside
from orchestrator.ending import Ending, reporting_error
from orchestrator.errors import (
    GprofError,
    InterruptedRunError,
    ParseError,
    ToolTimeoutError,
    interrupt_in,
)
from orchestrator.runfolder import WORKLOAD_MANIFEST, write_json

if TYPE_CHECKING:
    from orchestrator.backends.base import Parsed
    from orchestrator.results import Run
    from orchestrator.runfolder import RunFolder


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
    rf: RunFolder,
    error: GprofError | None,
    build: Callable[[RunFolder, Parsed | None], Run],
    manifest: Callable[[], dict[str, Any]] | None,
    *,
    source: str,
    copy: Path | None = None,
    parsed: Callable[[], Parsed | None] | None = None,
    despite_error: bool = False,
) -> Ending:
    """After the run's step (execute(): the profiler, or the copy of a capture; `error`, what
    went wrong there), write the synthetic workload.json (`manifest()`'s; None: the step left
    nothing to read) and build the report with `build` (not written): how the run ends, as
    Backend.report says it for a workload run. `despite_error`: a step that went wrong may have
    left a capture worth reporting (nsys's export of what it recorded). `copy`: the folder's copy
    of an imported capture, which an error reading it names as the user's file (`source`).
    `parsed()`: the backend's Parsed of what `manifest()` already read, read once."""

    run, unreadable = None, False  # unreadable: the imported file itself could not be read
    if manifest is not None and (error is None or despite_error):
        try:
            run = _capture_report(rf, manifest, error, build, parsed)
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


def _capture_report(rf: RunFolder, manifest, error: GprofError | None, build, parsed) -> Run:
    """The capture's workload.json written (`manifest()`'s), its Run built (not written)."""

    wman = manifest()
    if stopped_inside(wman, error):
        rf.manifest.setdefault("notes", []).append(OPEN_AT_STOP)
    write_json(rf.path / WORKLOAD_MANIFEST, wman, indent=1)
    return build(rf, parsed() if parsed is not None else None)
