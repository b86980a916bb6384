"""Attributed activity -> one row per variant: launches, GPU time statistics, launch CPU time,
copies and memsets, and how busy the GPU was inside the variant's ranges."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.parsers.nsys.schema import SUMMARY_COLUMNS, set_text


def summarize(attributed: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """One row per variant (in order of first range), then one row for activity outside every
    variant range (variant None).

    Columns:
      ranges, range_wall_ns      how many range instances, and their summed wall time
      kernels                    unique kernel names (short), in launch order
      launches                   kernel launches; gpu_time_{total,median,min,max}_ns over them
      launch_cpu_total_ns        summed duration of the CUDA API calls that launched them
      memcpy_*/memset_*          count and summed GPU time of copies and memsets
      gpu_busy_ns                per range instance, the union of its kernels' execution
                                 intervals (overlapping streams count once), summed
      gpu_span_ns                per range instance, max(range end, last kernel end) - range
                                 start: from the variant's first call until both CPU and GPU
                                 were done with it, summed over instances with kernels
      gpu_busy_fraction          gpu_busy_ns / gpu_span_ns: 1.0 means the GPU ran this variant's
                                 kernels without a gap from the moment the range opened; launch
                                 overhead, syncs and host work lower it. NaN without kernels.
    The outside row has ranges 0 and NaN for the range-based columns.

    Example:
        >>> summarize(attribute_kernels(ex), variant_ranges(ex))
    """
    variants, n_var, rid, inside, range_code, code, kind = _variant_codes(attributed, ranges)
    dur = attributed["duration_ns"].to_numpy(dtype=np.int64)
    groups = np.arange(n_var + 1)

    is_k = kind == "kernel"
    kc = code[is_k]
    k = pd.DataFrame(
        {
            "code": kc,
            "dur": dur[is_k],
            "cpu": attributed["launch_cpu_ns"].to_numpy(dtype=np.int64, na_value=0)[is_k],
        }
    )
    agg = (
        k.groupby("code")
        .agg(
            launches=("dur", "size"),
            total=("dur", "sum"),
            median=("dur", "median"),
            min=("dur", "min"),
            max=("dur", "max"),
            cpu=("cpu", "sum"),
        )
        .reindex(groups)
    )

    out = pd.DataFrame(index=pd.RangeIndex(n_var + 1))
    set_text(out, "variant", np.array(variants + [None], dtype=object))
    _range_columns(out, attributed, ranges, variants, is_k & inside, rid, range_code)
    set_text(out, "kernels", _kernel_names(attributed, is_k, kc, n_var))
    out["launches"] = agg["launches"].fillna(0).to_numpy(dtype=np.int64)
    out["gpu_time_total_ns"] = agg["total"].fillna(0).to_numpy(dtype=np.int64)
    for col in ("median", "min", "max"):
        out[f"gpu_time_{col}_ns"] = agg[col].to_numpy(dtype=np.float64)
    out["launch_cpu_total_ns"] = agg["cpu"].fillna(0).to_numpy(dtype=np.int64)
    for name in ("memcpy", "memset"):
        m = kind == name
        c = pd.Series(dur[m]).groupby(code[m]).agg(["size", "sum"]).reindex(groups).fillna(0)
        out[f"{name}_count"] = c["size"].to_numpy(dtype=np.int64)
        out[f"{name}_time_total_ns"] = c["sum"].to_numpy(dtype=np.int64)
    return out[SUMMARY_COLUMNS]


def range_times(attributed: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """summarize()'s columns variant, ranges, range_wall_ns, gpu_busy_ns, gpu_span_ns and
    gpu_busy_fraction, the same numbers from the same code, without the statistics over every
    launch (a median, names in launch order) that a report of millions of kernels does not use.

    Example:
        >>> range_times(attribute_kernels(ex), variant_ranges(ex))
    """
    variants, n_var, rid, inside, range_code, code, kind = _variant_codes(attributed, ranges)
    out = pd.DataFrame(index=pd.RangeIndex(n_var + 1))
    set_text(out, "variant", np.array(variants + [None], dtype=object))
    _range_columns(out, attributed, ranges, variants, (kind == "kernel") & inside, rid, range_code)
    return out


def _range_columns(
    out: pd.DataFrame,
    attributed: pd.DataFrame,
    ranges: pd.DataFrame,
    variants: list,
    kernels_inside: np.ndarray,
    rid: np.ndarray,
    range_code: np.ndarray,
) -> None:
    """Add ranges, range_wall_ns, gpu_busy_ns, gpu_span_ns, gpu_busy_fraction to `out` (one
    row per variant, then outside): summarize()'s and range_times()'s."""
    rw = ranges.groupby("variant", sort=False)["wall_ns"].agg(["size", "sum"]).reindex(variants)
    out["ranges"] = np.append(rw["size"].to_numpy(dtype=np.int64), 0)
    out["range_wall_ns"] = np.append(rw["sum"].to_numpy(dtype=np.float64), np.nan)
    busy, span = _busy_per_variant(attributed, kernels_inside, rid, range_code, ranges, len(variants))
    out["gpu_busy_ns"] = busy
    out["gpu_span_ns"] = span
    with np.errstate(invalid="ignore", divide="ignore"):
        out["gpu_busy_fraction"] = np.where(span > 0, busy / span, np.nan)


def _variant_codes(attributed: pd.DataFrame, ranges: pd.DataFrame):
    """summarize()'s groups: (variants in order of their first range, their number n_var,
    range_id per row, inside, variant code per range, variant code per row (n_var: outside),
    kind per row); ValueError when `ranges` is not the frame the rows were attributed to."""
    # variants in order of their first range; code n_var stands for "outside"
    first = ranges.groupby("variant", sort=False)["start"].min().sort_values(kind="stable")
    variants = list(first.index)
    n_var = len(variants)
    var_code = {v: i for i, v in enumerate(variants)}
    # attributed["range_id"] indexes the rows of variant_ranges(); summarize's `ranges` must be
    # that frame (same domain and prefix), which the variant names below double-check
    ids = ranges["range_id"].to_numpy(dtype=np.int64)
    rid = attributed["range_id"].to_numpy(dtype=np.int64)
    inside = rid >= 0
    if len(ids) and (ids.min() < 0 or not np.array_equal(ids, np.arange(len(ids)))):
        raise ValueError("summarize() needs the whole frame variant_ranges() returned, not a subset")
    if inside.any() and rid.max() >= len(ids):
        raise ValueError(
            "attributed rows point at ranges that are not in `ranges`: pass the "
            "variant_ranges() of the same export, domain and prefix"
        )
    range_code = np.array([var_code[v] for v in ranges["variant"]], dtype=np.int64)
    if inside.any() and not np.array_equal(
        attributed["variant"].to_numpy(dtype=object)[inside],
        ranges["variant"].to_numpy(dtype=object)[rid[inside]],
    ):
        raise ValueError(
            "attributed variants differ from `ranges`: pass the variant_ranges() of the "
            "same export, domain and prefix"
        )
    code = np.full(len(rid), n_var, dtype=np.int64)
    code[inside] = range_code[rid[inside]]
    return variants, n_var, rid, inside, range_code, code, attributed["kind"].to_numpy(dtype=object)


def _kernel_names(attributed: pd.DataFrame, is_k: np.ndarray, kc: np.ndarray, n_var: int) -> list[list[str]]:
    """Per variant code, the unique kernel names in the order of their first launch."""
    names = [[] for _ in range(n_var + 1)]
    if not is_k.any():
        return names
    name_codes, uniq = pd.factorize(attributed["name"][is_k])  # a lean read's categorical: on its codes
    # launch order; launches whose call is unknown sort last, by GPU start
    launch = attributed["launch_start"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)[is_k]
    order = np.lexsort((attributed["start"].to_numpy()[is_k], launch))
    pair = kc[order] * (len(uniq) + 1) + name_codes[order]
    _, first = np.unique(pair, return_index=True)
    for i in np.sort(first):
        names[kc[order][i]].append(uniq[name_codes[order][i]])
    return names


def instance_busy(attributed: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """Per range instance with kernels (in range_id order): range_id, gpu_busy_ns and
    gpu_span_ns, the figures range_times() sums per variant. A capture's range of many instances
    takes its GPU busy fraction from each apart, so that a cold first instance (a training loop's
    first step) is one sample of a median, not most of a summed span.

    Example:
        >>> instance_busy(attribute_kernels(ex), variant_ranges(ex))
    """
    _, _, rid, inside, _, _, kind = _variant_codes(attributed, ranges)
    inst, busy, span = _busy_per_instance(attributed, (kind == "kernel") & inside, rid, ranges)
    return pd.DataFrame({"range_id": inst, "gpu_busy_ns": busy, "gpu_span_ns": span})


def _busy_per_variant(
    attributed: pd.DataFrame,
    mask: np.ndarray,
    rid: np.ndarray,
    range_code: np.ndarray,
    ranges: pd.DataFrame,
    n_var: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per variant code: summed per-instance kernel busy time (interval union) and span; NaN
    for variants without kernels and for the outside row."""
    busy = np.full(n_var + 1, np.nan)
    span = np.full(n_var + 1, np.nan)
    if not mask.any():
        return busy, span
    inst, inst_busy, inst_span = _busy_per_instance(attributed, mask, rid, ranges)
    codes = range_code[inst]
    has = np.bincount(codes, minlength=n_var + 1) > 0
    busy[has] = np.bincount(codes, weights=inst_busy, minlength=n_var + 1)[has]
    span[has] = np.bincount(codes, weights=inst_span, minlength=n_var + 1)[has]
    return busy, span


