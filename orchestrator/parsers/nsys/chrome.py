"""Nsight Systems SQLite export -> Chrome Trace Event JSON, the format torch.profiler writes,
which Perfetto (ui.perfetto.dev) and chrome://tracing open.

Pure: works on an `NsysExport` (export.read_export); never runs nsys, never imports torch.

Layout, following torch.profiler's traces so that tools made for them read these too (our own
torch_trace parser among them):
- one process per profiled process (pid = the OS pid), one thread row per OS thread, holding
  the NVTX ranges and the CUDA API calls as complete ('X') events:
  - variant ranges (in `domain`, text starting with `prefix`) get cat "user_annotation" and
    their text as name ("variant:mul"), as torch's `record_function` ranges do;
  - every other push/pop range gets cat "nvtx" and the name "domain:text" (just the text in
    the default domain); start/end ranges, which need not nest, are async ('b'/'e') events;
    marks are instant ('i') events;
  - CUDA API calls get cat "cuda_runtime", or "cuda_driver" for the driver API (cu*), as in
    torch, with args.correlation;
- one process per GPU (pid = the device id, as torch writes it) with one thread per stream,
  holding kernels (cat "kernel", named by the demangled name), memcpys ("gpu_memcpy") and
  memsets ("gpu_memset"), each with args.correlation and the variant that launched it
  (`attribute_kernels`);
- flow events ('s' on the launching call, 'f' on the GPU activity, cat "ac2g") draw the
  launch arrows; their ids number the GPU activities (torch uses the correlation id, but one
  CUDA graph launch has one correlation id for many kernels);
- metadata ('M') events name the processes and threads.

Timestamps and durations are microseconds as floats with ns precision, from the earliest
timestamp written (kept as otherData.time_origin_ns, on nsys's session clock); reading them
back with `round(us * 1000)` gives the exported ns exactly.

Example:
    >>> from orchestrator.parsers.nsys import write_chrome_trace
    >>> write_chrome_trace("report.sqlite", "report.trace.json")   # open it in ui.perfetto.dev
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.parsers.nsys.attribution import attribute_kernels
from orchestrator.parsers.nsys.export import read_export
from orchestrator.parsers.nsys.ranges import last_timestamp, variant_ranges
from orchestrator.parsers.nsys.schema import (
    DEFAULT_DOMAIN,
    DEFAULT_PREFIX,
    NVTX_MARK,
    NVTX_PUSHPOP_RANGE,
    NVTX_STARTEND_RANGE,
    NsysExport,
)
from orchestrator.parsers.torch_trace import gc_paused

try:  # optional: a faster JSON writer
    import orjson as _orjson
except ImportError:
    _orjson = None

_TID_MASK = 0xFFFFFF
FLOW_CAT = "ac2g"
GPU_SORT_BASE = 5_000_000  # torch sorts GPU processes after CPU ones with these indices


def to_chrome_trace(
    export: NsysExport, *, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX
) -> dict:
    """The export as a Chrome trace: {"traceEvents": [...], "displayTimeUnit": "ms",
    "otherData": {...}}, ready for json.dump. `domain` and `prefix` choose the variant ranges
    as in ranges.variant_ranges (domain=None: the default domain).

    Example:
        >>> trace = to_chrome_trace(read_export("report.sqlite"))
        >>> [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
        ['variant:torch_square', 'variant:mul', ...]
    """
    export = _sorted_export(export)
    ranges = variant_ranges(export, domain, prefix)
    att = attribute_kernels(export, domain=domain, prefix=prefix)
    n = export.nvtx
    is_variant = _variant_mask(n, domain, prefix)
    if int(is_variant.sum()) != len(ranges):
        raise RuntimeError("NVTX variant selection disagrees with ranges.variant_ranges")
    other = n[~is_variant & n["event_type"].isin((NVTX_PUSHPOP_RANGE, NVTX_STARTEND_RANGE, NVTX_MARK))]

    t0 = _time_origin(export, ranges, other)
    last = last_timestamp(export)
    gpu_pid = _gpu_pids(export, att)

    events: list[dict] = []
    with gc_paused():  # millions of acyclic dicts: the cyclic GC would only slow this 3x
        events += _variant_range_events(ranges, prefix, t0)
        events += _nvtx_events(other, t0, last)
        events += _runtime_events(export.runtime, t0)
        events += _gpu_events(export, att, gpu_pid, t0)
        events += _flow_events(att, gpu_pid, t0)
        meta = _metadata_events(export, ranges, other, att, gpu_pid)
    return {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "otherData": {
            "source": "nsys export",
            "path": str(export.path),
            "time_origin_ns": t0,
            "nvtx_domain": domain,
            "variant_prefix": prefix,
            "nsys_version": export.meta.get("EXPORT_PRODUCT_VERSION"),
            "export_schema_version": export.meta.get("EXPORT_SCHEMA_VERSION"),
        },
        "traceEvents": meta + events,
    }


def write_chrome_trace(
    sqlite_path: str | Path,
    out_path: str | Path,
    *,
    domain: str | None = DEFAULT_DOMAIN,
    prefix: str = DEFAULT_PREFIX,
) -> Path:
    """Read an nsys SQLite export and write it as a Chrome trace (gzip-compressed when
    out_path ends in .gz, which Perfetto opens as well). Returns out_path. Raises ParseError
    for an unreadable export, as read_export does. An export of 200,000 kernels (a million
    events) converts and writes in about 4 s.

    Example:
        >>> write_chrome_trace("runs/nsys-square/report.sqlite", "square.trace.json.gz")
    """
    out_path = Path(out_path)
    trace = to_chrome_trace(read_export(sqlite_path), domain=domain, prefix=prefix)
    if _orjson is not None:  # 6x faster than json on a million events; the same JSON values
        data = _orjson.dumps(trace)
    else:
        data = json.dumps(trace, allow_nan=False, separators=(",", ":")).encode()
    tmp = out_path.with_name(out_path.name + ".tmp")
    opener = gzip.open if out_path.suffix == ".gz" else open
    try:
        with opener(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out_path)  # never leave a half-written trace under the final name
    finally:
        tmp.unlink(missing_ok=True)
    return out_path


# ------------------------------------------------------------------------------------ helpers


def _sorted_export(export: NsysExport) -> NsysExport:
    """The export with every GPU table sorted by start (read_export already does): the kernel,
    memcpy and memset rows of attribute_kernels then line up with the tables' own rows."""
    changes = {}
    for name in ("kernels", "memcpy", "memset"):
        df = getattr(export, name)
        start = df["start"].to_numpy()
        if len(start) > 1 and not (start[1:] >= start[:-1]).all():
            changes[name] = df.take(np.argsort(start, kind="stable")).reset_index(drop=True)
    return dataclasses.replace(export, **changes) if changes else export


def _variant_mask(nvtx: pd.DataFrame, domain: str | None, prefix: str) -> np.ndarray:
    """The NVTX rows variant_ranges() selects (same rule: range types, domain, text prefix)."""
    sel = nvtx["event_type"].isin((NVTX_PUSHPOP_RANGE, NVTX_STARTEND_RANGE))
    sel &= nvtx["domain"].isna() if domain is None else (nvtx["domain"] == domain).fillna(False)
    if prefix:
        sel &= nvtx["text"].fillna("").str.startswith(prefix)
    return sel.to_numpy(dtype=bool)


def _time_origin(export: NsysExport, ranges: pd.DataFrame, other: pd.DataFrame) -> int:
    starts = [
        df["start"].to_numpy()
        for df in (export.kernels, export.runtime, export.memcpy, export.memset, ranges, other)
        if len(df)
    ]
    return int(min(s.min() for s in starts)) if starts else 0


def _us(ns: np.ndarray | pd.Series, t0: int = 0) -> list[float]:
    """ns on nsys's clock -> us from t0, as Python floats (ns / 1000 is exact to the ns)."""
    return ((np.asarray(ns, dtype=np.int64) - t0) / 1000.0).tolist()


def _pid_tid(global_tid: np.ndarray | pd.Series) -> tuple[list[int], list[int]]:
    g = np.asarray(global_tid, dtype=np.int64)
    return ((g >> 24) & _TID_MASK).tolist(), (g & _TID_MASK).tolist()


def _gpu_pids(export: NsysExport, att: pd.DataFrame) -> dict[int, int | str]:
    """Chrome pid of each device: its id, as torch writes it, unless that is also the pid of a
    profiled process (possible in a container), then "GPU <id>"."""
    devices = sorted(set(att["device_id"].tolist()))
    cpu = set()
    for df in (export.runtime, export.nvtx):
        if len(df):
            cpu.update(((df["global_tid"].to_numpy(dtype=np.int64) >> 24) & _TID_MASK).tolist())
    if cpu.isdisjoint(devices):
        return {d: d for d in devices}
    return {d: f"GPU {d}" for d in devices}


def _variant_range_events(ranges: pd.DataFrame, prefix: str, t0: int) -> list[dict]:
    pid, tid = _pid_tid(ranges["global_tid"])
    kinds = {NVTX_PUSHPOP_RANGE: "push/pop", NVTX_STARTEND_RANGE: "start/end"}
    return [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": prefix + v,
            "pid": p,
            "tid": t,
            "ts": ts,
            "dur": dur,
            "args": {"variant": v, "domain": d, "nvtx": kinds.get(k, k)},
        }
        for v, p, t, ts, dur, d, k in zip(
            ranges["variant"].tolist(),
            pid,
            tid,
            _us(ranges["start"], t0),
            _us(ranges["wall_ns"]),
            ranges["domain"].tolist(),
            ranges["event_type"].tolist(),
        )
    ]


