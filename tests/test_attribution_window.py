"""By window (`exec nsys` / `import` / `report` `--attribute window`, the default), a kernel launched
by a thread with no chosen range open counts in the innermost range open at its launch on another
thread: PyTorch's backward launches its kernels from autograd's own thread while the main thread
waits in `backward()` inside its range, so that range holds them. By thread (`--attribute thread`)
a folder reads as nsys's nvtx_kern_sum counts, as it did before.

The H100 `exec-train` capture (tests/fixtures/runs/h100-programs: train_small.py, an MLP of
Linear and GELU layers with AdamW, 20 steps of `step` > `forward`, `backward`, `optimizer` pushed
on the main thread) is checked here against its report.sqlite by SQL alone."""

from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli, unpack_run
from test_h200_programs import _kernels_per_variant
from test_nsys_parser import make_export

from orchestrator import load_run
from orchestrator.backends.program_options import ATTRIBUTE_THREAD, ATTRIBUTE_WINDOW, ProgramOptions
from orchestrator.backends.program_threads import from_other_threads_note
from orchestrator.errors import UsageError
from orchestrator.parsers import nsys as ns
from reports import schema

RANGES = ["step", "forward", "backward", "optimizer"]
ITERS = 20

# Per range instance: every GPU activity (kernel, memset, copy) whose launch call (the runtime call
# of the same correlationId in the same process) starts inside the instance's [start, end], on any
# thread: what the range counts by window, its nested ranges' too. `innermost`: those whose
# latest-starting open range at the launch (any thread of the process) is this instance, the range
# a launch goes to where ranges nest. `other`: those launched by a thread other than the range's.
WINDOW_SQL = """
with act as (
    select correlationId, globalPid, start, end, 1 as kernel from CUPTI_ACTIVITY_KIND_KERNEL
    union all select correlationId, globalPid, start, end, 0 from CUPTI_ACTIVITY_KIND_MEMSET
    union all select correlationId, globalPid, start, end, 0 from CUPTI_ACTIVITY_KIND_MEMCPY
), launched as (
    select a.kernel, a.end - a.start as ns, a.globalPid as pid, rt.start as at, rt.globalTid as tid
    from act a join CUPTI_ACTIVITY_KIND_RUNTIME rt
        on rt.correlationId = a.correlationId and (rt.globalTid & ~16777215) = a.globalPid
), ranges as (
    select rowid as id, text as name, start, end, globalTid as tid, globalTid & ~16777215 as pid
    from NVTX_EVENTS where eventType in (59, 60)
), placed as (
    select l.*, (
        select r.id from ranges r where r.pid = l.pid and l.at between r.start and r.end
        order by r.start desc limit 1
    ) as innermost
    from launched l
)
select r.name, r.start,
    coalesce(sum(p.kernel), 0),
    coalesce(sum(p.kernel * p.ns), 0),
    coalesce(sum(p.ns), 0),
    coalesce(sum(p.kernel * (p.innermost = r.id)), 0),
    coalesce(sum(p.kernel * (p.tid != r.tid)), 0),
    coalesce(sum(p.ns * (p.tid != r.tid)), 0)
from ranges r left join placed p on p.pid = r.pid and p.at between r.start and r.end
group by r.id order by r.start
"""
FIELDS = ["kernels", "kernel_ns", "gpu_ns", "innermost", "other", "other_ns"]

# the GPU intervals of every activity, with its launch call's start, for the idle gaps
TIMELINE_SQL = """
with act as (
    select correlationId, globalPid, start, end from CUPTI_ACTIVITY_KIND_KERNEL
    union all select correlationId, globalPid, start, end from CUPTI_ACTIVITY_KIND_MEMSET
    union all select correlationId, globalPid, start, end from CUPTI_ACTIVITY_KIND_MEMCPY
)
select a.start, a.end, rt.start from act a join CUPTI_ACTIVITY_KIND_RUNTIME rt
    on rt.correlationId = a.correlationId and (rt.globalTid & ~16777215) = a.globalPid
order by a.start
"""


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    folder = unpack_run("exec-train", tmp_path_factory.mktemp("window"), "h100-programs")
    return folder, load_run(folder)


