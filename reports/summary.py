"""From the long-form frame to the per-variant table a person reads.

Statistics derive from the raw samples kept in the frame: `time_ns` (one per iteration, what
the backend measures as the variant's time), `cpu_time_ns`, `kernel_time_ns` (one per launch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from reports import flops, operators, plausibility, schema, why
from reports.kernels import aggregate, weighting_note
from reports.names import short_kernel_name
from reports.roofline import declared_tensor_point
from reports.roofline import point as roofline_point
from reports.schema import (
    ALL_KERNELS,
    FIRST_INSTANCE,
    FIRST_INSTANCE_RATIO,
    FROM_OTHER_THREADS,
    FROM_OTHER_THREADS_NS,
    ITERATIONS_IN_REPORT,
    LAUNCH_CPU_PER_ITER,
    LOST_EVENTS,
    NO_ACTIVITY,
    NO_RANGE,
    NOT_IN_REPORT,
    OTHER_RANGE_LAUNCHES,
    OTHER_THREAD_LAUNCHES,
    OUTSIDE,
    UNEVEN_LAUNCHES,
    WALL_TIME_ONLY,
)
from reports.unify import ACTIVITY_METRIC
from workloads.statuses import NO_GPU_WORK
from workloads.stopping import noise_pct

ACTIVITY_METRICS = list(ACTIVITY_METRIC.values())

# between the full kernel names of `kernels_full` (they hold commas, never this)
FULL_NAMES_SEP = "; "

# a call's peak above its result by more than this fraction, and these bytes, is noted (temporaries)
TEMPORARIES_OVER, TEMPORARIES_MIN_BYTES = 0.10, 64 * 2**10

# IQR / median above this is called out: the numbers are too noisy to rank variants by
HIGH_SPREAD = 0.10

# the note of a variant timed once (nsys on the CPU: its range's wall time over its iterations;
# `time --iters 1`): nothing tells its difference from another variant from noise, so no speedup
SINGLE_SAMPLE = "n=1: one sample, so no spread (IQR, CV) to show and no speedup"

# the per-variant table's columns, and the ones aggregated straight from a metric (reports/schema.py)
TABLE_COLUMNS = [c.name for c in schema.columns(schema.VARIANT)]
AGGREGATED = [c for c in schema.columns(schema.VARIANT) if c.source]


def sample_stats(values: np.ndarray) -> dict[str, float]:
    """median, IQR, min, mean, CV (standard deviation over the mean) and n of the finite values.
    One sample has no spread: its IQR and CV are NaN, not 0."""
    v = np.asarray(values, dtype="float64")
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {k: float("nan") for k in ("median", "iqr", "min", "mean", "cv")} | {"n": 0.0}
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    mean = float(v.mean())
    spread = v.size > 1
    return {
        "median": float(med),
        "iqr": float(q3 - q1) if spread else float("nan"),
        "min": float(v.min()),
        "mean": mean,
        "cv": float(v.std(ddof=1) / mean) if spread and mean else float("nan"),
        "n": float(v.size),
    }


def _also(note: str, more: str) -> str:
    """A variant's note with one more clause."""
    return f"{note}; {more}" if note else more


def _noise(n: float, times: np.ndarray) -> float:
    """The median's 95% CI half-width over the median, percent (workloads/stopping.py)."""
    times = np.asarray(times, dtype=np.float64)
    # sorted by numpy first: noise_pct's own sort of a sorted list is then one pass
    x = noise_pct(np.sort(times[np.isfinite(times)]).tolist()) if n >= 5 else np.nan
    return x if np.isfinite(x) else np.nan


def variant_table(frame: pd.DataFrame, wman: dict[str, Any]) -> pd.DataFrame:
    """One row per variant of the workload manifest (ok, skipped and failed alike), with the
    speedup over the baseline, the variants sharing its kernels and the why columns."""
    kernel_sets: dict[str, frozenset[str]] = {}
    by_variant = {v: g for v, g in frame.groupby("variant", sort=False)} if not frame.empty else {}
    rows = [_variant_row(v, by_variant.get(v["name"]), wman, kernel_sets) for v in wman.get("variants", [])]
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    if table.empty:
        return table
    for c in schema.columns(schema.VARIANT):
        if c.blank == "":
            table[c.name] = table[c.name].astype(object).fillna("")
    _add_speedup(table, wman)
    table["same_kernel_as"] = _same_kernels(table["variant"], kernel_sets)
    table["same_ops_as"] = operators.same_operators(frame, table["variant"])

    return why.why_columns(frame, table, wman)


