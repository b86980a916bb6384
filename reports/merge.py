"""One table across backends, sweeps over sizes, and the comparison of two runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from reports import schema
from reports.names import short_kernel_name
from reports.schema import ALL_KERNELS, MergedTime
from reports.summary import sample_stats

DISAGREE = 0.10  # backends whose medians differ by more than this are flagged


def merged_table(
    tables: Mapping[str, pd.DataFrame],
    sources: Mapping[str, MergedTime],
    baseline: str | None = None,
    *,
    on_gpu: bool = True,
) -> pd.DataFrame:
    """tables: backend -> its per-variant table (reports.summary.variant_table); sources: backend ->
    its MergedTime (the backends declare them). One row per
    variant with each backend's median, ncu's DRAM/SM %, the kernels, and an agreement flag
    (on a GPU only: on the CPU the backends time different things, host wall time with or
    without a profiler attached)."""
    variants: list[str] = []
    for t in tables.values():
        variants += [v for v in t["variant"] if v not in variants]
    rows = []
    for v in variants:
        row: dict[str, Any] = {"variant": v}
        for backend, t in tables.items():
            r = t[t["variant"] == v]
            if r.empty:
                continue
            r = r.iloc[0]
            row.setdefault("label", r.get("label"))
            if r.get("status") not in MEASURED:
                row["agreement"] = f"{backend}: {r.get('status')} ({r.get('note') or ''})"
                continue
            row[sources[backend].column] = next(
                (r.get(c) for c in sources[backend].medians if pd.notna(r.get(c))), None
            )
            # kernels: the first backend that names them (CUDA events see none)
            if not row.get("kernels") and isinstance(r.get("kernels"), str) and r.get("kernels"):
                for c in ("kernels", "kernels_full", "launches_per_iter", "same_kernel_as"):
                    row[c] = r.get(c)
            for c in schema.columns(schema.MERGED):
                if c.merged_from == backend:
                    row[c.name] = r.get(c.name)
        rows.append(row)
    for src in sources.values():
        src.declare()
    # the time columns of these backends only (others may be declared in this process)
    mine = {src.column for src in sources.values()}
    out = pd.DataFrame(
        rows,
        columns=[
            c.name for c in schema.columns(schema.MERGED) if c.name in mine or c.name not in schema.REGISTERED
        ],
    )
    ref = speedup_source(sources, out)
    ref_col = ref.column if ref else None
    out["agreement"] = [
        a if isinstance(a, str) else agreement(row, sources) if on_gpu else "-"
        for a, (_, row) in zip(out["agreement"], out.iterrows())
    ]
    if ref_col:
        base = out.loc[out["variant"] == baseline, ref_col] if baseline else pd.Series(dtype=float)
        if len(base) and pd.notna(base.iloc[0]):
            out["speedup_vs_baseline"] = base.iloc[0] / out[ref_col]
    return out


def speedup_source(sources: Mapping[str, MergedTime], table: pd.DataFrame) -> MergedTime | None:
    """The backend whose medians the merged table's speedup is over: the first by rank (the
    events first) that timed any variant."""
    order = sorted(sources.values(), key=lambda s: s.rank)
    return next((s for s in order if s.column in table and table[s.column].notna().any()), None)


def agreement(row: Mapping[str, Any], sources: Mapping[str, MergedTime]) -> str:
    """'ok' when every backend's median is within 10% of the others, else which disagree and why."""
    vals = {b: row.get(s.column) for b, s in sources.items() if pd.notna(row.get(s.column))}
    if len(vals) < 2:
        return "-"
    lo_b, lo = min(vals.items(), key=lambda kv: kv[1])
    hi_b, hi = max(vals.items(), key=lambda kv: kv[1])
    if hi <= lo * (1 + DISAGREE):
        return "ok"
    why = "; ".join(sources[b].reason for b in (hi_b, lo_b) if sources[b].distinct) or sources[hi_b].reason
    return f"DISAGREE: {hi_b} {hi / lo - 1:+.0%} over {lo_b} ({why})"


