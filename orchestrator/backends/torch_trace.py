"""`gprof-orch torch-trace`: the workload under torch.profiler; the Chrome trace is kept
(open it in Perfetto or chrome://tracing) and turned into per-variant kernels and times."""
from __future__ import annotations

import pandas as pd

from orchestrator.backends.base import Backend
from orchestrator.runfolder import RunFolder
from reports.schema import OUTSIDE
from reports.unify import RowMaker, activity_rows, variant_facts


class TorchTraceBackend(Backend):
    name = "torch-trace"
    mode = "torch-trace"
    default_iters = 20
    default_warmup = 5
    description = "torch.profiler (CPU + CUDA activity): kernels, self CPU/CUDA time, Chrome trace"

    def parse(self, rf: RunFolder) -> pd.DataFrame:
        from orchestrator.parsers import torch_trace as tt

        wman = rf.workload_manifest()
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        ok = {v["name"] for v in wman["variants"] if v.get("status") == "ok"}
        trace = tt.read_trace(rf.file(wman.get("trace", "trace.json")))
        return frame_from_trace(trace, rows, ok, on_gpu=wman.get("device") == "cuda")


def frame_from_trace(trace, rows: RowMaker, variants: set[str] | None, *, on_gpu: bool) -> pd.DataFrame:
    """Rows of one trace: per-iteration time (GPU kernel time on a GPU, host wall on a CPU),
    host time per iteration, self CPU time, and every GPU activity's duration."""
    from orchestrator.parsers import torch_trace as tt

    s = tt.summarize(trace)
    keep = (lambda v: v in variants) if variants is not None else (lambda v: True)
    for variant, grp in s["iterations"].groupby("variant", sort=False):
        if keep(variant):
            rows.samples(variant, "cpu_time_ns", grp["wall_ns"], "ns")
            if not on_gpu:
                rows.samples(variant, "time_ns", grp["wall_ns"], "ns")
    if on_gpu:
        for variant, grp in s["gpu_per_iteration"].groupby("variant", sort=False):
            if keep(variant):
                rows.samples(variant, "time_ns", grp["gpu_ns"], "ns")
    for _, r in s["self_cpu_ns"].iterrows():
        if keep(r["variant"]):
            rows.add(r["variant"], "self_cpu_time_ns", r["self_cpu_ns"], "ns")
    gpu = s["gpu"].rename(columns={"launch_ns": "launch_cpu_ns"})
    inside = gpu[gpu["variant"].notna()]
    for variant, g in inside.groupby("variant", sort=False):
        if keep(variant):
            activity_rows(rows, variant, g, "kernel")
    outside = gpu[gpu["variant"].isna()]
    activity_rows(rows, OUTSIDE, outside.drop(columns="launch_cpu_ns"), "kernel")
    return rows.frame()
