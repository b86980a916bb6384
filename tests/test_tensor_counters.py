"""ncu's tensor-core FLOP counters (`sm__ops_path_tensor_src_*`) read as each variant's achieved
FLOP/s and its point under the tensor roof: run folders committed under
tests/fixtures/runs/h100-compute (`gprof-orch ncu matmul` on an NVIDIA H100 80GB HBM3 with torch
2.11 + CUDA 13.0 and ncu 2025.3.1: bfloat16 at 8192x8192, float32 at 4096x4096), the H200's
tensor probe report imported as a user's capture, and the H100's own `ncu --query-metrics` list."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from conftest import run_cli

from orchestrator import load_run
from orchestrator.backends import ncu_tool
from orchestrator.parsers import ncu_metrics, ncu_rep
from reports import roofline

HERE = Path(__file__).resolve().parent
RUNS = HERE / "fixtures" / "runs" / "h100-compute"
PROBE = HERE / "fixtures" / "ncu" / "h200_tensor_counters" / "tensor_probe.ncu-rep.xz"
QUERY = HERE / "fixtures" / "ncu" / "h100_query_metrics" / "query-metrics.txt.xz"
needs_reader = pytest.mark.skipif(not ncu_rep.have_ncu_report(), reason="pip install ncu-report")


def _rows(name: str) -> dict:
    return load_run(RUNS / name, write=False).table.set_index("variant").to_dict("index")


def _two_n_cubed_rate(n: int, median_us: float) -> float:
    """GFLOP/s of one n x n x n matmul in median_us."""
    return 2 * n**3 / (median_us * 1e-6) / 1e9


@needs_reader
def test_the_tensor_core_kernels_point_is_ncus_own_count_within_5pct_of_2n3():
    rows = _rows("ncu-matmul-bf16")
    for name, counted, pct in (("torch_matmul", 807393.2, 81.6), ("triton_matmul", 781347.1, 79.0)):
        r = rows[name]
        assert r["roofline_precision"] == "bf16-tensor"
        # ncu's counter over each launch's duration, not the declared FLOPs (795.1 TFLOP/s)
        assert r["achieved_gflop_s"] == pytest.approx(counted, abs=0.1)
        assert r["achieved_gflop_s"] == pytest.approx(_two_n_cubed_rate(8192, r["time_median_us"]), rel=0.05)
        assert r["roof_gflop_s"] == pytest.approx(989_400.0)  # the datasheet's dense BF16 peak
        assert 0 < r["pct_of_roof"] < 100 and r["pct_of_roof"] == pytest.approx(pct, abs=0.1)
        assert r["arithmetic_intensity"] > 500  # FLOPs over ncu's DRAM bytes: far right of the ridge
        assert r["bound"] == "compute"
    assert {r["status"] for r in rows.values()} == {"ok", "skipped"}  # fp32-only variants skip bf16


@needs_reader
def test_simt_variants_keep_the_fp32_roof_and_tf32_takes_the_tf32_tensor_roof():
    rows = _rows("ncu-matmul-fp32")
    for name, pct in (("torch_matmul", 77.5), ("matmul_fp32", 77.4), ("triton_matmul", 66.2)):
        r = rows[name]
        assert r["roofline_precision"] == "fp32", name
        assert r["roof_gflop_s"] == pytest.approx(67_000, rel=0.01)  # ncu's own FFMA roof at its clock
        assert r["pct_of_roof"] == pytest.approx(pct, abs=0.1)
    tf32 = rows["matmul_tf32"]
    assert tf32["roofline_precision"] == "tf32-tensor"
    assert tf32["achieved_gflop_s"] == pytest.approx(
        _two_n_cubed_rate(4096, tf32["time_median_us"]), rel=0.05
    )
    assert tf32["roof_gflop_s"] == pytest.approx(494_700.0)
    assert tf32["pct_of_roof"] == pytest.approx(81.7, abs=0.1)


@needs_reader
def test_an_imported_report_reads_tflops_from_the_counters_when_nothing_declares_flops(tmp_path):
    """A user's capture declares no FLOPs: its TFLOP/s and % of the H200's datasheet peak come from
    ncu's counters (2 x 4096^3 per range), and the footer says so."""
    out = tmp_path / "imported"
    res = run_cli("import", str(PROBE), "--ranges", "*@", "-o", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {r["variant"]: r for r in json.loads((out / "report.json").read_text())["variants"]}
    want = {
        "bf16": ("bf16-tensor", 63.8),
        "tf32": ("tf32-tensor", 65.7),
        "triton_bf16": ("bf16-tensor", 55.7),
    }
    for name, (precision, pct) in want.items():
        r = rows[name]
        assert r["roofline_precision"] == precision
        assert r["flops_source"] == "ncu"
        assert r["tflop_s"] * 1e3 == pytest.approx(_two_n_cubed_rate(4096, r["time_median_us"]), rel=1e-6)
        assert r["pct_of_peak_flops"] == pytest.approx(pct, abs=0.1)
    assert "from the tensor-core FLOPs ncu counted" in res.stdout
    assert "% peak FLOP/s against 989 TFLOP/s (NVIDIA H200 datasheet: dense BF16 tensor)" in res.stdout


def test_the_h100_lists_every_tensor_counter_the_backend_asks_for():
    listed = ncu_tool.listed_metrics(lzma.decompress(QUERY.read_bytes()).decode())
    assert len(listed) > 1000
    assert {"Metric", "Device"}.isdisjoint(listed)  # headers are not metrics
    bases = {m.split(".", 1)[0] for m in ncu_rep.tensor_counters()}
    # GH100 names fp16 (and fp64) whole: the split names other chips use are not there
    assert bases - listed == {
        "sm__ops_path_tensor_src_fp16_dst_fp32",
        "sm__ops_path_tensor_src_fp16_dst_fp16",
        "sm__ops_path_tensor_src_fp64_dst_fp64",
    }


def test_without_ncu_the_tensor_counters_are_left_out_not_a_failed_run():
    ncu_tool._gpu_metrics.cache_clear()
    assert ncu_tool.on_this_gpu("/nonexistent/ncu", ncu_rep.tensor_counters()) == []


def test_the_roofline_reads_the_columns_the_ncu_parser_writes():
    assert set(roofline.TENSOR_RATES.values()) == {t.column for t in ncu_metrics.TENSOR_FLOPS}
    assert set(roofline.TENSOR_RATES) == {t.unit for t in ncu_metrics.TENSOR_FLOPS}


@needs_reader
def test_the_why_line_says_cublas_did_more_tensor_work_than_the_matmul_needs():
    """cuBLAS's 320-row tiles cover 8192 rows with 128 to spare: ncu counts exactly 8320/8192 x
    2n^3 on each launch, the Triton kernel's tiles divide 8192 and count 2n^3."""
    run = load_run(RUNS / "ncu-matmul-bf16", write=False)
    why = dict(zip(run.table["variant"], run.table["why"]))
    assert (
        "ncu counted 1.5% more tensor FLOPs than declared (tile work past the edges, or repeated)"
        in why["torch_matmul"]
    )
    assert "tensor FLOPs than declared" not in why["triton_matmul"]
