"""Compute-bound workloads: the FLOPs a workload declares, TFLOP/s and % of peak FLOP/s against the
device's datasheet peak for the variant's unit, the verdict by intensity against the ridge point,
and the built-in matmul workload, through the real CLI on the CPU (and on a GPU where there is one)."""

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from orchestrator.backends import ncu as ncu_backend
from reports import flops, why
from reports.summary import variant_table
from workloads.devices import FLOP_UNITS, flop_unit, peak_flops
from workloads.registry import Variant

CPU_N = 256  # the matmul workload's CPU default: 256x256


def _report(out) -> dict:
    return json.loads((out / "report.json").read_text())


def _cell(stdout: str, variant: str, header: str) -> str:
    """One cell of the printed table, by its row's variant and its column's header."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", lines[head])]
    names = [lines[head][s:e].strip() for s, e in zip(starts, starts[1:] + [None])]
    row = next(line for line in lines[head + 2 :] if line.split()[0] == variant)
    i = names.index(header)
    # numbers are right-aligned under their header: the cell ends where the header ends
    end = starts[i] + len(names[i])
    return row[:end].split()[-1]


def test_time_matmul_on_the_cpu_fills_tflops_as_2n3_over_the_median(tmp_path):
    out = tmp_path / "run"
    res = run_cli("time", "matmul", "--iters", "5", "--out", str(out), "--triton-interpret", timeout=600)
    assert res.returncode == 0, res.stderr
    rows = {r["variant"]: r for r in _report(out)["variants"]}
    assert set(rows) == {"torch_matmul", "matmul_fp32", "matmul_tf32", "triton_matmul"}
    for name, r in rows.items():
        assert r["status"] in ("ok", "noisy"), (name, r["note"])
        expected = 2 * CPU_N**3 / (r["time_median_us"] * 1e-6) / 1e12
        assert r["tflop_s"] == pytest.approx(expected, rel=1e-5)  # report.json keeps 6 digits
        # the printed cell, 3 significant digits
        assert float(_cell(res.stdout, name, "TFLOP/s")) == pytest.approx(expected, rel=5e-3)
        assert r["pct_of_peak_flops"] is None and r["bound"] is None
        assert r["flops_source"] == "workload"
        assert r["flops_per_byte"] == pytest.approx(2 * CPU_N**3 / (3 * CPU_N**2 * 4))
    header = next(line for line in res.stdout.splitlines() if line.startswith("variant "))
    assert "TFLOP/s" in header and "% peak FLOP/s" not in header  # an empty column is not printed
    assert (
        "% peak FLOP/s left empty: no peak FLOP/s for a CPU run; TFLOP/s is the FLOPs of each variant's "
        "call over its median" in res.stdout
    )
    wman = json.loads((out / "workload.json").read_text())
    units = {v["name"]: v["flop_unit"] for v in wman["variants"]}
    assert units == {
        "torch_matmul": "fp32",
        "matmul_fp32": "fp32",
        "matmul_tf32": "tf32",
        "triton_matmul": "fp32",
    }
    assert {v["name"]: v["flops"] for v in wman["variants"]}["torch_matmul"] == 2 * CPU_N**3
    assert {v["name"]: v["bytes_moved"] for v in wman["variants"]}["torch_matmul"] == 3 * CPU_N**2 * 4


USER_FILE = """
from workloads import Variant, Workload