def _variant_row(
    v: dict[str, Any], g: pd.DataFrame | None, wman: dict[str, Any], kernel_sets: dict[str, frozenset[str]]
) -> dict[str, Any]:
    """One variant's row: its status, numbers and note. Records the kernels a measured variant
    launched in kernel_sets (by name), for same_kernel_as."""
    name = v["name"]
    # an imported capture counts iterations per variant (its ranges' instances); time mode
    # without --iters samples each variant until its stop rule is met: no one count
    iters = v.get("iters") or wman.get("iters") or 1
    row: dict[str, Any] = {"variant": name, "label": v.get("label", name), "status": v.get("status", "")}
    note = v.get("reason") or v.get("error") or ""
    if v.get("holds"):  # an imported capture's range that holds other variants' ranges
        note = f"nested: holds {', '.join(v['holds'])} (its numbers include theirs; no speedup)" + (
            f"; {note}" if note else ""
        )
    check = v.get("check") if isinstance(v.get("check"), dict) else {}
    row.update(
        max_abs_error=check.get("max_abs_error", np.nan), max_rel_error=check.get("max_rel_error", np.nan)
    )
    lost = g.loc[g["metric"] == NOT_IN_REPORT, "value"] if g is not None else ()
    if (
        len(lost)
        and lost.iloc[0] == NO_ACTIVITY
        and wman.get("status") == "ok"
        and not (g["metric"] == LOST_EVENTS).any()
    ):
        # its range is there, the run ended whole, the profiler lost nothing, and nothing ran in
        # it: it launched no GPU work
        row["status"] = NO_GPU_WORK if row["status"] == "ok" else row["status"]
        note = _also(
            note,
            "no GPU work: its range holds no kernel, memset or copy (a result kept from an earlier call, or "
            "work done on the host); no time, no speedup",
        )
    elif len(lost):
        row["status"] = "not in report"
        what = "no range for it" if lost.iloc[0] == NO_RANGE else "no GPU activity in its range"
        note = f"it ran, but the profiler's report has {what} (the report is incomplete)"
    elif g is not None and not g.empty and row["status"] != "ok" and not (g["metric"] == "time_ns").any():
        note = _stopped_row(row, g, note)
    elif g is not None and not g.empty:
        env = wman.get("env") or {}
        roof = env.get("memory_roof") if isinstance(env.get("memory_roof"), dict) else {}
        t, kernel_sets[name] = _measured_columns(
            row,
            g,
            iters,
            env.get("peak_bandwidth_bytes_per_s"),
            roof.get("bytes_per_s"),
            env.get("peak_flops"),
        )
        flops.columns(row, g, v, env, t["median"], iters)
        apart = flops.declared_against_counted(g)
        if apart:
            note = _also(note, apart)
        # a tensor-core variant's roofline point from its declared FLOPs (ncu counts SIMT work only)
        row.update(
            declared_tensor_point(g, row, v.get("flop_unit"), flops.unit_peak(v.get("flop_unit"), env))
        )
        weighted = weighting_note(g)
        if weighted:
            note = _also(note, weighted)
        note = _run_notes(row, v, wman, t, note)
        note = _report_notes(row, g, iters, note)
        note = _memory_notes(row, g, note)
        if t["n"] == 1:
            note = _also(note, SINGLE_SAMPLE)
        if t["median"] > 0 and t["iqr"] / t["median"] > HIGH_SPREAD:
            note = _also(note, f"high spread: IQR is {t['iqr'] / t['median']:.0%} of the median")
        if t["n"] >= 5 and t["min"] > 0 and t["median"] > schema.TWO_SPEEDS_RATIO * t["min"]:
            row["status"] = "noisy" if row["status"] == "ok" else row["status"]
            note = _also(note, schema.two_speeds_note(t["median"] / 1e3, t["min"] / 1e3))
        for clause in plausibility.judge(row, v, wman):
            note = _also(note, clause)
    row["note"] = note
    return row


