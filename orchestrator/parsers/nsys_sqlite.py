"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> kernels, runtime calls and NVTX
ranges, and each GPU activity attributed to the variant whose NVTX range launched it.

Pure: reads a file with sqlite3 and pandas; never imports torch and never runs nsys, so it works
on a machine without a GPU.

Attribution follows `nsys stats --report nvtx_kern_sum`: a kernel (or memcpy/memset) belongs to
a range when the CUDA API call that launched it (same process and correlationId) starts inside
the range, on the same thread. GPU timestamps are never used for this: the GPU runs behind the
CPU, so a kernel often executes after its range has closed.

Tables and columns read (schema 3.7 of nsys 2023.4.4; names are nsys's, not ours):
`StringIds(id, value)`; `CUPTI_ACTIVITY_KIND_KERNEL`; `CUPTI_ACTIVITY_KIND_RUNTIME`;
`CUPTI_ACTIVITY_KIND_MEMCPY`; `CUPTI_ACTIVITY_KIND_MEMSET`; `NVTX_EVENTS` (eventType 59 = push/pop
range, 60 = start/end range, 34 = mark, 75 = domain create, 76 = domain destroy);
`META_DATA_EXPORT`. A missing table (a CPU-only capture has no CUPTI tables) reads as an empty
frame with the usual columns.

Example:
    >>> ex = read_export("run.sqlite")
    >>> att = attribute_kernels(ex)                # domain "gprof", prefix "variant:"
    >>> summarize(att, variant_ranges(ex))[["variant", "launches", "gpu_time_total_ns"]]
"""
from __future__ import annotations

import os
import sqlite3
import struct
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers import compressed

# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE in the export).
NVTX_MARK = 34
NVTX_PUSHPOP_RANGE = 59
NVTX_STARTEND_RANGE = 60
NVTX_DOMAIN_CREATE = 75
NVTX_DOMAIN_DESTROY = 76
RANGE_EVENT_TYPES = (NVTX_PUSHPOP_RANGE, NVTX_STARTEND_RANGE)

# globalTid = [hw 8 bits][vm 8 bits][pid 24 bits][tid 24 bits]; a kernel's globalPid is the
# globalTid of its process with the tid bits cleared.
_TID_BITS = np.int64(0xFFFFFF)

DEFAULT_DOMAIN = "gprof"
DEFAULT_PREFIX = "variant:"

# (our column, nsys's column, dtype, default). A NULL, or a column this schema version lacks,
# reads as the default; the nullable ids default to -1 so the frames stay plain int64, which the
# 1e6-row attribution relies on for speed. A default of None keeps NULL (nullable dtypes only).
Spec = list[tuple[str, str, str, object]]
# ...but not the columns times and attribution rest on: every nsys export since 2021 has them,
# so a table without one is damaged (one flipped byte of the schema renames a column, and a
# memset table without `correlationId` would silently leave every memset outside the variants).
_REQUIRED = {"start", "end", "correlationId", "globalPid", "globalTid", "eventType", "nameId",
             "shortName", "demangledName"}
# every GPU activity table (kernels, memcpy, memset) starts with these
_GPU_ACTIVITY_SPEC: Spec = [
    ("start", "start", "int64", -1),
    ("end", "end", "int64", -1),
    ("device_id", "deviceId", "int64", -1),
    ("stream_id", "streamId", "int64", -1),
    ("correlation_id", "correlationId", "int64", -1),
    ("global_pid", "globalPid", "int64", -1),
]
_KERNEL_SPEC: Spec = _GPU_ACTIVITY_SPEC + [
    ("name_id", "shortName", "int64", -1),
    ("demangled_id", "demangledName", "int64", -1),
    ("grid_x", "gridX", "int64", 0),
    ("grid_y", "gridY", "int64", 0),
    ("grid_z", "gridZ", "int64", 0),
    ("block_x", "blockX", "int64", 0),
    ("block_y", "blockY", "int64", 0),
    ("block_z", "blockZ", "int64", 0),
    ("registers_per_thread", "registersPerThread", "int64", 0),
    ("static_shared_mem_bytes", "staticSharedMemory", "int64", 0),
    ("dynamic_shared_mem_bytes", "dynamicSharedMemory", "int64", 0),
]
_RUNTIME_SPEC: Spec = [
    ("start", "start", "int64", -1),
    ("end", "end", "int64", -1),
    ("global_tid", "globalTid", "int64", -1),
    ("correlation_id", "correlationId", "int64", -1),
    ("name_id", "nameId", "int64", -1),
]
_MEMCPY_SPEC: Spec = _GPU_ACTIVITY_SPEC + [
    ("bytes", "bytes", "int64", 0),
    ("copy_kind_id", "copyKind", "int64", 0),
]
_MEMSET_SPEC: Spec = _GPU_ACTIVITY_SPEC + [
    ("bytes", "bytes", "int64", 0),
    ("value", "value", "int64", 0),
    ("mem_kind_id", "memKind", "int64", 7),
]
_NVTX_SPEC: Spec = [
    ("start", "start", "int64", -1),
    ("end", "end", "Int64", None),  # NULL for marks and domain events, and a range never closed
    ("event_type", "eventType", "int64", -1),
    ("text", "text", "object", None),
    ("text_id", "textId", "Int64", None),
    ("global_tid", "globalTid", "int64", -1),
    ("domain_id", "domainId", "int64", 0),
]

KERNEL_COLUMNS = ["start", "end", "duration_ns", "device_id", "stream_id", "correlation_id",
                  "global_pid", "name", "demangled_name", "grid_x", "grid_y", "grid_z", "block_x",
                  "block_y", "block_z", "registers_per_thread", "static_shared_mem_bytes",
                  "dynamic_shared_mem_bytes"]
RUNTIME_COLUMNS = ["start", "end", "duration_ns", "global_tid", "correlation_id", "name"]
MEMCPY_COLUMNS = ["start", "end", "duration_ns", "device_id", "stream_id", "correlation_id",
                  "global_pid", "bytes", "copy_kind"]
MEMSET_COLUMNS = ["start", "end", "duration_ns", "device_id", "stream_id", "correlation_id",
                  "global_pid", "bytes", "value", "mem_kind"]
NVTX_COLUMNS = ["start", "end", "event_type", "text", "global_tid", "domain_id", "domain"]
# read_export(lean=True): per table, the spec columns (our names) attribution and the reports use
LEAN_COLUMNS = {
    "kernels": {"start", "end", "correlation_id", "global_pid", "name_id", "demangled_id"},
    "runtime": {"start", "end", "global_tid", "correlation_id"},
    "memcpy": {"start", "end", "correlation_id", "global_pid", "bytes", "copy_kind_id"},
    "memset": {"start", "end", "correlation_id", "global_pid", "bytes"},
}
RANGE_COLUMNS = ["range_id", "variant", "start", "end", "wall_ns", "global_tid", "event_type",
                 "domain"]
ATTRIBUTED_COLUMNS = ["kind", "name", "demangled_name", "start", "end", "duration_ns", "device_id",
                      "stream_id", "correlation_id", "global_pid", "global_tid", "launch_start",
                      "launch_cpu_ns", "launch_api", "bytes", "variant", "range_id"]
SUMMARY_COLUMNS = ["variant", "ranges", "range_wall_ns", "kernels", "launches",
                   "gpu_time_total_ns", "gpu_time_median_ns", "gpu_time_min_ns", "gpu_time_max_ns",
                   "launch_cpu_total_ns", "memcpy_count", "memcpy_time_total_ns", "memset_count",
                   "memset_time_total_ns", "gpu_busy_ns", "gpu_span_ns", "gpu_busy_fraction"]

# Fallbacks for exports without the ENUM tables (labels as nsys 2023.4.4 writes them).
_COPY_KINDS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array",
               4: "Array-to-Host", 5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
               8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer",
               11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
               13: "Unified Device-to-Device"}
_MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
              6: "Managed Static", 7: "Unknown"}

_NVTX_TOO_NEW_HINT = (
    "the `nvtx` Python package 0.2.13 and newer emits ranges that Nsight Systems 2023.4.4 does "
    "not record (only the domain's create/destroy events reach the report); install "
    "nvtx==0.2.10 (`pip install nvtx==0.2.10`) or use a newer nsys")


@dataclass
class NsysExport:
    """The frames read from one export; times are ns on nsys's session clock, sorted by start."""

    path: Path
    kernels: pd.DataFrame
    runtime: pd.DataFrame
    nvtx: pd.DataFrame
    memcpy: pd.DataFrame
    memset: pd.DataFrame
    meta: dict[str, str] = field(default_factory=dict)  # META_DATA_EXPORT: product, schema version
    tables: frozenset[str] = frozenset()                 # every table name in the file
    # a lean read's `runtime` keeps only the calls that can have launched GPU work (see
    # read_export); this is the latest end of all of them, for a range never closed
    runtime_end: int | None = None


# --------------------------------------------------------------------------------------- reading

def read_export(path: str | Path, *, lean: bool = False) -> NsysExport:
    """Read an nsys SQLite export into DataFrames.

    `lean` reads only what attribute_kernels() and the reports use (LEAN_COLUMNS): not a
    kernel's launch shape, registers, shared memory, device and stream, nor a runtime call's
    name (attribute_kernels() then has no launch_api), nor a memset's value and memory kind.
    Each integer read costs SQLite and numpy about 0.1 to 0.3 us: on a 3,000,000-kernel export
    the columns left out were half of the reading (docs/scale-cpu.md). Its `runtime` keeps only
    the calls whose correlationId a kernel, memcpy or memset has (no other call can be matched
    to one, so attribution is the same) and any that end before they start (damage, reported
    as ever); `runtime_end` is the latest end of them all.

    Raises ParseError naming the file when it is missing, empty, truncated, not SQLite, or
    SQLite without nsys's `StringIds` table, or a table without a column that times or
    attribution need (start, end, correlationId, ...). A `.xz` or `.gz` export is read the same.
    Tables the capture did not produce (no CUDA trace, no NVTX) come back as empty frames with
    the usual columns.

    Example:
        >>> ex = read_export("tests/fixtures/nsys/h200_square_nvtx0217/square_nsys_nvtx0217.sqlite")
        >>> ex.kernels.groupby("name").size()
    """
    path = Path(path)
    if compressed.is_compressed(path):  # report.sqlite.xz / .gz: SQLite reads a temporary copy
        with compressed.plain_file(path) as plain:
            return replace(read_export(plain, lean=lean), path=path)
    _check_sqlite_file(path)
    try:
        reader = _Reader(path)
        try:
            return _read(reader, lean)
        finally:
            reader.close()
    except sqlite3.DatabaseError as exc:
        raise ParseError(path, f"SQLite error while reading ({exc})",
                         hint="the export may be truncated or corrupt; run `nsys export` again") from exc
    except UnicodeDecodeError as exc:  # nsys writes UTF-8: a string that is not is damage (fuzz: byte 284553)
        raise ParseError(path, f"a string in the export is not valid UTF-8 ({exc})",
                         hint="the export is damaged; run `nsys export` again") from exc


def _check_sqlite_file(path: Path) -> None:
    """Reject what sqlite3 would accept silently: an empty file opens as an empty database, and
    a truncated one reads fine until a query reaches a missing page."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            header = fh.read(100)
    except FileNotFoundError:
        raise ParseError(path, "no such file") from None
    except OSError as exc:
        raise ParseError(path, f"cannot read ({exc})") from exc
    if size == 0:
        raise ParseError(path, "empty file", hint="nsys export may have failed or been interrupted")
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise ParseError(path, "not an SQLite file",
                         hint="give the output of `nsys export --type sqlite`, not the .nsys-rep")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages = struct.unpack(">II", header[24:32])
    valid_for = struct.unpack(">I", header[92:96])[0]
    # the in-header page count is only trustworthy when its version matches the change counter
    if n_pages and valid_for == change_counter and size < page_size * n_pages:
        raise ParseError(path, f"truncated: the SQLite header promises {page_size * n_pages} bytes, "
                               f"the file has {size}",
                         hint="the copy or the export did not finish; export the .nsys-rep again")


def _read(reader: _Reader, lean: bool = False) -> NsysExport:
    con, tables, path = reader.con, reader.tables, reader.path
    if "StringIds" not in tables:
        raise ParseError(path, "no StringIds table: not an Nsight Systems SQLite export")
    # queue the big tables first so their SQL runs on worker threads while we build frames; the
    # activity tables before the runtime calls, which a lean read filters by their ids (the
    # workers take tasks in order, so the activity is read before any runtime task waits for it)
    launches = _Launches() if lean else None
    reader.gates.append(launches)
    pending = {key: reader.submit(table, [c for c in spec if not lean or key not in LEAN_COLUMNS
                                          or c[0] in LEAN_COLUMNS[key]], keep=launches if key == "runtime" else None)
               for key, table, spec in (
        ("kernels", "CUPTI_ACTIVITY_KIND_KERNEL", _KERNEL_SPEC),
        ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", _MEMCPY_SPEC),
        ("memset", "CUPTI_ACTIVITY_KIND_MEMSET", _MEMSET_SPEC),
        ("runtime", "CUPTI_ACTIVITY_KIND_RUNTIME", _RUNTIME_SPEC),
        ("nvtx", "NVTX_EVENTS", _NVTX_SPEC))}
    strings = _string_table(con)
    meta = {}
    if "META_DATA_EXPORT" in tables:
        meta = {str(k): str(v) for k, v in con.execute("SELECT name, value FROM META_DATA_EXPORT")}

    # sort while the columns are still integers: taking object (string) columns costs more
    k = _sorted(pending["kernels"]())
    if lean:  # a few names for millions of kernels: one code each, the names once
        k["name"] = _lookup_categorical(strings, k.pop("name_id"))
        k["demangled_name"] = _lookup_categorical(strings, k.pop("demangled_id"))
    else:
        _set_text(k, "name", _lookup(strings, k.pop("name_id")))
        _set_text(k, "demangled_name", _lookup(strings, k.pop("demangled_id")))
    kernels = _finish(k, KERNEL_COLUMNS)

    m = _sorted(pending["memcpy"]())
    _set_text(m, "copy_kind", _enum_labels(con, tables, "ENUM_CUDA_MEMCPY_OPER", _COPY_KINDS, m.pop("copy_kind_id")))
    memcpy = _finish(m, MEMCPY_COLUMNS)

    s = _sorted(pending["memset"]())
    if "mem_kind_id" in s:
        _set_text(s, "mem_kind", _enum_labels(con, tables, "ENUM_CUDA_MEM_KIND", _MEM_KINDS, s.pop("mem_kind_id")))
    memset = _finish(s, MEMSET_COLUMNS)

    if launches is not None:
        # sorted, duplicates left in: np.unique hashes, 20x slower than a sort on 4e6 ids here
        launches.open(np.sort(np.concatenate([f["correlation_id"].to_numpy() for f in (kernels, memcpy, memset)])))
    r = _sorted(pending["runtime"]())
    if "name_id" in r:
        _set_text(r, "name", _lookup(strings, r.pop("name_id")))
    runtime = _finish(r, RUNTIME_COLUMNS)

    nvtx = _finish_nvtx_frame(pending["nvtx"](), strings)
    for table, frame in (("CUPTI_ACTIVITY_KIND_KERNEL", kernels), ("CUPTI_ACTIVITY_KIND_RUNTIME", runtime),
                         ("CUPTI_ACTIVITY_KIND_MEMCPY", memcpy), ("CUPTI_ACTIVITY_KIND_MEMSET", memset)):
        _check_durations(path, table, frame)
    return NsysExport(path, kernels, runtime, nvtx, memcpy, memset, meta, tables,
                      runtime_end=launches.last_end if launches is not None else None)


class _Launches:
    """The runtime calls a lean read keeps, chunk by chunk on the worker threads: those whose
    correlationId some kernel, memcpy or memset has, and those that end before they start
    (_check_durations reports them). Workers wait here until open() gives the activity's ids
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
                self.last_end = max(int(end.max()), self.last_end if self.last_end is not None else int(end.max()))
        self._ready.wait()
        ids = self._ids
        if ids is None:
            return np.ones(len(corr), dtype=bool)
        keep = end < start
        if len(ids):
            pos = np.minimum(np.searchsorted(ids, corr), len(ids) - 1)
            keep |= ids[pos] == corr
        return keep


def _check_durations(path: Path, table: str, frame: pd.DataFrame) -> None:
    """A record that ends before it starts is damage, never a negative time: one flipped bit of
    a runtime call's start (byte 305481 of nsys-triton-mean's export) made a launch call end
    16.8 ms before it began and moved the variant's launch CPU time to -816.6 us/iter."""
    bad = np.flatnonzero(frame["duration_ns"].to_numpy() < 0)
    if len(bad):
        row = frame.iloc[bad[0]]
        raise ParseError(path, f"table {table}: {len(bad)} record(s) end before they start "
                               f"(the first: start {row['start']}, end {row['end']})",
                         hint="the export is damaged; run `nsys export` again")


def _string_table(con: sqlite3.Connection) -> np.ndarray:
    """StringIds as an array indexed by id, None where absent (nsys numbers strings densely)."""
    rows = con.execute("SELECT id, value FROM StringIds").fetchall()
    if not rows:
        return np.array([None], dtype=object)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if ids.min() < 0 or ids.max() > 16 * len(rows) + 1_000_000:
        raise sqlite3.DatabaseError("StringIds ids are not the small integers nsys writes")
    table = np.full(int(ids.max()) + 1, None, dtype=object)
    table[ids] = [r[1] for r in rows]
    return table


def _set_text(df: pd.DataFrame, col: str, values: np.ndarray | pd.Series | list) -> None:
    """Store strings as object dtype: pandas 3 would infer its `str` dtype, which turns None into
    NaN and groups 2x slower; object keeps None and the same dtype under pandas 2 and 3."""
    if isinstance(values, list):  # e.g. lists of kernel names: keep them as elements, not a 2-D array
        arr = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            arr[i] = v
        values = arr
    df[col] = pd.Series(np.asarray(values, dtype=object), index=df.index, dtype=object, copy=False)


def _lookup(strings: np.ndarray, ids: pd.Series) -> np.ndarray:
    idx = ids.to_numpy(dtype=np.int64)
    ok = (idx >= 0) & (idx < len(strings))
    if ok.all():  # the usual case, in one pass
        return strings.take(idx)
    out = np.full(len(idx), None, dtype=object)
    out[ok] = strings[idx[ok]]
    return out


def _lookup_categorical(strings: np.ndarray, ids: pd.Series) -> pd.Categorical:
    """_lookup() as a categorical (missing: NaN): its categories are the distinct strings the
    ids name, found by counting the ids (small dense integers), never by hashing the rows."""
    idx = ids.to_numpy(dtype=np.int64)
    ok = (idx >= 0) & (idx < len(strings))
    used = np.flatnonzero(np.bincount(idx[ok], minlength=len(strings)))
    code_of_used, names = pd.factorize(strings[used])  # two ids with one string share a category
    code_of_id = np.full(len(strings), -1, dtype=np.int64)
    code_of_id[used] = code_of_used
    codes = np.full(len(idx), -1, dtype=np.int64)
    codes[ok] = code_of_id[idx[ok]]
    return pd.Categorical.from_codes(codes, categories=pd.Index(np.asarray(names, dtype=object), dtype=object))


def _enum_labels(con: sqlite3.Connection, tables: frozenset[str], table: str,
                 fallback: dict[int, str], ids: pd.Series) -> pd.Series:
    labels = dict(fallback)
    if table in tables:
        labels.update({int(i): str(lab) for i, lab in con.execute(f'SELECT id, label FROM "{table}"')})
    return ids.map(labels).astype(object)


# Integer columns travel as one comma-separated string per column and chunk (SQLite's
# group_concat) parsed by numpy in C: about 3x faster than fetchall(), which builds a Python
# tuple per row (measured on 1e6 kernels). NULLs would be skipped, hence every nullable column
# is wrapped in ifnull() (a NULL in a NOT NULL column, which only damage makes, reads back one
# integer short and is an error). Tasks (every column of a range of rowids: one walk of the
# b-tree decodes each row once for all its columns) run on worker threads, since sqlite3
# releases the GIL while SQLite works, and parse their own strings, so that only integers wait
# for the caller. The tasks' chunks line up because every task walks the table's own b-tree in
# rowid order: NOT INDEXED keeps the planner off any index that a later nsys might add. A task
# reads about _TASK_VALUES values: its strings (about 15 bytes a value, some 30 MB) stay far
# below SQLite's 1e9-byte limit, and few wait in memory beside the integers.
_TASK_VALUES = 1 << 21
_DELTA_COLUMNS = ("start", "globalTid", "globalPid")  # sent as differences from the first row's value
_NULL = -(2**63) + 1  # stands for NULL in nullable integer columns on the way through


class _Reader:
    """One export opened read-only, with worker threads and their own connections."""

    def __init__(self, path: Path):
        self.path = path
        self.uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"  # an export is never rewritten
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self.gates: list = []  # _Launches whose workers wait: opened on close, so none waits forever
        try:
            self.con = self._connect()
            self.tables = frozenset(
                r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ParseError(path, f"cannot open as SQLite ({exc})") from exc

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.uri, uri=True, check_same_thread=False)
        with self._lock:
            self._conns.append(con)
        return con

    def _worker_con(self) -> sqlite3.Connection:
        if not hasattr(self._local, "con"):
            self._local.con = self._connect()
        return self._local.con

    def _fetch(self, table: str, exprs: list[str], first: int, last: int, names: list[str],
               keep: Callable[[dict[str, np.ndarray]], np.ndarray] | None,
               decode: list[tuple[int, int | None, int | None]]) -> tuple[int, list[np.ndarray]]:
        select = ", ".join(f"group_concat({e})" for e in exprs)
        count, *texts = self._worker_con().execute(
            f'SELECT count(*), {select} FROM "{table}" NOT INDEXED WHERE rowid >= ? AND rowid < ?',
            (first, last)).fetchone()
        values = []
        while texts:  # parsed one by one, each string freed once read
            values.append(_parse_ints(texts.pop(0), count, table))
        for i, base, _ in decode:  # the differences back to values: first the bases, then the ends
            if base is not None:
                values[i] += base
        for i, _, relative_to in decode:
            if relative_to is not None:
                values[i] += values[relative_to]
        if keep is not None and count:
            mask = keep(dict(zip(names, values)))
            values = [v[mask] for v in values]
            count = int(mask.sum())
        return count, values

    def submit(self, table: str, spec: Spec,
               keep: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None) -> Callable[[], pd.DataFrame]:
        """Start reading the spec's columns of `table`; the returned call gives the frame
        (empty, with the spec's columns, when the table is missing or has no rows). `keep`,
        given each chunk's integer columns (by our names), says which of its rows to keep."""
        if table not in self.tables:
            return lambda: _empty(spec)
        info = self.con.execute(f'PRAGMA table_info("{table}")').fetchall()
        have = {r[1] for r in info}
        not_null = {r[1] for r in info if r[3]}
        lost = sorted({col for _, col, _, _ in spec} & _REQUIRED - have)
        if lost:
            raise ParseError(self.path, f"table {table} has no column {', '.join(lost)}",
                             hint="the export is damaged (or not from nsys); run `nsys export` again")
        ints = [(name, col, dtype, default) for name, col, dtype, default in spec if dtype != "object"]
        texts = [(name, col) for name, col, dtype, _ in spec if dtype == "object"]
        # min() and max() apart: SQLite finds each at one end of the b-tree, but both in one
        # SELECT walk the whole table (seconds for millions of rows)
        lo = self.con.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
        hi = self.con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
        if lo is None:
            return lambda: _empty(spec)
        fills = {col: _NULL if default is None else int(default) for _, col, _, default in ints}
        value = {col: f'"{col}"' if col in not_null else f'ifnull("{col}", {fills[col]})'
                 for _, col, _, _ in ints if col in have}
        # Times and thread/process ids have 11 to 15 digits: they travel as differences, from the
        # first row's value (start, globalTid, globalPid) or from the row's start (end), in a few
        # digits; turning them into text and back was a fifth of the reading. Decoded in _fetch.
        delta: dict[str, int] = {}
        firsts = [c for c in _DELTA_COLUMNS if c in value and any(col == c and d is not None for _, col, _, d in ints)]
        if firsts:
            first = self.con.execute(f'SELECT {", ".join(value[c] for c in firsts)} FROM "{table}" WHERE rowid = ?',
                                     (lo,)).fetchone()
            delta = {c: int(v) for c, v in zip(firsts, first) if isinstance(v, int)}
        exprs = ["rowid"] if texts else []  # rowids place the sparse text columns
        at = {col: i for i, (_, col, _, _) in enumerate(ints, start=len(exprs))}
        decode: list[tuple[int, int | None, int | None]] = []  # (column, base, column it is relative to)
        for i, (_, col, _, default) in enumerate(ints, start=len(exprs)):
            if col not in have:
                exprs.append(str(_NULL if default is None else int(default)))
            elif col in delta:
                exprs.append(f"{value[col]} - {delta[col]}")
                decode.append((i, delta[col], None))
            elif col == "end" and default is not None and "start" in value:  # a duration: a few digits
                exprs.append(f"{value[col]} - {value['start']}")
                decode.append((i, None, at["start"]))
            else:
                exprs.append(value[col])
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1))
        rows = max(1 << 12, _TASK_VALUES // len(exprs))
        names = (["rowid"] if texts else []) + [name for name, _, _, _ in ints]
        futures = [self._pool.submit(self._fetch, table, exprs, first, first + rows, names, keep, decode)
                   for first in range(lo, hi + 1, rows)]

        def collect() -> pd.DataFrame:
            chunks: list[list[np.ndarray]] = []
            for fut in futures:
                count, parts = fut.result()
                if count:
                    chunks.append(parts)
            if not chunks:
                return _empty(spec)
            cols = []
            for i in range(len(exprs)):  # a column's chunks freed once joined: never two copies of the table
                cols.append(chunks[0][i] if len(chunks) == 1 else np.concatenate([c[i] for c in chunks]))
                for c in chunks:
                    c[i] = None
            rowid = cols.pop(0) if texts else None
            out: dict[str, object] = {}
            for (name, _, dtype, _), values in zip(ints, cols):
                out[name] = values if dtype == "int64" else pd.arrays.IntegerArray(values, values == _NULL)
            for name, col in texts:
                out[name] = pd.Series(self._text_column(table, col, have, rowid), dtype=object, copy=False)
            # copy=False keeps one block per column: consolidating 1e6-row columns costs ~1 s
            return pd.DataFrame(out, columns=[c for c, _, _, _ in spec], copy=False)
        return collect

    def _text_column(self, table: str, col: str, have: set[str], rowid: np.ndarray) -> np.ndarray:
        """A sparse text column (NVTX messages): the non-NULL values, placed by rowid."""
        values = np.full(len(rowid), None, dtype=object)
        if col in have:
            rows = self.con.execute(f'SELECT rowid, "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL').fetchall()
            if rows:
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                values[np.searchsorted(rowid, ids)] = [r[1] for r in rows]
        return values

    def close(self) -> None:
        for gate in self.gates:
            if gate is not None:
                gate.open(None)  # a no-op once opened; else its waiting workers go on, and are not needed
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for con in self._conns:
                con.close()
            self._conns.clear()


def _parse_ints(text: str | None, count: int, table: str) -> np.ndarray:
    """One group_concat string -> int64 array of exactly `count` values."""
    with warnings.catch_warnings():
        # numpy warns (and stops) at anything that is not an integer: make that an error here
        warnings.simplefilter("error")
        try:
            values = np.fromstring(text or "", dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning) as exc:
            raise sqlite3.DatabaseError(f"{table}: a column holds something other than integers ({exc})") from exc
    if len(values) != count:
        raise sqlite3.DatabaseError(f"{table}: a column read back {len(values)} integers, not {count}")
    return values


def _empty(spec: Spec) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, _, t, _ in spec})


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    """Sorted by start (stable): nsys does not promise row order. A no-op when already sorted."""
    start = df["start"].to_numpy()
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        df = df.take(np.argsort(start, kind="stable"))
    return df.reset_index(drop=True)


