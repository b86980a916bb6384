"""The operator view of a run (`--ops`): per variant, the aten operators each iteration
dispatched, as a tree, with the kernels each launched, the numbers torch.profiler's
`key_averages()` gives (calls, Self CPU, Self CUDA) per iteration, grouped by variant.

The frame holds them as rows of one kind (reports/schema.py OP_METRICS: `kernel` is the
operator's path, or a GPU activity's name under it); the torch-trace and nsys readers make the
same rows (add_rows), so both views are set side by side by the same code.

Example:
    >>> from orchestrator import load_run
    >>> ops = operator_table(load_run("tests/fixtures/runs/h200/torch-trace-square").frame)
    >>> ops[ops["variant"] == "torch_square"][["operator", "op_calls_per_iter", "self_cuda_us"]]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from reports import render, schema
from reports.names import short_kernel_name
from reports.schema import OP_CALLS, OP_METRICS, OP_SELF_CPU, OP_SELF_CUDA, OP_SEP, OUTSIDE_OPS

OPERATOR_COLUMNS = [c.name for c in schema.columns(schema.OPERATOR)]
TITLE = (
    "operators per variant, per iteration (as key_averages(): Self CPU = the operator's time less "
    "its child operators'; Self CUDA = the GPU time of the kernels it launched)"
)


def add_rows(rows, ops: pd.DataFrame, keep: Callable[[str], bool], *, on_gpu: bool) -> None:
    """The frame rows of a reader's operator table (orchestrator/parsers/torch_ops.py COLUMNS:
    variant, path, operator, kind, calls, self_cpu_ns, self_cuda_ns, each per iteration) for
    the variants `keep` accepts; Self CUDA only where the run was on a GPU."""
    for r in ops.itertuples(index=False):
        if not keep(r.variant):
            continue
        name = r.path if r.kind == "op" else f"{r.path}{OP_SEP}{r.operator}"
        if not math.isnan(r.calls):
            rows.add(r.variant, OP_CALLS, r.calls, "count", kernel=name)
        if r.kind == "op" and not math.isnan(r.self_cpu_ns):
            rows.add(r.variant, OP_SELF_CPU, r.self_cpu_ns, "ns", kernel=name)
        if on_gpu:
            rows.add(r.variant, OP_SELF_CUDA, r.self_cuda_ns, "ns", kernel=name)


def operator_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per operator of each variant, depth-first (an operator, then what it called, then
    the GPU work it launched), `(outside operators)` last: variant, operator (indented by depth),
    path, calls/iter, Self CPU us/iter, Self CUDA us/iter. Empty when the frame has no operator rows."""
    op = frame[frame["metric"].isin(OP_METRICS)] if not frame.empty else frame
    if op.empty:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    wide = op.pivot_table(
        index=["variant", "kernel"], columns="metric", values="value", aggfunc="sum", sort=False
    )
    wide = wide.reindex(columns=list(OP_METRICS))
    out = []
    for variant in dict.fromkeys(op["variant"].astype(str)):
        g = wide.loc[variant]
        paths = [str(p) for p in g.index]
        ops = {p for p in paths if p == OUTSIDE_OPS or not math.isnan(g.at[p, OP_SELF_CPU])}
        first = {p: i for i, p in enumerate(paths)}
        for path in sorted(paths, key=lambda p: _order(p, ops, first)):
            parent, leaf = _split(path, ops)
            depth = parent.count(OP_SEP) + 1 if parent else 0
            name = leaf if path in ops else short_kernel_name(leaf)
            out.append(
                {
                    "variant": variant,
                    "operator": "  " * depth + name,
                    "path": path,
                    "op_calls_per_iter": g.at[path, OP_CALLS],
                    "self_cpu_us": g.at[path, OP_SELF_CPU] * 1e-3,
                    "self_cuda_us": g.at[path, OP_SELF_CUDA] * 1e-3,
                }
            )
    return pd.DataFrame(out, columns=OPERATOR_COLUMNS)


def _split(path: str, ops: set[str]) -> tuple[str, str]:
    """(the path of the operator above `path`, its own name): a GPU activity's name may hold
    " > " itself (C++ templates), so its parent is the longest operator path it extends."""
    above = [p for p in ops if path != p and path.startswith(p + OP_SEP)]
    if not above:
        return "", path
    parent = max(above, key=len)
    return parent, path[len(parent) + len(OP_SEP) :]