triple = Workload(
    "triple",
    "x*3",
    [Variant("mul3", lambda a: a * 3, label="a*3")],
    reference=lambda x64: x64 * 3,
    bytes_moved=lambda numel, itemsize: 2 * numel * itemsize,
    flops=lambda shape, dtype: {FLOPS},
)
"""


def test_a_workload_file_that_declares_flops_gets_the_tflops_column(tmp_path):
    src = tmp_path / "mine.py"
    src.write_text(USER_FILE.replace("{FLOPS}", "shape[0] * shape[1]"))
    out = tmp_path / "run"
    res = run_cli(
        "time", "triple", "--workload-file", str(src), "--size", "500x400", "--iters", "5", "--out", str(out)
    )
    assert res.returncode == 0, res.stderr
    r = _report(out)["variants"][0]
    assert r["tflop_s"] == pytest.approx(500 * 400 / (r["time_median_us"] * 1e3) / 1e3, rel=1e-5)
    assert "TFLOP/s" in res.stdout and "% peak FLOP/s left empty" in res.stdout
    # one multiply per element: 0.125 FLOP/byte, memory-bound anywhere; the why line says nothing of it
    assert r["flops_per_byte"] == pytest.approx(0.125)


def test_a_flops_that_gives_no_count_is_the_workloads_failure(tmp_path):
    src = tmp_path / "mine.py"
    src.write_text(USER_FILE.replace("{FLOPS}", "'many'"))
    res = run_cli(
        "time",
        "triple",
        "--workload-file",
        str(src),
        "--size",
        "1000",
        "--iters",
        "3",
        "--out",
        str(tmp_path / "r"),
    )
    assert res.returncode != 0
    assert (
        "workload triple: its flops gave 'many' for shape (1000,), not a count >= 0"
        in res.stdout + res.stderr
    )
    assert "Traceback" not in res.stdout


def test_memory_bound_runs_get_no_compute_columns(tmp_path):
    out = tmp_path / "run"
    res = run_cli("time", "square", "--size", "1000", "--iters", "5", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "TFLOP/s" not in res.stdout and "FLOP" not in res.stdout
    assert all(r["tflop_s"] is None for r in _report(out)["variants"])
    assert "flops" not in json.loads((out / "workload.json").read_text())["variants"][0]


# -- the verdict, on an H200's numbers --------------------------------------------------------

N = 8192
H200_BW = 4.8e12


def _h200_bf16_matmul(median_ms: float) -> tuple[pd.DataFrame, dict]:
    """The unified rows and workload.json of `time matmul --size 8192x8192 --dtype bfloat16` on an
    H200 whose torch_matmul took `median_ms` a call (the numbers the runner writes)."""
    wman = {
        "baseline": "torch_matmul",
        "iters": 3,
        "shape": [N, N],
        "device": "cuda",
        "env": {
            "device_name": "NVIDIA H200",
            "peak_bandwidth_bytes_per_s": H200_BW,
            "peak_flops": {"bf16": peak_flops("NVIDIA H200")[0]["bf16"]},
            "peak_flops_source": peak_flops("NVIDIA H200")[1],
            "flop_units": FLOP_UNITS,
        },
        "variants": [
            {
                "name": "torch_matmul",
                "label": "torch.matmul",
                "status": "ok",
                "bytes_moved": 3 * N * N * 2,
                "flops": 2 * N**3,
                "flop_unit": "bf16",
            }
        ],
    }
    rows = [("time_ns", median_ms * 1e6)] * 3 + [("bytes_moved", 3 * N * N * 2), ("flops", 2 * N**3)]
    frame = pd.DataFrame(
        [
            {
                "run": "r",
                "backend": "time",
                "workload": "matmul",
                "variant": "torch_matmul",
                "kernel": "*",
                "metric": m,
                "value": float(v),
                "unit": "",
            }
            for m, v in rows
        ]
    )
    return frame, wman


def test_a_bf16_8192_matmul_on_an_h200_is_compute_bound_and_its_why_leads_with_tflops():
    assert flops.bound(2 * N**3, 3 * N * N * 2, 989.4e12, H200_BW) == "compute"
    frame, wman = _h200_bf16_matmul(1.37)
    table = variant_table(frame, wman)
    r = table.iloc[0]
    tflops = 2 * N**3 / 1.37e-3 / 1e12  # 802.6
    assert r["tflop_s"] == pytest.approx(tflops)
    assert r["pct_of_peak_flops"] == pytest.approx(tflops / 989.4 * 100)  # 81.1
    assert r["bound"] == "compute"
    assert r["flops_per_byte"] == pytest.approx(2 * N / 6)  # 2731
    assert r["ridge_flops_per_byte"] == pytest.approx(989.4e12 / H200_BW)  # 206
    line = why.explain(table, frame, wman).iloc[0]
    assert line == (
        "compute-bound: 803 TFLOP/s, 81.1% of peak FLOP/s (2,731 FLOP/byte, above the ridge at 206); "
        f"{r['achieved_gb_s']:,.0f} GB/s, {r['pct_of_peak_bw']:.1f}% peak BW"
    )
    assert r["pct_of_peak_bw"] == pytest.approx(3 * N * N * 2 / 1.37e-3 / H200_BW * 100)  # 6.1


def test_footer_names_the_peak_flops_and_its_datasheet():
    frame, wman = _h200_bf16_matmul(1.37)
    table = variant_table(frame, wman)
    assert flops.footer_lines(table, wman) == [
        "% peak FLOP/s against 989 TFLOP/s (NVIDIA H200 datasheet: dense BF16 tensor); TFLOP/s counts the "
        "FLOPs each variant declares"
    ]


def test_ncus_tensor_active_share_follows_the_flop_figures_in_the_compute_lead():
    r = pd.Series(
        {"bound": "compute", "tflop_s": 640.0, "pct_of_peak_flops": 64.7, "tensor_active_pct": 71.4}
    )
    assert flops.why_lead(r) == (
        "compute-bound: 640 TFLOP/s, 64.7% of peak FLOP/s, tensor cores active 71% of cycles"
    )
    # ncu declares the column once and collects its metric on every run
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed" in ncu_backend.table_metrics()


def test_an_elementwise_op_with_flops_is_memory_bound_and_its_why_is_unchanged():
    # a*a on 1e8 float32: 1 FLOP per 8 bytes, far under the ridge of any GPU
    assert flops.bound(1e8, 8e8, 67e12, H200_BW) == "memory"
    assert flops.bound(1e8, 8e8, None, H200_BW) == ""
    assert flops.why_lead(pd.Series({"bound": "memory", "tflop_s": 0.5})) == ""


# -- the device table -----------------------------------------------------------------------


def test_the_device_table_gives_dense_datasheet_peaks_by_name():
    h200, source = peak_flops("NVIDIA H200")
    assert source == "NVIDIA H200 datasheet"
    assert h200 == {
        "fp64": 34e12,
        "fp64-tensor": 67e12,
        "fp32": 67e12,
        "tf32": 494.7e12,
        "bf16": 989.4e12,
        "fp16": 989.4e12,
        "fp8": 1978.9e12,
    }
    assert peak_flops("NVIDIA H100 80GB HBM3") == (h200, "NVIDIA H100 SXM datasheet")
    assert peak_flops("NVIDIA H100 PCIe")[0]["bf16"] == 756e12
    assert peak_flops("NVIDIA GH200 480GB")[1] == "NVIDIA GH200 datasheet"  # not H200's row
    assert peak_flops("NVIDIA H200 NVL")[0]["bf16"] == 835.5e12
    assert "fp8" not in peak_flops("NVIDIA A100-SXM4-80GB")[0]
    assert peak_flops("Tesla V100-SXM2-16GB") == ({}, "no peak FLOP/s known for 'Tesla V100-SXM2-16GB'")


def test_the_unit_is_inferred_from_the_dtype_unless_the_variant_declares_its_math():
    assert [flop_unit(d) for d in ("bfloat16", "float16", "float32", "float64")] == [
        "bf16",
        "fp16",
        "fp32",
        "fp64",
    ]
    assert flop_unit("float32", "tf32") == "tf32"
    assert flop_unit("float32", "tensor") == "tf32"
    assert flop_unit("float64", "tensor") == "fp64-tensor"
    assert flop_unit("bfloat16", "simt") == "bf16-simt"  # no datasheet peak: % peak left empty
    with pytest.raises(ValueError, match="math 'tensor-core' is not one of tensor, tf32, fp8, simt"):
        Variant("v", lambda a: a, math="tensor-core")


# -- on a GPU ------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_time_matmul_bf16_8192_on_a_gpu_prints_tflops_and_pct_of_peak(tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "matmul",
        "--size",
        "8192x8192",
        "--dtype",
        "bfloat16",
        "--variants",
        "torch_matmul",
        "--out",
        str(out),
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    r = next(r for r in _report(out)["variants"] if r["variant"] == "torch_matmul")
    assert r["tflop_s"] == pytest.approx(2 * 8192**3 / (r["time_median_us"] * 1e-6) / 1e12, rel=0.05)
    assert r["pct_of_peak_flops"] is not None and 0 < r["pct_of_peak_flops"] < 110
    assert r["bound"] == "compute"
    assert "% peak FLOP/s" in res.stdout and "% peak FLOP/s against" in res.stdout
    assert f"why torch_matmul: compute-bound: {r['tflop_s']:,.0f} TFLOP/s" in res.stdout
    assert math.isfinite(r["pct_of_measured_flops"])


def test_report_of_a_folder_whose_flops_is_not_a_count_says_so(tmp_path):
    out = tmp_path / "run"
    assert (
        run_cli("time", "matmul", "--variants", "torch_matmul", "--iters", "3", "--out", str(out)).returncode
        == 0
    )
    wman = json.loads((out / "workload.json").read_text())
    wman["variants"][0]["flops"] = -1
    (out / "workload.json").write_text(json.dumps(wman))
    res = run_cli("report", str(out))
    assert res.returncode == 4, res.stdout + res.stderr
    assert '"flops" is -1, not a count of FLOPs' in res.stderr
    assert "Traceback" not in res.stderr


def test_proton_fills_tflops_from_the_triton_kernels_launch_metadata(h200_run):
    """The H200 proton run of proton-axpy (tests/fixtures/runs/h200-proton): its workload declares
    no FLOPs, its Triton kernel's launch_metadata does (2 an element): that fills TFLOP/s."""
    from orchestrator import load_run

    run = load_run(h200_run("proton-axpy", "h200-proton"), write=False)
    t = run.table.set_index("variant")
    numel = int(run.workload["numel"])
    assert t.loc["triton_axpy", "tflop_s"] == pytest.approx(
        2.0 * numel / (t.loc["triton_axpy", "time_median_us"] * 1e6)
    )
    assert t.loc["triton_axpy", "flops_source"] == "launch_metadata"
    assert math.isnan(t.loc["torch_two_ops", "tflop_s"]) and math.isnan(
        t.loc["triton_axpy", "pct_of_peak_flops"]
    )
    assert (
        "TFLOP/s of triton_axpy from the FLOPs its Triton kernels' launch_metadata declares (the workload "
        "declares none)" in run.footer()
    )


