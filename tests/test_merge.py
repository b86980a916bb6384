"""One report across backends, comparisons and sweeps: from the committed H200 run folders
(all four backends on square and mean) and real CPU runs."""

import json

import pytest
from conftest import run_cli

from orchestrator import api, backends, load_run
from reports import merge


def _tables(h200_run, workload):
    return {b: load_run(h200_run(f"{b}-{workload}")).table for b in ("time", "torch-trace", "nsys", "ncu")}


def _sources():
    return backends.merged_sources(["time", "torch-trace", "nsys", "ncu"])


def test_merged_square_from_four_backends(h200_run):
    m = merge.merged_table(_tables(h200_run, "square"), _sources(), "torch_square").set_index("variant")
    assert m.loc["mul", "events_us"] == pytest.approx(193.072, abs=1e-3)
    assert m.loc["mul", "torch_trace_us"] == pytest.approx(189.3435, abs=1e-4)
    assert m.loc["mul", "nsys_us"] == pytest.approx(189.183, abs=1e-3)
    assert m.loc["mul", "ncu_us"] == pytest.approx(186.88, abs=1e-3)
    assert m.loc["mul", "dram_pct_of_peak"] == pytest.approx(86.37, abs=0.01)  # time-weighted over launches
    assert m.loc["mul", "agreement"] == "ok"  # 186.9 .. 193.1: within 10%
    assert m.loc["torch_square", "same_kernel_as"] == "pow"
    assert m.loc["torch_square", "kernels"] == "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"
    # numba: events include its ~240 us of Python launch overhead per call
    assert m.loc["numba", "agreement"].startswith("DISAGREE: time +33% over ncu")
    assert (
        "launch latency" in m.loc["numba", "agreement"]
        and "replays each kernel" in m.loc["numba", "agreement"]
    )


def test_merged_mean_counts_the_division(h200_run):
    m = merge.merged_table(_tables(h200_run, "mean"), _sources(), "torch_mean").set_index("variant")
    assert m.loc["sum_div_numel", "launches_per_iter"] == 2
    assert m.loc["torch_mean", "same_kernel_as"] == "tensor_mean"
    # events 113.2 us (L2 flushed before each call, launch included) vs nsys's 101.8 us of
    # kernel time: 11% apart, flagged with the reason
    assert m.loc["torch_mean", "agreement"].startswith("DISAGREE: time +11% over nsys (CUDA events")
    assert m.loc["sum_div_numel", "speedup_vs_baseline"] == pytest.approx(113.2 / 116.032, rel=1e-3)


def test_compare_two_h200_runs(h200_run):
    # torch-trace's kernel time against time's CUDA events once read mul 2.0% "slower" (the
    # events hold each launch's processing) and failed a 1% gate: now refused as a mismatch
    a, events = h200_run("torch-trace-square"), h200_run("time-square")
    gate = run_cli("compare", str(a), str(events), "--fail-if-slower", "1")
    assert gate.returncode == 2 and "what the medians time" in gate.stderr and "slower" not in gate.stderr
    # nsys's kernel time against torch-trace's: the same thing, within the runs' spread
    nsys = h200_run("nsys-square")
    table, ra, rb = api.compare(nsys, a)
    t = table.set_index("variant")
    assert t.loc["mul", "ratio_b_over_a"] == pytest.approx(189.34 / 189.18, rel=2e-4)
    assert not bool(t.loc["mul", "beyond_spread"]) and t.loc["mul", "verdict"] == "same within spread"
    assert run_cli("compare", str(nsys), str(a), "--fail-if-slower", "1").returncode == 0


def test_compare_refuses_other_workloads_and_bad_folders(h200_run, tmp_path):
    square = h200_run("time-square")
    res = run_cli("compare", str(square), str(h200_run("time-mean")))
    assert res.returncode == 2 and "different workloads" in res.stderr
    res = run_cli("compare", str(square), str(tmp_path / "none"))
    assert res.returncode == 4 and "no such run folder" in res.stderr


def test_all_on_the_cpu(tmp_path):
    out = tmp_path / "all"
    res = run_cli(
        "all", "mean", "--device", "cpu", "--size", "10000", "--iters", "5", "-o", str(out), "--json"
    )
    assert res.returncode == 0, res.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["kind"] == "all" and man["status"] == "ok"
    assert man["children"]["time"]["status"] == "ok" and man["children"]["torch-trace"]["status"] == "ok"
    assert man["children"]["ncu"]["status"] == "skipped"
    rows = json.loads(res.stdout)["variants"]
    assert [r["variant"] for r in rows] == ["torch_mean", "tensor_mean", "sum_div_numel"]
    assert all(r["events_us"] > 0 and r["torch_trace_us"] > 0 for r in rows)
    again = load_run(out, write=True)
    assert set(again.runs) >= {"time", "torch-trace"} and "ncu" in again.skipped
    assert (out / "report.html").exists()


def test_sweep_on_the_cpu(tmp_path):
    out = tmp_path / "sweep"
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "1000,100000",
        "--dtype",
        "float32,bfloat16",
        "--iters",
        "5",
        "-v",
        "mul",
        "-o",
        str(out),
        "--json",
    )
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["variants"]
    pts = {(r["numel"], r["dtype"]) for r in rows}
    assert pts == {(1000, "float32"), (100000, "float32"), (1000, "bfloat16"), (100000, "bfloat16")}
    assert len(rows) == 8 and all(r["time_median_us"] > 0 for r in rows if r["status"] == "ok")
    assert sorted(p.name for p in out.iterdir() if p.is_dir() and p.name != "logs") == [
        "1000-bfloat16",
        "1000-float32",
        "100000-bfloat16",
        "100000-float32",
    ]


