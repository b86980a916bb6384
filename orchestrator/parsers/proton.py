"""Proton's hatchet JSON (Triton's own profiler, `triton.profiler`) -> per-variant kernels.

Pure: reads a file, returns DataFrames; never imports triton or torch.

The file `proton.start(name, data="tree")` writes at `proton.finalize()` is `<name>.hatchet`
(Triton 3.6: `path + "." + "hatchet"` in proton's Data::dump), one JSON array of two objects:

    [
      {"frame": {"name": "ROOT", "type": "function"},
       "metrics": {"count": 0, "time (ns)": 0, "flops32": 0, "bytes": 0},   # hints: every
       "children": [                                                        # inclusive metric
         {"frame": {"name": "variant:fast", "type": "function"}, "metrics": {},
          "children": [
            {"frame": {"name": "iter:0", "type": "function"},
             "metrics": {"cpu_time (ns)": 41234},          # a cpu_timed_scope's host time
             "children": [
               {"frame": {"name": "fast_mean_kernel", "type": "function"},
                "metrics": {"time (ns)": 5120, "count": 1, "device_id": "0", "device_type": "CUDA",
                            "flops32": 1000000, "bytes": 4000000},   # from launch_metadata
                "children": []}]}]}]},
      {"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000,
                      "memory_clock_rate": 2619000, "bus_width": 6144}}}
    ]

The tree is proton's "shadow" context: scopes (`proton.scope`, `enter_scope`, and in Triton 3.6
the global-domain `nvtxRangePushA` ranges) are frames, and a frame with the kernel metrics
`time (ns)` (the sum of its launches' CUPTI durations) and `count` (how many launches) is a kernel.
Launches of the same kernel under the same scope path are one frame: proton keeps sums, no
single launch. A Triton kernel launched with `hook="triton"` is named by its launch metadata
(the kernel's name unless its `launch_metadata` function returns another) and carries the
`flops<8|16|32|64>`, `flops` and `bytes` that function declares (summed over the frame's
launches); any other kernel is named by CUPTI, mangled, and demangled here. Frames named
`__proton_launch_metadata` hold the work of computing launch metadata and are dropped, as
proton's own viewer drops them (triton/profiler/viewer.py `remove_frames`).

Which frames are variants and iterations is this project's convention
(orchestrator/backends/proton.py puts them there): the first frame named `prefix` + name on a
kernel's path is its variant, and the first frame named `iter:<n>` below that its iteration.

Example:
    >>> prof = read_profile("run/proton.hatchet")
    >>> prof.kernels.groupby(["variant", "iteration"])["time_ns"].sum()
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers import compressed
from reports.schema import (
    ITERATIONS_IN_REPORT,
    NO_ACTIVITY,
    NO_RANGE,
    NOT_IN_REPORT,
    OUTSIDE,
    RAN,
    UNEVEN_LAUNCHES,
)
from reports.unify import RowMaker
from workloads.nvtx_ranges import RANGE_PREFIX

HATCHET = "proton.hatchet"
TIME, COUNT = "time (ns)", "count"
CPU_TIME = "cpu_time (ns)"  # proton.cpu_timed_scope's metric ("(exc)" may follow)
# what Triton's LaunchHook copies from a kernel's launch metadata (triton/profiler/hooks/launch.py)
DECLARED = ("flops", "flops8", "flops16", "flops32", "flops64", "bytes")
METADATA_FRAME = "__proton_launch_metadata"  # triton/profiler/hooks/launch.py COMPUTE_METADATA_SCOPE_NAME
ITER_PREFIX = "iter:"
KERNEL_COLUMNS = ["variant", "iteration", "kernel", "launches", "time_ns", *DECLARED, "path"]


@dataclass
class ProtonProfile:
    """One hatchet file, read.

    kernels: one row per kernel frame: variant (None outside every variant), iteration (-1
    outside every iteration scope), kernel (demangled), launches, time_ns (the sum over its
    launches), the declared flops* and bytes (NaN where the launch metadata declares none), path
    (the frame names from below ROOT to the kernel, joined by " / "). In the file's order.
    iterations: one row per iteration scope: variant, iteration, cpu_time_ns (NaN without one).
    variants: every variant whose frame is in the tree, in the file's order.
    devices: the second object of the file (device type -> id -> arch, num_sms, clocks, ...).
    metadata_launches: launches dropped with the `__proton_launch_metadata` frames.
    notes: what the reader left out and why (a negative declared count)."""

    path: Path
    kernels: pd.DataFrame
    iterations: pd.DataFrame
    variants: list[str] = field(default_factory=list)
    devices: dict = field(default_factory=dict)
    metadata_launches: int = 0
    notes: list[str] = field(default_factory=list)


def read_profile(
    path: str | Path, prefix: str = RANGE_PREFIX, iter_prefix: str = ITER_PREFIX
) -> ProtonProfile:
    """Read a proton hatchet file (`.xz` / `.gz` too). Raises ParseError naming the file when it
    is missing, not JSON, or not the shape above (a frame without a name, a kernel whose time or
    count is missing, negative or not a number)."""
    path = Path(path)
    raw = compressed.read_bytes(path)
    try:
        data = json.loads(raw)
    except ValueError as exc:  # cut short while proton wrote it, or not JSON at all
        raise ParseError(
            path,
            f"not JSON ({exc})",
            hint="proton writes the file when the workload ends: a run killed before "
            "proton.finalize() leaves none or half of one",
        ) from None
    if isinstance(data, dict) and "frame" in data:
        root, devices = data, {}
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        root, devices = data[0], data[1] if len(data) > 1 else {}
        if not isinstance(devices, dict):
            raise ParseError(
                path, f"its second element (the devices) is {type(devices).__name__}, not an object"
            )
    else:
        raise ParseError(
            path, "not a proton hatchet profile: expected a JSON array whose first element is the ROOT frame"
        )
    return _walk(path, root, devices, prefix, iter_prefix)


def _walk(path: Path, root: dict, devices: dict, prefix: str, iter_prefix: str) -> ProtonProfile:
    iter_re = re.compile(re.escape(iter_prefix) + r"(\d+)$")
    kernels: list[dict] = []
    iterations: dict[tuple[str, int], float] = {}
    variants: dict[str, None] = {}
    notes: list[str] = []
    dropped = 0
    _frame_name(path, root, ())  # the root must be a frame too; its own metrics are hints
    # (node, names above it below ROOT, variant, iteration); children pushed reversed: file order
    stack: list[tuple[dict, tuple[str, ...], str | None, int]] = [
        (child, (), None, -1) for child in reversed(_children(path, root, ("ROOT",)))
    ]
    while stack:
        node, above, variant, iteration = stack.pop()
        name = _frame_name(path, node, above)
        here = (*above, name)
        metrics = node.get("metrics", {})
        if not isinstance(metrics, dict):
            raise ParseError(path, f"frame {' / '.join(here)!r} has metrics of type {type(metrics).__name__}")
        if name == METADATA_FRAME:
            dropped += _launches_below(path, node, here)
            continue
        if variant is None and name.startswith(prefix):
            variant = name[len(prefix) :]
            variants[variant] = None
        elif variant is not None and iteration < 0 and (m := iter_re.match(name)):
            iteration = int(m.group(1))
            iterations[(variant, iteration)] = _cpu_time(path, metrics, here)
        if TIME in metrics or COUNT in metrics:
            kernels.append(_kernel(path, name, metrics, here, variant, iteration, notes))
        stack.extend((child, here, variant, iteration) for child in reversed(_children(path, node, here)))
    kframe = pd.DataFrame(kernels, columns=KERNEL_COLUMNS).astype(
        {"iteration": "int64", "launches": "int64", "time_ns": "float64", **{d: "float64" for d in DECLARED}}
    )
    iframe = pd.DataFrame(
        [(v, i, t) for (v, i), t in iterations.items()], columns=["variant", "iteration", "cpu_time_ns"]
    ).astype({"iteration": "int64", "cpu_time_ns": "float64"})
    return ProtonProfile(path, kframe, iframe, list(variants), devices, dropped, notes)


def _frame_name(path: Path, node, above: tuple[str, ...]) -> str:
    where = " / ".join(above) or "the top"
    if not isinstance(node, dict):
        raise ParseError(path, f"a child of {where} is {type(node).__name__}, not a frame object")
    frame = node.get("frame")
    if not isinstance(frame, dict) or not isinstance(frame.get("name"), str):
        raise ParseError(path, f'a frame under {where} has no "frame": {{"name": ...}}')
    return frame["name"]


def _children(path: Path, node: dict, here: tuple[str, ...]) -> list:
    children = node.get("children", [])
    if not isinstance(children, list):
        raise ParseError(path, f"frame {' / '.join(here)!r} has children of type {type(children).__name__}")
    return children


def _number(path: Path, value, what: str, here: tuple[str, ...]) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ParseError(path, f"kernel frame {' / '.join(here)!r}: {what} is {value!r}, not a number >= 0")
    return float(value)


def _kernel(
    path: Path,
    name: str,
    metrics: dict,
    here: tuple[str, ...],
    variant: str | None,
    iteration: int,
    notes: list[str],
) -> dict:
    for key in (TIME, COUNT):
        if key not in metrics:
            raise ParseError(path, f"kernel frame {' / '.join(here)!r} has no {key!r} metric")
    count = _number(path, metrics[COUNT], COUNT, here)
    if count != int(count) or count < 1:
        raise ParseError(
            path,
            f"kernel frame {' / '.join(here)!r}: count is {metrics[COUNT]!r}, not a "
            "whole number of launches >= 1",
        )
    row = {
        "variant": variant,
        "iteration": iteration,
        "kernel": demangle(name),
        "launches": int(count),
        "time_ns": _number(path, metrics[TIME], TIME, here),
        "path": " / ".join(here),
    }
    for key in DECLARED:
        value = metrics.get(key)
        if value is None:
            row[key] = math.nan
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ParseError(path, f"kernel frame {' / '.join(here)!r}: {key} is {value!r}, not a number")
        elif value < 0:
            # a launch_metadata that overflowed (proton's viewer warns of the same): not a count
            notes.append(
                f"kernel {row['kernel']} declares {key} {value:g} (an overflow in its launch_metadata?): "
                "left out"
            )
            row[key] = math.nan
        else:
            row[key] = float(value)
    return row


def _cpu_time(path: Path, metrics: dict, here: tuple[str, ...]) -> float:
    for key, value in metrics.items():
        if key.startswith(CPU_TIME):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParseError(path, f"scope {' / '.join(here)!r}: {key} is {value!r}, not a number")
            return float(value)
    return math.nan


def _launches_below(path: Path, node: dict, here: tuple[str, ...]) -> int:
    """Launches in `node`'s subtree (the metadata frames the reader drops: counted, not lost)."""
    total, stack = 0, [(node, here)]
    while stack:
        n, at = stack.pop()
        m = n.get("metrics") if isinstance(n, dict) else None
        if (
            isinstance(m, dict)
            and isinstance(m.get(COUNT), (int, float))
            and not isinstance(m.get(COUNT), bool)
        ):
            total += int(m[COUNT])
        for child in _children(path, n, at) if isinstance(n, dict) else []:
            stack.append((child, (*at, _frame_name(path, child, at))))
    return total


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """A C++ kernel name as c++filt (and torch.profiler) spell it, through the C++ runtime's
    __cxa_demangle; `name` as it is where it is not a mangled name (a Triton kernel's) or no C++
    runtime can be loaded. Pure: no process, no file."""
    if not name.startswith("_Z"):
        return name
    fn = _cxa_demangle()
    if fn is None:
        return name
    demangle_fn, free = fn
    status = ctypes.c_int(0)
    out = demangle_fn(name.encode(), None, None, ctypes.byref(status))
    if not out:
        return name
    try:
        return ctypes.string_at(out).decode(errors="replace") if status.value == 0 else name
    finally:
        free(out)


