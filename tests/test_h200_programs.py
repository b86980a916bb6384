"""User programs profiled with `gprof-orch exec nsys` on the H200 (tests/fixtures/runs/h200-programs,
see its README): reports rebuilt from the committed run folders, against nsys's own numbers."""

from pathlib import Path

import pytest

from orchestrator import load_run

PROGRAMS = Path(__file__).resolve().parent / "fixtures" / "runs" / "h200-programs"


def _t(run):
    return run.table.set_index("variant")


def _kernels_per_variant(run) -> dict[str, list[int]]:
    f = run.frame
    k = f[(f["metric"] == "kernel_time_ns") & ~f["kernel"].astype(str).str.startswith("[")]
    return {
        str(v): [len(g), int(g["value"].sum())] for v, g in k.groupby("variant") if v != "(outside variants)"
    }


def test_nested_program_ranges(h200_run):
    run = load_run(h200_run("exec-nested", "h200-programs"))
    t = _t(run)
    assert _kernels_per_variant(run) == {
        "step": [18, 46720],
        "backward": [6, 21696],
        "forward": [6, 12575],
        "grad_sum": [3, 15520],
        "train:opt": [3, 7104],
        "eval": [1, 5120],
    }
    assert t.loc["step", "note"].startswith("nested: holds forward, train:opt, backward")
    assert t.loc["backward", "note"].startswith("nested: holds grad_sum")
    assert (t["status"] == "ok").all()


def _nvtx_kern_sum(path: Path, tmp_path: Path) -> dict[str, list[int]]:
    """nsys's own nvtx_kern_sum on the run's export: launches and GPU ns per range name."""
    from test_nsys_parser import NSYS, nsys_stats

    if NSYS is None:
        pytest.skip("nsys not found")
    theirs: dict[str, list[int]] = {}
    for row in nsys_stats("nvtx_kern_sum:base", path / "report.sqlite", tmp_path):
        if row["NVTX Range"]:
            acc = theirs.setdefault(row["NVTX Range"].lstrip(":"), [0, 0])
            acc[0] += int(row["Kern Inst"])
            acc[1] += int(row["Total Time (ns)"])
    return theirs


@pytest.mark.nsys
def test_nested_program_equals_nvtx_kern_sum(h200_run, tmp_path):
    """Per range (nested ones inclusive): launches and GPU ns equal nsys's own nvtx_kern_sum."""
    path = h200_run("exec-nested", "h200-programs")
    theirs = _nvtx_kern_sum(path, tmp_path)
    assert theirs == _kernels_per_variant(load_run(path)) and len(theirs) == 6


# the training script's steady state (3 warm-up steps outside nsys's capture): every range's
# launches and GPU ns by thread (--attribute thread), as gprof-orch and nvtx_kern_sum both count
# them on the H200 export; by window (the default) backward, and step with it, also hold the 280
# kernels autograd's thread launched inside backward
STEADY = {
    "step": [340, 3805327],
    "forward": [160, 1600075],
    "backward": [20, 15202],
    "optimizer": [160, 2190050],
}
STEADY_WINDOW = {**STEADY, "step": [620, 5573756], "backward": [300, 1783631]}


def test_training_script_steady_state_has_every_range_and_says_what_backward_leaves_out(h200_run):
    """`exec nsys --nsys-arg=--capture-range=cudaProfilerApi` on train_small.py --warmup 3: nsys
    2023.4.4's unknown CUDA 13 call (cudaGetDriverEntryPointByVersion) falls in the warm-up,
    outside the capture, so no event is lost. By thread, backward's own range holds only the main
    thread's launch (the loss's grad fill); autograd's thread launched the other 15 a step inside
    it, which nsys does not count there, and the note says so (it did not). By window (the
    default) they are backward's, and its note says how much came so."""
    path = h200_run("exec-train-steady", "h200-programs")
    run = load_run(path)
    t = _t(run)
    assert list(t.index) == ["step", "forward", "backward", "optimizer"] and (t["status"] == "ok").all()
    assert _kernels_per_variant(run) == STEADY_WINDOW
    for v in ("step", "backward"):
        assert t.loc[v, "note"].count("from other threads: 14 kernel launches/iter") == 1, v
    for v in ("forward", "optimizer"):
        assert "other threads" not in t.loc[v, "note"], v
    run = load_run(path, write=True, attribute="thread")
    t = _t(run)
    assert _kernels_per_variant(run) == STEADY
    for v in ("step", "backward"):
        assert "300 kernel launches by other threads fell inside it, not counted" in t.loc[v, "note"], v
    for v in ("forward", "optimizer"):
        assert "other threads" not in t.loc[v, "note"], v
    assert not any("does not know a CUDA runtime call" in w for w in run.warnings)


