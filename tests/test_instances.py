"""A captured range's per-iteration figures are its median instance's, as its time is, and a cold
first instance is named under the table instead of being spread into them.

The H100 `exec-train` capture (tests/fixtures/runs/h100-programs) is a training loop of 20 steps
whose first step loads modules and makes cuBLAS's first calls: 236 ms of wall time against 1.2 ms
for the others. As means over the 20 steps its launch CPU time read 1989 us/iter, above the
range's own 1208 us of CPU time, and its GPU idle 8620 us/iter. The figures here are checked
against each range instance recomputed straight from the capture's report.sqlite."""

from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import unpack_run

from orchestrator import load_run
from reports import schema, summary
from reports.unify import RowMaker, idle_gap_rows, launch_cpu_rows

RANGES = ["step", "forward", "backward", "optimizer"]

# every GPU activity with the runtime call that launched it, on the thread of the range the call
# starts in (nsys counts a kernel in the range of the thread that launched it); `step` holds the
# other three and counts theirs, and nothing is nested inside those three
PER_INSTANCE_SQL = """
with act as (
    select start, end, correlationId from CUPTI_ACTIVITY_KIND_KERNEL
    union all select start, end, correlationId from CUPTI_ACTIVITY_KIND_MEMSET
    union all select start, end, correlationId from CUPTI_ACTIVITY_KIND_MEMCPY
)
select r.rowid, r.text, r.start, r.end, a.start, a.end, rt.end - rt.start, k.start is not null
from NVTX_EVENTS r
join CUPTI_ACTIVITY_KIND_RUNTIME rt
    on rt.globalTid = r.globalTid and rt.start >= r.start and rt.start <= r.end
join act a on a.correlationId = rt.correlationId
left join CUPTI_ACTIVITY_KIND_KERNEL k on k.correlationId = a.correlationId and k.start = a.start
order by r.start, a.start
"""


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    # by thread, as the SQL above counts (tests/test_attribution_window.py checks the default,
    # window, against the export)
    folder = unpack_run("exec-train", tmp_path_factory.mktemp("instances"), "h100-programs")
    return folder, load_run(folder, write=True, attribute="thread")


def _instances(sqlite: Path) -> dict[str, list[dict[str, float]]]:
    """Per range, per instance in start order: wall, GPU, idle, typical idle (median gap x gaps),
    launch CPU ns and GPU busy fraction (kernels only, over the range's span), from SQL alone."""
    con = sqlite3.connect(sqlite)
    acts: dict[int, tuple[str, int, int, list]] = {}
    for rid, name, rs, re_, s, e, cpu, is_kernel in con.execute(PER_INSTANCE_SQL):
        acts.setdefault(rid, (name, rs, re_, []))[3].append((s, e, cpu, is_kernel))
    out: dict[str, list[dict[str, float]]] = {}
    for name, rs, re_, a in sorted(acts.values(), key=lambda x: x[1]):
        gaps, reach = [], a[0][1]
        for s, e, _, _ in a[1:]:
            if s > reach:
                gaps.append(s - reach)
            reach = max(reach, e)
        kernels = [(s, e) for s, e, _, k in a if k]
        union, kreach = 0, None
        for s, e in kernels:
            union += e - s if kreach is None else max(0, e - max(s, kreach))
            kreach = e if kreach is None else max(kreach, e)
        out.setdefault(name, []).append(
            {
                "wall": re_ - rs,
                "gpu": sum(e - s for s, e, _, _ in a),
                "idle": sum(gaps),
                "typical": statistics.median(gaps) * len(gaps) if gaps else 0.0,
                "launch": sum(cpu for _, _, cpu, _ in a),
                "busy": union / (max(re_, kreach) - rs),
            }
        )
    return out


def test_launch_cpu_time_is_never_above_the_ranges_own_cpu_time(train):
    t = train[1].table.set_index("variant")
    assert list(t.index) == RANGES
    assert (t["launch_cpu_us"] <= t["cpu_median_us"]).all(), t[["launch_cpu_us", "cpu_median_us"]]


