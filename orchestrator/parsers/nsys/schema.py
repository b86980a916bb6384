"""What the nsys parser reads from an export and what it gives back, declared once: nsys's
tables and columns (each with our name, dtype and default), the frames' columns, the lean
read's subset, the labels of nsys's enums, and `NsysExport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

# by default a reader looks for the ranges gprof-orch's runner writes
from workloads.nvtx_ranges import NVTX_DOMAIN as DEFAULT_DOMAIN  # noqa: F401
from workloads.nvtx_ranges import RANGE_PREFIX as DEFAULT_PREFIX  # noqa: F401

# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE in the export).
NVTX_MARK = 34
NVTX_PUSHPOP_RANGE = 59
NVTX_STARTEND_RANGE = 60
NVTX_DOMAIN_CREATE = 75
NVTX_DOMAIN_DESTROY = 76
RANGE_EVENT_TYPES = (NVTX_PUSHPOP_RANGE, NVTX_STARTEND_RANGE)

# globalTid = [hw 8 bits][vm 8 bits][pid 24 bits][tid 24 bits]; a kernel's globalPid is the
# globalTid of its process with the tid bits cleared.
TID_BITS = np.int64(0xFFFFFF)

# (our column, nsys's column, dtype, default). A NULL, or a column this schema version lacks,
# reads as the default; the nullable ids default to -1 so the frames stay plain int64, which the
# 1e6-row attribution relies on for speed. A default of None keeps NULL (nullable dtypes only).
Spec = list[tuple[str, str, str, object]]
# ...but not the columns times and attribution rest on: every nsys export since 2021 has them,
# so a table without one is damaged (one flipped byte of the schema renames a column, and a
# memset table without `correlationId` would silently leave every memset outside the variants).
REQUIRED_COLUMNS = {
    "start",
    "end",
    "correlationId",
    "globalPid",
    "globalTid",
    "eventType",
    "nameId",
    "shortName",
    "demangledName",
}
# every GPU activity table (kernels, memcpy, memset) starts with these
_GPU_ACTIVITY_SPEC: Spec = [
    ("start", "start", "int64", -1),
    ("end", "end", "int64", -1),
    ("device_id", "deviceId", "int64", -1),
    ("stream_id", "streamId", "int64", -1),
    ("correlation_id", "correlationId", "int64", -1),
    ("global_pid", "globalPid", "int64", -1),
]
KERNEL_SPEC: Spec = _GPU_ACTIVITY_SPEC + [
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
RUNTIME_SPEC: Spec = [
    ("start", "start", "int64", -1),
    ("end", "end", "int64", -1),
    ("global_tid", "globalTid", "int64", -1),
    ("correlation_id", "correlationId", "int64", -1),
    ("name_id", "nameId", "int64", -1),
]
MEMCPY_SPEC: Spec = _GPU_ACTIVITY_SPEC + [
    ("bytes", "bytes", "int64", 0),
    ("copy_kind_id", "copyKind", "int64", 0),
]
MEMSET_SPEC: Spec = _GPU_ACTIVITY_SPEC + [
    ("bytes", "bytes", "int64", 0),
    ("value", "value", "int64", 0),
    ("mem_kind_id", "memKind", "int64", 7),
]
NVTX_SPEC: Spec = [
    ("start", "start", "int64", -1),
    ("end", "end", "Int64", None),  # NULL for marks and domain events, and a range never closed
    ("event_type", "eventType", "int64", -1),
    ("text", "text", "object", None),
    ("text_id", "textId", "Int64", None),
    ("global_tid", "globalTid", "int64", -1),
    ("domain_id", "domainId", "int64", 0),
]

KERNEL_COLUMNS = [
    "start",
    "end",
    "duration_ns",
    "device_id",
    "stream_id",
    "correlation_id",
    "global_pid",
    "name",
    "demangled_name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "static_shared_mem_bytes",
    "dynamic_shared_mem_bytes",
]
RUNTIME_COLUMNS = ["start", "end", "duration_ns", "global_tid", "correlation_id", "name"]
MEMCPY_COLUMNS = [
    "start",
    "end",
    "duration_ns",
    "device_id",
    "stream_id",
    "correlation_id",
    "global_pid",
    "bytes",
    "copy_kind",
]
MEMSET_COLUMNS = [
    "start",
    "end",
    "duration_ns",
    "device_id",
    "stream_id",
    "correlation_id",
    "global_pid",
    "bytes",
    "value",
    "mem_kind",
]
NVTX_COLUMNS = ["start", "end", "event_type", "text", "global_tid", "domain_id", "domain"]
# read_export(lean=True): per table, the spec columns (our names) attribution and the reports use
LEAN_COLUMNS = {
    "kernels": {"start", "end", "correlation_id", "global_pid", "name_id", "demangled_id"},
    "runtime": {"start", "end", "global_tid", "correlation_id"},
    "memcpy": {"start", "end", "correlation_id", "global_pid", "bytes", "copy_kind_id"},
    "memset": {"start", "end", "correlation_id", "global_pid", "bytes"},
}
RANGE_COLUMNS = ["range_id", "variant", "start", "end", "wall_ns", "global_tid", "event_type", "domain"]
ATTRIBUTED_COLUMNS = [
    "kind",
    "name",
    "demangled_name",
    "start",
    "end",
    "duration_ns",
    "device_id",
    "stream_id",
    "correlation_id",
    "global_pid",
    "global_tid",
    "launch_start",
    "launch_cpu_ns",
    "launch_api",
    "bytes",
    "variant",
    "range_id",
]
SUMMARY_COLUMNS = [
    "variant",
    "ranges",
    "range_wall_ns",
    "kernels",
    "launches",
    "gpu_time_total_ns",
    "gpu_time_median_ns",
    "gpu_time_min_ns",
    "gpu_time_max_ns",
    "launch_cpu_total_ns",
    "memcpy_count",
    "memcpy_time_total_ns",
    "memset_count",
    "memset_time_total_ns",
    "gpu_busy_ns",
    "gpu_span_ns",
    "gpu_busy_fraction",
]

# Fallbacks for exports without the ENUM tables (labels as nsys 2023.4.4 writes them).
COPY_KINDS = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}


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
    tables: frozenset[str] = frozenset()  # every table name in the file
    # a lean read's `runtime` keeps only the calls that can have launched GPU work (see
    # read_export); this is the latest end of all of them, for a range never closed
    runtime_end: int | None = None


def set_text(df: pd.DataFrame, col: str, values: np.ndarray | pd.Series | list) -> None:
    """Store strings as object dtype: pandas 3 would infer its `str` dtype, which turns None into
    NaN and groups 2x slower; object keeps None and the same dtype under pandas 2 and 3."""
    if isinstance(values, list):  # e.g. lists of kernel names: keep them as elements, not a 2-D array
        arr = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            arr[i] = v
        values = arr
    df[col] = pd.Series(np.asarray(values, dtype=object), index=df.index, dtype=object, copy=False)
