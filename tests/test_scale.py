"""Big runs on one machine: an nsys export repeated N times by
benchmarks/bench_scale.py's builder gives exactly N times every variant's launches and GPU ns, the
same per-iteration numbers, and the frame as frame.parquet, with frame.csv only under
reports.render.FRAME_CSV_MAX_ROWS rows or when asked (GPROF_FRAME_CSV). The timings at
3,000,000 kernels are in docs/scale-cpu.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from orchestrator import load_run
from orchestrator.parsers import nsys as ns
from orchestrator.parsers.nsys import arrow as nsys_arrow
from reports import render
from reports.schema import ALL_KERNELS, OUTSIDE

REPEATS = 20
ACTIVITY = ["kernel_time_ns", "memset_time_ns", "memcpy_time_ns"]
SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_scale.py"


@pytest.fixture(scope="module")
def bench_scale():
    spec = importlib.util.spec_from_file_location("bench_scale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scaled(bench_scale, tmp_path_factory) -> Path:
    """nsys-triton-mean's run folder with its export repeated REPEATS times (reports not built)."""
    folder = tmp_path_factory.mktemp("scale") / "nsys-triton-mean-x20"
    counts = bench_scale.build_run_folder(bench_scale.SOURCE_RUN, folder, REPEATS)
    assert counts["CUPTI_ACTIVITY_KIND_KERNEL"] == 96 * REPEATS
    return folder


def _per_variant(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """(variant, metric) -> (GPU activities, their summed ns), outside the variants included."""
    act = frame[frame["metric"].isin(ACTIVITY) & (frame["kernel"] != ALL_KERNELS)]
    g = act.groupby(["variant", "metric"], observed=True)["value"].agg(["size", "sum"])
    return {k: (int(r["size"]), int(r["sum"])) for k, r in g.iterrows()}


def test_every_figure_scales_by_the_repeat_factor(scaled, h200_run, monkeypatch):
    monkeypatch.delenv(render.FRAME_CSV_ENV, raising=False)
    monkeypatch.setattr(render, "FRAME_CSV_MAX_ROWS", 1000)  # the 20x frame has ~7,000 rows
    original = h200_run("nsys-triton-mean")
    one, many = load_run(original, write=True), load_run(scaled, write=True)
    assert len(one.frame) < 1000 < len(many.frame)

    # the parser: launches and GPU ns per variant, exactly REPEATS times
    def summary(folder: Path) -> pd.DataFrame:
        ex = ns.read_export(folder / "report.sqlite")
        return ns.summarize(ns.attribute_kernels(ex), ns.variant_ranges(ex)).set_index("variant", drop=False)

    s1, sn = summary(original), summary(scaled)
    assert list(s1["variant"]) == list(sn["variant"])
    for col in (
        "ranges",
        "launches",
        "gpu_time_total_ns",
        "launch_cpu_total_ns",
        "memcpy_count",
        "memcpy_time_total_ns",
        "memset_count",
        "memset_time_total_ns",
    ):
        assert (sn[col].to_numpy() == s1[col].to_numpy() * REPEATS).all(), col
    assert sn.loc["torch_mean", "launches"] == 20 * REPEATS and sn.loc["torch_mean", "gpu_time_total_ns"] > 0

    # the report's frame: every launch, memset and copy, inside the variants and outside
    p1, pn = _per_variant(one.frame), _per_variant(many.frame)
    assert set(p1) == set(pn) and (OUTSIDE, "kernel_time_ns") in p1
    assert pn == {k: (n * REPEATS, ns_ * REPEATS) for k, (n, ns_) in p1.items()}

    # the same iterations over again: the same per-iteration statistics, REPEATS times the samples
    t1, tn = one.table.set_index("variant"), many.table.set_index("variant")
    for col in (
        "time_median_us",
        "time_iqr_us",
        "time_min_us",
        "launches_per_iter",
        "launch_cpu_us",
        "gpu_busy_pct",
        "gpu_idle_us_per_iter",
        "cpu_median_us",
    ):
        assert (tn[col] == t1[col]).all(), col
    assert (tn["samples"] == t1["samples"] * REPEATS).all()
    assert list(tn["kernels"]) == list(t1["kernels"]) and list(tn["host_bound"]) == list(t1["host_bound"])
    k1, kn = one.kernels.set_index(["variant", "kernel"]), many.kernels.set_index(["variant", "kernel"])
    assert (kn["launches"] == k1["launches"] * REPEATS).all()
    assert (kn["time_us_per_iter"] == k1["time_us_per_iter"]).all() and (
        kn["share_pct"] == k1["share_pct"]
    ).all()

    # the frame: as Parquet always, as CSV only under the threshold
    assert (many.path / "frame.parquet").is_file() and not (many.path / "frame.csv").exists()
    assert (one.path / "frame.parquet").is_file() and (one.path / "frame.csv").is_file()
    back = pd.read_parquet(many.path / "frame.parquet")
    assert len(back) == len(many.frame) and (back["value"].to_numpy() == many.frame["value"].to_numpy()).all()
    assert (back["kernel"].astype(str).to_numpy() == many.frame["kernel"].astype(str).to_numpy()).all()


def test_frame_csv_when_asked_and_never_stale(scaled, monkeypatch):
    monkeypatch.setattr(render, "FRAME_CSV_MAX_ROWS", 1000)
    monkeypatch.setenv(render.FRAME_CSV_ENV, "1")  # asked: whatever the size
    run = load_run(scaled, write=True)
    csv = pd.read_csv(scaled / "frame.csv")
    assert len(csv) == len(run.frame) and (csv["value"].to_numpy() == run.frame["value"].to_numpy()).all()
    monkeypatch.delenv(render.FRAME_CSV_ENV)
    load_run(
        scaled, write=True
    )  # over the threshold: the earlier frame.csv would disagree with the new frame, and goes
    assert not (scaled / "frame.csv").exists() and (scaled / "frame.parquet").is_file()
    monkeypatch.setenv(render.FRAME_CSV_ENV, "0")
    monkeypatch.setattr(render, "FRAME_CSV_MAX_ROWS", 100_000)
    load_run(scaled, write=True)
    assert not (scaled / "frame.csv").exists()


def test_import_of_the_repeated_export_counts_each_copy(scaled, tmp_path):
    """`import` of the export alone: each copy of a variant's range is one range instance of 20
    iterations; every launch is counted once, as `report` counts it."""
    from orchestrator.capture import import_capture

    export = tmp_path / "repeated.sqlite"  # outside its run folder: nothing borrowed from workload.json
    export.write_bytes((scaled / "report.sqlite").read_bytes())
    run = import_capture(export, ranges="gprof@variant:", iters=20, out=tmp_path / "imported")
    rep = load_run(scaled)
    t, r = run.table.set_index("variant"), rep.table.set_index("variant")
    assert (t["samples"] == 20 * REPEATS).all()
    for col in ("time_median_us", "time_iqr_us", "launches_per_iter", "launch_cpu_us", "gpu_busy_pct"):
        assert (t[col] == r.loc[t.index, col]).all(), col
    assert _per_variant(run.frame) == _per_variant(rep.frame)


@pytest.mark.skipif(
    importlib.util.find_spec("adbc_driver_sqlite") is None, reason="adbc-driver-sqlite not installed"
)
@pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])
def test_arrow_and_sqlite3_readers_read_the_same_frames(scaled, monkeypatch, lean):
    """The ADBC (Arrow) reader, used when installed, and the sqlite3 text reader
    (GPROF_NSYS_READER=sqlite3) give equal frames, values and dtypes, for every table."""
    monkeypatch.delenv(nsys_arrow.READER_ENV, raising=False)
    assert nsys_arrow.driver() is not None
    arrow = ns.read_export(scaled / "report.sqlite", lean=lean)
    monkeypatch.setenv(nsys_arrow.READER_ENV, "sqlite3")
    assert nsys_arrow.driver() is None
    text = ns.read_export(scaled / "report.sqlite", lean=lean)
    for table in ("kernels", "runtime", "nvtx", "memcpy", "memset"):
        pd.testing.assert_frame_equal(
            getattr(arrow, table), getattr(text, table), check_exact=True, obj=table
        )
    assert (
        len(arrow.kernels) == 96 * REPEATS
        and arrow.runtime_end == text.runtime_end
        and arrow.meta == text.meta
    )


