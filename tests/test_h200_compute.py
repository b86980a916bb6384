"""What the H200 measured for time and memory, operators, and compute-bound work, read back from
the run folders committed under tests/fixtures/runs/h200-compute (captured on an NVIDIA H200 with
torch 2.11 + CUDA 13.0 and ncu 2025.3.1) and from a real ncu report of one matmul per precision
(tests/fixtures/ncu/h200_tensor_counters, benchmarks/probes/probe_ncu_tensor_counters.py)."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from test_operators import _assert_self_cuda_sums, _ops

from orchestrator import load_run
from orchestrator.parsers import ncu_rep

HERE = Path(__file__).resolve().parent
RUNS = HERE / "fixtures" / "runs" / "h200-compute"
PROBE = HERE / "fixtures" / "ncu" / "h200_tensor_counters" / "tensor_probe.ncu-rep.xz"
MIB = 2.0**20


def _report(tmp_path: Path, name: str) -> tuple[dict, Path]:
    folder = tmp_path / name
    shutil.copytree(RUNS / name, folder)
    res = run_cli("report", str(folder), "--ops")
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((folder / "report.json").read_text()), folder


# -------------------------------------------------------------- the lecture's operator tables


def test_torch_square_is_aten_square_calling_aten_pow_and_a_times_a_is_aten_mul(tmp_path):
    doc, folder = _report(tmp_path, "trace-square-ops")
    chains = doc["operator_chains"]
    assert any(
        c.startswith("aten::square > aten::pow > vectorized_elementwise_kernel<pow")
        for c in chains["torch_square"]
    )
    assert any(c.startswith("aten::pow > vectorized_elementwise_kernel<pow") for c in chains["pow"])
    assert any(c.startswith("aten::mul > vectorized_elementwise_kernel<MulFunctor") for c in chains["mul"])
    assert _ops(doc, "mul") == {"aten::mul": 1.0}
    same = {v["variant"]: v["same_ops_as"] for v in doc["variants"]}
    assert "pow" in same["torch_square"].split(", ")
    _assert_self_cuda_sums(doc, folder)


def test_mean_by_sum_and_div_is_aten_sum_then_aten_div(tmp_path):
    doc, folder = _report(tmp_path, "trace-mean-ops")
    ops = _ops(doc, "sum_div_numel")
    assert ops["aten::sum"] == 1.0 and ops["aten::div"] == 1.0
    assert _ops(doc, "torch_mean")["aten::mean"] == 1.0
    _assert_self_cuda_sums(doc, folder)


# ------------------------------------------------------------------------------- memory


def test_each_square_variant_allocates_its_result_once_and_nothing_else():
    t = load_run(RUNS / "time-square-1e8", write=False).table.set_index("variant")
    result = 1e8 * 4 / MIB  # 381.47 MiB
    assert list(t["result_mib"]) == pytest.approx([result] * 5)
    assert (t["allocs_per_call"] == 1).all()
    # the caching allocator rounds a large block up to 2 MiB
    assert ((t["peak_mib"] - t["result_mib"]).abs() < 2.0).all()
    assert not t["note"].str.contains("temporaries").any()


def test_mean_allocates_under_one_mib():
    t = load_run(RUNS / "time-mean-1e8", write=False).table.set_index("variant")
    assert (t["peak_mib"] < 1.0).all() and (t["result_mib"] < 1.0).all()


def test_a_variant_with_temporaries_shows_its_extra_peak_and_the_note():
    t = load_run(RUNS / "time-temporaries-1e8", write=False).table.set_index("variant")
    assert t.loc["temps", "allocs_per_call"] == 5
    assert t.loc["temps", "peak_mib"] - t.loc["temps", "result_mib"] == pytest.approx(764.0)
    assert "temporaries: 764.00 MiB above the result" in t.loc["temps", "note"]
    assert t.loc["clean", "allocs_per_call"] == 1 and not t.loc["clean", "note"]


# ----------------------------------------------------------------------------- compute


def test_time_matmul_bf16_reads_its_tflops_against_the_h200s_bf16_peak():
    r = load_run(RUNS / "time-matmul-bf16", write=False).table.set_index("variant").loc["torch_matmul"]
    n = 8192
    assert r["tflop_s"] == pytest.approx(2 * n**3 / (r["time_median_us"] * 1e-6) / 1e12, rel=0.05)
    assert r["tflop_s"] == pytest.approx(797.5, abs=0.1)
    assert r["pct_of_peak_flops"] == pytest.approx(r["tflop_s"] / 989.4 * 100)
    assert r["bound"] == "compute"


def test_ncu_matmul_puts_the_tensor_core_kernel_under_the_bf16_tensor_roof():
    run = load_run(RUNS / "ncu-matmul-bf16", write=False)
    r = run.table.set_index("variant").loc["torch_matmul"]
    assert r["roofline_precision"] == "bf16-tensor"
    assert r["achieved_gflop_s"] / 1e3 == pytest.approx(2 * 8192**3 / (r["time_median_us"] * 1e-6) / 1e12)
    assert 0 < r["pct_of_roof"] < 100 and r["pct_of_roof"] == pytest.approx(80.2, abs=0.1)
    assert r["tensor_active_pct"] == pytest.approx(93.7, abs=0.1)
    assert "tensor cores active 94% of cycles" in r["why"]


@pytest.mark.skipif(not ncu_rep.have_ncu_report(), reason="pip install ncu-report")
def test_ncus_ops_path_counters_count_every_tensor_core_flop(tmp_path):
    """On the H200 with ncu 2025.3.1, `sm__ops_path_tensor_src_<in>_dst_fp32.sum` is exactly 2 n^3
    for cuBLAS's HGMMA kernels (bf16, tf32) and a Triton tl.dot: it counts FLOPs, wgmma's too."""
    import ncu_report

    rep = tmp_path / "probe.ncu-rep"
    rep.write_bytes(lzma.decompress(PROBE.read_bytes()))
    ctx = ncu_report.load_report(str(rep))
    flops = 2 * 4096**3
    seen = {}
    for i in range(ctx.num_ranges()):
        for k in (ctx.range_by_idx(i).action_by_idx(j) for j in range(ctx.range_by_idx(i).num_actions())):
            name = k.name()
            for src in ("bf16", "tf32"):
                m = k.metric_by_name(f"sm__ops_path_tensor_src_{src}_dst_fp32.sum")
                if m is not None and m.as_double() > 0:
                    seen[(name[:10], src)] = m.as_double()
    assert seen == {("nvjet_sm90", "bf16"): flops, ("sm90_xmma_", "tf32"): flops, ("_mm", "bf16"): flops}


@pytest.mark.skipif(not ncu_rep.have_ncu_report(), reason="pip install ncu-report")
def test_an_imported_ncu_report_of_a_users_matmuls_reads_their_tensor_active_share(tmp_path):
    """The probe's report is a user's capture: its default-domain ranges import by --ranges, and
    the tensor pipe's share per range is ncu's own figure (bf16 HGMMA 90.4%, TF32 88.7%, Triton 79.4%)."""
    out = tmp_path / "imported"
    res = run_cli("import", str(PROBE), "--ranges", "*@", "-o", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {r["variant"]: r for r in json.loads((out / "report.json").read_text())["variants"]}
    got = {v: round(r["tensor_active_pct"], 1) for v, r in rows.items()}
    assert got == {"bf16": 90.4, "tf32": 88.7, "triton_bf16": 79.4}
