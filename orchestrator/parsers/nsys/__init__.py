"""The Nsight Systems reader: an SQLite export (`nsys export --type sqlite`) -> an `NsysExport`
(kernels, runtime calls, memcpys, memsets, NVTX ranges), each GPU activity attributed to the
variant whose NVTX range launched it, per-variant summaries, the operators table and a Chrome
trace. Pure: never runs nsys, never imports torch.

The other modules import these names from here; the package's modules are its stages:
export (reads the file; a lean read's LaunchFilter), table_reader and arrow (the threaded column
reader), schema (tables, columns, `NsysExport`), strings (ids -> text), ranges (variant ranges and
why there are none), attribution (activity -> variant), summary (per-variant times), ops (the
operators table) and chrome (the Chrome trace). ops and chrome load on first use: most reads need
neither.

Example:
    >>> from orchestrator.parsers import nsys
    >>> ex = nsys.read_export("run.sqlite")
    >>> att = nsys.attribute_kernels(ex)                # domain "gprof", prefix "variant:"
    >>> nsys.summarize(att, nsys.variant_ranges(ex))[["variant", "launches", "gpu_time_total_ns"]]
"""

from __future__ import annotations

import importlib
from typing import Any

from orchestrator.parsers.nsys.attribution import (
    ATTRIBUTIONS,
    FROM_OTHER_THREAD,
    OTHER_THREAD,
    SEVERAL_THREADS,
    THREAD,
    WINDOW,
    attribute_kernels,
)
from orchestrator.parsers.nsys.export import read_export
from orchestrator.parsers.nsys.ranges import (
    last_timestamp,
    missing_ranges_hint,
    require_variant_ranges,
    variant_ranges,
)
from orchestrator.parsers.nsys.schema import (
    ATTRIBUTED_COLUMNS,
    DEFAULT_DOMAIN,
    DEFAULT_PREFIX,
    KERNEL_COLUMNS,
    MEMCPY_COLUMNS,
    MEMSET_COLUMNS,
    NVTX_COLUMNS,
    NVTX_DOMAIN_CREATE,
    NVTX_DOMAIN_DESTROY,
    NVTX_MARK,
    NVTX_PUSHPOP_RANGE,
    NVTX_STARTEND_RANGE,
    RANGE_COLUMNS,
    RANGE_EVENT_TYPES,
    RUNTIME_COLUMNS,
    NsysExport,
)
from orchestrator.parsers.nsys.summary import instance_busy, range_times, summarize

# loaded on first use (module __getattr__): the name -> the module of this package that holds it
_LAZY = {"operators": "ops", "to_chrome_trace": "chrome", "write_chrome_trace": "chrome"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ATTRIBUTED_COLUMNS",
    "ATTRIBUTIONS",
    "FROM_OTHER_THREAD",
    "OTHER_THREAD",
    "SEVERAL_THREADS",
    "THREAD",
    "WINDOW",
    "DEFAULT_DOMAIN",
    "DEFAULT_PREFIX",
    "KERNEL_COLUMNS",
    "MEMCPY_COLUMNS",
    "MEMSET_COLUMNS",
    "NVTX_COLUMNS",
    "NVTX_DOMAIN_CREATE",
    "NVTX_DOMAIN_DESTROY",
    "NVTX_MARK",
    "NVTX_PUSHPOP_RANGE",
    "NVTX_STARTEND_RANGE",
    "RANGE_COLUMNS",
    "RANGE_EVENT_TYPES",
    "RUNTIME_COLUMNS",
    "NsysExport",
    "attribute_kernels",
    "instance_busy",
    "last_timestamp",
    "missing_ranges_hint",
    "operators",
    "range_times",
    "read_export",
    "require_variant_ranges",
    "summarize",
    "to_chrome_trace",
    "variant_ranges",
    "write_chrome_trace",
]