def _nvtx_events(other: pd.DataFrame, t0: int, last: int) -> list[dict]:
    """Push/pop ranges as 'X', start/end ranges as async 'b'/'e' pairs, marks as 'i'."""
    if other.empty:
        return []
    text = other["text"].fillna("").astype(object).tolist()
    dom = other["domain"].tolist()
    names = [f"{d}:{t}" if isinstance(d, str) else t for d, t in zip(dom, text)]
    unclosed = other["end"].isna().to_numpy()
    end = other["end"].fillna(last).to_numpy(dtype=np.int64)  # never closed: to the end, as nsys shows it
    start = other["start"].to_numpy(dtype=np.int64)
    pid, tid = _pid_tid(other["global_tid"])
    ts, te, dur = _us(start, t0), _us(end, t0), _us(end - start)
    out: list[dict] = []
    for i, kind in enumerate(other["event_type"].tolist()):
        args = {"domain": dom[i], "text": text[i]}
        if unclosed[i] and kind != NVTX_MARK:
            args["unclosed"] = True
        if kind == NVTX_PUSHPOP_RANGE:
            out.append(
                {
                    "ph": "X",
                    "cat": "nvtx",
                    "name": names[i],
                    "pid": pid[i],
                    "tid": tid[i],
                    "ts": ts[i],
                    "dur": dur[i],
                    "args": args,
                }
            )
        elif kind == NVTX_STARTEND_RANGE:
            common = {"cat": "nvtx", "name": names[i], "id": i, "pid": pid[i], "tid": tid[i]}
            out.append({"ph": "b", **common, "ts": ts[i], "args": args})
            out.append({"ph": "e", **common, "ts": te[i]})
        else:
            out.append(
                {
                    "ph": "i",
                    "s": "t",
                    "cat": "nvtx",
                    "name": names[i],
                    "pid": pid[i],
                    "tid": tid[i],
                    "ts": ts[i],
                    "args": args,
                }
            )
    return out


