"""A new user's own PyTorch program, profiled as the README's first `exec` example reads, on a CUDA
GPU (skipped without one): tests/fixtures/programs/nested_steps.py, `step` > `fwd` (a matmul and a
relu) and `reduce` (a sum), 5 steps, unchanged for the profiler."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import run_cli

pytestmark = pytest.mark.gpu

NESTED = Path(__file__).parent / "fixtures" / "programs" / "nested_steps.py"


def _needs(tool: str):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if tool == "ncu" and shutil.which("ncu") is None:
        pytest.skip("needs ncu")


@pytest.mark.nsys
def test_plain_exec_nsys_reports_every_range_equal_to_nvtx_kern_sum(tmp_path):
    """Every range with every kernel, 5 instances each, equal to nsys's own nvtx_kern_sum on the
    same capture; or, where this nsys loses the program's events, exit 6 saying so (never `ok`)."""
    from test_h200_programs import _kernels_per_variant, _nvtx_kern_sum

    from orchestrator import load_run

    _needs("nsys")
    out = tmp_path / "r"
    res = run_cli("exec", "nsys", "-o", str(out), "--json", "--", sys.executable, str(NESTED))
    doc = json.loads(res.stdout)
    if res.returncode == 6:  # an nsys older than the CUDA runtime (2023.4.4 under CUDA 13)
        assert doc["error"]["kind"] == "IncompleteReportError" and "events were lost" in doc["error"]["hint"]
        assert {v["status"] for v in doc["variants"]} == {"incomplete"}
        pytest.skip("this nsys loses the program's events: said, exit 6 (" + doc["error"]["message"] + ")")
    assert res.returncode == 0, res.stderr
    rows = {v["variant"]: v for v in doc["variants"]}
    assert list(rows) == ["step", "fwd", "reduce"]
    assert all(r["status"] == "ok" and r["samples"] == 5 for r in rows.values()), rows
    assert all(
        r["speedup_vs_baseline"] is None for r in rows.values()
    )  # parts of a program, not alternatives
    assert rows["step"]["note"].startswith("nested: holds fwd, reduce")
    theirs = _nvtx_kern_sum(out, tmp_path)
    mine = _kernels_per_variant(load_run(out))
    assert mine == theirs, (mine, theirs)
    assert mine["step"][0] == mine["fwd"][0] + mine["reduce"][0] and mine["fwd"][0] >= 10


@pytest.mark.ncu
def test_exec_ncu_names_the_gpu_and_counts_instances_as_exec_nsys(tmp_path):
    """`exec ncu` on the same program: the title names the GPU (it read "on cuda") and each range's
    5 instances are its 5 iterations, as `exec nsys` counts them (it read 1)."""
    import torch

    _needs("ncu")
    res = run_cli("exec", "ncu", "-o", str(tmp_path / "r"), "--json", "--", sys.executable, str(NESTED))
    assert res.returncode == 0, res.stderr
    rows = {v["variant"]: v for v in json.loads(res.stdout)["variants"]}
    assert set(rows) == {"fwd", "reduce"}  # ncu's default: the innermost range of each kernel
    assert rows["fwd"]["samples"] == 5 and rows["reduce"]["samples"] == 5, rows
    assert all(r["speedup_vs_baseline"] is None for r in rows.values())
    table = run_cli("report", str(tmp_path / "r"))
    assert f"on {torch.cuda.get_device_name(0)} |" in table.stdout.splitlines()[0]
