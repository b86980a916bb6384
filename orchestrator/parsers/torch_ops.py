"""torch.profiler Chrome-trace JSON -> the aten operators each variant's iterations dispatched,
as a tree, with the GPU work each operator launched: what `key_averages()` tells, per variant.

Pure: reads a read trace (orchestrator.parsers.torch_trace.read_trace), returns a DataFrame.
An operator's parent is the innermost `cpu_op` enclosing it on its thread (the profiler nests
them so: aten::square's call of aten::pow lies inside it). A kernel, memset or copy belongs to
the operator enclosing the CUDA runtime call that launched it (the same `correlation`), as in
key_averages(); work launched inside an iteration by no operator is `(outside operators)`.
Only operators inside a variant's `iter` ranges count, each total divided by the variant's
iterations.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.parsers import torch_trace as tt
from workloads.nvtx_ranges import RANGE_PREFIX

OUTSIDE_OPS = "(outside operators)"
SEP = " > "
# one row per operator path, or per GPU activity name under its operator path
COLUMNS = ["variant", "path", "operator", "kind", "calls", "self_cpu_ns", "self_cuda_ns"]


def nest(ev: pd.DataFrame) -> pd.DataFrame:
    """The `cpu_op` and CUDA runtime events of `ev` (sorted per thread, outermost first), each
    with `parent` (the row of its innermost enclosing cpu_op, -1 if none), `path` (the operator
    names from the outermost down, for cpu_ops) and `self_ns` (its duration less its direct
    children's: key_averages()'s Self CPU)."""
    cats = ev["cat"].isin(("cpu_op",) + tt.RUNTIME_CATS)
    ops = ev[cats].sort_values(["tid", "start_ns", "end_ns"], ascending=[True, True, False])
    ops = ops.reset_index(drop=True)
    tids, names = ops["tid"].to_numpy(), ops["name"].to_numpy(dtype=object)
    is_op = (ops["cat"] == "cpu_op").to_numpy()
    starts, ends = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    self_ns = ends - starts
    parent = np.full(len(ops), -1, dtype=np.int64)
    path = np.full(len(ops), "", dtype=object)
    stack: list[int] = []
    prev_tid = None
    for i in range(len(ops)):
        if tids[i] != prev_tid:
            stack.clear()
            prev_tid = tids[i]
        while stack and ends[stack[-1]] <= starts[i]:
            stack.pop()
        if stack:  # a runtime call inside a runtime call (a driver call) has its op's parent
            top = stack[-1]
            self_ns[top] -= ends[i] - starts[i]
            parent[i] = top if is_op[top] else parent[top]
        if is_op[i]:
            path[i] = f"{path[parent[i]]}{SEP}{names[i]}" if parent[i] >= 0 else names[i]
        stack.append(i)
    return ops.assign(parent=parent, path=path, self_ns=self_ns)


def operators(trace: tt.TorchTrace, prefix: str = RANGE_PREFIX, iter_label: str = "iter") -> pd.DataFrame:
    """The operator table (aggregate()) of a torch.profiler trace; empty when the trace has no
    variant iterations."""
    _, iters = tt.variant_ranges(trace, prefix, iter_label)
    if iters.empty:
        return pd.DataFrame(columns=COLUMNS)
    ops = nest(trace.events)
    gpu = tt.attribute(trace, prefix, iter_label)
    return aggregate(ops, iters, gpu[gpu["variant"].notna() & (gpu["iteration"] >= 0)])


def aggregate(ops: pd.DataFrame, iters: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """Per variant, one row per operator path (kind "op": calls, Self CPU and Self CUDA ns per
    iteration) and one per GPU activity under it (kind kernel/memset/memcpy: launches and GPU ns
    per iteration, `operator` its name), plus OUTSIDE_OPS for GPU work inside an iteration that
    no operator launched. `ops`: nest()'s; `iters`: the iteration ranges (tid, start_ns, end_ns,
    variant, iteration); `gpu`: the GPU activities launched inside them (variant, correlation,
    kind, kernel, duration_ns)."""
    counts = iters.groupby("variant")["iteration"].nunique()
    ops = ops.assign(variant=tt._containing(ops.assign(t=ops["start_ns"]), iters, "variant"))
    cpu = ops[(ops["cat"] == "cpu_op") & ops["variant"].notna()]
    parts = [
        cpu.groupby(["variant", "path"], sort=False)
        .agg(operator=("name", "last"), calls=("name", "size"), self_cpu_ns=("self_ns", "sum"))
        .reset_index()
        .assign(kind="op", self_cuda_ns=0.0)
    ]
    gpu = _owned(gpu, ops)
    if len(gpu):
        own = gpu.groupby(["variant", "path"], sort=False)["duration_ns"].sum()
        key = pd.MultiIndex.from_frame(parts[0][["variant", "path"]])
        parts[0]["self_cuda_ns"] = own.reindex(key).fillna(0.0).to_numpy()
        act = (
            gpu.groupby(["variant", "path", "kind", "kernel"], sort=False)
            .agg(calls=("kernel", "size"), self_cuda_ns=("duration_ns", "sum"))
            .reset_index()
        )
        parts.append(act.rename(columns={"kernel": "operator"}).assign(self_cpu_ns=np.nan))
        rest = own[own.index.get_level_values("path") == OUTSIDE_OPS].reset_index()
        parts.append(
            rest.rename(columns={"duration_ns": "self_cuda_ns"}).assign(
                operator=OUTSIDE_OPS, kind="op", calls=np.nan, self_cpu_ns=np.nan
            )
        )
    out = pd.concat(parts, ignore_index=True)[COLUMNS]
    n = out["variant"].map(counts).astype("float64")
    for c in ("calls", "self_cpu_ns", "self_cuda_ns"):
        out[c] = out[c].astype("float64") / n
    return out


def _owned(gpu: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """The GPU activities, each with the path of the operator whose runtime call launched it
    (OUTSIDE_OPS where none encloses that call)."""
    rt = ops[ops["cat"].isin(tt.RUNTIME_CATS) & (ops["correlation"] >= 0)]
    rt = rt.drop_duplicates("correlation").set_index("correlation")
    paths = np.append(ops["path"].to_numpy(dtype=object), OUTSIDE_OPS)  # parent -1: the last
    owner = pd.Series(paths[rt["parent"].to_numpy()], index=rt.index)
    return gpu.assign(path=gpu["correlation"].map(owner).fillna(OUTSIDE_OPS))
