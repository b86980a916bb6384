"""An nsys export of a run made with `--ops` -> the operator table of torch-trace's reader
(orchestrator/parsers/torch_ops.py), from the NVTX ranges torch.autograd.profiler.emit_nvtx
pushed (the default domain: one per `iter` and per aten operator, "aten::pow, seq = 3, ...")
inside each variant's own range (domain `gprof`), and the CUDA runtime calls that launched each
kernel (by correlation id, as nsys attributes kernels to variants).

Pure: reads an export (read_export), returns a DataFrame."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.parsers import torch_ops
from orchestrator.parsers import torch_trace as tt
from orchestrator.parsers.nsys.ranges import variant_ranges
from workloads.nvtx_ranges import RANGE_PREFIX

ITER_LABEL = "iter"


def op_name(text: str) -> str:
    """An emit_nvtx range's operator: its text up to the first ", " (the sequence number, op id
    and shapes follow)."""
    return text.split(", ", 1)[0]


def operators(export, ranges: pd.DataFrame, attributed: pd.DataFrame) -> pd.DataFrame:
    """torch_ops.aggregate()'s table for the variant ranges `ranges` (ranges.variant_ranges)
    and the GPU activities `attributed` (attribution.attribute_kernels); empty when the
    export has no `iter` range inside a variant (a run without --ops)."""
    nv = variant_ranges(export, domain=None, prefix="")
    # without the nvtx package the runner's own ranges are in the default domain too
    nv = nv[~nv["variant"].astype(str).str.startswith(RANGE_PREFIX)]
    nv = pd.DataFrame(
        {
            "cat": "cpu_op",
            "name": [op_name(str(t)) for t in nv["variant"]],
            "tid": nv["global_tid"].to_numpy(dtype=np.int64),
            "start_ns": nv["start"].to_numpy(dtype=np.int64),
            "end_ns": nv["end"].to_numpy(dtype=np.int64),
            "correlation": -1,
        }
    )
    var = pd.DataFrame(
        {
            "tid": ranges["global_tid"],
            "start_ns": ranges["start"],
            "end_ns": ranges["end"],
            "variant": ranges["variant"],
        }
    )
    it = nv[nv["name"] == ITER_LABEL]
    it = it.assign(variant=tt._containing(it.assign(t=it["start_ns"]), var, "variant")).dropna(
        subset=["variant"]
    )
    if it.empty:
        return pd.DataFrame(columns=torch_ops.COLUMNS)
    it = it.sort_values("start_ns", kind="stable")
    it = it.assign(iteration=it.groupby("variant").cumcount())[
        ["tid", "start_ns", "end_ns", "variant", "iteration"]
    ]
    rt = export.runtime
    calls = pd.DataFrame(
        {
            "cat": "cuda_runtime",
            "name": "",
            "tid": rt["global_tid"].to_numpy(dtype=np.int64),
            "start_ns": rt["start"].to_numpy(dtype=np.int64),
            "end_ns": rt["end"].to_numpy(dtype=np.int64),
            "correlation": rt["correlation_id"].to_numpy(dtype=np.int64),
        }
    )
    ops = torch_ops.nest(pd.concat([nv[nv["name"] != ITER_LABEL], calls], ignore_index=True))
    return torch_ops.aggregate(ops, it, _in_iterations(attributed, it))


def _in_iterations(attributed: pd.DataFrame, iters: pd.DataFrame) -> pd.DataFrame:
    """The GPU activities whose launch call lies inside an iteration, in torch_ops' columns."""
    a = attributed[attributed["launch_start"].notna()]
    pts = pd.DataFrame(
        {"tid": a["global_tid"].to_numpy(dtype=np.int64), "t": a["launch_start"].to_numpy(dtype=np.int64)},
        index=a.index,
    )
    variant = tt._containing(pts, iters, "variant")
    a = a.assign(variant=variant)[variant.notna()]
    return pd.DataFrame(
        {
            "variant": a["variant"],
            "correlation": a["correlation_id"].to_numpy(dtype=np.int64),
            "kind": a["kind"].astype(str),
            "kernel": a["demangled_name"].fillna(a["name"]).astype(str)
            if "demangled_name" in a
            else a["name"].astype(str),
            "duration_ns": a["duration_ns"].to_numpy(dtype=np.int64),
        }
    )
