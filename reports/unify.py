"""Turning each backend's parsed output into rows of the unified frame."""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from reports.schema import ALL_KERNELS, concat, make_frame


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
        rows.add(v["name"], "iterations", wman.get("iters", 0), "count")


__all__ = ["RowMaker", "variant_facts", "concat"]