def _finish(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    df["duration_ns"] = df["end"] - df["start"]
    return df[[c for c in columns if c in df]]  # a lean read has fewer


def _finish_nvtx_frame(n: pd.DataFrame, strings: np.ndarray) -> pd.DataFrame:
    """Resolve NVTX texts and domain names; sort by start."""
    # registered strings (nvtx 0.2.10 registers every message) live in StringIds; others in text
    registered = _lookup(strings, n.pop("text_id").fillna(-1).astype("int64"))
    _set_text(n, "text", np.where(pd.isna(n["text"]).to_numpy(), registered, n["text"].to_numpy(dtype=object)))
    # Domain ids are per process: resolve (process, domainId) through the domain-create events,
    # whose text is the domain's name. Domain 0 is the default domain and has no name.
    pid = n["global_tid"].to_numpy() & ~_TID_BITS
    dom = n["domain_id"].to_numpy()
    created = n["event_type"].to_numpy() == NVTX_DOMAIN_CREATE
    lut: dict[tuple[int, int], str] = {}
    for p, d, name in zip(pid[created].tolist(), dom[created].tolist(), n["text"].to_numpy()[created]):
        lut.setdefault((p, d), name)
    names = np.full(len(n), None, dtype=object)
    if lut:
        keys = pd.MultiIndex.from_arrays([pid, dom])
        found = pd.Series(list(lut.values()), index=pd.MultiIndex.from_tuples(list(lut))).reindex(keys)
        names[:] = found.to_numpy(dtype=object)
        names[pd.isna(names) | (dom == 0)] = None
    _set_text(n, "domain", names)
    return _sorted(n[NVTX_COLUMNS])


# ------------------------------------------------------------------------------------ attribution

def variant_ranges(export: NsysExport, domain: str | None = DEFAULT_DOMAIN,
                   prefix: str = DEFAULT_PREFIX) -> pd.DataFrame:
    """The NVTX ranges that name variants: push/pop (59) and start/end (60) ranges in `domain`
    whose text starts with `prefix`; `variant` is the text after the prefix.

    `domain=None` selects the default (unnamed) domain, as torch.cuda.nvtx and nvtx without a
    domain use; `prefix=""` keeps every range, named by its whole text. A range never closed
    ends at the export's last timestamp, as nsys's own reports do.

    Columns: range_id (0.. in start order), variant, start, end, wall_ns, global_tid, event_type,
    domain.

    Example:
        >>> variant_ranges(ex, domain=None, prefix="")   # every default-domain range
    """
    n = export.nvtx
    sel = n["event_type"].isin(RANGE_EVENT_TYPES)
    sel &= n["domain"].isna() if domain is None else (n["domain"] == domain).fillna(False)
    text = n["text"].fillna("")
    if prefix:
        sel &= text.str.startswith(prefix)
    r = n[sel]
    end = r["end"].fillna(_last_timestamp(export)).astype("int64")
    out = pd.DataFrame({
        "start": r["start"].to_numpy(dtype=np.int64),
        "end": end.to_numpy(dtype=np.int64),
        "global_tid": r["global_tid"].to_numpy(dtype=np.int64),
        "event_type": r["event_type"].to_numpy(dtype=np.int64),
    })
    _set_text(out, "variant", np.array([t[len(prefix):] for t in text[sel]], dtype=object))
    _set_text(out, "domain", r["domain"].to_numpy(dtype=object))
    out["wall_ns"] = out["end"] - out["start"]
    out = out.sort_values("start", kind="stable").reset_index(drop=True)
    out.insert(0, "range_id", np.arange(len(out), dtype=np.int64))
    return out[RANGE_COLUMNS]


def _last_timestamp(export: NsysExport) -> int:
    candidates = [0] if export.runtime_end is None else [export.runtime_end]
    for df in (export.kernels, export.runtime, export.memcpy, export.memset):
        if len(df):
            candidates.append(int(df["end"].max()))
    if len(export.nvtx):
        candidates.append(int(export.nvtx["start"].max()))
        ends = export.nvtx["end"].dropna()
        if len(ends):
            candidates.append(int(ends.max()))
    return max(candidates)


def attribute_kernels(export: NsysExport, *, domain: str | None = DEFAULT_DOMAIN,
                      prefix: str = DEFAULT_PREFIX, ranges: pd.DataFrame | None = None) -> pd.DataFrame:
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

    Example:
        >>> att = attribute_kernels(ex, domain="gprof", prefix="variant:")
        >>> att[att.kind == "kernel"].groupby("variant").duration_ns.sum()
    """
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
        rid[found] = _innermost_containing(ranges["global_tid"].to_numpy(), ranges["start"].to_numpy(),
                                           ranges["end"].to_numpy(), tid[found], lstart)
    inside = rid >= 0
    variant = np.full(len(act), None, dtype=object)
    variant[inside] = ranges["variant"].to_numpy(dtype=object)[rid[inside]]

    act["global_tid"] = tid
    act["launch_start"] = _nullable(lstart, found)
    act["launch_cpu_ns"] = _nullable(rt["duration_ns"].to_numpy()[li], found)
    if "name" in rt:  # a lean read has no runtime call names
        api = np.full(len(act), None, dtype=object)
        api[found] = rt["name"].to_numpy(dtype=object)[li]
        _set_text(act, "launch_api", api)
    _set_text(act, "variant", variant)
    act["range_id"] = rid
    return act[[c for c in ATTRIBUTED_COLUMNS if c in act]]


def _nullable(values: np.ndarray, where: np.ndarray) -> pd.arrays.IntegerArray:
    """An Int64 array holding `values` where `where` is true and NA elsewhere."""
    data = np.zeros(len(where), dtype=np.int64)
    data[where] = values
    return pd.arrays.IntegerArray(data, ~where)


def _activity(export: NsysExport) -> pd.DataFrame:
    """Kernels, memcpys and memsets in one frame with a `kind` column, sorted by start (stable).

    Built column by column and reordered once: concatenating the frames and sorting the result
    copied every column twice, seconds on millions of rows."""
    common = [c for c in ("start", "end", "duration_ns", "device_id", "stream_id", "correlation_id", "global_pid")
              if c in export.kernels]  # a lean read has no device and stream ids
    parts = [("kernel", export.kernels)] + [(kind, f) for kind, f in (("memcpy", export.memcpy),
                                                                       ("memset", export.memset)) if len(f)]
    sizes = [len(f) for _, f in parts]
    k = export.kernels
    # a lean read's names are categorical: they stay so, the copies' and fills' names joining them
    categorical = isinstance(k["name"].dtype, pd.CategoricalDtype)
    text = (lambda c: k[c].array) if categorical else (lambda c: k[c].to_numpy(dtype=object))
    names, demangled = [text("name")], [text("demangled_name")]
    byte_values = [np.zeros(len(k), dtype=np.int64)]
    for kind, f in parts[1:]:
        if kind == "memcpy":  # one name per copy kind, not one string per row
            codes, kinds = pd.factorize(f["copy_kind"], use_na_sentinel=False)
            labels = np.array([f"[CUDA memcpy {c}]" for c in kinds], dtype=object)
        else:
            codes, labels = np.zeros(len(f), dtype=np.int64), np.array(["[CUDA memset]"], dtype=object)
        label = (pd.Categorical.from_codes(codes, categories=pd.Index(labels, dtype=object)) if categorical
                 else labels[codes])
        names.append(label)
        demangled.append(label)
        byte_values.append(f["bytes"].to_numpy(dtype=np.int64))
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
            out[dest[bounds[i]:bounds[i + 1]]] = piece
        return out

    cols: dict[str, object] = {c: arrange([f[c].to_numpy() for _, f in parts]) for c in common}
    if categorical:  # the joined categories, the codes arranged
        joined = [pd.api.types.union_categoricals(x) for x in (names, demangled)]
        cols["name"], cols["demangled_name"] = (
            pd.Categorical.from_codes(arrange([j.codes[bounds[i]:bounds[i + 1]] for i in range(len(parts))]),
                                      categories=j.categories) for j in joined)
    else:
        cols["name"], cols["demangled_name"] = arrange(names), arrange(demangled)
    cols["kind"] = arrange([np.full(n, kind, dtype=object) for (kind, _), n in zip(parts, sizes)])
    no_bytes = [np.full(n, kind == "kernel") for (kind, _), n in zip(parts, sizes)]  # a kernel moves none
    cols["bytes"] = pd.arrays.IntegerArray(arrange(byte_values), arrange(no_bytes))
    texts = ("kind",) if categorical else ("name", "demangled_name", "kind")
    act = pd.DataFrame({c: v for c, v in cols.items() if c not in texts}, copy=False)
    for c in texts:
        _set_text(act, c, cols[c])
    return act[[*common, "name", "demangled_name", "kind", "bytes"]]


def _match_launches(pid: np.ndarray, corr: np.ndarray, runtime: pd.DataFrame) -> np.ndarray:
    """Row index in `runtime` of the call with the same (process, correlationId); -1 if none."""
    out = np.full(len(pid), -1, dtype=np.int64)
    if not len(pid) or not len(runtime):
        return out
    r_corr = runtime["correlation_id"].to_numpy()
    r_pid = runtime["global_tid"].to_numpy() & ~_TID_BITS
    # one int64 key per (process, correlationId): a small process code in the high bits
    a_code, r_code = _shared_codes(pid, r_pid)
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


def _shared_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Small int64 codes of two arrays of ids (processes, threads) in one numbering: pd.factorize
    of both, or all zeros without hashing millions of ids when both hold one and the same id."""
    if len(a) and len(b) and a.min() == a.max() == b.min() == b.max():
        return np.zeros(len(a), dtype=np.int64), np.zeros(len(b), dtype=np.int64)
    codes, _ = pd.factorize(np.concatenate([a, b]))
    return codes[: len(a)].astype(np.int64), codes[len(a):].astype(np.int64)


def _innermost_containing(r_tid: np.ndarray, r_start: np.ndarray, r_end: np.ndarray,
                          q_tid: np.ndarray, q_t: np.ndarray) -> np.ndarray:
    """For each query (thread, time), the index of the latest-starting range on that thread
    with start <= t <= end, or -1.

    Per thread: a binary search finds the last range starting at or before t. If it ended
    before t, only a range enclosing it can still contain t, so the search walks up a parent
    chain (each range's latest-starting enclosing range, from one stack pass). That pass runs
    only on threads whose ranges overlap; variants one after another need just the search.
    """
    out = np.full(len(q_t), -1, dtype=np.int64)
    rc, qc = _shared_codes(r_tid, q_tid)
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


# ------------------------------------------------------------------------------------- summaries

def summarize(attributed: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """One row per variant (in order of first range), then one row for activity outside every
    variant range (variant None).

    Columns:
      ranges, range_wall_ns      how many range instances, and their summed wall time
      kernels                    unique kernel names (short), in launch order
      launches                   kernel launches; gpu_time_{total,median,min,max}_ns over them
      launch_cpu_total_ns        summed duration of the CUDA API calls that launched them
      memcpy_*/memset_*          count and summed GPU time of copies and memsets
      gpu_busy_ns                per range instance, the union of its kernels' execution
                                 intervals (overlapping streams count once), summed
      gpu_span_ns                per range instance, max(range end, last kernel end) - range
                                 start: from the variant's first call until both CPU and GPU
                                 were done with it, summed over instances with kernels
      gpu_busy_fraction          gpu_busy_ns / gpu_span_ns: 1.0 means the GPU ran this variant's
                                 kernels without a gap from the moment the range opened; launch
                                 overhead, syncs and host work lower it. NaN without kernels.
    The outside row has ranges 0 and NaN for the range-based columns.

    Example:
        >>> summarize(attribute_kernels(ex), variant_ranges(ex))
    """
    variants, n_var, rid, inside, range_code, code, kind = _variant_codes(attributed, ranges)
    dur = attributed["duration_ns"].to_numpy(dtype=np.int64)
    groups = np.arange(n_var + 1)

    is_k = kind == "kernel"
    kc = code[is_k]
    k = pd.DataFrame({"code": kc, "dur": dur[is_k],
                      "cpu": attributed["launch_cpu_ns"].to_numpy(dtype=np.int64, na_value=0)[is_k]})
    agg = k.groupby("code").agg(launches=("dur", "size"), total=("dur", "sum"), median=("dur", "median"),
                                min=("dur", "min"), max=("dur", "max"), cpu=("cpu", "sum")).reindex(groups)

    out = pd.DataFrame(index=pd.RangeIndex(n_var + 1))
    _set_text(out, "variant", np.array(variants + [None], dtype=object))
    _range_columns(out, attributed, ranges, variants, is_k & inside, rid, range_code)
    _set_text(out, "kernels", _kernel_names(attributed, is_k, kc, n_var))
    out["launches"] = agg["launches"].fillna(0).to_numpy(dtype=np.int64)
    out["gpu_time_total_ns"] = agg["total"].fillna(0).to_numpy(dtype=np.int64)
    for col in ("median", "min", "max"):
        out[f"gpu_time_{col}_ns"] = agg[col].to_numpy(dtype=np.float64)
    out["launch_cpu_total_ns"] = agg["cpu"].fillna(0).to_numpy(dtype=np.int64)
    for name in ("memcpy", "memset"):
        m = kind == name
        c = pd.Series(dur[m]).groupby(code[m]).agg(["size", "sum"]).reindex(groups).fillna(0)
        out[f"{name}_count"] = c["size"].to_numpy(dtype=np.int64)
        out[f"{name}_time_total_ns"] = c["sum"].to_numpy(dtype=np.int64)
    return out[SUMMARY_COLUMNS]


def range_times(attributed: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """summarize()'s columns variant, ranges, range_wall_ns, gpu_busy_ns, gpu_span_ns and
    gpu_busy_fraction, the same numbers from the same code, without the statistics over every
    launch (a median, names in launch order) that a report of millions of kernels does not use.

    Example:
        >>> range_times(attribute_kernels(ex), variant_ranges(ex))
    """
    variants, n_var, rid, inside, range_code, code, kind = _variant_codes(attributed, ranges)
    out = pd.DataFrame(index=pd.RangeIndex(n_var + 1))
    _set_text(out, "variant", np.array(variants + [None], dtype=object))
    _range_columns(out, attributed, ranges, variants, (kind == "kernel") & inside, rid, range_code)
    return out


def _range_columns(out: pd.DataFrame, attributed: pd.DataFrame, ranges: pd.DataFrame, variants: list,
                   kernels_inside: np.ndarray, rid: np.ndarray, range_code: np.ndarray) -> None:
    """Add ranges, range_wall_ns, gpu_busy_ns, gpu_span_ns, gpu_busy_fraction to `out` (one
    row per variant, then outside): summarize()'s and range_times()'s."""
    rw = ranges.groupby("variant", sort=False)["wall_ns"].agg(["size", "sum"]).reindex(variants)
    out["ranges"] = np.append(rw["size"].to_numpy(dtype=np.int64), 0)
    out["range_wall_ns"] = np.append(rw["sum"].to_numpy(dtype=np.float64), np.nan)
    busy, span = _busy_per_variant(attributed, kernels_inside, rid, range_code, ranges, len(variants))
    out["gpu_busy_ns"] = busy
    out["gpu_span_ns"] = span
    with np.errstate(invalid="ignore", divide="ignore"):
        out["gpu_busy_fraction"] = np.where(span > 0, busy / span, np.nan)


def _variant_codes(attributed: pd.DataFrame, ranges: pd.DataFrame):
    """summarize()'s groups: (variants in order of their first range, their number n_var,
    range_id per row, inside, variant code per range, variant code per row (n_var: outside),
    kind per row); ValueError when `ranges` is not the frame the rows were attributed to."""
    # variants in order of their first range; code n_var stands for "outside"
    first = ranges.groupby("variant", sort=False)["start"].min().sort_values(kind="stable")
    variants = list(first.index)
    n_var = len(variants)
    var_code = {v: i for i, v in enumerate(variants)}
    # attributed["range_id"] indexes the rows of variant_ranges(); summarize's `ranges` must be
    # that frame (same domain and prefix), which the variant names below double-check
    ids = ranges["range_id"].to_numpy(dtype=np.int64)
    rid = attributed["range_id"].to_numpy(dtype=np.int64)
    inside = rid >= 0
    if len(ids) and (ids.min() < 0 or not np.array_equal(ids, np.arange(len(ids)))):
        raise ValueError("summarize() needs the whole frame variant_ranges() returned, not a subset")
    if inside.any() and rid.max() >= len(ids):
        raise ValueError("attributed rows point at ranges that are not in `ranges`: pass the "
                         "variant_ranges() of the same export, domain and prefix")
    range_code = np.array([var_code[v] for v in ranges["variant"]], dtype=np.int64)
    if inside.any() and not np.array_equal(
            attributed["variant"].to_numpy(dtype=object)[inside],
            ranges["variant"].to_numpy(dtype=object)[rid[inside]]):
        raise ValueError("attributed variants differ from `ranges`: pass the variant_ranges() of the "
                         "same export, domain and prefix")
    code = np.full(len(rid), n_var, dtype=np.int64)
    code[inside] = range_code[rid[inside]]
    return variants, n_var, rid, inside, range_code, code, attributed["kind"].to_numpy(dtype=object)


def _kernel_names(attributed: pd.DataFrame, is_k: np.ndarray, kc: np.ndarray, n_var: int) -> list[list[str]]:
    """Per variant code, the unique kernel names in the order of their first launch."""
    names = [[] for _ in range(n_var + 1)]
    if not is_k.any():
        return names
    name_codes, uniq = pd.factorize(attributed["name"][is_k])  # a lean read's categorical: on its codes
    # launch order; launches whose call is unknown sort last, by GPU start
    launch = attributed["launch_start"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)[is_k]
    order = np.lexsort((attributed["start"].to_numpy()[is_k], launch))
    pair = kc[order] * (len(uniq) + 1) + name_codes[order]
    _, first = np.unique(pair, return_index=True)
    for i in np.sort(first):
        names[kc[order][i]].append(uniq[name_codes[order][i]])
    return names


def _busy_per_variant(attributed: pd.DataFrame, mask: np.ndarray, rid: np.ndarray, range_code: np.ndarray,
                      ranges: pd.DataFrame, n_var: int) -> tuple[np.ndarray, np.ndarray]:
    """Per variant code: summed per-instance kernel busy time (interval union) and span; NaN
    for variants without kernels and for the outside row."""
    busy = np.full(n_var + 1, np.nan)
    span = np.full(n_var + 1, np.nan)
    if not mask.any():
        return busy, span
    r = rid[mask]
    start = attributed["start"].to_numpy()[mask]
    end = attributed["end"].to_numpy()[mask]
    order = np.lexsort((start, r))
    r, start, end = r[order], start[order], end[order]
    first = np.ones(len(r), dtype=bool)
    first[1:] = r[1:] != r[:-1]
    # union length of sorted intervals: each adds what lies beyond the running max end of the
    # earlier ones of its range instance
    run_max = pd.Series(end).groupby(np.cumsum(first)).cummax().to_numpy()
    prev = np.empty_like(run_max)
    prev[1:] = run_max[:-1]
    prev[first] = np.iinfo(np.int64).min
    add = np.maximum(0, end - np.maximum(start, prev))
    seg = np.flatnonzero(first)
    inst = r[seg]  # the range instances that have kernels
    inst_busy = np.add.reduceat(add, seg)
    inst_last = np.maximum.reduceat(end, seg)
    r_start = ranges["start"].to_numpy()[inst]
    inst_span = np.maximum(ranges["end"].to_numpy()[inst], inst_last) - r_start
    codes = range_code[inst]
    has = np.bincount(codes, minlength=n_var + 1) > 0
    busy[has] = np.bincount(codes, weights=inst_busy, minlength=n_var + 1)[has]
    span[has] = np.bincount(codes, weights=inst_span, minlength=n_var + 1)[has]
    return busy, span


# ------------------------------------------------------------------------------------ diagnostics

def missing_ranges_hint(export: NsysExport, *, domain: str | None = DEFAULT_DOMAIN,
                        prefix: str = DEFAULT_PREFIX) -> str | None:
    """Why the export has no variant ranges, or None when it has some.

    The case that matters most: the domain was created (eventType 75) but not one range was
    recorded in it. That is what nsys 2023.4.4 makes of ranges from the `nvtx` package 0.2.13
    and newer; nvtx 0.2.10 is recorded.

    Example:
        >>> msg = missing_ranges_hint(read_export("square_nsys_nvtx0217.sqlite"))
        >>> "nvtx==0.2.10" in msg
        True
    """
    if len(variant_ranges(export, domain, prefix)):
        return None
    n = export.nvtx
    where = f"NVTX domain {domain!r}" if domain is not None else "the default NVTX domain"
    if n.empty:
        return ("the export has no NVTX events at all: profile with NVTX tracing "
                "(`nsys profile -t nvtx,...`)")
    is_range = n["event_type"].isin(RANGE_EVENT_TYPES)
    in_domain = n["domain"].isna() if domain is None else (n["domain"] == domain).fillna(False)
    created = (n["event_type"] == NVTX_DOMAIN_CREATE) & (n["text"] == domain)
    if domain is not None and created.any() and not (is_range & in_domain).any():
        return (f"{where} was created but no range was recorded in it ({int(is_range.sum())} "
                f"ranges in other domains): {_NVTX_TOO_NEW_HINT}")
    if (is_range & in_domain).any():
        seen = sorted(set(n.loc[is_range & in_domain, "text"].dropna()))[:5]
        return f"no range in {where} starts with {prefix!r}; seen: {seen}"
    if domain is not None and not created.any():
        return (f"{where} never appears in the export (no domain-create event): the workload did "
                f"not open `nvtx.annotate({prefix}<name>, domain={domain!r})` ranges, or NVTX was "
                f"not traced")
    return f"no NVTX range in {where}"


def require_variant_ranges(export: NsysExport, *, domain: str | None = DEFAULT_DOMAIN,
                           prefix: str = DEFAULT_PREFIX) -> pd.DataFrame:
    """variant_ranges(), or ParseError (with missing_ranges_hint as its hint) when there are none."""
    ranges = variant_ranges(export, domain, prefix)
    if ranges.empty:
        raise ParseError(export.path, "no variant ranges",
                         hint=missing_ranges_hint(export, domain=domain, prefix=prefix))
    return ranges