def test_every_per_iteration_figure_is_the_median_instances(train):
    folder, run = train
    t = run.table.set_index("variant")
    # what the table reads, to the digit
    assert t["time_median_us"].round(4).to_dict() == {
        "step": 205.2805,
        "forward": 81.7445,
        "backward": 0.992,
        "optimizer": 122.5615,
    }
    assert t["cpu_median_us"].round(4).to_dict() == {
        "step": 1208.101,
        "forward": 246.358,
        "backward": 581.372,
        "optimizer": 370.811,
    }
    assert t["launch_cpu_us"].round(4).to_dict() == {
        "step": 111.0255,
        "forward": 47.433,
        "backward": 6.745,
        "optimizer": 56.2595,
    }
    assert t["gpu_idle_us_per_iter"].round(4).to_dict() == {
        "step": 926.3275,
        "forward": 85.169,
        "backward": 0.0,
        "optimizer": 55.3125,
    }
    assert t["gpu_busy_pct"].round(1).to_dict() == {
        "step": 17.0,
        "forward": 33.1,
        "backward": 0.2,
        "optimizer": 33.0,
    }
    # and the same from the export itself, instance by instance, with no code of the project's
    inst = _instances(folder / "report.sqlite")
    assert sorted(inst) == sorted(RANGES) and all(len(v) == 20 for v in inst.values())
    for name, xs in inst.items():
        med = {k: statistics.median(x[k] for x in xs) for k in xs[0]}
        r = t.loc[name]
        assert r["time_median_us"] == pytest.approx(med["gpu"] / 1e3, rel=1e-12)
        assert r["cpu_median_us"] == pytest.approx(med["wall"] / 1e3, rel=1e-12)
        assert r["launch_cpu_us"] == pytest.approx(med["launch"] / 1e3, rel=1e-12)
        assert r["gpu_idle_us_per_iter"] == pytest.approx(med["idle"] / 1e3, rel=1e-12, abs=1e-12)
        assert r["gpu_busy_pct"] == pytest.approx(med["busy"] * 100, rel=1e-9)
        # host-bound: the median instance's typical gap against a tenth of the GPU work
        bound = med["typical"] / 1e3 > 0.10 * r["time_median_us"]
        assert (r["host_bound"] == "host-bound") == bound, name
        # the mean over the steps, which the table read before, is far from it
        assert np.mean([x["idle"] for x in xs]) > 2 * med["idle"] or med["idle"] == 0
    assert list(t["host_bound"]) == ["host-bound", "host-bound", "", "host-bound"]
    assert t.loc["step", "why"] == (
        "host-bound: the GPU idles 926.3 us/iter between launches against 205.3 us of GPU work; "
        "launch calls 111.0 us CPU/iter"
    )


def test_a_cold_first_step_is_named_under_the_table(train):
    folder, run = train
    inst = _instances(folder / "report.sqlite")
    first, rest = inst["step"][0]["wall"], statistics.median(x["wall"] for x in inst["step"][1:])
    assert (first, rest) == (236468344, 1207526.0)
    lines = [ln for ln in run.footer() if "instance 1 of" in ln]
    assert lines[0] == (
        "warning: step: instance 1 of 20 took 236.47 ms, the others 1.21 ms (median): start-up, "
        "not spread into the medians"
    )
    assert [ln.split(":")[1].strip() for ln in lines] == RANGES
    assert (
        "warning: start-up instances: time, CPU, launch CPU, GPU busy and GPU idle are the median "
        "instance's; launches/iter and the kernels' us/iter are means over every instance, the first "
        "one in them"
    ) in run.footer()
    # the figures that stay means say so: 29 launches in the first step against 17 in the others
    assert run.table.set_index("variant").loc["step", "launches_per_iter"] == 17.6


def test_a_steady_loop_names_no_instance(tmp_path):
    """The H200 capture of the same loop with its warm-up outside the ranges: no first instance
    stands out, so no line."""
    run = load_run(unpack_run("exec-train-steady", tmp_path, "h200-programs"))
    assert not [ln for ln in run.footer() if "instance 1 of" in ln or "start-up" in ln]


def _act(start: list[float], end: list[float], inst: list[int], cpu: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"start": start, "end": end, "range_id": inst, "launch_cpu_ns": cpu})


@pytest.mark.parametrize("missing_time", [False, True], ids=["vectorised", "loop"])
def test_each_instance_has_its_own_idle_and_launch_figures(missing_time):
    """Two instances of 2 iterations each, the second's gaps uneven (its typical gap is less than
    its mean); an activity with no end (a damaged record) takes the one-interval-at-a-time path
    to the same figures."""
    act = _act(
        [0, 20, 70, 100, 110, 131, 200],
        [10, 40, 80, 104, 130, 140, 205],
        [7, 7, 7, 9, 9, 9, 9],
        [5, 6, 7, 1, np.nan, 2, 3],  # a launch whose call was not found counts 0
    )
    if missing_time:
        act.loc[6, "end"] = np.nan  # the last interval: it ends no gap
    rows = RowMaker("r", "program", "w")
    idle_gap_rows(rows, "v", act, "start", "end", instance="range_id", iters_per_instance=2)
    launch_cpu_rows(rows, "v", act, "range_id", 2)
    f = rows.frame()

    def of(metric: str) -> list[float]:
        return f.loc[f["metric"] == metric, "value"].tolist()

    assert of("gpu_idle_gap_ns") == [10.0, 30.0, 6.0, 1.0, 60.0]
    assert of(schema.IDLE_PER_ITER) == [20.0, 33.5]  # (10 + 30) / 2, (6 + 1 + 60) / 2
    assert of(schema.IDLE_TYPICAL_PER_ITER) == [20.0, 9.0]  # median gap x gaps / 2
    assert of(schema.LAUNCH_CPU_PER_ITER) == [9.0, 3.0]


def test_one_instance_keeps_the_old_figures():
    """Without iters_per_instance (an nsys or torch-trace workload run: one range of every
    iteration) only the gaps are written, and the table takes every gap over the iterations."""
    rows = RowMaker("r", "nsys", "w")
    idle_gap_rows(
        rows, "v", _act([0, 20, 70], [10, 40, 80], [0, 0, 0], [1, 1, 1]), "start", "end", "range_id"
    )
    assert set(rows.frame()["metric"]) == {"gpu_idle_gap_ns"}
    assert summary.start_up_warnings(rows.frame(), pd.DataFrame({"variant": ["v"]})) == []
