"""Turning each backend's parsed output into rows of the unified frame."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from reports.schema import (
    ALL_KERNELS,
    COLUMNS,
    IDLE_PER_ITER,
    IDLE_TYPICAL_PER_ITER,
    LAUNCH_CPU_PER_ITER,
    SAMPLED,
    concat,
    empty_frame,
)

# GPU activity kind -> the metric of each instance's duration
ACTIVITY_METRIC = {"kernel": "kernel_time_ns", "memset": "memset_time_ns", "memcpy": "memcpy_time_ns"}


# pandas 3 groups a categorical by its observed values only (pandas 2 by every category, so
# `size()` would list other variants' kernels at 0): categorical text columns from pandas 3 on
_CATEGORICAL = int(pd.__version__.split(".")[0]) >= 3


class RowMaker:
    """Rows that share run, backend and workload.

    Kept as blocks (variant, kernel, metric, unit and the values that share them) and turned
    into columns once: a 3,000,000-kernel nsys run makes about 9,000,000 rows, which as one
    dict each took minutes and several GiB (docs/scale-cpu.md). The text columns come out
    categorical under pandas 3 (object under pandas 2, as make_frame gives there): one small
    code a row instead of a string, and comparisons and groupings on codes. The values and the
    row order are make_frame's."""

    def __init__(self, run: str, backend: str, workload: str):
        self.base = {"run": run, "backend": backend, "workload": workload}
        self._keys: list[tuple[Any, Any, Any, Any]] = []  # (variant, kernel, metric, unit) per block
        self._values: list[Any] = []

    def add(self, variant: str, metric: str, value: float, unit: str, kernel: str = ALL_KERNELS) -> None:
        """One row: `value` of `metric` in `unit` for the variant (and kernel; ALL_KERNELS by default)."""
        self._keys.append((variant, kernel, metric, unit))
        self._values.append([value])

    def samples(
        self, variant: str, metric: str, values: Iterable[float], unit: str, kernel: str = ALL_KERNELS
    ) -> None:
        """One row per value (raw samples: one per iteration or launch), all of one metric, unit,
        variant and kernel."""
        self._keys.append((variant, kernel, metric, unit))
        self._values.append(
            _floats(values if isinstance(values, (np.ndarray, pd.Series, list)) else list(values))
        )

    def frame(self) -> pd.DataFrame:
        """The rows added so far as one unified long-form frame, in the order they were added
        (text columns categorical under pandas 3); an empty frame with the schema's columns when none."""
        values = [v if isinstance(v, np.ndarray) else _floats(v) for v in self._values]
        lengths = np.array([len(v) for v in values], dtype=np.int64)
        n = int(lengths.sum())
        if n == 0:
            return empty_frame()
        cols: dict[str, Any] = {}
        for c in ("run", "backend", "workload"):
            cols[c] = _text_column([_text(self.base[c])], np.array([n], dtype=np.int64))
        for i, c in enumerate(("variant", "kernel", "metric", "unit")):
            cols[c] = _text_column([_text(k[i]) for k in self._keys], lengths)
        cols["value"] = np.concatenate(values)
        return pd.DataFrame(cols, columns=COLUMNS, copy=False)


def _text(x: Any) -> str:
    """make_frame's fillna("").astype(str) of one key."""
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return ""
    return str(x)


def _text_column(texts: list[str], lengths: np.ndarray) -> pd.Categorical | np.ndarray:
    """texts[i] repeated lengths[i] times: categorical (categories sorted, so that grouping with
    sort=True orders as strings do) or, under pandas 2, object."""
    uniq = sorted(set(texts))
    code_of = {t: i for i, t in enumerate(uniq)}
    dtype = np.int8 if len(uniq) < 2**7 else np.int16 if len(uniq) < 2**15 else np.int32
    codes = np.repeat(np.array([code_of[t] for t in texts], dtype=dtype), lengths)
    if _CATEGORICAL:
        return pd.Categorical.from_codes(codes, categories=pd.Index(uniq, dtype=object))
    return np.array(uniq, dtype=object)[codes]


