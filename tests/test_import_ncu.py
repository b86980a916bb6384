"""`gprof-orch import FILE.ncu-rep`: an Nsight Compute report made by anyone,
reported per NVTX range as `gprof-orch ncu` reports its own; real H200 reports."""

import json

import pytest
from conftest import FIXTURES, run_cli

from orchestrator import import_capture, load_run
from orchestrator.parsers import ncu_rep

# reading a .ncu-rep here takes NVIDIA's ncu_report (no ncu on this machine); on the GPU machine
# `exec ncu` reads its report through `ncu --import` where the wheel is missing
needs_ncu_report = pytest.mark.skipif(not ncu_rep.have_ncu_report(), reason="pip install ncu-report")

FOREIGN = FIXTURES / "ncu" / "h200_square_mul_sol_mem" / "square_mul_sol_mem.ncu-rep"
# gpu__time_duration.sum of its 10 kernels (ns), all in the range gprof@variant:a*a
DURATIONS_NS = [4128, 4160, 4192, 4192, 4192, 4160, 4352, 4192, 4192, 4128]


@needs_ncu_report
def test_a_report_in_a_run_folder_rebuilds_that_runs_table(tmp_path):
    """The report of a gprof-orch `ncu` run, imported alone, keeps the run's variants, labels,
    iterations and bytes (its folder's workload.json), so the table equals the run's own."""
    folder = FIXTURES / "runs" / "h200" / "ncu-square"
    run = import_capture(folder / "report.ncu-rep.xz", out=tmp_path / "imported")
    own = load_run(folder).table.set_index("variant")
    got = run.table.set_index("variant")
    assert run.backend == "ncu" and run.status == "ok"
    assert list(got.index) == list(own.index) == ["torch_square", "mul", "pow", "triton", "numba"]
    for col in ("time_median_us", "dram_pct_of_peak", "achieved_gb_s", "label", "launches_per_iter"):
        assert got[col].tolist() == own[col].tolist(), col
    manifest = json.loads((tmp_path / "imported" / "manifest.json").read_text())
    # the request names the backend whose report hook made the folder's workload.json
    assert manifest["kind"] == "import" and manifest["request"]["backend"] == "program-ncu"


@needs_ncu_report
def test_a_foreign_report_one_variant_per_range_and_iters_from_the_user(tmp_path):
    one = import_capture(FOREIGN, out=tmp_path / "one").table.set_index("variant")
    assert list(one.index) == ["a*a"]
    assert one.loc["a*a", "launches_per_iter"] == 10
    assert one.loc["a*a", "time_median_us"] == pytest.approx(sum(DURATIONS_NS) / 1e3)
    ten = import_capture(FOREIGN, iters=10, out=tmp_path / "ten").table.set_index("variant")
    assert ten.loc["a*a", "launches_per_iter"] == 1
    assert ten.loc["a*a", "time_median_us"] == pytest.approx(4.192)  # the median of the 10 launches
    assert (
        51 < ten.loc["a*a", "l2_hit_pct"] < 53
    )  # the report's MemoryWorkloadAnalysis: the schema's L2 column


@needs_ncu_report
def test_no_matching_range_is_exit_4_naming_the_ranges_it_holds(tmp_path):
    res = run_cli("import", str(FOREIGN), "--ranges", "gprof@nope", "-o", str(tmp_path / "r"))
    assert res.returncode == 4
    assert "no kernel is inside an NVTX range gprof@nope*" in res.stderr
    assert "it holds: variant:a*a" in res.stderr


STEPS = FIXTURES / "programs" / "torch_steps.py"


def test_exec_ncu_dry_run_is_the_whole_program_under_ncu_with_nvtx(cli):
    import sys

    res = cli(
        "exec",
        "ncu",
        "--dry-run",
        "--ncu",
        sys.executable,
        "--ncu-arg=--launch-count=9",
        "--",
        "python",
        "train.py",
        "--steps",
        "5",
    )
    assert res.exit_code == 0, res.output
    line = res.output.strip().splitlines()[-1]
    assert (
        " --nvtx " in line
        and "--section SpeedOfLight_RooflineChart" in line
        and "lts__t_sector_hit_rate.pct" in line
    )
    assert line.endswith("--launch-count=9 python train.py --steps 5")


def test_exec_ncu_is_the_program_ncu_backends_commands(tmp_path):
    """`exec ncu` runs ncu as every backend runs its tool: the registry's program-ncu backend
    builds the command (the ncu backend's argv for a whole program) from its own options, and
    the request record keeps them under "options"."""
    import sys

    from orchestrator import backends
    from orchestrator.backends.ncu import NcuBackend
    from orchestrator.capture_request import ProgramRequest

    be = backends.get("program-ncu")
    assert be.Options.names() == ["ncu", "ncu_args"]
    argv = ["python", "train.py"]
    req = ProgramRequest.of(
        be, argv=argv, tool="ncu", ncu=sys.executable, ncu_args=("--launch-count=9",)
    ).validate()
    (step,) = be.commands(req, tmp_path)
    assert step.name == "ncu"
    assert step.argv == NcuBackend.program_argv(sys.executable, argv, tmp_path, ["--launch-count=9"])
    assert req.to_json()["options"] == {"ncu": sys.executable, "ncu_args": ["--launch-count=9"]}
    assert (
        be.merged is None
        and "program-ncu" not in backends.of_all()
        and "program-ncu" not in backends.commands()
    )


@pytest.mark.gpu
@pytest.mark.ncu
def test_exec_ncu_reports_a_users_program_per_range(tmp_path):
    import shutil
    import sys

    import torch

    if not torch.cuda.is_available() or shutil.which("ncu") is None:
        pytest.skip("needs a CUDA GPU and ncu")
    res = run_cli(
        "exec",
        "ncu",
        "--ranges",
        "@step",
        "--iters",
        "3",
        "-o",
        str(tmp_path / "r"),
        "--json",
        "--",
        sys.executable,
        str(STEPS),
    )
    assert res.returncode == 0, res.stderr
    rows = {r["variant"]: r for r in json.loads(res.stdout)["variants"]}
    assert list(rows) == ["step"]  # "other" is not a step range
    # its 3 back-to-back instances, with no kernel of another range between them, read as one
    # instance of 3 iterations (ncu keeps no instances; on the H100: 6 launches a "step" without --iters)
    assert (
        rows["step"]["launches_per_iter"] == 2
        and rows["step"]["samples"] == 3
        and rows["step"]["status"] == "ok"
    )
    assert "MulFunctor" in rows["step"]["kernels"] and "reduce_kernel" in rows["step"]["kernels"]
    assert 0 < rows["step"]["time_median_us"] < 1000 and rows["step"]["dram_pct_of_peak"] > 0
    every = run_cli("exec", "ncu", "-o", str(tmp_path / "all"), "--json", "--", sys.executable, str(STEPS))
    assert every.returncode == 0, every.stderr
    doc = json.loads(every.stdout)
    assert [r["variant"] for r in doc["variants"]] == ["step", "other"]
    assert doc["variants"][0]["speedup_vs_baseline"] is None  # a program's ranges are not alternatives


def test_range_instances_are_counted_from_the_kernels_order():
    """ncu keeps no range instances: a new one starts where a kernel of the range follows another's."""
    import pandas as pd

    from orchestrator.backends.program_ncu import range_instances

    order = pd.Series(["fwd", "fwd", "reduce", None, "fwd", "fwd", "reduce", "fwd", "reduce"])
    assert range_instances(order) == {"fwd": 3, "reduce": 3}
