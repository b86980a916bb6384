"""Each GPU activity (kernel, memcpy, memset) -> the variant whose NVTX range contains the start
of the CUDA API call that launched it, on the same thread (see export's docstring); by `window`,
a launch from a thread with no range open goes to a range open on another thread then."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.parsers.nsys.ranges import variant_ranges
from orchestrator.parsers.nsys.schema import (
    ATTRIBUTED_COLUMNS,
    DEFAULT_DOMAIN,
    DEFAULT_PREFIX,
    TID_BITS,
    NsysExport,
    set_text,
)
from orchestrator.parsers.range_nesting import innermost_containing, shared_codes

# how a launch is given to a range: THREAD, only to one open on the thread that made the call (as
# nsys's nvtx_kern_sum counts); WINDOW, also to one open on another thread of its process where
# its own thread has none open (PyTorch's backward launches from autograd's thread, with no range)
THREAD, WINDOW = "thread", "window"
ATTRIBUTIONS = (WINDOW, THREAD)
# the column WINDOW adds: where the launch's range is (OWN_THREAD: its own thread's, or none);
# SEVERAL_THREADS: ranges were open on several other threads, and the one that started last took it
FROM_OTHER_THREAD = "from_other_thread"
OWN_THREAD, OTHER_THREAD, SEVERAL_THREADS = 0, 1, 2


def attribute_kernels(
    export: NsysExport,
    *,
    domain: str | None = DEFAULT_DOMAIN,
    prefix: str = DEFAULT_PREFIX,
    ranges: pd.DataFrame | None = None,
    by: str = THREAD,
) -> pd.DataFrame:
    """One row per GPU activity (kernel, memcpy, memset: column `kind`), with the variant whose
    NVTX range contains the start of the CUDA API call that launched it, on the same thread.

    The launching call is found by (process, correlationId) in the runtime table;
    `launch_cpu_ns` is its duration and `launch_api` its name. Where ranges nest, the innermost
    (latest-starting) one wins. Activity outside every variant range, or whose launch call is
    not in the export, has variant None and range_id -1: report it apart.

    Vectorised (sort + binary search): 1e6 kernels take well under a second once read.

    `ranges`, when given, is the selection to attribute to instead of domain and prefix: a frame
    shaped like variant_ranges()'s (orchestrator.capture selects ranges of any domain, or only
    the top-level ones, so).

    `by` WINDOW: an activity whose launching thread has no selected range open at the call's
    start goes to the latest-starting selected range open then on any other thread of the same
    process (the innermost, where they nest; across threads, the one that started last), and the
    FROM_OTHER_THREAD column says which came so (OTHER_THREAD, SEVERAL_THREADS where ranges were
    open on more than one other thread). THREAD (the default): the launching thread's only.

    Example:
        >>> att = attribute_kernels(ex, domain="gprof", prefix="variant:")
        >>> att[att.kind == "kernel"].groupby("variant").duration_ns.sum()
    """
    if by not in ATTRIBUTIONS:
        raise ValueError(f"attribute_kernels(by={by!r}): one of {', '.join(ATTRIBUTIONS)}")
    if ranges is None:
        ranges = variant_ranges(export, domain, prefix)
    act = _activity(export)
    rt = export.runtime
    launch = _match_launches(act["global_pid"].to_numpy(), act["correlation_id"].to_numpy(), rt)
    found = launch >= 0
    li = launch[found]
    tid = np.full(len(act), -1, dtype=np.int64)
    tid[found] = rt["global_tid"].to_numpy()[li]
    lstart = rt["start"].to_numpy()[li]

    rid = np.full(len(act), -1, dtype=np.int64)
    if len(li) and len(ranges):
        rid[found] = innermost_containing(
            ranges["global_tid"].to_numpy(),
            ranges["start"].to_numpy(),
            ranges["end"].to_numpy(),
            tid[found],
            lstart,
        )
    moved = _from_other_threads(ranges, tid, lstart, found, rid) if by == WINDOW else None
    inside = rid >= 0
    variant = np.empty(len(act), dtype=object)  # all None; np.full(None) sets them one by one, 10x slower
    variant[inside] = ranges["variant"].to_numpy(dtype=object)[rid[inside]]

    act["global_tid"] = tid
    act["launch_start"] = _nullable(lstart, found)
    act["launch_cpu_ns"] = _nullable(rt["duration_ns"].to_numpy()[li], found)
    if "name" in rt:  # a lean read has no runtime call names
        api = np.full(len(act), None, dtype=object)
        api[found] = rt["name"].to_numpy(dtype=object)[li]
        set_text(act, "launch_api", api)
    set_text(act, "variant", variant)
    act["range_id"] = rid
    if moved is not None:
        act[FROM_OTHER_THREAD] = moved
    return act[[c for c in (*ATTRIBUTED_COLUMNS, FROM_OTHER_THREAD) if c in act]]


def _from_other_threads(
    ranges: pd.DataFrame, tid: np.ndarray, lstart: np.ndarray, found: np.ndarray, rid: np.ndarray
) -> np.ndarray:
    """WINDOW's step: `rid` (per activity, its range on the launching thread, -1 for none) given,
    in place, the latest-starting range open at the launch on any thread of the launching process
    where it has none; returns FROM_OTHER_THREAD's codes per activity. `tid`: the launching thread
    (-1: call not found); `lstart`: the calls' starts, for the activities `found`."""
    codes = np.full(len(rid), OWN_THREAD, dtype=np.int8)
    if not len(ranges) or not found.any():
        return codes
    orphan = np.flatnonzero(found & (rid < 0))
    if not len(orphan):
        return codes
    at = np.full(len(rid), -1, dtype=np.int64)
    at[found] = lstart
    q_t, q_pid = at[orphan], tid[orphan] & ~TID_BITS
    r_tid = ranges["global_tid"].to_numpy()
    r_start, r_end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    # every thread of a process as one: the range that started last among those open at the call
    hit = innermost_containing(r_tid & ~TID_BITS, r_start, r_end, q_pid, q_t)
    got = hit >= 0
    rid[orphan[got]] = hit[got]
    codes[orphan[got]] = OTHER_THREAD
    threads = np.unique(r_tid)
    if len(threads) > 1:  # how many threads had one open: more than one, the rule above chose
        open_on = np.zeros(len(orphan), dtype=np.int64)
        for t in threads.tolist():
            sel = r_tid == t
            mine = innermost_containing(
                r_tid[sel], r_start[sel], r_end[sel], np.full(len(orphan), t, dtype=np.int64), q_t
            )
            open_on += (mine >= 0) & (q_pid == (t & ~TID_BITS))
        codes[orphan[got & (open_on > 1)]] = SEVERAL_THREADS
    return codes