def _by_instance(sqlite: Path) -> dict[str, list[dict[str, float]]]:
    """WINDOW_SQL's rows: per range name, per instance in start order, FIELDS and its start."""
    out: dict[str, list[dict[str, float]]] = {}
    with sqlite3.connect(sqlite) as con:
        for name, start, *values in con.execute(WINDOW_SQL):
            out.setdefault(name, []).append({"start": start, **dict(zip(FIELDS, values))})
    return out


def test_every_range_counts_what_was_launched_inside_its_window(train):
    folder, run = train
    inst = _by_instance(folder / "report.sqlite")
    assert sorted(inst) == sorted(RANGES) and all(len(v) == ITERS for v in inst.values())
    t = run.table.set_index("variant")
    assert list(t.index) == RANGES and (t["status"] == "ok").all()
    total = {n: {f: sum(x[f] for x in xs) for f in FIELDS} for n, xs in inst.items()}
    for name, xs in inst.items():
        r = t.loc[name]
        assert r["launches_per_iter"] == pytest.approx(total[name]["kernels"] / ITERS, rel=1e-12), name
        # the median instance's GPU time: its kernels, memsets and copies
        assert r["time_median_us"] == pytest.approx(
            statistics.median(x["gpu_ns"] for x in xs) / 1e3, rel=1e-12
        ), name
    # each kernel once, in its range: launches and GPU ns as the per-kernel rows hold them
    assert _kernels_per_variant(run) == {n: [total[n]["kernels"], total[n]["kernel_ns"]] for n in RANGES}
    assert _kernels_per_variant(run) == {
        "step": [632, 5951222],
        "forward": [160, 1637870],
        "backward": [300, 1851604],
        "optimizer": [172, 2461748],
    }
    # nothing is nested in forward, backward and optimizer: the innermost range of all they count
    for name in ("forward", "backward", "optimizer"):
        assert total[name]["innermost"] == total[name]["kernels"], name
    # step holds them: its launches are theirs and its own (none here), each kernel counted once
    assert total["step"]["kernels"] == sum(total[n]["innermost"] for n in RANGES)
    assert total["step"]["innermost"] == 0
    assert t.loc["step", "launches_per_iter"] == pytest.approx(
        sum(t.loc[n, "launches_per_iter"] for n in ("forward", "backward", "optimizer")), rel=1e-12
    )
    assert t["launches_per_iter"].round(4).to_dict() == {
        "step": 31.6,
        "forward": 8.0,
        "backward": 15.0,
        "optimizer": 8.6,
    }
    assert t["time_median_us"].round(4).to_dict() == {
        "step": 297.682,
        "forward": 81.7445,
        "backward": 93.441,
        "optimizer": 122.5615,
    }


def test_backward_holds_the_kernels_autograds_thread_launched(train):
    folder, run = train
    t = run.table.set_index("variant")
    inst = _by_instance(folder / "report.sqlite")
    other = {n: sum(x["other"] for x in inst[n]) for n in RANGES}
    other_ns = {n: sum(x["other_ns"] for x in inst[n]) for n in RANGES}
    # the loss's grad fill is the main thread's; the other 14 launches a step autograd's thread made
    assert t.loc["backward", "launches_per_iter"] == 15 and other["backward"] == 14 * ITERS
    assert other == {"step": 280, "forward": 0, "backward": 280, "optimizer": 0}
    for name in (
        "vectorized_elementwise_kernel<FillFunctor>",
        "nll_loss_backward_reduce_cuda_kernel_2d",
        "softmax_warp_backward",
        "vectorized_elementwise_kernel<GeluBackwardCUDAKernelImpl>",
        "reduce_kernel<sum_functor>",
        "+memset",
    ):
        assert name in t.loc["backward", "kernels"], name
    assert t.loc["backward", "kernels_full"].count("sm80_xmma_gemm_f32f32_f32f32_f32_n") == 5
    # how much came so: in the frame, and in the note of backward and of step, which holds it
    f = run.frame
    for name in ("step", "backward"):
        g = f[f["variant"] == name].set_index("metric")["value"]
        assert g[schema.FROM_OTHER_THREADS] == other[name]
        assert g[schema.FROM_OTHER_THREADS_NS] == other_ns[name] == 1846355  # its memsets' too
        assert (
            "from other threads: 14 kernel launches/iter, 92.32 us/iter of GPU time (memsets and copies "
            "too), launched while their own thread had no range open (--attribute thread leaves them out, "
            "as nvtx_kern_sum does)"
        ) in t.loc[name, "note"]
        assert "not counted" not in t.loc[name, "note"]
    assert set(f.loc[f["metric"] == schema.FROM_OTHER_THREADS, "variant"]) == {"step", "backward"}
    assert (
        "warning: 300 GPU activities were launched by threads with no range open (PyTorch's backward "
        "launches from autograd's own thread): each counts in the innermost range open on another thread "
        "at its launch (--attribute window; --attribute thread counts them in none, as nsys's "
        "nvtx_kern_sum does)"
    ) in run.footer()
    # the autograd thread's launches are no longer outside every range
    outside = " ".join(ln for ln in run.footer() if ln.startswith("outside the variants' ranges"))
    assert "softmax_warp_backward" not in outside and "[memcpy] x7" in outside


