"""The "why" (reports/why.py) on the committed H200 runs: ncu's findings, excess DRAM traffic,
GPU idle gaps and host-bound variants, and the one-line explanation, asserted on real numbers."""

from __future__ import annotations

import json

import pytest

from orchestrator import load_run

pytest.importorskip("ncu_report")


def _row(run, variant):
    t = run.table.set_index("variant")
    return t.loc[variant]


def test_ncu_findings_per_variant_from_the_real_report(h200_run):
    run = load_run(h200_run("ncu-triton-mean"))
    f = run.findings
    assert set(f["variant"]) == {"torch_mean", "triton_lecture", "triton_fast"}
    lec = f[f["variant"] == "triton_lecture"]
    # ncu's rules on both of its kernels; the 5 us helper's 99% gain is weighed by its time share
    tail = lec[(lec["rule"] == "LaunchConfiguration") & (lec["kernel"] == "lecture_row_mean_kernel")].iloc[0]
    assert tail["title"] == "Tail Effect" and tail["estimated_speedup_pct"] == pytest.approx(20.0, abs=0.1)
    small = lec[(lec["rule"] == "LaunchConfiguration") & (lec["kernel"] == "reduce_kernel")].iloc[0]
    assert small["estimated_speedup_pct"] == pytest.approx(99.24, abs=0.01)
    assert small["variant_speedup_pct"] < 1.0
    assert lec.iloc[0]["title"] == "Tail Effect"  # the top finding is the big kernel's
    assert lec["launches"].max() == 3 and lec["message"].str.len().min() > 20


def test_lecture_triton_mean_explanation_names_dram_and_launch_shape(h200_run):
    run = load_run(h200_run("ncu-triton-mean"))
    why = _row(run, "triton_lecture")["why"]
    assert why.startswith("0.05x of torch.mean: ")
    assert f"{_row(run, 'triton_lecture')['dram_pct_of_peak']:.1f}% DRAM peak" in why
    assert "grid of 10000 blocks x 4 warps" in why and "one block per row (10000 rows of 10000)" in why
    assert (
        "ncu: Tail Effect (LaunchStats/LaunchConfiguration, est. 20% faster) on lecture_row_mean_kernel"
        in why
    )
    assert "1 more kernel(s)/iter than the fewest" in why
    # the fast kernel's line is built from its own numbers, not the lecture's
    fast = _row(run, "triton_fast")["why"]
    assert "90.5% DRAM peak" in fast and "grid of 528 blocks x 8 warps" in fast and "per row" not in fast
    footer = run.footer()
    assert any(line.startswith("why triton_lecture: 0.05x of torch.mean") for line in footer)


def test_load_inline_lecture_square_shows_its_dram_pct_and_latency_finding(h200_run):
    run = load_run(h200_run("ncu-load-inline-square"))
    why = _row(run, "cuda_lecture")["why"]
    assert "47.2% DRAM peak" in why and "grid of 390625 blocks x 8 warps" in why
    # SpeedOfLight's own verdict on the kernel that holds the time comes first
    assert "ncu: Latency Issue (SpeedOfLight/SOLBottleneck) on square_matrix_kernel" in why


def test_excess_traffic_is_measured_dram_bytes_over_bytes_moved(h200_run):
    run = load_run(h200_run("ncu-mean"))
    # sum/numel reduces first and divides one scalar: 5 kB more, not a second read of the input
    assert _row(run, "sum_div_numel")["excess_traffic"] == pytest.approx(1.0067, abs=0.0005)
    assert _row(run, "torch_mean")["excess_traffic"] == pytest.approx(1.0063, abs=0.0005)
    assert _row(run, "sum_div_numel")["extra_kernels_per_iter"] == 1
    sq = load_run(h200_run("ncu-load-inline-square"))
    # 776 of 800 MB reach DRAM: the last writes are still in L2 when the kernel ends
    assert _row(sq, "torch_square")["excess_traffic"] == pytest.approx(0.9699, abs=0.001)


def test_nsys_triton_mean_flags_the_host_bound_variant(h200_run):
    run = load_run(h200_run("nsys-triton-mean"))
    fast, mean, lec = (_row(run, v) for v in ("triton_fast", "torch_mean", "triton_lecture"))
    # the fast Triton mean leaves the GPU idle 35-57 us before every launch
    assert fast["host_bound"] == "host-bound"
    assert fast["gpu_idle_us_per_iter"] == pytest.approx(50.42, abs=0.05)
    # torch.mean's idle is a few startup gaps, then 1-2 us between kernels
    assert mean["host_bound"] == "" and mean["gpu_idle_us_per_iter"] == pytest.approx(7.59, abs=0.05)
    assert lec["host_bound"] == "" and lec["gpu_idle_us_per_iter"] == pytest.approx(2.60, abs=0.05)
    assert (
        "host-bound: the GPU idles 50.4 us/iter between launches against 89.4 us of GPU work" in fast["why"]
    )
    assert run.findings.empty


def test_torch_trace_idle_gaps(h200_run):
    run = load_run(h200_run("torch-trace-mean"))
    assert (run.table["host_bound"] == "").all()
    assert _row(run, "torch_mean")["gpu_idle_us_per_iter"] == pytest.approx(3.48, abs=0.05)


def test_json_and_html_hold_every_finding(h200_run):
    path = h200_run("ncu-load-inline-square")
    run = load_run(path, write=True)
    doc = json.loads((path / "report.json").read_text())
    assert len(doc["meta"]["findings"]) == len(run.findings) >= 6
    assert {v["variant"]: v["why"] for v in doc["variants"]}["cuda_lecture"].startswith(
        "0.54x of torch.square"
    )
    page = (path / "report.html").read_text()
    assert 'id="findings"' in page and "Latency Issue" in page
    assert page.count('class="finding-variant"') == 3
    assert "low compute throughput and memory bandwidth utilization" in page


def test_warp_state_findings_name_the_lecture_means_stall(h200_run):
    """ncu-triton-mean-why: captured on the H200 with the default sections that now include
    WarpStateStats and SchedulerStats. The lecture Triton mean's top finding is the stall that
    explains it (one scalar loop per row waits on its loads), not a note about the collection."""
    run = load_run(h200_run("ncu-triton-mean-why"))
    top = run.findings[run.findings["variant"] == "triton_lecture"].iloc[0]
    assert (top["section"], top["rule"], top["title"]) == (
        "WarpStateStats",
        "CPIStall",
        "Long Scoreboard Stalls",
    )
    assert top["kernel"] == "lecture_row_mean_kernel"
    assert top["estimated_speedup_pct"] == pytest.approx(74.94, abs=0.01)
    assert "scoreboard dependency on a L1TEX" in top["message"]
    why = _row(run, "triton_lecture")["why"]
    assert (
        "3.8% DRAM peak" in why and "Long Scoreboard Stalls (WarpStateStats/CPIStall, est. 75% faster)" in why
    )