def _nullable(values: np.ndarray, where: np.ndarray) -> pd.arrays.IntegerArray:
    """An Int64 array holding `values` where `where` is true and NA elsewhere."""
    data = np.zeros(len(where), dtype=np.int64)
    data[where] = values
    return pd.arrays.IntegerArray(data, ~where)


def _activity(export: NsysExport) -> pd.DataFrame:
    """Kernels, memcpys and memsets in one frame with a `kind` column, sorted by start (stable).

    Built column by column and reordered once: concatenating the frames and sorting the result
    copied every column twice, seconds on millions of rows."""
    common = [
        c
        for c in ("start", "end", "duration_ns", "device_id", "stream_id", "correlation_id", "global_pid")
        if c in export.kernels
    ]  # a lean read has no device and stream ids
    parts = [("kernel", export.kernels)] + [
        (kind, f) for kind, f in (("memcpy", export.memcpy), ("memset", export.memset)) if len(f)
    ]
    sizes = [len(f) for _, f in parts]
    k = export.kernels
    # a lean read's names are categorical: they stay so, the copies' and fills' names joining them
    categorical = isinstance(k["name"].dtype, pd.CategoricalDtype)
    text = (lambda c: k[c].array) if categorical else (lambda c: k[c].to_numpy(dtype=object))
    labels = [_copy_names(kind, f, categorical) for kind, f in parts[1:]]
    names, demangled = [text("name"), *labels], [text("demangled_name"), *labels]
    byte_values = [np.zeros(len(k), dtype=np.int64)] + [
        f["bytes"].to_numpy(dtype=np.int64) for _, f in parts[1:]
    ]
    # where each part's rows go in start order (stable): each column is written there once,
    # never concatenated first and then reordered
    start = [f["start"].to_numpy() for _, f in parts]
    dest = None
    if len(parts) > 1:
        order = np.argsort(np.concatenate(start), kind="stable")
        dest = np.empty(len(order), dtype=np.int64)
        dest[order] = np.arange(len(order))
    bounds = np.cumsum([0, *sizes])

    def arrange(pieces: list[np.ndarray]) -> np.ndarray:
        if dest is None:
            return pieces[0].copy()
        out = np.empty(bounds[-1], dtype=pieces[0].dtype)
        for i, piece in enumerate(pieces):
            out[dest[bounds[i] : bounds[i + 1]]] = piece
        return out

    cols: dict[str, object] = {c: arrange([f[c].to_numpy() for _, f in parts]) for c in common}
    if categorical:  # the joined categories, the codes arranged
        joined = [pd.api.types.union_categoricals(x) for x in (names, demangled)]
        cols["name"], cols["demangled_name"] = (
            pd.Categorical.from_codes(
                arrange([j.codes[bounds[i] : bounds[i + 1]] for i in range(len(parts))]),
                categories=j.categories,
            )
            for j in joined
        )
    else:
        cols["name"], cols["demangled_name"] = arrange(names), arrange(demangled)
    # the kinds as small codes, arranged, then their labels: an object array per part, filled
    # string by string and moved, took half a second on 4e6 rows
    kind_codes = arrange([np.full(n, i, dtype=np.int8) for i, n in enumerate(sizes)])
    cols["kind"] = np.array([kind for kind, _ in parts], dtype=object)[kind_codes]
    no_bytes = [np.full(n, kind == "kernel") for (kind, _), n in zip(parts, sizes)]  # a kernel moves none
    cols["bytes"] = pd.arrays.IntegerArray(arrange(byte_values), arrange(no_bytes))
    texts = ("kind",) if categorical else ("name", "demangled_name", "kind")
    act = pd.DataFrame({c: v for c, v in cols.items() if c not in texts}, copy=False)
    for c in texts:
        set_text(act, c, cols[c])
    return act[[*common, "name", "demangled_name", "kind", "bytes"]]