def test_no_host_bound_verdict_rests_on_uncounted_work(train):
    """By thread, step read host-bound with the GPU idle 926.3 us/iter: autograd's kernels, left
    out, looked like idle time between step's launches. By window nothing launched inside a range
    is left out of it, and the GPU idle a range's verdict rests on is idle: no activity of the whole
    capture runs on the GPU in those gaps."""
    folder, run = train
    f = run.frame
    assert (
        not f["metric"]
        .isin([schema.OTHER_THREAD_LAUNCHES, schema.WALL_TIME_ONLY, schema.OTHER_RANGE_LAUNCHES])
        .any()
    )
    with sqlite3.connect(folder / "report.sqlite") as con:
        tl = np.array(con.execute(TIMELINE_SQL).fetchall(), dtype=np.int64)
        spans = {
            name: con.execute(
                "select start, end from NVTX_EVENTS where eventType in (59, 60) and text = ? order by start",
                (name,),
            ).fetchall()
            for name in RANGES
        }
    t = run.table.set_index("variant")
    for name in RANGES:
        idle, typical = [], []
        for rs, re_ in spans[name]:
            mine = tl[(tl[:, 2] >= rs) & (tl[:, 2] <= re_)]  # launched inside, on any thread
            gaps, reach = [], mine[0, 1]
            for s, e in mine[1:, :2]:
                if s > reach:
                    gaps.append(s - reach)
                reach = max(reach, e)
            idle.append(sum(gaps))
            typical.append(statistics.median(gaps) * len(gaps) if gaps else 0.0)
            # every activity the GPU ran between the instance's first start and last end is its own
            lo, hi = mine[:, 0].min(), mine[:, 1].max()
            during = tl[(tl[:, 1] > lo) & (tl[:, 0] < hi)]
            assert len(during) == len(mine), (name, rs)
        r = t.loc[name]
        assert r["gpu_idle_us_per_iter"] == pytest.approx(statistics.median(idle) / 1e3, rel=1e-12, abs=1e-12)
        bound = statistics.median(typical) / 1e3 > 0.10 * r["time_median_us"]
        assert (r["host_bound"] == "host-bound") == bound, name
    assert t["gpu_idle_us_per_iter"].round(4).to_dict() == {
        "step": 834.0705,
        "forward": 85.169,
        "backward": 352.052,
        "optimizer": 55.3125,
    }
    assert t.loc["step", "why"] == (
        "host-bound: the GPU idles 834.1 us/iter between launches against 297.7 us of GPU work; "
        "launch calls 203.4 us CPU/iter"
    )
    assert t.loc["backward", "why"] == (
        "host-bound: the GPU idles 352.1 us/iter between launches against 93.4 us of GPU work; "
        "launch calls 97.8 us CPU/iter"
    )