def _order(path: str, ops: set[str], first: dict[str, int]) -> tuple:
    """Depth-first in call order (`first`: each path's first appearance): an operator after its
    parent, its own GPU work after the operators it called, OUTSIDE_OPS and its work last."""
    parent, _ = _split(path, ops)
    top = path if path in ops else parent
    names = top.split(OP_SEP) if top else []
    key = [first.get(OP_SEP.join(names[: i + 1]), 0) for i in range(len(names))]
    if path not in ops:
        key += [len(first), first[path]]
    return (path.startswith(OUTSIDE_OPS), key)


def render_tree(table: pd.DataFrame, fmt: str = "table", why: str = "") -> str:
    """The operator table under its title (text or Markdown); a line saying so when it is empty
    (`why`: the runner's reason, workload.json's `ops`)."""

    if table.empty:
        empty = "no operators: this run recorded none (torch-trace, or nsys with --ops, records them)"
        empty = f"no operators: {why}" if why else empty
        return f"### {TITLE}\n\n{empty}\n" if fmt == "markdown" else f"{TITLE}\n{empty}"
    shown = table.drop(columns=["path"])
    return render.to_markdown(shown, TITLE) if fmt == "markdown" else render.to_text(shown, TITLE)


def chains(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Per variant, each path from a top operator down to the GPU work (or the deepest operator)
    it reached, GPU work by its short name: `aten::square > aten::pow > vectorized_elementwise_kernel<...>`."""
    out: dict[str, list[str]] = {}
    for variant, paths in _paths(frame).items():
        ops = _ops(frame, variant)
        leaves = [p for p in paths if not any(q.startswith(p + OP_SEP) for q in paths)]
        out[variant] = []
        for p in leaves:
            parent, leaf = _split(p, ops)
            out[variant].append(p if p in ops else f"{parent}{OP_SEP}{short_kernel_name(leaf)}")
    return out


def _paths(frame: pd.DataFrame) -> dict[str, list[str]]:
    op = frame[frame["metric"].isin(OP_METRICS)] if not frame.empty else frame
    return {
        str(v): list(dict.fromkeys(g["kernel"].astype(str))) for v, g in op.groupby("variant", sort=False)
    }


def _ops(frame: pd.DataFrame, variant: str) -> set[str]:
    """The operator paths of one variant (the rows with a Self CPU; OUTSIDE_OPS too)."""
    g = frame[(frame["variant"] == variant) & (frame["metric"] == OP_SELF_CPU)]
    return {*g["kernel"].astype(str), OUTSIDE_OPS}


def same_operators(frame: pd.DataFrame, variants: pd.Series) -> list[str]:
    """For each variant, the others whose operator tree is its own once a top operator that only
    calls one other is set aside (aten::square > aten::pow is aten::pow's tree), "" for none."""
    if frame.empty:
        return [""] * len(variants)
    # an operator fewer than half the iterations called is not part of the variant's tree (an
    # iteration whose event was lost or moved to another thread would otherwise change it)
    calls = frame[frame["metric"] == OP_CALLS].set_index(["variant", "kernel"])["value"]
    op = frame[frame["metric"] == OP_SELF_CPU]
    op = op[calls.reindex(pd.MultiIndex.from_frame(op[["variant", "kernel"]])).to_numpy() >= 0.5]
    trees = {
        str(v): _canonical(g["kernel"].astype(str).tolist()) for v, g in op.groupby("variant", sort=False)
    }
    return [
        ", ".join(o for o, t in trees.items() if o != v and t and t == trees.get(v))
        for v in variants.astype(str)
    ]


def _canonical(paths: list[str]) -> frozenset[str]:
    """A variant's operator paths (no GPU work: it differs by device) with a single top operator
    that calls exactly one other dropped, repeatedly."""
    tree = frozenset(paths)
    while True:
        tops = [p for p in tree if OP_SEP not in p]
        if len(tops) != 1:
            return tree
        below = [p for p in tree if p.startswith(tops[0] + OP_SEP)]
        children = [p for p in below if p.count(OP_SEP) == 1]
        if len(children) != 1 or len(below) + 1 != len(tree):
            return tree
        tree = frozenset(p[len(tops[0]) + len(OP_SEP) :] for p in below)


def to_doc(table: pd.DataFrame, frame: pd.DataFrame) -> dict:
    """report.json's operator keys: "operators" (the table's rows, the operator unindented, its
    depth beside it) and "operator_chains" (chains(), per variant)."""
    rows = table.assign(
        depth=(table["operator"].str.len() - table["operator"].str.lstrip().str.len()) // 2,
        operator=table["operator"].str.strip(),
    )
    records = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in rows.to_dict(orient="records")
    ]
    return {"operators": records, "operator_chains": chains(frame)}