def test_all_square_captured_on_the_h200(h200_run):
    multi = load_run(h200_run("all-square"), write=True)
    assert list(multi.runs) == ["time", "torch-trace", "nsys", "ncu"] and multi.skipped == {}
    m = multi.table.set_index("variant")
    assert m.loc["mul", "events_us"] == pytest.approx(192.208, abs=1e-3)
    assert m.loc["mul", "nsys_us"] == pytest.approx(188.416, abs=1e-3)
    assert m.loc["mul", "ncu_us"] == pytest.approx(185.408, abs=1e-3)
    assert m.loc["mul", "dram_pct_of_peak"] == pytest.approx(86.92, abs=0.01)  # time-weighted over launches
    assert (m.loc[["torch_square", "mul", "pow", "triton"], "agreement"] == "ok").all()
    assert m.loc["numba", "agreement"].startswith("DISAGREE: time +46% over ncu")
    assert m.loc["pow", "same_kernel_as"] == "torch_square"
    assert (multi.path / "report.html").read_text().count('class="gprof-plot"') >= 5
    # numba's 0.68x is the events' (its launch is slow); nsys's kernels alone would say 0.95x
    assert m.loc["numba", "speedup_vs_baseline"] == pytest.approx(
        m.loc["torch_square", "events_us"] / m.loc["numba", "events_us"]
    )
    assert any(
        line.endswith("speedup from the events medians. agreement flags medians >10% apart.")
        for line in multi.footer()
    )


def test_all_mean_captured_on_the_h200_flags_the_event_overhead(h200_run):
    m = load_run(h200_run("all-mean")).table.set_index("variant")
    assert m.loc["torch_mean", "agreement"].startswith("DISAGREE: time +11% over torch-trace")
    assert m.loc["sum_div_numel", "launches_per_iter"] == 2
    assert m.loc["torch_mean", "ncu_us"] == pytest.approx(105.056, abs=1e-3)


def test_runs_print_as_one_line_each_not_their_frames(h200_run):
    path = h200_run("all-mean")
    multi = load_run(path)
    assert repr(multi) == (
        f"MultiRun({str(path)!r}, kind='all', workload='mean', status='ok', variants=3, "
        "runs=['time', 'torch-trace', 'nsys', 'ncu'])"
    )
    assert repr(multi.runs["nsys"]) == (
        f"Run({str(path / 'nsys')!r}, backend='nsys', workload='mean', status='ok', variants=3)"
    )
    shown = str(multi.runs)  # a dict prints its values' reprs
    assert len(shown.splitlines()) == 1 and shown.count("Run(") == 4 and "kernel" not in shown


def test_sweep_captured_on_the_h200(h200_run):
    multi = load_run(h200_run("sweep-triton-mean"), write=True)
    t = multi.table.set_index(["numel", "variant"])
    assert t.loc[(100_000_000, "triton_fast"), "time_median_us"] == pytest.approx(102.208, abs=1e-3)
    assert t.loc[(100_000_000, "triton_lecture"), "achieved_gb_s"] == pytest.approx(183.65, abs=0.01)
    # GB/s grows with size: launch-bound at 1e6, bandwidth-bound at 1e8
    gbs = [t.loc[(n, "torch_mean"), "achieved_gb_s"] for n in (1_000_000, 10_000_000, 100_000_000)]
    assert gbs == sorted(gbs) and gbs[-1] > 3000
    assert 'data-plot="sweep_time"' in (multi.path / "report.html").read_text()


def test_a_sweep_point_whose_folder_is_gone_is_unreadable_not_skipped(h200_run):
    """A point the parent saw end ok, its folder deleted since: `report` said "skipped: no
    results" and exited 0; the others are reported, the point named, exit 4."""
    import shutil

    folder = h200_run("sweep-triton-mean")
    shutil.rmtree(folder / "1000000-float32")
    res = run_cli("report", str(folder))
    assert res.returncode == 4, res.stderr
    assert (
        "1000000-float32: unreadable, left out of the table: its folder is missing, though it ended ok"
        in res.stdout
    )
    assert "could not read" in res.stderr and "1000000-float32" in res.stderr
    multi = load_run(folder, write=False)
    assert sorted(multi.runs) == ["10000000-float32", "100000000-float32"] and not multi.skipped


def test_report_on_an_all_folder_with_one_damaged_result_keeps_the_others(h200_run):
    """One unreadable backend result in an `all` folder (its ncu report cut short)
    used to make `report` exit with no merged table. Now the others' merged table is printed,
    the damaged one named with its reason, and the exit code says a result could not be read."""
    folder = h200_run("all-square")
    rep = folder / "ncu" / "report.ncu-rep"
    rep.write_bytes(rep.read_bytes()[:1000])
    res = run_cli("report", str(folder))
    assert res.returncode == 4, res.stderr
    assert "could not read" in res.stderr and "ncu" in res.stderr
    assert "ncu: unreadable, left out of the table" in res.stdout
    for col in ("events us", "torch-trace us", "nsys us"):
        assert col in res.stdout
    assert "ncu us" not in res.stdout
    js = run_cli("report", str(folder), "--json")
    doc = json.loads(js.stdout)
    assert js.returncode == 4 and doc["exit_code"] == 4 and doc["error"]["kind"] == "ParseError"
    assert {r["variant"] for r in doc["variants"]} >= {"torch_square", "mul", "pow"}