def test_the_measured_flop_roof_fills_its_column_and_its_line():
    frame, wman = _h200_bf16_matmul(1.37)
    method = "torch.matmul of two 8192x8192 bfloat16 matrices, median of 10 calls by CUDA events"
    wman["env"]["compute_roof"] = {"bf16": {"flop_per_s": 850e12, "method": method}}
    table = variant_table(frame, wman)
    assert table.iloc[0]["pct_of_measured_flops"] == pytest.approx(2 * N**3 / 1.37e-3 / 850e12 * 100)
    assert (
        flops.footer_lines(table, wman)[-1]
        == f"% of measured FLOP roof against 850 TFLOP/s for bf16 ({method})"
    )
    assert "94% of the measured FLOP roof" in why.explain(table, frame, wman).iloc[0]


def test_a_damaged_env_leaves_the_peak_empty_without_a_traceback():
    frame, wman = _h200_bf16_matmul(1.37)
    wman["env"].update(peak_flops=5, compute_roof=["x"], flop_units=None)
    table = variant_table(frame, wman)
    assert math.isnan(table.iloc[0]["pct_of_peak_flops"]) and table.iloc[0]["tflop_s"] > 800
    assert flops.footer_lines(table, wman) == [
        "no peak FLOP/s for bf16 (NVIDIA H200 datasheet): % peak FLOP/s left empty"
    ]