def _runtime_events(rt: pd.DataFrame, t0: int) -> list[dict]:
    names = rt["name"].fillna("").astype(object).tolist()
    pid, tid = _pid_tid(rt["global_tid"])
    return [
        {
            "ph": "X",
            "cat": "cuda_driver" if n.startswith("cu") and not n.startswith("cuda") else "cuda_runtime",
            "name": n,
            "pid": p,
            "tid": t,
            "ts": ts,
            "dur": dur,
            "args": {"correlation": c},
        }
        for n, p, t, ts, dur, c in zip(
            names, pid, tid, _us(rt["start"], t0), _us(rt["duration_ns"]), rt["correlation_id"].tolist()
        )
    ]


def _rows(att: pd.DataFrame, kind: str, table: pd.DataFrame) -> pd.DataFrame:
    """attribute_kernels' rows of one kind, checked to line up with the table they came from."""
    rows = att[att["kind"] == kind]
    if not (
        np.array_equal(rows["start"].to_numpy(), table["start"].to_numpy())
        and np.array_equal(rows["correlation_id"].to_numpy(), table["correlation_id"].to_numpy())
    ):
        raise RuntimeError(f"attribute_kernels' {kind} rows do not line up with the export's table")
    return rows


def _gpu_events(export: NsysExport, att: pd.DataFrame, gpu_pid: dict, t0: int) -> list[dict]:
    out: list[dict] = []
    k = export.kernels
    if len(k):
        a = _rows(att, "kernel", k)
        demangled = k["demangled_name"].to_numpy(dtype=object)
        short = k["name"].to_numpy(dtype=object)
        names = np.where(pd.isna(demangled), short, demangled).tolist()
        g = k[["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].to_numpy().tolist()
        shared = (k["static_shared_mem_bytes"] + k["dynamic_shared_mem_bytes"]).tolist()
        out += [
            {
                "ph": "X",
                "cat": "kernel",
                "name": nm,
                "pid": gpu_pid[d],
                "tid": s,
                "ts": ts,
                "dur": dur,
                "args": {
                    "device": d,
                    "stream": s,
                    "correlation": c,
                    "grid": gb[:3],
                    "block": gb[3:],
                    "registers per thread": r,
                    "shared memory": sh,
                    "short name": sn,
                    "variant": v,
                },
            }
            for nm, d, s, ts, dur, c, gb, r, sh, sn, v in zip(
                names,
                k["device_id"].tolist(),
                k["stream_id"].tolist(),
                _us(k["start"], t0),
                _us(k["duration_ns"]),
                k["correlation_id"].tolist(),
                g,
                k["registers_per_thread"].tolist(),
                shared,
                short.tolist(),
                a["variant"].tolist(),
            )
        ]
    for kind, table in (("memcpy", export.memcpy), ("memset", export.memset)):
        if len(table):
            out += _memory_op_events(kind, table, _rows(att, kind, table), gpu_pid, t0)
    return out


def _memory_op_events(
    kind: str, table: pd.DataFrame, rows: pd.DataFrame, gpu_pid: dict, t0: int
) -> list[dict]:
    """The export's memcpy or memset table (`kind`) as complete events of cat "gpu_<kind>",
    named as attribute_kernels' `rows` of that kind name them."""
    cat = "gpu_" + kind
    dev, stream = table["device_id"].tolist(), table["stream_id"].tolist()
    return [
        {"ph": "X", "cat": cat, "name": nm, "pid": gpu_pid[d], "tid": s, "ts": ts, "dur": dur, "args": a}
        for nm, d, s, ts, dur, a in zip(
            rows["name"].tolist(),
            dev,
            stream,
            _us(table["start"], t0),
            _us(table["duration_ns"]),
            _memory_op_args(kind, table, rows["variant"].tolist()),
        )
    ]


def _memory_op_args(kind: str, table: pd.DataFrame, variant: list) -> list[dict]:
    """The args of each memcpy or memset event. A dict literal per kind: filling dicts from a
    list of arg names instead made the events of a million rows 7% slower to build."""
    common = zip(
        table["device_id"].tolist(),
        table["stream_id"].tolist(),
        table["correlation_id"].tolist(),
        table["bytes"].tolist(),
        variant,
    )
    if kind == "memcpy":
        return [
            {"device": d, "stream": s, "correlation": c, "bytes": b, "copy kind": ck, "variant": v}
            for (d, s, c, b, v), ck in zip(common, table["copy_kind"].tolist())
        ]
    return [
        {
            "device": d,
            "stream": s,
            "correlation": c,
            "bytes": b,
            "value": val,
            "memory kind": mk,
            "variant": v,
        }
        for (d, s, c, b, v), val, mk in zip(common, table["value"].tolist(), table["mem_kind"].tolist())
    ]


def _flow_events(att: pd.DataFrame, gpu_pid: dict, t0: int) -> list[dict]:
    """An 's' at the start of each launching call and an 'f' (bound to the enclosing slice, as
    torch's) at the start of its GPU activity; activity whose call is not in the export has none."""
    found = att["global_tid"].to_numpy() >= 0
    a = att[found]
    pid, tid = _pid_tid(a["global_tid"])
    launch = a["launch_start"].to_numpy(dtype=np.int64)
    out: list[dict] = []
    for i, (p, t, ls, d, s, gs) in enumerate(
        zip(pid, tid, _us(launch, t0), a["device_id"].tolist(), a["stream_id"].tolist(), _us(a["start"], t0))
    ):
        out.append({"ph": "s", "id": i, "pid": p, "tid": t, "ts": ls, "cat": FLOW_CAT, "name": FLOW_CAT})
        out.append(
            {
                "ph": "f",
                "id": i,
                "pid": gpu_pid[d],
                "tid": s,
                "ts": gs,
                "cat": FLOW_CAT,
                "name": FLOW_CAT,
                "bp": "e",
            }
        )
    return out


def _metadata_events(
    export: NsysExport, ranges: pd.DataFrame, other: pd.DataFrame, att: pd.DataFrame, gpu_pid: dict
) -> list[dict]:
    tids = np.unique(
        np.concatenate(
            [df["global_tid"].to_numpy(dtype=np.int64) for df in (export.runtime, ranges, other)]
            + [np.empty(0, np.int64)]
        )
    )
    pids, threads = _pid_tid(tids)
    out: list[dict] = []
    for p in sorted(set(pids)):
        out.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": f"process {p}"}})
        out.append({"ph": "M", "name": "process_labels", "pid": p, "tid": 0, "args": {"labels": "CPU"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": p, "tid": 0, "args": {"sort_index": p}})
    for p, t in zip(pids, threads):
        out.append({"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": f"thread {t}"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": p, "tid": t, "args": {"sort_index": t}})
    for d, p in gpu_pid.items():
        out.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": f"GPU {d}"}})
        out.append({"ph": "M", "name": "process_labels", "pid": p, "tid": 0, "args": {"labels": f"GPU {d}"}})
        out.append(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": p,
                "tid": 0,
                "args": {"sort_index": GPU_SORT_BASE + d},
            }
        )
    streams = att[["device_id", "stream_id"]].drop_duplicates().sort_values(["device_id", "stream_id"])
    for d, s in zip(streams["device_id"].tolist(), streams["stream_id"].tolist()):
        out.append(
            {"ph": "M", "name": "thread_name", "pid": gpu_pid[d], "tid": s, "args": {"name": f"stream {s}"}}
        )
        out.append(
            {"ph": "M", "name": "thread_sort_index", "pid": gpu_pid[d], "tid": s, "args": {"sort_index": s}}
        )
    return out
