"""How a run ends once its step ran: its report and status (Ending: what execution.conclude
takes), the status from what went wrong and what its workload.json says (final_status), and the
error a report that could not be built stands for (reporting_error). Every backend's report hook
(Backend.report) ends its run with these; execution.conclude then ends the folder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator.errors import GprofError, InterruptedRunError, RunFailedError, interrupt_in
from workloads.statuses import STALE

if TYPE_CHECKING:
    from orchestrator.results import Run
    from orchestrator.runfolder import RunFolder


class Ending(NamedTuple):
    """How a run ends, once its report is built: what conclude() takes."""

    run: Run | None
    status: str
    error: GprofError | None
    unreadable_input: bool = False  # the file the user imported could not be read at all


def final_status(
    rf: RunFolder, workload: dict[str, Any] | None, error: GprofError | None
) -> tuple[str, GprofError | None]:
    """The run folder's status and the error to raise, from what went wrong and what the
    workload manifest (read and checked) says."""
    status = "interrupted" if isinstance(error, InterruptedRunError) else "failed" if error else "ok"
    if workload is None or error is not None:
        return status, error
    variants = workload.get("variants", [])
    # a stale result fails the run too: its answer did not follow its input (workloads/recheck.py)
    failed = [v for v in variants if v.get("status") in ("failed", STALE)]
    wstatus = workload.get("status")
    if failed:
        first = failed[0]
        return "failed", RunFailedError(
            f"{len(failed)} variant(s) failed: "
            + "; ".join(f"{v['name']}: {v.get('error') or v.get('reason', '')}" for v in failed),
            log=rf.logs / "workload.stderr.log",
            hint=f"the other variants' results are in {rf.path}; the traceback of "
            f"{first['name']} is in {rf.path / 'workload.json'}",
        )
    if wstatus == "interrupted":
        return "interrupted", InterruptedRunError("the workload was interrupted")
    if wstatus != "ok" or any(v.get("status") in ("pending", "measuring") for v in variants):
        # the runner exited without finishing workload.json (it could not write it, say)
        return "failed", RunFailedError(
            f"the workload runner stopped before it finished (workload.json says {wstatus!r})",
            log=rf.logs / "workload.stderr.log",
        )
    return status, error


def reporting_error(rf: RunFolder, exc: BaseException, error: GprofError | None) -> GprofError:
    """The error a run ends with when building or writing its report raised `exc`: an interrupt
    (Ctrl-C, SIGTERM, or an error one caused) is the run's interrupt, so the folder ends
    `interrupted`, never `running`; a GprofError, the run's error unless it had one already.
    Anything else is a bug: the folder is ended `failed` and `exc` raised again."""
    if interrupt_in(exc):
        if isinstance(error, InterruptedRunError):
            return error
        had = f" (the run had already failed: {error.message})" if error is not None else ""
        return InterruptedRunError(
            f"interrupted while the report was made{had}",
            hint=f"the run's data is kept: `gprof-orch report {rf.path}` writes the reports",
        )
    if not isinstance(exc, GprofError):
        rf.finish("failed", "gprof-orch failed to build the report (a bug: see the traceback)")
        raise exc
    return error or exc