def _floats(values: Any) -> np.ndarray:
    """make_frame's pd.to_numeric(errors="coerce") as float64; numeric arrays directly."""
    if (
        isinstance(values, (np.ndarray, pd.Series))
        and isinstance(values.dtype, np.dtype)
        and values.dtype.kind in "iuf"
    ):
        return np.asarray(values, dtype=np.float64)
    if isinstance(values, list) and all(type(v) in (float, int) for v in values):
        return np.array(values, dtype=np.float64)
    return pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").astype("float64").to_numpy()


# workload.json's `memory` of a variant (workloads/call_memory.py) -> (metric, unit)
CALL_MEMORY = [
    ("peak_bytes", "call_peak_bytes", "bytes"),
    ("allocated_bytes", "call_allocated_bytes", "bytes"),
    ("allocations", "call_allocations", "count"),
    ("result_bytes", "call_result_bytes", "bytes"),
]


def variant_facts(rows: RowMaker, wman: dict[str, Any]) -> None:
    """What the workload itself says of each variant that ran: bytes it must move, iterations,
    and the memory of one extra call where the runner measured it."""
    for v in wman.get("variants", []):
        if v.get("status") not in SAMPLED:
            continue
        rows.add(v["name"], "bytes_moved", v["bytes_moved"], "bytes")
        if isinstance(v.get("flops"), (int, float)) and not isinstance(v["flops"], bool):
            rows.add(v["name"], "flops", v["flops"], "count")  # one call's, as the workload declares
        if isinstance(v.get("counted_flops"), (int, float)) and not isinstance(v["counted_flops"], bool):
            rows.add(v["name"], "counted_flops", v["counted_flops"], "count")  # one call's, as PyTorch counts
        rows.add(
            v["name"], "iterations", wman.get("iters") or v.get("iters") or v.get("samples") or 0, "count"
        )
        mem = v.get("memory") if isinstance(v.get("memory"), dict) else {}
        for key, metric, unit in CALL_MEMORY:
            if isinstance(mem.get(key), (int, float)) and not isinstance(mem.get(key), bool):
                rows.add(v["name"], metric, mem[key], unit)
        if mem.get("reserved_new"):
            rows.add(v["name"], "call_reserved_new", 1.0, "flag")


def activity_rows(rows: RowMaker, variant: str, act: pd.DataFrame, name_col: str) -> None:
    """Each GPU activity's duration (ns) under its kind's metric, named by `name_col`, plus
    the launching calls' CPU time per name where the frame has `launch_cpu_ns`. Groups in order
    of first appearance, each group's rows in frame order (groupby(sort=False)'s), found with
    integer codes: a groupby that builds a frame per group took most of a 1e6-launch report."""
    if act.empty:
        return
    kind_code, kinds = pd.factorize(act["kind"])
    name_code, names = pd.factorize(act[name_col])
    ok = (kind_code >= 0) & (name_code >= 0)  # groupby drops a missing key
    pair, _ = pd.factorize((kind_code.astype(np.int64) * (len(names) + 1) + name_code)[ok])
    rows_ok = np.flatnonzero(ok)
    order = rows_ok[np.argsort(pair, kind="stable")]
    bounds = np.searchsorted(np.sort(pair, kind="stable"), np.arange(pair.max(initial=-1) + 2))
    dur = act["duration_ns"].to_numpy()
    cpu = act["launch_cpu_ns"].astype("float64") if "launch_cpu_ns" in act else None
    for g in range(len(bounds) - 1):
        idx = order[bounds[g] : bounds[g + 1]]
        kind, name = kinds[kind_code[idx[0]]], names[name_code[idx[0]]]
        rows.samples(variant, ACTIVITY_METRIC[kind], dur[idx], "ns", kernel=name)
        if cpu is not None:
            rows.add(variant, "launch_cpu_time_ns", float(cpu.iloc[idx].sum()), "ns", kernel=name)


