"""`gprof-orch torch-trace`: the workload under torch.profiler; the Chrome trace is kept
(open it in Perfetto or chrome://tracing) and turned into per-variant kernels and times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.backends.base import Backend, Parsed
from orchestrator.backends.ops_option import ops_field
from orchestrator.backends.options import BackendOptions
from orchestrator.parsers import compressed
from orchestrator.runfolder import RunFolder
from reports import schema
from reports.schema import (
    ITERATIONS_IN_REPORT,
    NO_ACTIVITY,
    NO_RANGE,
    NOT_IN_REPORT,
    OUTSIDE,
    UNEVEN_LAUNCHES,
    MergedTime,
)
from workloads.nvtx_ranges import RANGE_PREFIX

if TYPE_CHECKING:  # pandas and numpy at run time only where a report is built (parse)
    import pandas as pd

    from reports.unify import RowMaker


@dataclass(frozen=True)
class TorchTraceOptions(BackendOptions):
    """--ops: print each variant's operator tree under the table (report.json and report.html
    always hold it)."""

    ops: bool = ops_field()


class TorchTraceBackend(Backend):
    """`gprof-orch torch-trace`: the workload under torch.profiler; the Chrome trace is kept and
    turned into per-variant kernels and times."""

    name = "torch-trace"
    mode = "torch-trace"
    host_measure = "host-torch-trace"
    default_iters = 20
    default_warmup = 5
    merged = MergedTime(
        "torch_trace_us",
        "torch-trace us",
        "torch-trace",
        on_gpu="kernel durations per iteration",
        on_cpu="host wall-clock time per iteration under each profiler",
        reason="torch.profiler sums kernel durations only (no launch gaps)",
        rank=2,
    ).declare()
    help = (
        "Run the workload under torch.profiler; keep the Chrome trace; report kernels, self CPU and CUDA "
        "time per variant."
    )
    description = "torch.profiler (CPU + CUDA activity): kernels, self CPU/CUDA time, Chrome trace"
    Options = TorchTraceOptions

    def parse(self, rf: RunFolder) -> Parsed:
        """The unified frame of the run's Chrome trace (trace.json, or its .xz/.gz), or of an
        imported trace, whose ranges may hold one another (frame_from_trace)."""
        # why lazy: it imports numpy, pandas, which importing torch_trace must not
        from orchestrator.parsers import torch_trace as tt

        # why lazy: it imports numpy, pandas, which importing torch_trace must not
        from reports.unify import RowMaker, variant_facts

        wman = rf.workload_manifest()
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        ok = {v["name"] for v in wman["variants"] if v.get("status") in schema.RAN}

        # trace.json, or trace.json.xz / .gz in an archived folder (read_trace streams those)
        trace = tt.read_trace(compressed.locate(rf.file(wman.get("trace", "trace.json"))))
        imported = wman.get("mode") == "capture"  # `gprof-orch import trace.json --ranges PREFIX`
        return Parsed(
            frame_from_trace(
                trace,
                rows,
                ok,
                on_gpu=wman.get("device") == "cuda",
                iters=wman.get("iters") or None,
                prefix=(wman.get("ranges") or {}).get("prefix", RANGE_PREFIX),
                holds={v["name"]: v["holds"] for v in wman["variants"] if v.get("holds")}
                if imported
                else None,
            )
        )


def frame_from_trace(
    trace,
    rows: RowMaker,
    variants: set[str] | None,
    *,
    on_gpu: bool,
    iters: int | None = None,
    prefix: str = RANGE_PREFIX,
    holds: dict[str, list[str]] | None = None,
) -> pd.DataFrame:
    """Rows of one trace: per-iteration time (GPU kernel time on a GPU, host wall on a CPU),
    host time per iteration, self CPU time, and every GPU activity's duration. The variants are
    the record_function ranges named `prefix` + name.

    With `iters` (what the workload ran), a variant whose trace holds another number of
    iterations, or iterations with different numbers of GPU activities, gets no time samples
    but a row that marks it incomplete: a lost event would otherwise give a different median.

    `holds` (an imported trace; see orchestrator.capture.nesting): each range of a variant
    without `iter` ranges inside is one iteration, and a variant named in `holds` counts the GPU
    activity of the ranges nested in it (as nvtx_kern_sum does), every other innermost-wins."""
    # why lazy: it imports numpy, pandas, which importing torch_trace must not
    from orchestrator.parsers import torch_trace as tt

    # why lazy: it imports numpy, pandas, which importing torch_trace must not
    from reports.unify import activity_rows, idle_gap_rows

    s = tt.summarize(trace, prefix)
    if holds is not None:
        s = _as_capture(trace, s, holds)
    keep = (lambda v: v in variants) if variants is not None else (lambda v: True)
    broken = _broken_variants(s, rows, variants, keep, iters=iters, on_gpu=on_gpu)
    for variant, grp in s["iterations"].groupby("variant", sort=False):
        if keep(variant) and variant not in broken:
            rows.samples(variant, "cpu_time_ns", grp["wall_ns"], "ns")
            if not on_gpu:
                rows.samples(variant, "time_ns", grp["wall_ns"], "ns")
    if on_gpu:
        for variant, grp in s["gpu_per_iteration"].groupby("variant", sort=False):
            if keep(variant) and variant not in broken:
                rows.samples(variant, "time_ns", grp["gpu_ns"], "ns")
    for _, r in s["self_cpu_ns"].iterrows():
        if keep(r["variant"]):
            rows.add(r["variant"], "self_cpu_time_ns", r["self_cpu_ns"], "ns")
    gpu = s["gpu"].rename(columns={"launch_ns": "launch_cpu_ns"})
    inside = gpu[gpu["variant"].notna()]
    for variant, g in inside.groupby("variant", sort=False):
        if keep(variant):
            activity_rows(rows, variant, g, "kernel")
            if on_gpu and variant not in broken:
                idle_gap_rows(rows, variant, g, "start_ns", "end_ns")
    if on_gpu:  # a range whose iterations launched nothing on the GPU: said, never an empty ok row
        for variant in sorted(set(s["ranges"]["variant"]) - set(inside["variant"]) - broken):
            if keep(variant):
                rows.add(variant, NOT_IN_REPORT, NO_ACTIVITY, "flag")
    outside = gpu[gpu["variant"].isna()]
    activity_rows(rows, OUTSIDE, outside.drop(columns="launch_cpu_ns"), "kernel")
    # why lazy: they import pandas, which importing the backend must not
    from orchestrator.parsers import torch_ops
    from reports import operators

    operators.add_rows(rows, torch_ops.operators(trace, prefix), keep, on_gpu=on_gpu)
    return rows.frame()


def _broken_variants(
    s: dict[str, pd.DataFrame],
    rows: RowMaker,
    variants: set[str] | None,
    keep,
    *,
    iters: int | None,
    on_gpu: bool,
) -> set[str]:
    """The variants that get no time samples, each with a row saying why: its range is not in
    the trace, or (with `iters`) the trace holds another number of iterations, or on a GPU its
    iterations launched different numbers of GPU activities (a lost event would otherwise give
    a different median)."""
    broken: set[str] = set()
    # a variant the workload ran whose range the trace lost (a damaged trace): said, never a blank
    # row marked ok (found by the fuzz: deleting event 163 of torch-trace-mean's trace)
    for variant in sorted((variants or set()) - set(s["ranges"]["variant"])):
        rows.add(variant, NOT_IN_REPORT, NO_RANGE, "flag")
        broken.add(variant)
    if not iters:
        return broken
    # a variant whose range holds none of its iterations counts too: its row would be ok and empty
    # (the fuzz moved the range to another thread, tid 1207 -> "1": no iteration, no kernel inside)
    counts = s["iterations"]["variant"].value_counts(sort=False)
    named = variants if variants is not None else set(s["ranges"]["variant"])
    for variant in [*counts.index, *sorted(set(named) - set(counts.index) - broken)]:
        seen = int(counts.get(variant, 0))
        if keep(variant) and variant not in broken and seen != iters:
            rows.add(variant, ITERATIONS_IN_REPORT, float(seen), "count")
            broken.add(variant)
    if on_gpu:
        g = s["gpu"]
        inside = g[g["variant"].notna()]
        for variant, grp in inside.groupby("variant", sort=False):
            per_iter = grp[grp["iteration"] >= 0].groupby("iteration").size()
            if (
                keep(variant)
                and variant not in broken
                and (len(per_iter) != iters or per_iter.nunique() > 1 or (grp["iteration"] < 0).any())
            ):
                rows.add(variant, UNEVEN_LAUNCHES, float(len(grp)), "count")
                broken.add(variant)
    return broken


def _as_capture(trace, s: dict[str, pd.DataFrame], holds: dict[str, list[str]]) -> dict[str, pd.DataFrame]:
    """tt.summarize()'s result for an imported trace: a variant without `iter` ranges takes each
    of its ranges as one iteration, and a variant that holds others takes the GPU activity
    launched anywhere inside its ranges (duplicated from the variants nested in it)."""
    import pandas as pd

    # why lazy: it imports numpy, pandas, which importing torch_trace must not
    from orchestrator.parsers import torch_trace as tt

    ranges = s["ranges"].copy()
    ranges["iteration"] = ranges.groupby("variant", sort=False).cumcount()
    whole = set(ranges["variant"]) - set(s["iterations"]["variant"])
    mine = ranges[ranges["variant"].isin(whole)]
    iters = pd.concat(
        [s["iterations"], mine.assign(wall_ns=mine["end_ns"] - mine["start_ns"])[s["iterations"].columns]],
        ignore_index=True,
    )
    gpu = s["gpu"]
    if len(gpu):
        ev = trace.events
        rt = ev[ev["cat"].isin(tt.RUNTIME_CATS) & (ev["correlation"] >= 0)].drop_duplicates("correlation")
        t = gpu["correlation"].map(rt.set_index("correlation")["start_ns"])
        pts = gpu.assign(t=t)[t.notna()].astype({"t": "int64"})
        for name in whole:  # the instance of the variant's own range that launched it
            own = pts[pts["variant"] == name]
            it = tt._containing(own, ranges[ranges["variant"] == name], "iteration")
            gpu.loc[own.index, "iteration"] = pd.to_numeric(it, errors="coerce").fillna(-1).astype("int64")
        extra = []
        for name in holds:
            r = ranges[ranges["variant"] == name]
            it = pd.to_numeric(tt._containing(pts, r, "iteration"), errors="coerce")
            inside = it.notna() & (pts["variant"] != name)
            extra.append(
                gpu.loc[pts.index[inside]].assign(variant=name, iteration=it[inside].astype("int64"))
            )
        gpu = pd.concat([gpu, *extra], ignore_index=True) if extra else gpu
    inside = gpu.dropna(subset=["variant"])
    gpu_iter = (
        inside[inside["iteration"] >= 0]
        .groupby(["variant", "iteration"])["duration_ns"]
        .sum()
        .rename("gpu_ns")
        .reset_index()
    )
    return {**s, "iterations": iters, "gpu": gpu, "gpu_per_iteration": gpu_iter}