def _stopped_row(row: dict[str, Any], g: pd.DataFrame, note: str) -> str:
    """A variant stopped part-way (interrupted, or failed) without a time sample: the kernels the
    profiler caught go in row; returns its note (no per-iteration numbers)."""
    k = g[g["metric"].isin(ACTIVITY_METRICS) & (g["kernel"] != ALL_KERNELS)]
    if len(k):
        names = k.groupby("kernel", sort=False)["value"].size()
        row["kernels"] = ", ".join(short_kernel_name(n) for n in names.index)
        row["kernels_full"] = FULL_NAMES_SEP.join(names.index)
        note = _also(
            note,
            (
                f"{row['status']} part-way: {len(k)} GPU activities recorded before it stopped; no "
                f"per-iteration numbers (the rows are in frame.parquet)"
            ),
        )
    return note


def _measured_columns(
    row: dict[str, Any],
    g: pd.DataFrame,
    iters: int,
    peak: float | None,
    roof: float | None = None,
    peak_flops: dict[str, Any] | None = None,
) -> tuple[dict[str, float], frozenset[str]]:
    """Fills a measured variant's numeric columns into row from its rows g; returns the
    statistics of its time samples and the set of kernels it launched. `peak`: the DRAM peak
    bytes/s, `roof` the measured one, `peak_flops` the datasheet's FLOP/s by unit."""
    times = g.loc[g["metric"] == "time_ns", "value"].to_numpy()
    t = sample_stats(times)
    c = sample_stats(g.loc[g["metric"] == "cpu_time_ns", "value"].to_numpy())
    k = g[(g["metric"] == "kernel_time_ns") & (g["kernel"] != ALL_KERNELS)]
    launches = k.groupby("kernel", sort=False)["value"].size()
    other = sorted(
        {m.split("_")[0] for m in g["metric"].unique() if m in ("memset_time_ns", "memcpy_time_ns")}
    )
    bytes_moved = g.loc[g["metric"] == "bytes_moved", "value"]
    gbps = float(bytes_moved.iloc[0]) / t["median"] if len(bytes_moved) and t["median"] > 0 else np.nan
    row.update(
        kernels=", ".join([short_kernel_name(n) for n in launches.index] + [f"+{o}" for o in other]),
        kernels_full=FULL_NAMES_SEP.join(launches.index),
        launches_per_iter=float(launches.sum()) / iters if len(launches) else np.nan,
        time_median_us=t["median"] / 1e3,
        time_iqr_us=t["iqr"] / 1e3,
        time_min_us=t["min"] / 1e3,
        time_cv_pct=t["cv"] * 100,
        samples=t["n"],
        noise_pct=_noise(t["n"], times),
        cpu_median_us=c["median"] / 1e3,
        achieved_gb_s=gbps,
        pct_of_peak_bw=gbps * 1e9 / peak * 100 if peak else np.nan,
    )
    # a capture's range: the median instance's, as the time is; else all launches over the iterations
    per_instance = g.loc[g["metric"] == LAUNCH_CPU_PER_ITER, "value"]
    launch = g.loc[g["metric"] == "launch_cpu_time_ns", "value"]
    if len(per_instance):
        row["launch_cpu_us"] = float(per_instance.median()) / 1e3
    elif len(launch):
        row["launch_cpu_us"] = float(launch.sum()) / iters / 1e3
    for col in AGGREGATED:  # NaN where the backend does not measure it
        row[col.name] = aggregate(g, col)
    if pd.notna(row.get("dram_pct_of_peak")) and pd.notna(row.get("sm_pct_of_peak")):
        row["bound"] = "memory" if row["dram_pct_of_peak"] >= row["sm_pct_of_peak"] else "compute"
    # reports/roofline.py: ncu's roofline rates (SIMT or tensor cores), time-weighted
    row.update(roofline_point(g, roof, peak_flops if isinstance(peak_flops, dict) else None))
    return t, frozenset(launches.index)