def _copy_names(kind: str, f: pd.DataFrame, categorical: bool) -> np.ndarray | pd.Categorical:
    """The name each memcpy ("[CUDA memcpy Host-to-Device]") or memset ("[CUDA memset]") row of
    `f` takes, as a categorical when the kernels' names are one."""
    if kind == "memcpy":  # one name per copy kind, not one string per row
        codes, kinds = pd.factorize(f["copy_kind"], use_na_sentinel=False)
        labels = np.array([f"[CUDA memcpy {c}]" for c in kinds], dtype=object)
    else:
        codes, labels = np.zeros(len(f), dtype=np.int64), np.array(["[CUDA memset]"], dtype=object)
    return (
        pd.Categorical.from_codes(codes, categories=pd.Index(labels, dtype=object))
        if categorical
        else labels[codes]
    )


def _match_launches(pid: np.ndarray, corr: np.ndarray, runtime: pd.DataFrame) -> np.ndarray:
    """Row index in `runtime` of the call with the same (process, correlationId); -1 if none."""
    out = np.full(len(pid), -1, dtype=np.int64)
    if not len(pid) or not len(runtime):
        return out
    r_corr = runtime["correlation_id"].to_numpy()
    r_pid = runtime["global_tid"].to_numpy() & ~TID_BITS
    # one int64 key per (process, correlationId): a small process code in the high bits
    a_code, r_code = shared_codes(pid, r_pid)
    if corr.max(initial=0) >= 2**32 or r_corr.max(initial=0) >= 2**32:
        # CUPTI's ids are 32-bit; if a future export widens them, take the slower exact path
        index = pd.MultiIndex.from_arrays([r_pid, r_corr])
        keep = ~index.duplicated(keep="first")
        pos = index[keep].get_indexer(pd.MultiIndex.from_arrays([pid, corr]))
        out[pos >= 0] = np.flatnonzero(keep)[pos[pos >= 0]]
        out[corr < 0] = -1
        return out
    a_key = np.where(corr >= 0, (a_code << 32) | corr, -1)
    r_key = np.where(r_corr >= 0, (r_code << 32) | r_corr, -2)
    if (r_key[1:] >= r_key[:-1]).all():  # calls in id order already, as one thread makes them
        order, sk = None, r_key
    else:
        order = np.argsort(r_key, kind="stable")  # stable: a duplicated id keeps its first call
        sk = r_key[order]
    pos = np.searchsorted(sk, a_key, side="left")
    pos_c = np.minimum(pos, len(sk) - 1)
    hit = (pos < len(sk)) & (sk[pos_c] == a_key) & (a_key >= 0)
    out[hit] = pos_c[hit] if order is None else order[pos_c[hit]]
    return out
