"""A run folder's life: a request (a BaseRequest: a workload run's Request, or a capture's
ProgramRequest) run into a new folder (execute), its report and status made by its backend's
report hook (Backend.report: a workload's from what its runner left, a capture's from its
synthetic workload.json), the folder concluded with its report (conclude); run_request is that
whole life, for api.profile and for `exec`/`import` alike. And a point of a parent folder as a
Dask worker runs it (execute_point: no report, no pandas) and as the client lands it
(land_point: the report built once, where the folder lies)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import backends, envinfo
from orchestrator.base_request import BaseRequest
from orchestrator.cluster.archive import unpack
from orchestrator.ending import final_status, reporting_error
from orchestrator.errors import (
    EXIT_INCOMPLETE,
    EXIT_SUSPECT,
    GprofError,
    InterruptedRunError,
    SamplesLostError,
    ToolTimeoutError,
    UsageError,
    interrupt_in,
)
from orchestrator.request import Request
from orchestrator.runfolder import WORKLOAD_MANIFEST, RunFolder
from orchestrator.table_errors import table_error

if TYPE_CHECKING:
    from orchestrator.backends.base import Parsed
    from orchestrator.results import Run


def execute(
    req: BaseRequest,
    argv: list[str] | None,
    *,
    launch: Launch | None = None,
) -> tuple[RunFolder, GprofError | None]:
    """Run a validated one-point request into a new run folder: the backend's tools looked for (a
    missing one raises before any folder exists), its runs made, the wall time kept. Returns the
    folder and what went wrong, if anything; no report is built. A capture (`exec`, `import`:
    a ProgramRequest) brings its folder's name, the tools it found and its step instead."""
    if launch is None:
        be = backends.get(req.backend)
        launch = Launch(req.backend, req.workload_name(), be.require(req), lambda rf: be.execute(req, rf))
    rf = RunFolder.create(
        launch.backend, launch.workload, out=req.out, root=req.root, request=req.to_json(), argv=argv
    )

    def step() -> None:
        rf.update(machine=envinfo.machine(), tools=launch.tools, **launch.facts)
        launch.step(rf)

    return rf, run_step(rf, step)


@dataclass
class Launch:
    """What a run's folder is named by and what its step runs: a workload's backend and
    workload, or a capture's (`exec` runs the program, `import` copies the file in), with what
    its manifest records beside (kind, program, notes). Its report is not here: every run's is
    its request's backend's hook (Backend.report)."""

    backend: str
    workload: str
    tools: dict[str, Any]
    step: Callable[[RunFolder], None]
    facts: dict[str, Any] = field(default_factory=dict)


def run_request(req: BaseRequest, argv: list[str] | None, *, launch: Launch | None = None) -> Run:
    """A run's whole life, a workload's or a capture's (`exec`, `import`): its step into a new
    folder (execute), its report and status by its backend's hook (Backend.report, handed the
    report builder: the backends sit below the reports), the folder concluded."""
    rf, error = execute(req, argv, launch=launch)
    end = backends.get(req.backend).report(req, rf, error, build_run)
    return conclude(rf, end.run, end.status, end.error, unreadable_input=end.unreadable_input)


def build_run(rf: RunFolder, parsed: Parsed | None = None) -> Run:
    """The Run of a folder whose step ran (`parsed`: what its backend already read, else read
    now), not written: conclude() writes it once the status is set. The report stack (pandas) is
    first imported here, inside each caller's guard: an interrupt in that import is the run's."""
    # why lazy: it imports pandas, which importing execution must not
    from orchestrator.results import build_report

    return build_report(rf, parsed, write=False)


def run_step(rf: RunFolder, step: Callable[[], None]) -> GprofError | None:
    """Run a run's step into its folder (a backend's execute(); for `exec`/`import`, the
    program's or the copy of a capture): what went wrong kept, Ctrl-C as an interrupt, the variant
    a --timeout stopped marked, the wall time kept. Every run, a workload's or a capture, ends here."""
    t0 = time.monotonic()
    error: GprofError | None = None
    try:
        step()
    except GprofError as exc:
        error = exc
    except KeyboardInterrupt:
        error = InterruptedRunError("interrupted")
    rf.ended = True
    if isinstance(error, ToolTimeoutError):
        on = rf.mark_timed_out()  # None for a capture: its workload.json is written after
        if on is not None:
            error.message += f"; the workload was {on[1]} variant {on[0]}, marked timed out"
    rf.manifest["wall_s"] = round(time.monotonic() - t0, 3)
    return error


