"""The one schema of gprof-orch: a long-form frame, one row per measured value.

Units are normalised when a parser builds rows: times in ns, sizes in bytes, rates in
bytes/s, fractions as "fraction" (0..1), percentages of a peak as "pct" (0..100, as ncu
reports them), counts as "count".
"""
from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

SCHEMA_VERSION = 1

COLUMNS = ["run", "backend", "workload", "variant", "kernel", "metric", "value", "unit"]

# kernel value for rows that describe a whole variant, not one kernel
ALL_KERNELS = "*"
# variant value for GPU work outside every variant's range (input creation, warm-up, checks)
OUTSIDE = "(outside variants)"
# metric of a variant the workload ran but the profiler's report does not hold; its value says
# what is missing: its range, or (on a GPU) any GPU activity in its range
NOT_IN_REPORT = "not_in_report"
NO_RANGE, NO_ACTIVITY = 1, 2
# metric of a variant whose launches (value: how many) do not split into its iterations: the
# report lost some (or holds extra), so it has no per-iteration time; the table marks it incomplete
UNEVEN_LAUNCHES = "uneven_launches"
# metric of a variant whose report holds (value) another number of iterations than it ran
ITERATIONS_IN_REPORT = "iterations_in_report"
# metric of a captured range (exec/import) in which its own thread launched no GPU work, so its
# time is the range's wall time; value: the kernel launches other threads made inside its span
WALL_TIME_ONLY = "wall_time_only"


def make_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """Build a unified frame from dict rows with the COLUMNS keys (missing -> "")."""
    df = pd.DataFrame.from_records(list(rows), columns=COLUMNS)
    if df.empty:
        return empty_frame()
    for col in COLUMNS:
        if col != "value":
            df[col] = df[col].fillna("").astype(str)
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype("float64")
    return df


def empty_frame() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype="float64" if c == "value" else "object") for c in COLUMNS})
    return df


def concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if f is not None and not f.empty]
    if not frames:
        return empty_frame()
    return pd.concat(frames, ignore_index=True)[COLUMNS]
