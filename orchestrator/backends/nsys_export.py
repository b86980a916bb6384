"""A report nsys wrote whose SQLite export was never made: the run stopped during `nsys export`
(Ctrl-C, a kill), leaving `report.nsys-rep` and no `report.sqlite`. `gprof-orch report` makes
the export then, as the run would have, with the nsys the run used or one found here; a reading
that writes nothing (`compare`, a read-only folder) says so instead."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from orchestrator import tools
from orchestrator.backends.base import Step
from orchestrator.errors import ParseError, ToolFailedError, ToolNotFoundError
from orchestrator.parsers import compressed
from orchestrator.runfolder import RunFolder

REPORT = "report.nsys-rep"
SQLITE = "report.sqlite"
# how `nsys export` begins the line that says a report cannot be read: an empty, cut-short or
# foreign file ("Cannot read from stream.", "Version tag is not found in the stream.")
UNREADABLE_REPORT = "Exportation error:"


def export_step(exe: str, run_dir: Path, rep: Path | None = None) -> Step:
    """`nsys export` of the run's report (or of `rep`) to run_dir/report.sqlite (pure)."""
    return Step(
        "nsys-export",
        [
            exe,
            "export",
            "--type=sqlite",
            f"--output={run_dir / SQLITE}",
            "--force-overwrite=true",
            str(rep or run_dir / REPORT),
        ],
    )


def unexported(rf: RunFolder) -> bool:
    """Whether the folder holds nsys's report and no export of it (plain, .xz or .gz)."""
    return (rf.path / REPORT).is_file() and not compressed.locate(rf.path / SQLITE).exists()


def pending_export(rf: RunFolder, write: bool) -> Step | None:
    """The export to make before the folder's report is read, or None when there is none to make.
    Reading without writing (`write` False): ParseError saying how to make it. No nsys here:
    ToolNotFoundError (exit 3) saying where the report can still be read."""
    if not unexported(rf):
        return None
    what = f"nsys wrote {REPORT}, but the run stopped before its SQLite export was made"
    if not write:
        raise ParseError(
            rf.path / SQLITE,
            f"no such file: {what}",
            hint=f"`gprof-orch report {rf.path}` makes the export (the folder must be writable)",
        )
    # the nsys the run used, unless $GPROF_NSYS names another; then PATH and the install places
    recorded = (rf.manifest.get("tools") or {}).get("nsys")
    explicit = (
        recorded
        if recorded and os.access(recorded, os.X_OK) and not os.environ.get(tools.ENV["nsys"])
        else None
    )
    try:
        found = tools.find("nsys", explicit, with_version=False)
    except ToolNotFoundError as exc:
        raise ToolNotFoundError(
            f"cannot report {rf.path}: {what}, and nsys is needed to make it: {exc.message}",
            hint=f"{tools.HOW_TO_GET['nsys']}, then run `gprof-orch report {rf.path}` again; "
            f"or, where nsys is, `gprof-orch import {rf.path / REPORT}`",
        ) from None
    print(f"gprof-orch: {rf.path}: {what}; making it now", file=sys.stderr, flush=True)
    return export_step(str(found.path), rf.path.resolve())


def export_pending(export: Callable[[], None], rf: RunFolder) -> None:
    """Run a backend's `export` of the report pending_export() found; a report nsys cannot read
    (the run was stopped while nsys wrote it) is a ParseError (exit 4), not a failed tool."""
    try:
        export()
    except ToolFailedError as exc:
        err = unreadable_report(
            exc,
            rf.path / REPORT,
            "cut short: the run was stopped while nsys wrote it, so there is nothing to export",
        )
        if err is None:
            raise
        raise err from exc


def unreadable_report(exc: ToolFailedError, report: Path | str, hint: str) -> ParseError | None:
    """A failed `nsys export` whose log says the report cannot be read (empty, cut short, not a
    report): the input is damaged (exit 4), not the tool; None for any other failure."""
    said = [ln.strip() for ln in exc.log_tail.splitlines() if ln.startswith(UNREADABLE_REPORT)]
    if not said:
        return None
    err = ParseError(report, said[-1], hint=hint)
    err.log = exc.log
    return err