@functools.lru_cache(maxsize=1)
def _cxa_demangle():
    for lib in (
        ctypes.util.find_library("stdc++"),
        ctypes.util.find_library("c++abi"),
        ctypes.util.find_library("c++"),
    ):
        if not lib:
            continue
        try:
            cxx = ctypes.CDLL(lib)
            fn = cxx.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_int),
        ]
        free = ctypes.CDLL(None).free
        free.argtypes = [ctypes.c_void_p]
        return fn, free
    return None


# -- the unified rows (reports/schema.py) of a read profile, for the proton backend --------------


def frame_from_profile(prof: ProtonProfile, rows: RowMaker, wman: dict[str, Any]) -> pd.DataFrame:
    """The unified rows of a read proton profile (ProtonProfile, read_profile's).

    Per variant that ran ok: `time_ns` per iteration (the sum of its kernels' durations in that
    iteration's scope) and `cpu_time_ns` per iteration where the scopes carry it. A variant whose
    profile holds another number of iterations than it ran gets ITERATIONS_IN_REPORT, one whose
    iterations launched different numbers of kernels (or launched outside an iteration) gets
    UNEVEN_LAUNCHES, instead of samples; one without a frame or a kernel, NOT_IN_REPORT. A
    variant stopped part-way (interrupted, failed) keeps the kernels its scope caught, no times.
    Every kernel: one `kernel_time_ns` sample per launch, and its declared FLOPs and bytes."""
    import numpy as np

    k, it = prof.kernels, prof.iterations
    iters = int(wman.get("iters") or 0)
    for v in wman.get("variants", []):
        if v.get("status") not in RAN:
            continue
        variant = v["name"]
        mine = k[k["variant"] == variant]
        if mine.empty:
            # no kernel while other variants' frames are there: its range held no GPU work (a scope
            # that recorded none may have no frame at all); no variant frame anywhere: the scopes
            # themselves are missing (the bridge did not mark the runner's ranges)
            lost = NO_ACTIVITY if prof.variants else NO_RANGE
            rows.add(variant, NOT_IN_REPORT, lost, "flag")
            continue
        seen = sorted(
            set(it.loc[it["variant"] == variant, "iteration"])
            | set(mine.loc[mine["iteration"] >= 0, "iteration"])
        )
        broken = False
        if iters and len(seen) != iters:
            rows.add(variant, ITERATIONS_IN_REPORT, float(len(seen)), "count")
            broken = True
        else:
            per_iter = (
                mine[mine["iteration"] >= 0]
                .groupby("iteration")["launches"]
                .sum()
                .reindex(seen, fill_value=0)
            )
            if (mine["iteration"] < 0).any() or per_iter.nunique() > 1:
                rows.add(variant, UNEVEN_LAUNCHES, float(mine["launches"].sum()), "count")
                broken = True
        if not broken:
            gpu = mine.groupby("iteration")["time_ns"].sum().reindex(seen, fill_value=0.0)
            rows.samples(variant, "time_ns", gpu.to_numpy(dtype=np.float64), "ns")
            cpu = it[it["variant"] == variant].set_index("iteration")["cpu_time_ns"].reindex(seen)
            if len(cpu) and cpu.notna().all():
                rows.samples(variant, "cpu_time_ns", cpu.to_numpy(dtype=np.float64), "ns")
        kernel_rows(rows, variant, mine)
    # variants stopped part-way (interrupted, failed): the GPU work their scope caught, no times
    for v in wman.get("variants", []):
        if v.get("status") in ("interrupted", "failed"):
            kernel_rows(rows, v["name"], k[k["variant"] == v["name"]])
    kernel_rows(rows, OUTSIDE, k[k["variant"].isna()])
    return rows.frame()


def kernel_rows(rows: RowMaker, variant: str, kernels: pd.DataFrame) -> None:
    """Per kernel (in order of first appearance): one `kernel_time_ns` sample per launch, and the
    launch metadata's declared FLOPs and bytes summed. Proton keeps one sum per kernel and scope
    path: a frame of n launches gives n samples of its mean (exact for the usual one launch per
    kernel and iteration; the launch count and the total are always exact)."""
    import numpy as np

    for name, g in kernels.groupby("kernel", sort=False):
        n = g["launches"].to_numpy(dtype=np.int64)
        per_launch = np.repeat(g["time_ns"].to_numpy(dtype=np.float64) / n, n)
        rows.samples(variant, "kernel_time_ns", per_launch, "ns", kernel=name)
        for d in DECLARED:
            declared = g[d].dropna()
            if len(declared):
                rows.add(
                    variant,
                    f"declared_{d}",
                    float(declared.sum()),
                    "bytes" if d == "bytes" else "count",
                    kernel=name,
                )