def _run_notes(
    row: dict[str, Any], v: dict[str, Any], wman: dict[str, Any], t: dict[str, float], note: str
) -> str:
    """The note's clauses on how the variant's run went (stopped part-way, held, clocks, noisy);
    a median not known to --max-noise turns an ok row "noisy"."""
    if row["status"] in schema.PART_WAY:  # stopped part-way (interrupted, timed out): over what it took
        note = _also(
            note,
            (
                f"{row['status']} part-way: {t['n']:.0f}"
                + (f" of {wman['iters']}" if wman.get("iters") else "")
                + " samples taken; the numbers are over those"
            ),
        )
    if v.get("stream_note") and v["stream_note"] not in note:  # where its GPU work ran (workloads/streams.py)
        note = _also(note, v["stream_note"])
    if v.get("hold_note"):
        note = _also(note, v["hold_note"])
    if v.get("time_clock") == "events":  # the kernel clock was on, but not every call had a record
        missed = sum(k is None for k in v.get("kernel_samples_ns") or [])
        note = _also(
            note,
            f"median from the CUDA events: {missed} call(s) had no GPU work of their own in "
            "CUPTI's records (no kernel, memset or copy launched by the call)",
        )
    if v.get("clock_note"):  # NVML saw the GPU slow down while this variant was timed
        note = _also(note, f"clocks: {v['clock_note']}; its samples ran slower")
    rule = wman.get("stop_rule") or {}
    if v.get("converged") is False and rule.get("max_noise_pct") is not None and row["status"] == "ok":
        row["status"] = "noisy"
        note = _also(
            note,
            (
                f"noisy: the median is known to +-{row['noise_pct']:.2f}% after {t['n']:.0f} samples in "
                f"{rule.get('max_time_s', 0):g} s, not the {rule['max_noise_pct']:g}% asked (--max-noise)"
            ),
        )
    return note


# why launches by other threads are not a range's: the same words for both notes that count them
_BY_LAUNCHING_THREAD = (
    "(nsys, as nvtx_kern_sum, counts a kernel in the range of the thread that launched "
    "it; PyTorch's backward launches from its own thread)"
)


def _report_notes(row: dict[str, Any], g: pd.DataFrame, iters: int, note: str) -> str:
    """The note's clauses on what the profiler's report lacks (uneven launches, wall time only,
    lost iterations); a report without whole iterations turns the row "incomplete"."""
    uneven = g.loc[g["metric"] == UNEVEN_LAUNCHES, "value"]
    if len(uneven):
        n = float(uneven.iloc[0])
        row["status"] = "incomplete"
        note = _also(
            note,
            (
                f"{n:g} launches do not split into {iters} iterations ({n / iters:.3g}/iter): no "
                f"per-iteration time (the report lost launches or is damaged; each launch is in frame.parquet)"
            ),
        )
    wall_only = g.loc[g["metric"] == WALL_TIME_ONLY, "value"]
    if len(wall_only):
        others = float(wall_only.iloc[0])
        note = _also(
            note,
            (
                "no GPU work launched from its own thread inside the range: the time is the range's "
                "wall time"
                + (
                    f"; {others:g} kernel launches by other threads fell inside it {_BY_LAUNCHING_THREAD}"
                    if others
                    else ""
                )
            ),
        )
    beside = g.loc[g["metric"] == OTHER_THREAD_LAUNCHES, "value"]
    if len(beside):
        note = _also(
            note,
            (
                f"{float(beside.iloc[0]):g} kernel launches by other threads fell inside it, "
                f"not counted {_BY_LAUNCHING_THREAD}"
            ),
        )
    came = g.loc[g["metric"].isin([FROM_OTHER_THREADS, FROM_OTHER_THREADS_NS])]
    if len(came):
        n, ns = (
            float(came.loc[came["metric"] == m, "value"].sum())
            for m in (FROM_OTHER_THREADS, FROM_OTHER_THREADS_NS)
        )
        note = _also(
            note,
            (
                f"from other threads: {n / iters:.3g} kernel launches/iter, {ns / iters / 1e3:.2f} us/iter "
                "of GPU time (memsets and copies too), launched while their own thread had no range open "
                "(--attribute thread leaves them out, as nvtx_kern_sum does)"
            ),
        )
    elsewhere = g.loc[g["metric"] == OTHER_RANGE_LAUNCHES, "value"]
    if len(elsewhere):
        note = _also(
            note,
            (
                f"{float(elsewhere.iloc[0]):g} kernel launches by other threads fell inside it, counted "
                "in ranges open on their own threads (or on a third one, in a range that started later)"
            ),
        )
    if (g["metric"] == LOST_EVENTS).any():
        row["status"] = "incomplete"
        note = _also(
            note,
            "the profiler lost events in this run (see the warning): any of its GPU work may be "
            "missing, so its numbers are not a result",
        )
    seen = g.loc[g["metric"] == ITERATIONS_IN_REPORT, "value"]
    if len(seen):
        row["status"] = "incomplete"
        note = _also(
            note,
            (
                f"the report holds {float(seen.iloc[0]):g} of its {iters} iterations: no per-iteration "
                f"time (the report lost events or is damaged)"
            ),
        )
    return note