# -- the Triton matmul kernel (the interpreter on the CPU; conftest sets TRITON_INTERPRET=1) ------


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float16", 1e-3), ("bfloat16", 1e-2)])
def test_triton_matmul_matches_torch_at_sizes_that_are_no_multiple_of_its_tiles(dtype, tol):
    import torch

    from workloads.kernels.triton_matmul import declared, triton_matmul

    g = torch.Generator().manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(70, 50, generator=g).to(dev, getattr(torch, dtype))
    b = torch.randn(50, 90, generator=g).to(dev, getattr(torch, dtype))
    ref = a.double() @ b.double()
    got = triton_matmul(a, b)
    assert got.shape == (70, 90) and got.dtype == a.dtype
    assert float((got.double() - ref).norm() / ref.norm()) < tol
    # what proton reads at each launch: 2 M N K FLOPs at the inputs' width, a, b and c once
    size = a.element_size()
    args = {"a_ptr": a, "M": 70, "N": 90, "K": 50}
    assert declared(None, None, args) == {
        f"flops{8 * size}": 2.0 * 70 * 90 * 50,
        "bytes": size * (70 * 50 + 50 * 90 + 70 * 90),
    }


UNDECLARED = Path(__file__).resolve().parent / "fixtures" / "workloads" / "gemm_undeclared.py"


