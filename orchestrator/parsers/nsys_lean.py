"""The lean read of a big export (read_export(lean=True)): which runtime calls it keeps."""

from __future__ import annotations

import threading

import numpy as np


class LaunchFilter:
    """The runtime calls a lean read keeps, chunk by chunk on the worker threads: those whose
    correlationId some kernel, memcpy or memset has, and those that end before they start
    (nsys_sqlite's _check_durations reports them). Workers wait here until open() gives the activity's ids
    (None: the read was abandoned); the latest end of every call is kept in `last_end`."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._ids: np.ndarray | None = None
        self._lock = threading.Lock()
        self.last_end: int | None = None

    def open(self, ids: np.ndarray | None) -> None:
        """`ids`: the GPU activity's correlationIds, sorted. Only the first call counts."""
        if not self._ready.is_set():
            self._ids = ids
            self._ready.set()

    def __call__(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        start, end, corr = cols["start"], cols["end"], cols["correlation_id"]
        if len(end):
            with self._lock:
                self.last_end = max(
                    int(end.max()), self.last_end if self.last_end is not None else int(end.max())
                )
        self._ready.wait()
        ids = self._ids
        if ids is None:
            return np.ones(len(corr), dtype=bool)
        keep = end < start
        if len(ids):
            pos = np.minimum(np.searchsorted(ids, corr), len(ids) - 1)
            keep |= ids[pos] == corr
        return keep