def _memory_notes(row: dict[str, Any], g: pd.DataFrame, note: str) -> str:
    """The note's clauses on one call's memory: a peak more than TEMPORARIES_OVER its result
    (and over TEMPORARIES_MIN_BYTES: allocator rounding and scalars are no trade-off), and a call
    that made the allocator reserve new memory from the driver."""
    peak, result = row.get("peak_mib"), row.get("result_mib")
    if pd.notna(peak) and pd.notna(result):
        over = (peak - result) * 2**20
        if over > TEMPORARIES_OVER * result * 2**20 and over > TEMPORARIES_MIN_BYTES:
            note = _also(note, f"temporaries: {over / 2**20:,.2f} MiB above the result")
    if (g["metric"] == "call_reserved_new").any():
        note = _also(note, "its call made the allocator reserve new memory from the driver")
    return note


def mark_lost_events(frame: pd.DataFrame, wman: dict[str, Any]) -> pd.DataFrame:
    """The frame with a LOST_EVENTS row for every variant it measured: the profiler said it lost
    events, and which variant's GPU work they were is not known (a thread's API events go)."""
    measured = [v for v in frame["variant"].unique() if v != OUTSIDE] if not frame.empty else []
    if not measured:
        return frame
    base = frame.iloc[0]
    rows = [
        {
            "run": base["run"],
            "backend": base["backend"],
            "workload": base["workload"],
            "variant": v,
            "kernel": ALL_KERNELS,
            "metric": LOST_EVENTS,
            "value": 1.0,
            "unit": "flag",
        }
        for v in measured
    ]
    return schema.concat([frame, schema.make_frame(rows)])


def _add_speedup(table: pd.DataFrame, wman: dict[str, Any]) -> None:
    """speedup_vs_baseline, where the baseline has a time and holds no other variant's range."""
    baseline = wman.get("baseline")
    base = table.loc[table["variant"] == baseline, "time_median_us"]
    # a range holding others is their sum plus its own work: not an alternative to compare
    nested = {v["name"] for v in wman.get("variants", []) if v.get("holds")}
    if len(base) and pd.notna(base.iloc[0]) and baseline not in nested:
        table["speedup_vs_baseline"] = base.iloc[0] / table["time_median_us"]
        # a range holding others, or a variant whose report is not whole: no ratio to stand on
        table.loc[
            table["variant"].isin(nested) | table["status"].isin(("incomplete", *schema.UNRANKED)),
            "speedup_vs_baseline",
        ] = np.nan
        # a ratio of single readings is noise (SINGLE_SAMPLE), the baseline's or the variant's
        once = table["samples"] == 1
        table.loc[once | bool(once[table["variant"] == baseline].any()), "speedup_vs_baseline"] = np.nan


def _same_kernels(variants: pd.Series, kernel_sets: dict[str, frozenset[str]]) -> list[str]:
    """For each variant, the other variants whose launches are the very same kernels."""
    same = []
    for name in variants:
        ks = kernel_sets.get(name)
        same.append(", ".join(o for o, oks in kernel_sets.items() if o != name and ks and oks == ks))
    return same


