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

This module reads the file (and keeps, in a lean read, only the runtime calls that launched
something: LaunchFilter); the other stages live beside it in this package: schema (tables,
columns, `NsysExport`), table_reader and arrow (the threaded column reader), strings (ids ->
text), ranges (variant ranges and why there are none), attribution and summary;
orchestrator.parsers.range_nesting finds the innermost containing range.

Example:
    >>> ex = read_export("run.sqlite")
    >>> att = attribute_kernels(ex)                # domain "gprof", prefix "variant:"
    >>> summarize(att, variant_ranges(ex))[["variant", "launches", "gpu_time_total_ns"]]
"""

from __future__ import annotations

import sqlite3
import struct
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers import compressed
from orchestrator.parsers.nsys.schema import (
    COPY_KINDS,
    KERNEL_COLUMNS,
    KERNEL_SPEC,
    LEAN_COLUMNS,
    MEM_KINDS,
    MEMCPY_COLUMNS,
    MEMCPY_SPEC,
    MEMSET_COLUMNS,
    MEMSET_SPEC,
    NVTX_SPEC,
    RUNTIME_COLUMNS,
    RUNTIME_SPEC,
    NsysExport,
    set_text,
)
from orchestrator.parsers.nsys.strings import (
    enum_labels,
    lookup,
    lookup_categorical,
    resolve_nvtx_text,
    string_table,
)
from orchestrator.parsers.nsys.table_reader import TableReader


class LaunchFilter:
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
        reader = TableReader(path)
        try:
            return _read(reader, lean)
        finally:
            reader.close()
    except sqlite3.DatabaseError as exc:
        raise ParseError(
            path,
            f"SQLite error while reading ({exc})",
            hint="the export may be truncated or corrupt; run `nsys export` again",
        ) from exc
    except UnicodeDecodeError as exc:  # nsys writes UTF-8: a string that is not is damage (fuzz: byte 284553)
        raise ParseError(
            path,
            f"a string in the export is not valid UTF-8 ({exc})",
            hint="the export is damaged; run `nsys export` again",
        ) from exc


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
        raise ParseError(
            path,
            "not an SQLite file",
            hint="an SQLite export is what `nsys export --type sqlite` writes (gprof-orch import "
            "takes the .nsys-rep itself too, named .nsys-rep)",
        )
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages = struct.unpack(">II", header[24:32])
    valid_for = struct.unpack(">I", header[92:96])[0]
    # the in-header page count is only trustworthy when its version matches the change counter
    if n_pages and valid_for == change_counter and size < page_size * n_pages:
        raise ParseError(
            path,
            f"truncated: the SQLite header promises {page_size * n_pages} bytes, the file has {size}",
            hint="the copy or the export did not finish; export the .nsys-rep again",
        )


def _read(reader: TableReader, lean: bool = False) -> NsysExport:
    con, tables, path = reader.con, reader.tables, reader.path
    if "StringIds" not in tables:
        raise ParseError(path, "no StringIds table: not an Nsight Systems SQLite export")
    # queue the big tables first so their SQL runs on worker threads while we build frames; the
    # activity tables before the runtime calls, which a lean read filters by their ids (the
    # workers take tasks in order, so the activity is read before any runtime task waits for it)
    launches = LaunchFilter() if lean else None
    reader.gates.append(launches)
    pending = {
        key: reader.submit(
            table,
            [c for c in spec if not lean or key not in LEAN_COLUMNS or c[0] in LEAN_COLUMNS[key]],
            keep=launches if key == "runtime" else None,
        )
        for key, table, spec in (
            ("kernels", "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_SPEC),
            ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY_SPEC),
            ("memset", "CUPTI_ACTIVITY_KIND_MEMSET", MEMSET_SPEC),
            ("runtime", "CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_SPEC),
            ("nvtx", "NVTX_EVENTS", NVTX_SPEC),
        )
    }
    strings = string_table(con)
    meta = {}
    if "META_DATA_EXPORT" in tables:
        meta = {str(k): str(v) for k, v in con.execute("SELECT name, value FROM META_DATA_EXPORT")}

    # sort while the columns are still integers: taking object (string) columns costs more
    k = _sorted(pending["kernels"]())
    if lean:  # a few names for millions of kernels: one code each, the names once
        k["name"] = lookup_categorical(strings, k.pop("name_id"))
        k["demangled_name"] = lookup_categorical(strings, k.pop("demangled_id"))
    else:
        set_text(k, "name", lookup(strings, k.pop("name_id")))
        set_text(k, "demangled_name", lookup(strings, k.pop("demangled_id")))
    kernels = _finish(k, KERNEL_COLUMNS)

    m = _sorted(pending["memcpy"]())
    set_text(
        m, "copy_kind", enum_labels(con, tables, "ENUM_CUDA_MEMCPY_OPER", COPY_KINDS, m.pop("copy_kind_id"))
    )
    memcpy = _finish(m, MEMCPY_COLUMNS)

    s = _sorted(pending["memset"]())
    if "mem_kind_id" in s:
        set_text(
            s, "mem_kind", enum_labels(con, tables, "ENUM_CUDA_MEM_KIND", MEM_KINDS, s.pop("mem_kind_id"))
        )
    memset = _finish(s, MEMSET_COLUMNS)

    if launches is not None:
        # sorted, duplicates left in: np.unique hashes, 20x slower than a sort on 4e6 ids here
        launches.open(
            np.sort(np.concatenate([f["correlation_id"].to_numpy() for f in (kernels, memcpy, memset)]))
        )
    r = _sorted(pending["runtime"]())
    if "name_id" in r:
        set_text(r, "name", lookup(strings, r.pop("name_id")))
    runtime = _finish(r, RUNTIME_COLUMNS)

    nvtx = _sorted(resolve_nvtx_text(pending["nvtx"](), strings))
    for table, frame in (
        ("CUPTI_ACTIVITY_KIND_KERNEL", kernels),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", runtime),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", memcpy),
        ("CUPTI_ACTIVITY_KIND_MEMSET", memset),
    ):
        _check_durations(path, table, frame)
    return NsysExport(
        path,
        kernels,
        runtime,
        nvtx,
        memcpy,
        memset,
        meta,
        tables,
        runtime_end=launches.last_end if launches is not None else None,
    )


def _check_durations(path: Path, table: str, frame: pd.DataFrame) -> None:
    """A record that ends before it starts is damage, never a negative time: one flipped bit of
    a runtime call's start (byte 305481 of nsys-triton-mean's export) made a launch call end
    16.8 ms before it began and moved the variant's launch CPU time to -816.6 us/iter."""
    bad = np.flatnonzero(frame["duration_ns"].to_numpy() < 0)
    if len(bad):
        row = frame.iloc[bad[0]]
        raise ParseError(
            path,
            f"table {table}: {len(bad)} record(s) end before they start "
            f"(the first: start {row['start']}, end {row['end']})",
            hint="the export is damaged; run `nsys export` again",
        )


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    """Sorted by start (stable): nsys does not promise row order. A no-op when already sorted."""
    start = df["start"].to_numpy()
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        df = df.take(np.argsort(start, kind="stable"))
    return df.reset_index(drop=True)


def _finish(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    df["duration_ns"] = df["end"] - df["start"]
    return df[[c for c in columns if c in df]]  # a lean read has fewer