def conclude(
    rf: RunFolder, run: Run | None, status: str, error: GprofError | None, *, unreadable_input: bool = False
) -> Run:
    """End a run folder: the reports carry the final status, so set it first, write them once,
    then save the manifest; raise `error` (with `.run`, what could be built) if there is one.
    `unreadable_input`: `error` says the file the user imported could not be read at all."""
    if error is not None and run is None and collected_nothing(rf, error, unreadable_input):
        rf.discard()
        error.log = None  # it was in the folder
        raise error
    if error is None and run is not None:
        error = table_error(run)
        if error is not None:
            status = {EXIT_INCOMPLETE: "incomplete", EXIT_SUSPECT: "suspect"}.get(error.exit_code, status)
    rf.set_status(status, error)
    if run is not None:
        t0 = time.monotonic()
        try:
            # why lazy: it imports pandas, which importing execution must not; only with a run to
            # write: with none, pandas' import may be one an interrupt broke, and would raise again
            from orchestrator.results import write_report

            write_report(run)
        except BaseException as exc:
            # those written carry the status set before: they would mislead (a full disk needs the room)
            rf.remove_reports()
            run.saved = False
            stopped = interrupt_in(exc)
            if error is not None and isinstance(exc, GprofError) and not stopped:
                # the run had already gone wrong (the runner could not write either, say): both
                error.message += f"; {exc.message}"
            error = reporting_error(rf, exc, error)
            if stopped:
                status = "interrupted"
            else:  # samples the runner could not save are lost: only a new run brings them back
                error.hint = (
                    "free some space and run again"
                    if isinstance(error, SamplesLostError)
                    else f"free some space, then `gprof-orch report {rf.path}` writes the reports"
                )
            rf.set_status("interrupted" if stopped else "failed", error)
        rf.manifest["report_s"] = round(time.monotonic() - t0, 3)
    if error is not None and (run is None or not run.saved) and status != "interrupted":
        error.hint = (error.hint + "; " if error.hint else "") + f"run folder kept: {rf.path}"
    rf.finish()
    if run is not None:
        run.manifest = rf.manifest
    if error is not None:
        error.run = run  # type: ignore[attr-defined]
        error.run_path = rf.path  # type: ignore[attr-defined]
        raise error
    assert run is not None
    return run


def collected_nothing(rf: RunFolder, error: GprofError, unreadable_input: bool = False) -> bool:
    """Whether a run that went wrong left nothing worth its folder: no workload.json, and a usage
    error (`--size` too large for the device, found by the runner) or an imported file that
    could not be read (its copy is all the folder would hold)."""
    return (isinstance(error, UsageError) or unreadable_input) and not (rf.path / WORKLOAD_MANIFEST).exists()


def execute_point(point: Any, out: Path) -> RunFolder | str:
    """A point as a Dask worker runs it: the same runs into `out` as run_point makes, the status
    (from workload.json) in the manifest and every raw file, but no report. The client builds
    the report where the folder lands, once (land_point: its titles name that folder), so the
    worker never imports pandas (tests/test_cluster.py). Returns the folder, or why the backend
    cannot run here; raises GprofError (the folder ended failed or interrupted) as profile()
    does."""
    reason = point_unavailable(point)
    if reason:
        return reason
    req = backends.request(point.workload, point.backend, **{**point.options, "out": str(out)}).validate()
    rf, error = execute(req, None)
    workload = None
    if error is None:
        try:
            workload = rf.workload_manifest()
        except GprofError as exc:
            error = exc
    status, error = final_status(rf, workload, error)
    rf.set_status(status, error)
    rf.finish()
    if error is not None:
        error.run_path = rf.path  # type: ignore[attr-defined]
        raise error
    return rf


def land_point(folder: Path, outcome: Any, **manifest: Any) -> Run:
    """A point's run folder, sent back by its worker, unpacked into `folder`; where it ran (and
    `manifest`'s keys) written into its manifest; its report built here, once (execute_point
    leaves it to the client), and the folder concluded as profile() concludes one. Raises the
    point's error (or the report's: a raw file the worker wrote that does not parse)."""
    unpack(outcome.archive, folder)  # over any placeholder manifest: the worker's is the run's
    rf = RunFolder.open(folder)
    rf.manifest.update(placement=outcome.placement, **manifest)
    error: GprofError | None = None if outcome.status == "ok" else outcome.as_error()
    run = None
    try:
        run = build_run(rf)
    except BaseException as exc:
        error = reporting_error(rf, exc, error)
    status = "ok" if error is None else "interrupted" if isinstance(error, InterruptedRunError) else "failed"
    return conclude(rf, run, status, error)


def point_unavailable(point: Any) -> str | None:
    """Why a point that asks to be checked (`all`'s backends) cannot run here, or None."""
    if not point.check:
        return None
    return unavailable(point.backend, backends.request(point.workload, point.backend, **point.options))


def unavailable(name: str, req: Request) -> str | None:
    """Why backend `name` cannot run on this machine, or None when it can."""
    avail = backends.get(name).check(req)
    if not avail.ok:
        return avail.detail.splitlines()[0]
    if backends.get(name).needs_gpu and (req.device == "cpu" or envinfo.nvidia_smi() is None):
        return f"{name} needs an NVIDIA GPU (none here, or --device cpu)"
    return None