def test_a_gemm_that_declares_no_flops_gets_them_counted_by_pytorch(tmp_path):
    """A user's `a @ a` with no `flops=`: FlopCounterMode counts 2 n^3 on the runner's extra call,
    and TFLOP/s is that over the median, on the CPU too, saying where the FLOPs come from."""
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "gemm_undeclared",
        "--workload-file",
        str(UNDECLARED),
        "--device",
        "cpu",
        "--size",
        "128x128",
        "--max-time",
        "0.3",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    wman = json.loads((out / "workload.json").read_text())
    for v in wman["variants"]:
        assert v["counted_flops"] == 2 * 128**3 and "flops" not in v
        assert v["counted_flops_source"] == "torch.utils.flop_counter.FlopCounterMode"
        assert v["flop_unit"] == "fp32"
    rows = {r["variant"]: r for r in json.loads((out / "report.json").read_text())["variants"]}
    for r in rows.values():
        assert r["flops_source"] == "pytorch"
        assert r["tflop_s"] == pytest.approx(2 * 128**3 / (r["time_median_us"] * 1e-6) / 1e12, rel=1e-5)
    assert "TFLOP/s of matmul, mm from the FLOPs PyTorch's FlopCounterMode counted" in res.stdout


def test_declared_flops_win_and_a_count_more_than_1pct_apart_is_said():
    g = pd.DataFrame({"metric": ["flops", "counted_flops"], "value": [1e9, 2e9], "kernel": ["*", "*"]})
    assert flops.flops_per_call(g, 1) == (1e9, "workload")
    assert flops.declared_against_counted(g) == (
        "FLOPs: the workload declares 1e+09 a call, PyTorch's FlopCounterMode counts 2e+09 (+100.0%)"
    )
    assert flops.declared_against_counted(g.assign(value=[1e9, 1.005e9])) == ""
    assert flops.flops_per_call(g[g["metric"] == "counted_flops"], 1) == (2e9, "pytorch")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["time", "ncu"])
def test_an_undeclared_bf16_gemm_gets_tflops_and_pct_of_peak_on_a_gpu(tmp_path, backend):
    import shutil

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if backend == "ncu" and shutil.which("ncu") is None:
        pytest.skip("needs ncu")
    out = tmp_path / "run"
    res = run_cli(
        backend,
        "gemm_undeclared",
        "--workload-file",
        str(UNDECLARED),
        "--dtype",
        "bfloat16",
        "--out",
        str(out),
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    rows = {r["variant"]: r for r in json.loads((out / "report.json").read_text())["variants"]}
    for r in rows.values():
        assert r["flops_source"] == "pytorch"
        assert 100 < r["tflop_s"] and 20 < r["pct_of_peak_flops"] <= 100
    assert "no peak FLOP/s for" not in res.stdout
