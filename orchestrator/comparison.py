"""Two runs of one workload, variant by variant: B's median over A's, and whether the change
exceeds the runs' spread (also sweep against sweep, point by point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator import backends
from orchestrator.errors import ParseError, UsageError
from orchestrator.loading import load_run
from orchestrator.multirun import MultiRun
from orchestrator.results import Run
from reports.schema import MEASURES


def compare(
    path_a: str | Path, path_b: str | Path, *, allow_mismatch: bool = False
) -> tuple[pd.DataFrame, Run | MultiRun, Run | MultiRun]:
    """Variant by variant: B's median over A's, and whether the change exceeds the runs' spread.

    Runs of another workload, size, shape or dtype, or whose variants ran other kernels, are
    refused (UsageError naming what differs) unless `allow_mismatch`, and so are runs whose medians
    time different things (each backend's `measures()`: CUDA events against kernel durations, ncu's
    replay, the host's wall time), whatever their backends, or timed another way on a GPU (L2
    flush, hold, CUDA graph). Sweeps are compared point
    by point on (size, dtype); a single run against a sweep, with the sweep's point of its size
    and dtype. On different GPUs each run's % of its GPU's peak bandwidth is compared too. The
    table's `attrs["notes"]` says so, and what was allowed to differ; `attrs["lost"]` names the
    variants A measured and B did not (failed, skipped, absent), with why.

    Example:
        >>> table, a, b = compare("gprof-runs/before", "gprof-runs/after")
        >>> table[["variant", "ratio_b_over_a", "verdict"]]
    """
    # why lazy: it imports numpy, which importing comparison must not
    from reports import merge

    loaded = [load_run(p) for p in (path_a, path_b)]
    pa, pb = (_points(r) for r in loaded)
    pairs, allowed = _pair_points(pa, pb, str(path_a), str(path_b), allow_mismatch)
    notes = []
    for name, mine, other in ((path_a, pa, pb), (path_b, pb, pa)):
        if len(mine) == 1 and len(other) > 1:
            notes.append(
                f"{name} is one run: compared with the sweep's point of its size and dtype "
                f"(size {pairs[0][0][0]} {pairs[0][0][1]})"
            )
    sweep = len(pa) > 1 or len(pb) > 1 or any(getattr(r, "kind", "") == "sweep" for r in loaded)
    parts, lost, apart, backends_seen = [], [], False, set()
    for (numel, dtype), ra, rb in pairs:
        at = f" at size {numel} {dtype}" if sweep else ""
        differ, measured_apart = _differences(ra, rb, f"{path_a} and {path_b}{at}", allow_mismatch)
        apart = apart or measured_apart
        backends_seen.add((ra.backend, rb.backend))
        allowed += [f"{d}{at}" for d in differ]
        gpu = merge.gpu_note(ra.workload, rb.workload)
        if gpu and gpu not in notes:
            notes.append(gpu)
        t = merge.compare_runs(ra.frame, rb.frame, ra.table, rb.table, peak_bw=gpu is not None)
        lost += [f"{v}{at}: {why}" for v, why in t.attrs["lost"]]
        if sweep and not t.empty:
            t.insert(0, "dtype", rb.workload.get("dtype"))
            t.insert(0, "numel", rb.workload.get("numel"))
        parts.append(t)
    for ba, bb in sorted(backends_seen):  # the runs compared (an `all` folder's is its time run)
        if ba != bb and not apart:
            notes.append(f"different backends ({ba} vs {bb}); their medians time the same thing")
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if table.empty or not (table["verdict"] != "missing").any():
        raise UsageError(f"the runs share no variant that ran: {path_a} and {path_b}")
    table.attrs["notes"] = [f"warning: compared despite a mismatch: {d}" for d in allowed] + notes
    table.attrs["mismatches"] = allowed
    table.attrs["lost"] = lost  # measured in A, not in B: what a gate must not pass
    a, b = (r if getattr(r, "kind", "") == "sweep" else _single(r) for r in loaded)
    return table, a, b


def _differences(ra: Run, rb: Run, names: str, allow_mismatch: bool) -> tuple[list[str], bool]:
    """What makes one pair of runs not comparable (merge.mismatches; how they timed and what their
    medians time, which the hint answers), and whether their medians time different things;
    UsageError unless `allow_mismatch`."""
    # why lazy: it imports numpy, which importing comparison must not
    from reports import merge

    apart = _measures_apart(ra, rb)
    measured = [
        f"what the medians time ({', '.join(vs)}): A {a}, {MEASURES[a]}; B {b}, {MEASURES[b]}"
        for (a, b), vs in apart.items()
    ]
    timing = merge.timing_mismatches(ra.workload, rb.workload) + measured
    differ = merge.mismatches(ra.workload, rb.workload, ra.frame, rb.frame) + timing
    if differ and not allow_mismatch:
        on_host = any(a in HOST_MEASURES and b in HOST_MEASURES for a, b in apart)
        like = (HOST_LIKE_FOR_LIKE if on_host else LIKE_FOR_LIKE) + "; " if timing else ""
        raise UsageError(
            f"cannot compare {names}: " + "; ".join(differ),
            hint=like + "--allow-mismatch compares them anyway",
        )
    return differ, bool(measured)


# the refusal's hint where the medians time different things, or were timed differently
LIKE_FOR_LIKE = (
    "compare like with like: `time --no-kernel-clock` times the events, time's kernel clock, nsys and "
    "torch-trace time the kernels, `time --no-flush-l2` leaves the cache as nsys's loop does; an "
    "`all` folder's runs are its subfolders (ALL/nsys)"
)
# the host's times, bare or under a profiler (reports.schema.MEASURES): a CPU run's
HOST_MEASURES = tuple(m for m in MEASURES if m.startswith("host"))
HOST_LIKE_FOR_LIKE = (
    "on the CPU every backend times the host, and only `time` without a profiler's cost in it: "
    "compare runs of one backend (time with time, torch-trace with torch-trace)"
)


def _measures_apart(ra: Run, rb: Run) -> dict[tuple[str, str], list[str]]:
    """(A's measure, B's) -> the variants measured in both runs whose medians time different
    things (reports.schema.MEASURES), each backend saying what its own do: events against kernel
    durations, a replay, the host bare or under a profiler. A variant one run lacks, skipped or
    failed is `missing` instead, which a gate fails on."""
    # why lazy: it imports numpy, which importing comparison must not
    from reports.merge import MEASURED

    ma, mb = (backends.get(r.backend).measures(r.workload, r.frame) if r.backend else {} for r in (ra, rb))
    both = set.intersection(
        *(
            set(t.loc[t["status"].isin(MEASURED), "variant"]) if "status" in t else set()
            for t in (ra.table, rb.table)
        )
    )
    apart: dict[tuple[str, str], list[str]] = {}
    for v in (v for v in ma if v in mb and v in both and ma[v] != mb[v]):
        apart.setdefault((ma[v], mb[v]), []).append(v)
    return apart


def _points(run: Run | MultiRun) -> dict[tuple[Any, Any], Run]:
    """(numel, dtype) -> the run measured there: each point of a sweep, else the one run."""
    if isinstance(run, MultiRun) and run.kind == "sweep":
        if not run.runs:
            raise ParseError(run.path, "holds no completed run")
        return {(r.workload.get("numel"), r.workload.get("dtype")): r for r in run.runs.values()}
    one = _single(run)
    return {(one.workload.get("numel"), one.workload.get("dtype")): one}


def _pair_points(
    pa: dict, pb: dict, name_a: str, name_b: str, allow_mismatch: bool
) -> tuple[list[tuple[Any, Run, Run]], list[str]]:
    """The (point, A's run, B's run) pairs to compare, matched on size and dtype, and the
    points only one sweep has (allowed by `allow_mismatch`, else refused)."""
    if len(pa) == 1 and len(pb) == 1:  # two single runs: mismatches() judges their sizes
        (ka, ra), (_, rb) = next(iter(pa.items())), next(iter(pb.items()))
        return [(ka, ra, rb)], []

    def points(p: dict) -> str:
        return ", ".join(f"size {n} {d}" for n, d in p)

    common = [k for k in pa if k in pb]
    if not common:
        raise UsageError(
            f"no point of the same size and dtype: {name_a} has {points(pa)}; {name_b} has {points(pb)}"
        )
    only = [(name, [k for k in p if k not in common]) for name, p in ((name_a, pa), (name_b, pb))]
    differ = "; ".join(
        f"only {name} has {points(dict.fromkeys(ks))}"
        for name, ks in only
        if ks and len(pa) > 1 and len(pb) > 1
    )
    if differ and not allow_mismatch:
        raise UsageError(
            f"the sweeps differ in their points: {differ}",
            hint="--allow-mismatch compares the points they share",
        )
    return [(k, pa[k], pb[k]) for k in common], [differ] if differ else []


def _single(run: Run | MultiRun) -> Run:
    """A run's own measurement: for an `all` folder the run of the backend that compares medians
    (Backend.compares_medians: time's), else its first one."""
    if isinstance(run, MultiRun):
        if not run.runs:
            raise ParseError(run.path, "holds no completed run")
        own = [
            r
            for n, r in run.runs.items()
            if n in backends.BACKENDS and backends.backend_class(n).compares_medians
        ]
        return own[0] if own else next(iter(run.runs.values()))
    return run
