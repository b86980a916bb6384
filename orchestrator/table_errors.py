"""The error a run's table carries: variants that ran but whose report is not whole
(incomplete_error, exit 6), whose number cannot stand for their work (suspect_error, exit 7), or
whose result the runner never saved (report_error, exit 1). A
run folder concluded (orchestrator/execution.py) and one read back (orchestrator/results.py)
judge their table by the same rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.errors import GprofError, IncompleteReportError, RunFailedError, SuspectResultError
from reports.schema import IMPOSSIBLE, NOT_SAVED
from workloads.statuses import OTHER_STREAM

if TYPE_CHECKING:
    from orchestrator.results import Run


# the table's statuses of a variant that ran but whose numbers the profiler's report does not hold whole
UNREPORTED = ("incomplete", "not in report")
# the table's statuses of a variant whose number cannot stand for its work
SUSPECT = (IMPOSSIBLE, OTHER_STREAM)


def incomplete_error(run: Run) -> GprofError | None:
    """An IncompleteReportError naming the variants that ran but whose report is not whole (lost
    events, a missing range): the table keeps them, marked, and the run must not exit 0. The
    backend's word on lost events (`run.lost`) is its hint where there is one."""
    t = run.table
    if t.empty or "status" not in t:
        return None
    bad = t[t["status"].isin(UNREPORTED)]
    if bad.empty:
        return None
    return IncompleteReportError(
        f"the profiler's report is incomplete for {', '.join(f'{r.variant} ({r.status})' for r in bad.itertuples())}"
        f": their numbers are not whole",
        hint=(run.lost or "see each row's note") + "; the rows are kept, marked",
    )


def suspect_error(run: Run) -> GprofError | None:
    """A SuspectResultError naming the variants whose number cannot stand for their work (a rate
    above the device's, work on a stream the timer cannot join): the table keeps them, marked,
    and the run must not exit 0."""
    t = run.table
    if t.empty or "status" not in t:
        return None
    bad = t[t["status"].isin(SUSPECT)]
    if bad.empty:
        return None
    return SuspectResultError(
        f"the numbers of {', '.join(f'{r.variant} ({r.status})' for r in bad.itertuples())} cannot stand "
        f"for their work",
        hint="see each row's note; the rows are kept, marked, and given no speedup",
    )


def table_error(run: Run) -> GprofError | None:
    """The error a concluded run's table carries: incomplete_error first (exit 6), then
    suspect_error (exit 7)."""
    return incomplete_error(run) or suspect_error(run)


def report_error(run: Any) -> GprofError | None:
    """The error a run read back carries in its table (each child of a parent folder judged), or
    None: variants whose result the runner never saved (RunFailedError, exit 1), or whose
    profiler's report is not whole (incomplete_error, exit 6). With `.run` set, so that its table
    is printed with it."""
    lost, error = [], None
    children = getattr(run, "runs", None)  # a parent folder's (orchestrator.multirun.MultiRun)
    for r in [run] if children is None else list(children.values()):
        t = r.table
        if "status" in t and "variant" in t:
            lost += [f"{r.path}: {v}" for v in t.loc[t["status"] == NOT_SAVED, "variant"]]
        error = error or table_error(r)
    if lost:
        error = RunFailedError(
            f"no result saved for {', '.join(lost)}: the runner stopped while measuring, before "
            f"it wrote workload.json again (the rows say `not saved`)"
        )
    if error is not None:
        error.run = run  # type: ignore[attr-defined]
    return error