@pytest.mark.nsys
@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_the_repeated_export_equals_nvtx_kern_sum(scaled, tmp_path, monkeypatch, reader):
    """nsys's own per-range kernel summary sees the repeats as the builder says: each variant's
    launches and GPU ns, REPEATS times the capture's (and gprof-orch's equal them)."""
    from test_nsys_parser import NSYS, nsys_stats

    if NSYS is None:
        pytest.skip("nsys not found")
    if reader == "sqlite3":
        monkeypatch.setenv(nsys_arrow.READER_ENV, "sqlite3")
    elif nsys_arrow.driver() is None:
        pytest.skip("adbc-driver-sqlite not installed")
    theirs: dict[str, list[int]] = {}
    for row in nsys_stats("nvtx_kern_sum", scaled / "report.sqlite", tmp_path):
        if row["NVTX Range"].startswith("gprof:variant:"):
            acc = theirs.setdefault(row["NVTX Range"].removeprefix("gprof:variant:"), [0, 0])
            acc[0] += int(row["Kern Inst"])
            acc[1] += int(row["Total Time (ns)"])
    ex = ns.read_export(scaled / "report.sqlite", lean=True)
    ranges = ns.variant_ranges(ex)
    s = ns.summarize(ns.attribute_kernels(ex, ranges=ranges), ranges)
    mine = {
        v: [int(n), int(t)]
        for v, n, t in zip(s["variant"], s["launches"], s["gpu_time_total_ns"])
        if isinstance(v, str)
    }
    assert theirs == mine and mine["triton_lecture"][0] == 40 * REPEATS