def test_by_thread_the_folder_reads_as_nvtx_kern_sum_counts(tmp_path):
    """`report --attribute thread` records the choice in workload.json: this report and every
    later one read as before window attribution, backward one launch a step."""
    folder = unpack_run("exec-train", tmp_path, "h100-programs")
    res = run_cli("report", str(folder), "--attribute", "thread", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads((folder / "workload.json").read_text())["attribute"] == "thread"
    for run in (load_run(folder), load_run(folder, write=True, attribute="thread")):
        t = run.table.set_index("variant")
        assert t["launches_per_iter"].round(4).to_dict() == {
            "step": 17.6,
            "forward": 8.0,
            "backward": 1.0,
            "optimizer": 8.6,
        }
        assert t.loc["backward", "time_median_us"] == pytest.approx(0.992, rel=1e-12)
        assert t.loc["backward", "kernels"] == "vectorized_elementwise_kernel<FillFunctor>"
        assert t.loc["backward", "note"] == (
            "300 kernel launches by other threads fell inside it, not counted (nsys, as nvtx_kern_sum, "
            "counts a kernel in the range of the thread that launched it; PyTorch's backward launches "
            "from its own thread)"
        )
        assert t.loc["step", "why"] == (
            "host-bound: the GPU idles 926.3 us/iter between launches against 205.3 us of GPU work; "
            "launch calls 111.0 us CPU/iter"
        )
        assert _kernels_per_variant(run) == {
            "step": [352, 4119779],
            "forward": [160, 1637870],
            "backward": [20, 20161],
            "optimizer": [172, 2461748],
        }
        assert not any(
            "GPU activities were launched by threads with no range open" in ln for ln in run.footer()
        )
    doc = json.loads(res.stdout)
    assert {v["variant"]: v["launches_per_iter"] for v in doc["variants"]}["backward"] == 1
    # and back: the default view, recorded again
    res = run_cli("report", str(folder), "--attribute", "window", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads((folder / "workload.json").read_text())["attribute"] == "window"
    assert load_run(folder).table.set_index("variant").loc["backward", "launches_per_iter"] == 15


def test_import_takes_and_records_the_attribution(tmp_path):
    folder = unpack_run("exec-train", tmp_path, "h100-programs")
    # a capture of no run folder: no workload.json to borrow the choice from
    alone = tmp_path / "alone" / "train.sqlite"
    alone.parent.mkdir()
    alone.write_bytes((folder / "report.sqlite").read_bytes())
    res = run_cli("import", str(alone), "--attribute", "thread", "--out", str(tmp_path / "thread"))
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "thread" / "manifest.json").read_text())["request"]
    assert rec["options"]["attribute"] == "thread"
    assert json.loads((tmp_path / "thread" / "workload.json").read_text())["attribute"] == "thread"
    thread = load_run(tmp_path / "thread").table.set_index("variant")
    assert thread.loc["backward", "launches_per_iter"] == 1
    res = run_cli("import", str(alone), "--out", str(tmp_path / "window"))
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "window" / "workload.json").read_text())["attribute"] == "window"
    window = load_run(tmp_path / "window").table.set_index("variant")
    assert window.loc["backward", "launches_per_iter"] == 15
    # the export of a run folder keeps that run's choice, as it keeps its ranges and name
    (folder / "workload.json").write_text(
        json.dumps({**json.loads((folder / "workload.json").read_text()), "attribute": "thread"})
    )
    res = run_cli("import", str(folder / "report.sqlite"), "--out", str(tmp_path / "borrowed"))
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "borrowed" / "workload.json").read_text())["attribute"] == "thread"


def test_the_attribute_option_is_refused_where_it_means_nothing(cli, tmp_path):
    trace = Path(__file__).resolve().parent / "fixtures" / "runs" / "h200" / "torch-trace-mean" / "trace.json"
    res = cli("import", str(trace), "--attribute", "thread", "--out", str(tmp_path / "t"))
    assert res.exit_code == 2 and "--attribute applies to Nsight Systems captures" in res.output
    res = cli("import", "x.sqlite", "--attribute", "both")
    assert res.exit_code == 2 and "'both' is not one of 'window', 'thread'" in res.output
    # a workload run attributes by its own ranges' thread: nothing to choose
    nsys_run = unpack_run("nsys-square", tmp_path)
    with pytest.raises(UsageError, match="not an nsys capture's folder"):
        load_run(nsys_run, write=True, attribute="thread")
    with pytest.raises(UsageError, match="pass write=True"):
        load_run(nsys_run, attribute="thread")
    with pytest.raises(UsageError, match="--attribute 'both'"):
        ProgramOptions(attribute="both").validate()


def test_exec_nsys_takes_the_option_without_changing_nsys_command(cli):
    argv = ["exec", "nsys", "--no-cuda", "--dry-run"]
    plain = cli(*argv, "--", "python", "prog.py")
    thread = cli(*argv[:2], "--attribute", "thread", *argv[2:], "--", "python", "prog.py")
    assert plain.exit_code == thread.exit_code == 0, thread.output
    assert plain.output == thread.output and "nsys" in plain.output and "--attribute" not in plain.output


