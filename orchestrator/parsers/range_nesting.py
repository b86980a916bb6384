"""Which range contains a point in time, on the same thread, where ranges nest: the innermost.
Shared by the nsys attribution, torch.profiler's traces and orchestrator.capture."""

from __future__ import annotations

import numpy as np
import pandas as pd


def shared_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Small int64 codes of two arrays of ids (processes, threads) in one numbering: pd.factorize
    of both, or all zeros without hashing millions of ids when both hold one and the same id."""
    if len(a) and len(b) and a.min() == a.max() == b.min() == b.max():
        return np.zeros(len(a), dtype=np.int64), np.zeros(len(b), dtype=np.int64)
    codes, _ = pd.factorize(np.concatenate([a, b]))
    return codes[: len(a)].astype(np.int64), codes[len(a) :].astype(np.int64)


def innermost_containing(
    r_tid: np.ndarray, r_start: np.ndarray, r_end: np.ndarray, q_tid: np.ndarray, q_t: np.ndarray
) -> np.ndarray:
    """For each query (thread, time), the index of the latest-starting range on that thread
    with start <= t <= end, or -1.

    Per thread: a binary search finds the last range starting at or before t. If it ended
    before t, only a range enclosing it can still contain t, so the search walks up a parent
    chain (each range's latest-starting enclosing range, from one stack pass). That pass runs
    only on threads whose ranges overlap; variants one after another need just the search.
    """
    out = np.full(len(q_t), -1, dtype=np.int64)
    rc, qc = shared_codes(r_tid, q_tid)
    r_order = np.lexsort((-r_end, r_start, rc))  # by thread, start, then outer before inner
    one = not qc.any() and not rc.any()  # one thread: every query in one group, taken as it is
    q_order = np.arange(len(qc)) if one else np.argsort(qc, kind="stable")
    rc_sorted, qc_sorted = rc[r_order], (qc if one else qc[q_order])
    for code in np.unique(rc):
        r_lo, r_hi = np.searchsorted(rc_sorted, [code, code + 1])
        q_lo, q_hi = np.searchsorted(qc_sorted, [code, code + 1])
        if q_lo == q_hi:
            continue
        ri = r_order[r_lo:r_hi]
        s, e = r_start[ri], r_end[ri]
        qi = q_order[q_lo:q_hi]
        t = q_t if one else q_t[qi]
        cand = np.searchsorted(s, t, side="right") - 1
        overlapping = len(s) > 1 and bool((s[1:] < np.maximum.accumulate(e)[:-1]).any())
        parent = _parents(s, e) if overlapping else None
        while True:
            valid = cand >= 0
            miss = valid.copy()
            miss[valid] = t[valid] > e[cand[valid]]
            if not miss.any():
                break
            cand[miss] = parent[cand[miss]] if parent is not None else -1
        ok = cand >= 0
        out[qi[ok]] = ri[cand[ok]]
    return out


def _parents(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Each range's latest-starting enclosing range (ranges sorted by start, outer first)."""
    parent = [-1] * len(s)
    stack: list[int] = []
    ends = e.tolist()
    for i, si in enumerate(s.tolist()):
        while stack and ends[stack[-1]] < si:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return np.asarray(parent, dtype=np.int64)