def legend(sources: Mapping[str, MergedTime], on_gpu: bool, table: pd.DataFrame | None = None) -> str:
    """What each time column of the merged table measured (the `all` footer), backends that
    measure the same thing named together, and which one the speedup is over. On the CPU
    `time` reads the host clock: there are no CUDA events."""
    groups: dict[str, list[str]] = {}
    for s in sources.values():
        what = s.on_gpu if on_gpu else s.on_cpu
        if what:
            groups.setdefault(what, []).append(s.label)
    text = "; ".join(f"{' / '.join(labels)} = {what}" for what, labels in groups.items())
    ref = speedup_source(sources, table) if table is not None else None
    if ref is not None:  # the kernel-time backends can rank variants otherwise (launch costs)
        text += f"; speedup from the {ref.label} medians"
    if on_gpu:
        return f"{text}. agreement flags medians >{DISAGREE:.0%} apart."
    return f"{text}. agreement is not judged on the CPU."


SWEEP_FROM_POINT = (
    "variant",
    "status",
    "time_median_us",
    "time_iqr_us",
    "achieved_gb_s",
    "pct_of_peak_bw",
    "speedup_vs_baseline",
)


def sweep_table(points: list[tuple[int, str, pd.DataFrame]]) -> pd.DataFrame:
    """points: (numel, dtype, per-variant table) -> long table of time and GB/s against size;
    its columns also when no point left a table (every one failed before it wrote any)."""
    rows = [
        {"numel": numel, "dtype": dtype, **{c: r.get(c) for c in SWEEP_FROM_POINT}}
        for numel, dtype, t in points
        for _, r in t.iterrows()
    ]
    return pd.DataFrame(rows, columns=["numel", "dtype", *SWEEP_FROM_POINT])


# statuses whose variant has samples to compare ("noisy": measured, its median less sure)
MEASURED = ("ok", "noisy")


def compare_runs(
    frame_a: pd.DataFrame,
    frame_b: pd.DataFrame,
    table_a: pd.DataFrame,
    table_b: pd.DataFrame,
    *,
    peak_bw: bool = False,
) -> pd.DataFrame:
    """Per variant of either run: medians, B/A ratio, and whether the difference is larger than
    the runs' own spread (|mB - mA| > IQR_A + IQR_B, the samples' interquartile ranges). A variant
    that one run skipped, failed or lacks is `missing` (never "same"), with why in `note`; those
    A measured and B did not are in `attrs["lost"]` (variant, why): a gate fails on them.
    `peak_bw` (the runs are on different GPUs): each run's % of its own GPU's peak bandwidth too."""
    rows_a = {r["variant"]: r for _, r in table_a.iterrows()}
    rows_b = {r["variant"]: r for _, r in table_b.iterrows()}
    rows, lost = [], []
    for v in list(rows_a) + [v for v in rows_b if v not in rows_a]:
        a = frame_a.loc[(frame_a.variant == v) & (frame_a.metric == "time_ns"), "value"].to_numpy()
        b = frame_b.loc[(frame_b.variant == v) & (frame_b.metric == "time_ns"), "value"].to_numpy()
        sa, sb = sample_stats(a), sample_stats(b)
        gone_a, gone_b = _missing("A", rows_a.get(v), sa), _missing("B", rows_b.get(v), sb)
        gone = [why for why in (gone_a, gone_b) if why]
        if gone_b and not gone_a:
            lost.append((v, gone_b))
        row: dict[str, Any] = {
            "variant": v,
            "a_median_us": sa["median"] / 1e3,
            "b_median_us": sb["median"] / 1e3,
            "a_iqr_us": sa["iqr"] / 1e3,
            "b_iqr_us": sb["iqr"] / 1e3,
        }
        if gone:
            row.update(
                ratio_b_over_a=np.nan,
                change_pct=np.nan,
                beyond_spread=False,
                verdict="missing",
                note="; ".join(gone),
            )
        else:
            ratio = sb["median"] / sa["median"] if sa["median"] else np.nan
            diff = abs(sb["median"] - sa["median"])
            # one sample has no spread to weigh the change against: never called beyond it
            significant = (
                bool(diff > sa["iqr"] + sb["iqr"])
                if np.isfinite(diff) and min(sa["n"], sb["n"]) > 1
                else False
            )
            row.update(
                ratio_b_over_a=ratio,
                change_pct=(ratio - 1) * 100,
                beyond_spread=significant,
                verdict=("slower" if ratio > 1 else "faster")
                if significant
                else "same within spread"
                if min(sa["n"], sb["n"]) > 1
                else "n=1: no spread to judge by",
                note="",
            )
        if peak_bw:
            pa = _num(rows_a.get(v), "pct_of_peak_bw")
            pb = _num(rows_b.get(v), "pct_of_peak_bw")
            row.update(
                a_pct_of_peak_bw=pa,
                b_pct_of_peak_bw=pb,
                peak_bw_change_pct=(pb / pa - 1) * 100 if pa and np.isfinite(pa) and not gone else np.nan,
            )
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["lost"] = lost
    return table


