"""--each-gpu: the one point once on every worker's GPU; each child folder's name, and the table
that flags a GPU slower than the others."""

from __future__ import annotations

import re
from typing import Any

# a GPU slower than the median of the GPUs' medians by more than this is flagged
SLOW_PCT = 3.0


def worker_label(address: str, name: str) -> str:
    """A child folder's name for a worker: its name where it has one of its own (gpu0, w0; Dask
    keeps names unique in a cluster), else its address; letters, digits and . _ - only."""
    own = name if name and name != address else address.split("://", 1)[-1]
    if own.isdigit():  # LocalCluster numbers its workers
        own = f"worker{own}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", own).strip("-") or "worker"


def each_gpu_table(runs: dict[str, Any]):
    """One block of rows per worker's GPU: `run` (the worker's child folder), gpu, gpu_uuid, variant,
    status, median, IQR, GB/s, % peak BW; `change_pct`, each variant's median against the median of
    every GPU's median for that variant, and `verdict` "slow" (`slow` True) where a GPU is more than
    SLOW_PCT % slower. Rows of variants not measured get no ratio. (The columns are those the
    renderers already show: `run` as for a child's rows, `change %`, `verdict`.)"""
    import numpy as np
    import pandas as pd

    rows = []
    for name, run in runs.items():
        place = run.manifest.get("placement") or {}
        gpu = place.get("gpu_name") or ("cpu" if run.workload.get("device") == "cpu" else None)
        for r in run.table.to_dict("records"):
            rows.append(
                {
                    "run": name,
                    "gpu": gpu,
                    "gpu_uuid": place.get("gpu_uuid"),
                    "variant": r["variant"],
                    "status": r.get("status"),
                    "time_median_us": r.get("time_median_us"),
                    "time_iqr_us": r.get("time_iqr_us"),
                    "achieved_gb_s": r.get("achieved_gb_s"),
                    "pct_of_peak_bw": r.get("pct_of_peak_bw"),
                }
            )
    table = pd.DataFrame(
        rows,
        columns=[
            "run",
            "gpu",
            "gpu_uuid",
            "variant",
            "status",
            "time_median_us",
            "time_iqr_us",
            "achieved_gb_s",
            "pct_of_peak_bw",
        ],
    )
    measured = table["status"].isin(("ok", "noisy")) & table["time_median_us"].notna()
    medians = table[measured].groupby("variant")["time_median_us"].median()
    ref = table["variant"].map(medians).astype(float)
    table["change_pct"] = np.where(measured, (table["time_median_us"].astype(float) / ref - 1) * 100, np.nan)
    table["slow"] = table["change_pct"] > SLOW_PCT
    table["verdict"] = np.where(table["slow"], "slow", "")
    return table


def slow_lines(table) -> list[str]:
    """The footer lines of an each-gpu table: each worker's GPU, then which are slow, or that none is."""
    gpus = table.drop_duplicates("run")
    lines = [
        "GPUs: "
        + ", ".join(
            f"{r.run} = {r.gpu or '?'}" + (f" ({r.gpu_uuid})" if r.gpu_uuid else "")
            for r in gpus.itertuples()
        )
    ]
    slow = table[table["slow"]]
    if slow.empty:
        whose = "the one GPU's" if len(gpus) == 1 else f"the {len(gpus)} GPUs'"
        return lines + [
            f"no GPU more than {SLOW_PCT:g}% slower than the median of {whose} medians "
            f"(change %, per variant)"
        ]
    return lines + [
        f"slow: {r.run} ({r.gpu or '?'}) {r.variant} {r.change_pct:+.1f}% against the median of the "
        f"GPUs' medians (more than {SLOW_PCT:g}%)"
        for r in slow.itertuples()
    ]
