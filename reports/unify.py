"""Turning each backend's parsed output into rows of the unified frame."""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from reports.schema import ALL_KERNELS, concat, make_frame


# GPU activity kind -> the metric of each instance's duration
ACTIVITY_METRIC = {"kernel": "kernel_time_ns", "memset": "memset_time_ns", "memcpy": "memcpy_time_ns"}


class RowMaker:
    """Rows that share run, backend and workload."""

    def __init__(self, run: str, backend: str, workload: str):
        self.base = {"run": run, "backend": backend, "workload": workload}
        self.rows: list[dict[str, Any]] = []

    def add(self, variant: str, metric: str, value: float, unit: str, kernel: str = ALL_KERNELS) -> None:
        self.rows.append({**self.base, "variant": variant, "kernel": kernel, "metric": metric,
                          "value": value, "unit": unit})

    def samples(self, variant: str, metric: str, values: Iterable[float], unit: str,
                kernel: str = ALL_KERNELS) -> None:
        for v in values:
            self.add(variant, metric, v, unit, kernel)

    def frame(self) -> pd.DataFrame:
        return make_frame(self.rows)


def variant_facts(rows: RowMaker, wman: dict[str, Any]) -> None:
    """What the workload itself says of each variant that ran: bytes it must move, iterations."""
    for v in wman.get("variants", []):
        if v.get("status") != "ok":
            continue
        rows.add(v["name"], "bytes_moved", v["bytes_moved"], "bytes")
        rows.add(v["name"], "iterations", wman.get("iters") or v.get("iters") or v.get("samples") or 0, "count")


def activity_rows(rows: RowMaker, variant: str, act: pd.DataFrame, name_col: str) -> None:
    """Each GPU activity's duration (ns) under its kind's metric, named by `name_col`, plus
    the launching calls' CPU time per name where the frame has `launch_cpu_ns`."""
    for (kind, name), g in act.groupby(["kind", name_col], sort=False):
        metric = ACTIVITY_METRIC[kind]
        rows.samples(variant, metric, g["duration_ns"], "ns", kernel=name)
        if "launch_cpu_ns" in g:
            rows.add(variant, "launch_cpu_time_ns", float(g["launch_cpu_ns"].astype("float64").sum()), "ns",
                     kernel=name)


def idle_gap_rows(rows: RowMaker, variant: str, act: pd.DataFrame, start: str, end: str,
                  instance: str | None = None) -> None:
    """Each idle gap of the GPU between consecutive GPU activities of one range instance
    (`instance` column; all one instance without it), as `gpu_idle_gap_ns` samples: the busy
    intervals are merged first, so overlapping activities leave no gap. A variant whose work
    never left the GPU idle gets one 0 (it was measured). See reports/why.py."""
    if act.empty:
        return
    groups = act.groupby(instance, sort=False) if instance and instance in act else [(None, act)]
    gaps: list[float] = []
    for _, g in groups:
        iv = g[[start, end]].astype("float64").sort_values(start, kind="stable").to_numpy()
        reach = iv[0, 1]
        for s, e in iv[1:]:
            if s > reach:
                gaps.append(float(s - reach))
            reach = max(reach, e)
    rows.samples(variant, "gpu_idle_gap_ns", gaps or [0.0], "ns")


__all__ = ["ACTIVITY_METRIC", "RowMaker", "activity_rows", "idle_gap_rows", "variant_facts", "concat"]
