"""What threads other than a captured range's own launched inside it (`exec nsys`, `import`).

nsys counts a kernel in the range of the thread that launched it; PyTorch's backward launches its
kernels from autograd's own thread, with no range open there. By window (--attribute window, the
default) such launches count in the range open on another thread at the call (the main thread's
`backward`): from_other_thread_rows() says how much came so, the line under the table the rule.
By thread (--attribute thread), LaunchTimes counts the launches that fell inside a range and
went uncounted, which its note gives."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.capture_ranges import inclusive_activity
from orchestrator.parsers import nsys as ns
from reports.schema import FROM_OTHER_THREADS, FROM_OTHER_THREADS_NS
from reports.unify import RowMaker


class LaunchTimes:
    """Every attributed launch's start, sorted, overall and per thread: how many launches other
    threads made inside a set of ranges, by binary search (every variant's ranges are counted, tens
    of thousands in a big capture: a scan per range was quadratic).

    nsys (and nvtx_kern_sum) counts a kernel in the range of the thread that launched it, so a range
    whose work another thread launches does not hold it: PyTorch's backward, for one, launches its
    kernels from autograd's device thread, never from the thread that opened "backward". By window
    (--attribute window) those launches are the range's; the others counted here went elsewhere."""

    def __init__(self, attributed: pd.DataFrame) -> None:
        ls = attributed["launch_start"].to_numpy(dtype=np.float64, na_value=np.nan)
        tid = attributed["global_tid"].to_numpy(dtype=np.float64, na_value=np.nan)
        keep = ~np.isnan(ls)
        self._all = np.sort(ls[keep])
        self._tid = tid[keep]
        self._ls = ls[keep]
        self._per_tid: dict[float, np.ndarray] = {}

    def _of(self, t: float) -> np.ndarray:
        if t not in self._per_tid:
            self._per_tid[t] = np.sort(self._ls[self._tid == t])
        return self._per_tid[t]

    def by_other_threads(self, ranges: pd.DataFrame) -> int:
        """Launches inside the ranges' spans made by threads other than each range's own."""
        starts = ranges["start"].to_numpy(dtype=np.float64)
        ends = ranges["end"].to_numpy(dtype=np.float64)
        rtid = ranges["global_tid"].to_numpy(dtype=np.float64, na_value=np.nan)
        total = _inside(self._all, starts, ends)
        same = np.zeros(len(starts), dtype=np.int64)
        for t in np.unique(rtid[~np.isnan(rtid)]):
            sel = rtid == t
            same[sel] = _inside(self._of(float(t)), starts[sel], ends[sel])
        return int((total - same).sum())


def _inside(times: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each [lo, hi]: how many of the sorted `times` fall in it."""
    return np.searchsorted(times, hi, "right") - np.searchsorted(times, lo, "left")


def from_other_threads(attributed: pd.DataFrame) -> pd.DataFrame:
    """The rows of attribute_kernels(by=WINDOW) that a range open on another thread than the
    launching one took; none by thread."""
    if ns.FROM_OTHER_THREAD not in attributed:
        return attributed.iloc[:0]
    return attributed[attributed[ns.FROM_OTHER_THREAD].to_numpy() > 0]


def from_other_thread_rows(
    rows: RowMaker, name: str, moved: pd.DataFrame, ranges: pd.DataFrame, r: pd.DataFrame, holds: bool
) -> int:
    """A variant's FROM_OTHER_THREADS (kernel launches) and FROM_OTHER_THREADS_NS (GPU ns, memsets
    and copies too) rows, over its ranges `r`, its nested ranges' included where it `holds` them;
    returns how many activities of `moved` (from_other_threads()) it counts."""
    mine = inclusive_activity(moved, ranges, name) if holds else moved[moved["range_id"].isin(r["range_id"])]
    if len(mine):
        rows.add(name, FROM_OTHER_THREADS, float((mine["kind"] == "kernel").sum()), "count")
        rows.add(name, FROM_OTHER_THREADS_NS, float(mine["duration_ns"].sum()), "ns")
    return len(mine)


def from_other_threads_note(moved: pd.DataFrame) -> str:
    """The line under a window-attributed table on the activities it took from other threads
    (`moved`: attribute_kernels' rows with FROM_OTHER_THREAD set), and the rule for those launched
    while ranges were open on several other threads."""
    several = int((moved[ns.FROM_OTHER_THREAD].to_numpy() == ns.SEVERAL_THREADS).sum())
    return (
        f"{len(moved)} GPU activities were launched by threads with no range open (PyTorch's backward "
        "launches from autograd's own thread): each counts in the innermost range open on another "
        "thread at its launch (--attribute window; --attribute thread counts them in none, as nsys's "
        "nvtx_kern_sum does)"
        + (
            f"; {several} came while ranges were open on several other threads: each went to the "
            "range that started last"
            if several
            else ""
        )
    )