def _busy_per_instance(
    attributed: pd.DataFrame, mask: np.ndarray, rid: np.ndarray, ranges: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The range instances with kernels among the `mask` rows (range_id, ascending), the union of
    their kernels' intervals and their span: max(range end, last kernel end) - range start."""
    if not mask.any():
        return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0)
    r = rid[mask]
    start = attributed["start"].to_numpy()[mask]
    end = attributed["end"].to_numpy()[mask]
    order = np.lexsort((start, r))
    r, start, end = r[order], start[order], end[order]
    first = np.ones(len(r), dtype=bool)
    first[1:] = r[1:] != r[:-1]
    # union length of sorted intervals: each adds what lies beyond the running max end of the
    # earlier ones of its range instance
    run_max = pd.Series(end).groupby(np.cumsum(first)).cummax().to_numpy()
    prev = np.empty_like(run_max)
    prev[1:] = run_max[:-1]
    prev[first] = np.iinfo(np.int64).min
    add = np.maximum(0, end - np.maximum(start, prev))
    seg = np.flatnonzero(first)
    inst = r[seg]  # the range instances that have kernels
    inst_busy = np.add.reduceat(add, seg)
    inst_last = np.maximum.reduceat(end, seg)
    r_start = ranges["start"].to_numpy()[inst]
    inst_span = np.maximum(ranges["end"].to_numpy()[inst], inst_last) - r_start
    return inst, inst_busy, inst_span
