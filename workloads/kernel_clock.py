"""The kernel clock of `time`: each timed call's own GPU work (its kernels, memsets and copies),
summed from CUPTI's activity records, the records nsys reads, taken in-process through NVIDIA's
cupti-python.

Why: the CUDA events around a call hold, beside its kernels, the GPU's processing of the launch,
about 2.4 to 3.2 us a launch on the H200, measured on the very same calls under nsys
(docs/time-fidelity-h200.md, point 7). That is the call as the stream sees it, kept beside the
median as `events us`; but at 1e7 elements and below it is more than the 0.5 us the `time` goal allows against
nsys. CUPTI's kernel records are what nsys reports, so the clock's median is nsys's figure
without nsys.

How a record finds its call: the runner notes CUPTI's clock just before and after each timed
call (`window`). CUPTI's runtime and driver API records carry their host start time and a
correlation id; every kernel, memset and copy carries the correlation id of the API call that
launched it. A call's GPU work is then everything whose launching API call started inside its
window: the L2 flush and the timer's hold, launched before the window opens, are not in it.
Probed on the H200 first (benchmarks/probes/probe_cupti_clock.py): with the records on, the events read
what they read without them (within 0.07 us), and torch.square's kernel read 1.63, 3.58, 21.15
and 189.89 us at 1e5 to 1e8, where nsys read 1.63, 3.55, 20.90 and 189.15 us.

On by default wherever it can be (`--no-kernel-clock` turns it off; CUPTI's runtime and driver
API records add 1 to 3 us of host time to every call, which `CPU us` holds). Off, even when asked
for, where it cannot be exact: under nsys or ncu (they hold CUPTI; GPROF_MARK_CALLS, or their injection in the
environment), without cupti-python (`gprof-orch doctor` names the version for this CUDA), or
when CUPTI refuses. The manifest's `kernel_clock` says which.
"""

from __future__ import annotations

import bisect
import os

from workloads.timers import MARK_CALLS_ENV

# a profiler that holds CUPTI in this process: nsys sets the first, ncu and nsys inject through the second
PROFILER_ENVS = ("NSYS_PROFILING_SESSION_ID", "CUDA_INJECTION64_PATH", "NV_COMPUTE_PROFILER_PERFWORKS_DIR")
BUFFER_BYTES = 8 * 2**20


class KernelClock:
    """CUPTI's activity records on, windows noted per call, each window's GPU ns summed on take()."""

    def __init__(self, cupti) -> None:
        self._cupti = cupti
        kind = cupti.ActivityKind
        self._api = (kind.RUNTIME, kind.DRIVER)
        self._gpu = (kind.CONCURRENT_KERNEL, kind.MEMSET, kind.MEMCPY)
        self._records: list = []
        self._windows: list[tuple[int, int]] = []
        self.now = cupti.get_timestamp
        cupti.activity_register_callbacks(self._requested, self._completed)
        for k in self._api + self._gpu:
            cupti.activity_enable(k)

    @staticmethod
    def _requested():
        return BUFFER_BYTES, 0

    def _completed(self, activities) -> None:
        # the records' fields, copied: CUPTI reuses the buffer once this returns
        for r in activities:
            self._records.append((r.kind, r.start, r.end, r.correlation_id))

    def window(self, call):
        """`call` with its window noted on every call (the runner times this one)."""
        # the list itself, bound once: take() and reset() empty it in place, never replace it
        now, windows = self.now, self._windows

        def windowed():
            t0 = now()
            call()
            windows.append((t0, now()))

        return windowed

    def take(self) -> list[float | None]:
        """The GPU ns of each window noted since the last take, in order (None: no GPU record
        in it). Call once the GPU has finished the calls (after a synchronize)."""
        self._cupti.activity_flush_all(1)
        windows = self._windows[:]
        self._windows.clear()
        # swapped, not copied and cleared: a buffer CUPTI's thread hands in between lands in the new list
        records, self._records = self._records, []
        if not windows:
            return []
        starts = [w[0] for w in windows]
        owner: dict[int, int] = {}  # correlation id -> the window its API call started in
        for kind, start, _end, corr in records:
            if kind in self._api:
                i = bisect.bisect_right(starts, start) - 1
                if i >= 0 and start <= windows[i][1]:
                    owner[corr] = i
        total: list[float | None] = [None] * len(windows)
        for kind, start, end, corr in records:
            i = owner.get(corr)
            if i is not None and kind in self._gpu:
                total[i] = (total[i] or 0.0) + float(end - start)
        return total

    def reset(self) -> None:
        """Forget the windows and records so far (a variant that failed part-way left some)."""
        self._cupti.activity_flush_all(1)
        self._windows.clear()
        self._records.clear()

    def close(self) -> None:
        for k in self._api + self._gpu:
            self._cupti.activity_disable(k)
        self._cupti.activity_flush_all(1)
        self._records.clear()


def open_clock() -> tuple[KernelClock | None, str]:
    """(clock, "cupti") or (None, why it is off)."""
    held = [k for k in (MARK_CALLS_ENV, *PROFILER_ENVS) if os.environ.get(k)]
    if held:
        return (
            None,
            f"a profiler holds CUPTI in this process ({held[0]} is set): nsys or ncu times the kernels",
        )
    try:
        from cupti import cupti
    except ImportError as exc:
        return None, f"no cupti-python ({exc}): `gprof-orch doctor` names the one for this CUDA"
    try:
        return KernelClock(cupti), "cupti"
    except Exception as exc:
        return None, f"CUPTI refused the activity records: {type(exc).__name__}: {exc}"