@pytest.mark.nsys
def test_training_script_steady_state_equals_nvtx_kern_sum(h200_run, tmp_path):
    path = h200_run("exec-train-steady", "h200-programs")
    run = load_run(path, write=True, attribute="thread")  # nvtx_kern_sum's view
    assert _nvtx_kern_sum(path, tmp_path) == _kernels_per_variant(run) == STEADY


def test_training_script_says_why_its_ranges_hold_no_kernels(h200_run):
    """nsys 2023.4.4 lost the main thread's CUDA calls (a CUDA 13 call it does not know); the
    backward kernels, launched from autograd's own thread, are in no range by thread, and in
    backward (and step, which holds it) by window: no range wall time may pass for a GPU time
    without a word, and the log's cause is named."""
    path = h200_run("exec-train", "h200-programs")
    run = load_run(path)
    t = _t(run)
    assert list(t.index) == ["step", "forward", "backward", "optimizer"]
    assert _kernels_per_variant(run) == {"step": [280, 1770035], "backward": [280, 1770035]}
    for v in ("step", "backward"):
        assert "from other threads: 14 kernel launches/iter" in t.loc[v, "note"], v
    for v in ("forward", "optimizer"):
        assert t.loc[v, "note"].startswith(
            "no GPU work launched from its own thread inside the range: the time is the range's wall time;"
        ), v
        assert "other threads" not in t.loc[v, "note"], v
    run = load_run(path, write=True, attribute="thread")
    t = _t(run)
    assert _kernels_per_variant(run) == {}
    for v in t.index:
        assert (
            "no GPU work launched from its own thread inside the range: the time is the range's wall time"
            in t.loc[v, "note"]
        ), v
    assert "300 kernel launches by other threads fell inside it" in t.loc["backward", "note"]
    assert "by other threads" not in t.loc["forward", "note"]
    assert any("does not know a CUDA runtime call" in w for w in run.warnings)


def test_lost_events_make_every_range_incomplete_and_the_run_exit_6(h200_run):
    """The same capture read as it was printed before (every range `ok`, speedups, exit 0): nsys said
    it lost events, so any range's GPU work may be missing; every range is `incomplete`, no speedup
    stands on them, `report` exits 6 and says what to do."""
    from conftest import run_cli

    from orchestrator.backends.nsys import NEWER_NSYS

    path = h200_run("exec-train", "h200-programs")
    t = _t(load_run(path))
    assert (t["status"] == "incomplete").all()
    assert t["speedup_vs_baseline"].isna().all()
    assert all("the profiler lost events in this run" in n for n in t["note"])
    res = run_cli("report", str(path), "--json")
    assert res.returncode == 6, res.stderr
    import json

    doc = json.loads(res.stdout)
    assert doc["exit_code"] == 6 and doc["error"]["kind"] == "IncompleteReportError"
    assert NEWER_NSYS in doc["error"]["hint"]
    assert [v["status"] for v in doc["variants"]] == ["incomplete"] * 4


def test_a_programs_ranges_are_not_alternatives_unless_said(h200_run, tmp_path):
    """`import` of a program's capture: its ranges (a step, its backward, its optimizer) are its
    parts, so no speedup, no "x of" and no "more kernels than the fewest" between them; with
    --compare-ranges they are set against the first."""
    from orchestrator import import_capture

    sqlite = h200_run("exec-nested", "h200-programs") / "report.sqlite"
    parts = import_capture(sqlite, ranges="*@", out=tmp_path / "a")
    t = _t(parts)
    assert parts.workload["baseline"] is None
    assert t["speedup_vs_baseline"].isna().all() and t["extra_kernels_per_iter"].isna().all()
    assert not any(" of " in w.split(":")[0] for w in t["why"] if w)
    alternatives = import_capture(sqlite, ranges="*@", out=tmp_path / "b", compare_ranges=True)
    a = _t(alternatives)
    assert alternatives.workload["baseline"] == "forward" and a.loc["forward", "speedup_vs_baseline"] == 1.0
    assert a["speedup_vs_baseline"].notna().sum() >= 3 and a["extra_kernels_per_iter"].notna().any()