def test_the_choices_are_the_readers():
    assert (ATTRIBUTE_WINDOW, ATTRIBUTE_THREAD) == ns.ATTRIBUTIONS == (ns.WINDOW, ns.THREAD)


# ------------------------------------------------------------------ attribute_kernels by window


def _ex():
    """Thread 1 opens `a` [100, 500] and `inner` [150, 200] in it; thread 3 opens `b` [250, 300].
    Thread 2, with no range, launches at 120 (in a), 160 (in inner), 260 (a and b open: b started
    last), 400 (a again) and 600 (none); thread 1 itself launches at 110 (its own a); thread 5 of
    another process launches at 10."""
    other = 9 << 24
    return make_export(
        kernels=[(1000 + 10 * c, 1005 + 10 * c, c) for c in range(1, 7)] + [(2000, 2005, 1, other)],
        runtime=[
            (110, 111, 1, 1),
            (120, 121, 2, 2),
            (160, 161, 2, 3),
            (260, 261, 2, 4),
            (400, 401, 2, 5),
            (600, 601, 2, 6),
            (10, 11, 5, 1, other),
        ],
        nvtx=[
            (100, 500, 59, "variant:a", 1),
            (150, 200, 59, "variant:inner", 1),
            (250, 300, 59, "variant:b", 3),
        ],
    )


def test_a_launch_from_a_thread_with_no_range_open_goes_to_the_range_open_elsewhere():
    ex = _ex()  # and `far` [0, 1000] on the other process's thread 1: only that process's launch
    ex.nvtx = pd.concat(
        [
            ex.nvtx,
            ex.nvtx.iloc[:1].assign(start=0, end=1000, text="variant:far", global_tid=(9 << 24) | 1),
        ],
        ignore_index=True,
    )
    att = ns.attribute_kernels(ex, by=ns.WINDOW).sort_values("launch_start")
    assert att["variant"].tolist() == ["far", "a", "a", "inner", "b", "a", None]
    assert att[ns.FROM_OTHER_THREAD].tolist() == [
        ns.OTHER_THREAD,  # another process's thread 5 had none: its own process's far
        0,  # thread 1's own range
        ns.OTHER_THREAD,
        ns.OTHER_THREAD,
        ns.SEVERAL_THREADS,  # a (thread 1) and b (thread 3) open: b started last
        ns.OTHER_THREAD,
        0,  # no range open anywhere in its process: outside
    ]
    # by thread (the default, what `nsys` workload runs use): only thread 1's own launch is a's
    by_thread = ns.attribute_kernels(ex).sort_values("launch_start")
    assert by_thread["variant"].tolist() == [None, "a", None, None, None, None, None]
    assert ns.FROM_OTHER_THREAD not in by_thread
    assert list(by_thread.columns) == ns.ATTRIBUTED_COLUMNS


def test_the_footer_names_the_rule_where_ranges_were_open_on_several_threads():
    att = ns.attribute_kernels(_ex(), by=ns.WINDOW)
    moved = att[att[ns.FROM_OTHER_THREAD] > 0]
    assert len(moved) == 4
    assert from_other_threads_note(moved).endswith(
        "; 1 came while ranges were open on several other threads: each went to the range that started last"
    )
    assert "several" not in from_other_threads_note(moved[moved[ns.FROM_OTHER_THREAD] == ns.OTHER_THREAD])


def test_an_unknown_attribution_is_refused():
    with pytest.raises(ValueError, match="window, thread"):
        ns.attribute_kernels(_ex(), by="both")


def test_the_default_nsys_workload_run_is_unchanged(h200_run):
    """`gprof-orch nsys square`: one thread, its own ranges; by window or by thread the same."""
    ex = ns.read_export(h200_run("nsys-square") / "report.sqlite")
    a, b = ns.attribute_kernels(ex), ns.attribute_kernels(ex, by=ns.WINDOW)
    assert (b[ns.FROM_OTHER_THREAD] == 0).all()
    pd.testing.assert_frame_equal(a, b.drop(columns=ns.FROM_OTHER_THREAD))