def _num(row: Mapping[str, Any] | None, col: str) -> float:
    v = row.get(col) if row is not None else None
    try:
        return float(v) if v is not None else np.nan
    except (TypeError, ValueError):
        return np.nan


def _missing(side: str, row: Mapping[str, Any] | None, stats: Mapping[str, float]) -> str:
    """Why a run has no time for a variant ('' when it has one)."""
    if row is None:
        return f"not in {side}"
    status = row.get("status") or ""
    if status not in MEASURED:
        why = str(row.get("note") or "").split(";")[0].strip()
        return f"{status or 'no status'} in {side}" + (f" ({why})" if why else "")
    if not stats["n"]:
        return f"no samples in {side}"
    return ""


def kernel_sets(frame: pd.DataFrame) -> dict[str, frozenset[str]]:
    """variant -> the short names of the kernels it launched (empty where a backend names none)."""
    k = (
        frame[(frame["metric"] == "kernel_time_ns") & (frame["kernel"] != ALL_KERNELS)]
        if not frame.empty
        else frame
    )
    if k.empty:
        return {}
    return {
        str(v): frozenset(short_kernel_name(n) for n in g["kernel"].unique()) for v, g in k.groupby("variant")
    }


# how a run timed its calls on a GPU, where both runs record it: a kernel after an L2 flush reads up
# to 2x the back-to-back one at 1e6 and 1e7 (docs/time-fidelity-h200.md, point 3), the events
# without a hold hold the host's launch, a graph replay none
SETTINGS = (
    ("flush_l2", "L2 flushed before each call"),
    ("hold", "what held the GPU while the call was queued"),
    ("cuda_graph", "CUDA graph replays"),
)


def mismatches(
    wa: Mapping[str, Any], wb: Mapping[str, Any], frame_a: pd.DataFrame, frame_b: pd.DataFrame
) -> list[str]:
    """What makes two runs' times not comparable: another workload, size, shape, dtype, or
    variants that ran other kernels (where both runs name kernels). Empty when they match. How
    they timed is timing_mismatches()'s."""
    out = []
    for key, what in (("workload", "workload"), ("numel", "size"), ("shape", "shape"), ("dtype", "dtype")):
        va, vb = wa.get(key), wb.get(key)
        if key == "shape" and wa.get("numel") != wb.get("numel"):
            continue  # another size is another shape: said once
        if va != vb:
            out.append(
                f"different workloads: A {va}, B {vb}"
                if key == "workload"
                else f"{what}: A {_show(va)}, B {_show(vb)}"
            )
    ka, kb = kernel_sets(frame_a), kernel_sets(frame_b)
    for v in [v for v in ka if v in kb and ka[v] and kb[v] and ka[v] != kb[v]]:
        out.append(f"kernels of {v}: A ran {', '.join(sorted(ka[v]))}; B ran {', '.join(sorted(kb[v]))}")
    return out


def timing_mismatches(wa: Mapping[str, Any], wb: Mapping[str, Any]) -> list[str]:
    """How two GPU runs timed their calls differently (SETTINGS), where both record it; empty on
    the CPU, where none of these change what is timed."""
    if "cpu" in (wa.get("device"), wb.get("device")):
        return []
    return [
        f"{what}: A {_show(wa[key])}, B {_show(wb[key])}"
        for key, what in SETTINGS
        if wa.get(key) is not None and wb.get(key) is not None and wa[key] != wb[key]
    ]


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return "x".join(str(x) for x in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def gpu_note(wa: Mapping[str, Any], wb: Mapping[str, Any]) -> str | None:
    """A line saying the runs are on different GPUs (None when they are not)."""
    ga = (wa.get("env") or {}).get("device_name") or wa.get("device")
    gb = (wb.get("env") or {}).get("device_name") or wb.get("device")
    if ga == gb:
        return None
    return (
        f"different GPUs: A ran on {ga}, B on {gb}: % of peak bandwidth (each against its own GPU's "
        f"peak) is compared beside time"
    )