def outside_activity(frame: pd.DataFrame) -> pd.DataFrame:
    """GPU work outside every variant's range: kernel, launches, total time."""
    k = frame[
        (frame["variant"] == OUTSIDE)
        & frame["metric"].isin(["kernel_time_ns", "memset_time_ns", "memcpy_time_ns"])
    ]
    if k.empty:
        return pd.DataFrame(columns=["kernel", "launches", "total_us"])
    # each distinct name shortened once: a large capture has millions of rows and a few names
    codes, names = pd.factorize(k["kernel"], use_na_sentinel=False)
    k = k.assign(short=np.array([short_kernel_name(n) for n in names], dtype=object)[codes])
    g = k.groupby("short", sort=False)["value"].agg(["size", "sum"]).reset_index()
    return pd.DataFrame({"kernel": g["short"], "launches": g["size"], "total_us": g["sum"] / 1e3})


def warnings_for(table: pd.DataFrame, frame: pd.DataFrame | None = None) -> list[str]:
    """One warning per variant whose spread is too high to rank it by (unless its median is
    known to within 1%), and per variant that ran at two speeds (reports.schema.TWO_SPEEDS_RATIO),
    saying how to get a steadier number; with the frame, per captured range whose first instance
    was start-up (start_up_warnings)."""
    out = start_up_warnings(frame, table) if frame is not None else []
    for _, r in table.iterrows():
        # a median known to within 1% ranks variants whatever the spread of single samples
        if "high spread" in str(r["note"]) and not (pd.notna(r.get("noise_pct")) and r["noise_pct"] < 1):
            out.append(
                f"{r['variant']}: {r['note'].split('high spread: ')[-1].split('; ')[0]}; rerun with more "
                f"--iters or on a quieter machine before ranking"
            )
        if "two speeds: " in str(r["note"]):  # whatever noise_pct says: a narrow CI of a mixture
            out.append(
                f"{r['variant']}: {r['note'].split('two speeds: ')[-1].split('; ')[0]}; its median and "
                f"every speedup over it are no steady time: rerun on a quieter machine before ranking"
            )
    return out


def start_up_warnings(frame: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """One line per captured range (exec/import) of the table whose first instance took more than
    FIRST_INSTANCE_RATIO times the median of the others (wall time, as its CPU us): a training
    loop's first step, loading modules and making cuBLAS's first calls; then one line on what that
    means for the table. Its time, CPU, launch CPU, GPU busy and idle figures are medians over the
    instances, so the instance is named here rather than spread into them; the counts and the
    kernels' times per iteration stay means."""
    if frame.empty or not (frame["metric"] == FIRST_INSTANCE).any():
        return []
    rows = frame[frame["metric"].isin((FIRST_INSTANCE, "cpu_time_ns", "iterations"))]
    by_variant = {v: g for v, g in rows.groupby("variant", sort=False)}
    out = []
    for name in table["variant"]:
        g = by_variant.get(name)
        first = g.loc[g["metric"] == FIRST_INSTANCE, "value"] if g is not None else ()
        if not len(first):
            continue
        walls = g.loc[g["metric"] == "cpu_time_ns", "value"].to_numpy(dtype=np.float64)
        # the others: its samples less the first instance's own (one of them)
        hit = np.flatnonzero(walls == first.iloc[0])
        others = np.delete(walls, hit[:1])
        if not len(hit) or not len(others):
            continue
        rest, took = float(np.median(others)), float(first.iloc[0])
        if rest > 0 and took > FIRST_INSTANCE_RATIO * rest:
            iters = g.loc[g["metric"] == "iterations", "value"]
            each = " per iteration" if len(iters) and float(iters.iloc[0]) > len(walls) else ""
            out.append(
                f"{name}: instance 1 of {len(walls)} took {_ms(took)}{each}, the others {_ms(rest)} "
                "(median): start-up, not spread into the medians"
            )
    if out:
        out.append(
            "start-up instances: time, CPU, launch CPU, GPU busy and GPU idle are the median instance's; "
            "launches/iter and the kernels' us/iter are means over every instance, the first one in them"
        )
    return out


def _ms(ns: float) -> str:
    """A wall time in ms: two decimals from 1 ms, three significant digits under it."""
    ms = ns / 1e6
    return f"{ms:,.2f} ms" if ms >= 1 else f"{ms:.3g} ms"