def idle_gap_rows(
    rows: RowMaker,
    variant: str,
    act: pd.DataFrame,
    start: str,
    end: str,
    instance: str | None = None,
    iters_per_instance: int | None = None,
) -> None:
    """Each idle gap of the GPU between consecutive GPU activities of one range instance
    (`instance` column; all one instance without it), as `gpu_idle_gap_ns` samples: the busy
    intervals are merged first, so overlapping activities leave no gap. A variant whose work
    never left the GPU idle gets one 0 (it was measured). With `iters_per_instance` (a capture's
    range instances, each of that many iterations), also one IDLE_PER_ITER and one
    IDLE_TYPICAL_PER_ITER sample per instance (reports/schema.py), in order of first appearance:
    the gaps alone cannot say which instance they were in. See reports/why.py."""
    if act.empty:
        return
    gaps, owner, n = _idle_gaps(act, start, end, instance)
    rows.samples(variant, "gpu_idle_gap_ns", gaps if len(gaps) else [0.0], "ns")
    if iters_per_instance:
        k = float(iters_per_instance)
        count = np.bincount(owner, minlength=n)
        total = np.bincount(owner, weights=gaps, minlength=n)
        median = pd.Series(gaps).groupby(owner).median().reindex(range(n), fill_value=0.0).to_numpy()
        rows.samples(variant, IDLE_PER_ITER, total / k, "ns")
        rows.samples(variant, IDLE_TYPICAL_PER_ITER, median * count / k, "ns")


def launch_cpu_rows(
    rows: RowMaker, variant: str, act: pd.DataFrame, instance: str, iters_per_instance: int
) -> None:
    """The CPU time of the CUDA API calls that launched each range instance's GPU activity
    (`launch_cpu_ns`, summed; a call not found counts 0, as in activity_rows), over the instance's
    iterations: one LAUNCH_CPU_PER_ITER sample per instance, in order of first appearance."""
    if act.empty or "launch_cpu_ns" not in act or instance not in act:
        return
    inst, uniq = pd.factorize(act[instance])
    keep = inst >= 0  # groupby drops a missing instance
    cpu = np.nan_to_num(act["launch_cpu_ns"].astype("float64").to_numpy()[keep])
    per = np.bincount(inst[keep], weights=cpu, minlength=len(uniq))
    rows.samples(variant, LAUNCH_CPU_PER_ITER, per / float(iters_per_instance), "ns")


def _idle_gaps(
    act: pd.DataFrame, start: str, end: str, instance: str | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """idle_gap_rows's gaps, the instance of each (0.., in order of first appearance) and the
    number of instances."""
    iv = act[[start, end]].astype("float64").to_numpy()
    if instance and instance in act:
        inst, uniq = pd.factorize(act[instance])  # in order of first appearance, as groupby(sort=False)
        n = len(uniq)
    else:
        inst, n = np.zeros(len(act), dtype=np.int64), 1
    if np.isnan(iv).any():  # a missing time: the loop's own comparisons decide
        gaps, owner = _idle_gaps_loop(act, start, end, instance)
        return np.asarray(gaps, dtype=np.float64), np.asarray(owner, dtype=np.int64), n
    keep = np.flatnonzero(inst >= 0)  # groupby drops a missing instance
    order = keep[np.lexsort((iv[keep, 0], inst[keep]))]  # by instance, then start; stable
    s, e, g = iv[order, 0], iv[order, 1], inst[order]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    # how far the GPU was busy before each activity: the running max end of the earlier
    # ones of its instance
    reach = pd.Series(e).groupby(np.cumsum(first)).cummax().to_numpy()
    before = np.empty_like(reach)
    before[1:] = reach[:-1]
    gap = ~first & (s > before)
    return s[gap] - before[gap], g[gap].astype(np.int64), n


def _idle_gaps_loop(
    act: pd.DataFrame, start: str, end: str, instance: str | None
) -> tuple[list[float], list[int]]:
    """_idle_gaps's gaps and their instances one interval at a time (for frames with a missing
    time)."""
    groups = act.groupby(instance, sort=False) if instance and instance in act else [(None, act)]
    gaps: list[float] = []
    owner: list[int] = []
    for i, (_, g) in enumerate(groups):
        iv = g[[start, end]].astype("float64").sort_values(start, kind="stable").to_numpy()
        reach = iv[0, 1]
        for s, e in iv[1:]:
            if s > reach:
                gaps.append(float(s - reach))
                owner.append(i)
            reach = max(reach, e)
    return gaps, owner


__all__ = [
    "ACTIVITY_METRIC",
    "RowMaker",
    "activity_rows",
    "idle_gap_rows",
    "launch_cpu_rows",
    "variant_facts",
    "concat",
]
