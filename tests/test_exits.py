"""What a script relies on, driven through the real CLI: `report` of a saved folder exits as its
run did (the README's "Exit codes"), with the table printed; its --json is the folder's
report.json; --per-kernel in CSV is one table pandas reads whole; a usage error found once the run
had started, or an imported file that cannot be read, leaves no run folder and names the user's
file; a size no machine has is said in a few digits."""

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

CPU = ["--device", "cpu", "--size", "1000", "--iters", "5"]

# a variant that never returns: --timeout ends the run while the runner measures it
HANGS = """
import time
from workloads import Variant, Workload

def hangs(a):
    while True:
        time.sleep(1)

sq = lambda x: x * x
WORKLOADS = [Workload("hangs", "the second variant hangs", [Variant("fast", sq), Variant("stuck", hangs)],
                      reference=sq, bytes_moved=lambda n, s: 2 * n * s, cpu_default_shape=(1000,))]
"""


def _json(path: Path):
    return json.loads(Path(path).read_text())


# -- report exits as the run did ---------------------------------------------------------------


@pytest.mark.parametrize("name, tool", [("nsys-sigint-lost", "nsys"), ("ncu-sigint-measuring", "ncu")])
def test_report_of_an_interrupted_run_exits_130_with_its_table(h200_run, name, tool):
    """Real H200 folders interrupted by SIGINT: `report` used to exit 0 and say exit_code 0."""
    path = h200_run(name, group="h200-faults")
    res = run_cli("report", str(path))
    assert res.returncode == 130, res.stderr
    assert f"| {path}\n" in res.stdout and "torch_square" in res.stdout  # the table, printed all the same
    assert f"run interrupted: interrupted while running {tool}" in res.stdout
    assert (
        f"gprof-orch: {path}: the run ended interrupted (exit 130): interrupted while running {tool}"
        in res.stderr
    )
    res = run_cli("report", str(path), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 130 and doc["exit_code"] == 130 and doc["status"] == "interrupted"
    assert doc["error"] == {"kind": "InterruptedRunError", "message": f"interrupted while running {tool}"}
    assert [v["variant"] for v in doc["variants"]] == ["torch_square", "mul", "pow"]


def test_report_of_a_failed_run_exits_1(tmp_path):
    out = tmp_path / "run"
    res = run_cli("time", "square", *CPU, "--variants", "mul,pow", "--fail-variant", "pow", "-o", str(out))
    assert res.returncode == 1, res.stderr
    man = _json(out / "manifest.json")
    assert (man["status"], man["exit_code"], man["error_kind"]) == ("failed", 1, "RunFailedError")
    rep = run_cli("report", str(out))
    assert rep.returncode == 1, rep.stderr
    assert (
        re.search(r"^mul .* ok ", rep.stdout, re.M) and "run failed: 1 variant(s) failed: pow" in rep.stdout
    )
    assert "the run ended failed (exit 1): 1 variant(s) failed: pow" in rep.stderr
    js = run_cli("report", str(out), "--json")
    doc = json.loads(js.stdout)
    assert js.returncode == 1 and (doc["status"], doc["exit_code"]) == ("failed", 1)
    assert doc["error"]["kind"] == "RunFailedError" and doc["error"]["message"].startswith(
        "1 variant(s) failed: pow"
    )


def test_report_of_a_timed_out_run_exits_124(tmp_path):
    wfile = tmp_path / "hangs.py"
    wfile.write_text(HANGS)
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "hangs",
        "--workload-file",
        str(wfile),
        "--device",
        "cpu",
        "--iters",
        "20",
        "--timeout",
        "8",
        "-o",
        str(out),
    )
    assert res.returncode == 124, res.stderr
    man = _json(out / "manifest.json")
    assert (man["status"], man["exit_code"], man["error_kind"]) == ("failed", 124, "ToolTimeoutError")
    rep = run_cli("report", str(out), "--json")
    doc = json.loads(rep.stdout)
    assert rep.returncode == 124 and doc["exit_code"] == 124 and doc["error"]["kind"] == "ToolTimeoutError"
    assert {v["variant"]: v["status"] for v in doc["variants"]}["stuck"] == "timed out"
    # a folder written before the exit code was recorded: its workload.json says timed out
    for key in ("exit_code", "error_kind"):
        del man[key]
    (out / "manifest.json").write_text(json.dumps(man))
    rep = run_cli("report", str(out))
    assert rep.returncode == 124 and "stuck" in rep.stdout, rep.stderr


def test_report_of_several_folders_exits_as_the_one_that_did_not_end_ok(h200_run):
    ok, stopped = h200_run("nsys-mean"), h200_run("nsys-sigint-lost", group="h200-faults")
    res = run_cli("report", str(ok), str(stopped))
    assert res.returncode == 130, res.stderr
    assert f"| {ok}\n" in res.stdout and f"| {stopped}\n" in res.stdout
    res = run_cli("report", str(ok), str(stopped), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 130 and (doc["status"], doc["exit_code"]) == ("failed", 130)
    assert [(d["status"], d["exit_code"]) for d in doc["runs"]] == [("ok", 0), ("interrupted", 130)]
    assert doc["error"]["message"] == f"{stopped}: interrupted while running nsys"
    assert run_cli("report", str(ok)).returncode == 0


def test_the_exit_code_of_a_folder_without_one_recorded():
    from orchestrator.runfolder import run_exit_code

    assert [run_exit_code({"status": s}) for s in ("ok", "failed", "interrupted", "running")] == [
        0,
        1,
        130,
        1,
    ]
    assert run_exit_code({"status": "failed"}, {"status": "timed out"}) == 124
    assert run_exit_code({"status": "failed", "exit_code": 5}) == 5
    assert (
        run_exit_code({"status": "ok", "exit_code": "0"}) == 0
        and run_exit_code({"status": "ok", "exit_code": 999}) == 0
    )


# -- --json is report.json ---------------------------------------------------------------------


def test_report_json_is_the_folders_report_json(h200_run):
    """stdout's document lacked meta.findings (and said meta differently): now one builder writes both."""
    path = h200_run("ncu-mean")
    res = run_cli("report", str(path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc == _json(path / "report.json")
    assert len(doc["meta"]["findings"]) >= 1 and doc["meta"]["run"] == str(path)
    per_kernel = json.loads(run_cli("report", str(path), "--json", "--per-kernel").stdout)
    assert len(per_kernel.pop("kernels")) == 4 and per_kernel == doc


def test_a_runs_json_is_its_report_json(tmp_path):
    out = tmp_path / "run"
    res = run_cli("time", "square", *CPU, "--json", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == _json(out / "report.json")


# -- --per-kernel --format csv: one table ------------------------------------------------------


def test_per_kernel_csv_is_one_table(h200_run):
    path = h200_run("ncu-mean")
    res = run_cli("report", str(path), "--per-kernel", "--format", "csv")
    assert res.returncode == 0, res.stderr
    both = pd.read_csv(io.StringIO(res.stdout))
    assert list(both.columns[:4]) == ["table", "variant", "label", "status"]
    assert list(both["table"]) == ["variants"] * 3 + ["kernels"] * 4
    for col in ("launches", "share_pct", "time_median_us", "dram_pct_of_peak", "time_us_per_iter"):
        assert pd.api.types.is_float_dtype(both[col]), col
    kernels = both[both["table"] == "kernels"].set_index("kernel")
    assert list(kernels["launches"]) == [3, 3, 3, 3]  # ncu's 3 iterations
    as_text = pd.read_csv(io.StringIO(res.stdout), dtype=str, keep_default_na=False)
    assert list(as_text["launches"]) == [""] * 3 + ["3"] * 4  # whole numbers stay whole, not 3.0
    division = kernels.loc[kernels["variant"] == "sum_div_numel"].iloc[1]
    assert 0.04 < division["dram_pct_of_peak"] < 0.06 and division["share_pct"] == pytest.approx(
        2.1, abs=0.01
    )
    variants = both[both["table"] == "variants"].dropna(axis=1, how="all").drop(columns="table")
    alone = pd.read_csv(io.StringIO(run_cli("report", str(path), "--format", "csv").stdout))
    pd.testing.assert_frame_equal(
        variants.reset_index(drop=True), alone.dropna(axis=1, how="all")[variants.columns]
    )


def test_per_kernel_csv_of_runs_without_kernels_is_the_variant_rows(h200_run, tmp_path):
    """CUDA-event timing and a CPU run see no kernels: the CSV has its variant rows, the kernels'
    columns in the header and empty, where it raised KeyError for those columns."""
    cpu = tmp_path / "cpu"
    for args, variants in (
        (["report", str(h200_run("time-mean"))], ["torch_mean", "tensor_mean", "sum_div_numel"]),
        (["time", "square", *CPU, "-o", str(cpu)], ["torch_square", "mul", "pow", "triton", "numba"]),
    ):
        res = run_cli(*args, "--per-kernel", "--format", "csv")
        assert res.returncode == 0, res.stderr
        both = pd.read_csv(io.StringIO(res.stdout))
        assert list(both["table"]) == ["variants"] * len(variants)
        assert list(both["variant"]) == variants
        for col in ("kernel", "kernel_full", "launches", "time_us_per_iter", "share_pct"):
            assert both[col].isna().all(), col


# -- a usage error leaves no run folder --------------------------------------------------------


def test_a_size_too_large_leaves_no_folder_and_says_its_size_in_a_few_digits(tmp_path):
    res = run_cli("time", "square", "--device", "cpu", "--size", "1e30", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert re.search(
        r"size 1e\+30 \(1e\+30 elements of float32\) needs about \d\.\de\+22 GiB; this machine has "
        r"[\d.,]+ GiB available\. Choose a smaller --size\.",
        res.stderr,
    ), res.stderr
    assert (
        not re.search(r"\d{16}", res.stderr)
        and "run folder kept" not in res.stderr
        and "log:" not in res.stderr
    )
    assert not list((tmp_path / "gprof-runs").iterdir())


@pytest.mark.parametrize("size", ["64x32", "4096", "16x16x16"])
def test_matmul_of_a_size_that_is_not_square_is_a_usage_error(tmp_path, size):
    """It read "the workload runner crashed" (its make_input's refusal), exit 1, folder kept."""
    res = run_cli("time", "matmul", "--device", "cpu", "--size", size, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (
        f"gprof-orch: error: workload matmul needs a square size, --size NxN (its input is one n x n "
        f"matrix), not {size}"
    )
    assert not (tmp_path / "gprof-runs").exists() or not list((tmp_path / "gprof-runs").iterdir())


def test_a_usage_error_leaves_an_out_folder_as_it_was(tmp_path):
    there = tmp_path / "there"
    there.mkdir()
    res = run_cli("time", "square", "--device", "cpu", "--size", "1e30", "-o", str(there), "--json")
    assert res.returncode == 2 and json.loads(res.stdout)["exit_code"] == 2, res.stderr
    assert there.is_dir() and not list(there.iterdir())  # the user's folder kept, empty as it was
    res = run_cli("time", "square", "--device", "cpu", "--size", "1e30", "-o", str(tmp_path / "new"))
    assert res.returncode == 2 and not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "name, reason",
    [
        ("garbage.sqlite", "not an SQLite file"),
        ("garbage.ncu-rep", "not an Nsight Compute report"),
        ("garbage.json", "not a JSON Chrome trace"),
    ],
)
def test_importing_a_file_that_is_not_a_capture_names_it_and_leaves_no_folder(tmp_path, name, reason):
    (tmp_path / name).write_text("garbage, not a capture\n")
    res = run_cli("import", name, cwd=tmp_path)
    assert res.returncode == 4, res.stderr
    assert res.stderr.startswith(f"gprof-orch: error: cannot read {name}: ") and reason in res.stderr, (
        res.stderr
    )
    assert "gprof-runs" not in res.stderr and "run folder kept" not in res.stderr
    assert not list((tmp_path / "gprof-runs").iterdir())
    assert (tmp_path / name).read_text() == "garbage, not a capture\n"


def test_sizes_in_gib_read_in_a_few_digits():
    from workloads.environment import gib

    assert [gib(n) for n in (0, 22.1 * 2**30, 1536 * 2**30, 2.8e31)] == [
        "0.0 GiB",
        "22.1 GiB",
        "1,536 GiB",
        "2.6e+22 GiB",
    ]


def test_any_size_in_gib_is_short_and_reads_back_close():
    pytest.importorskip("hypothesis")
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from workloads.environment import gib

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(st.floats(min_value=2**20, max_value=1e40))
    def check(nbytes):
        text = gib(nbytes)
        assert len(text) <= 13 and text.endswith(" GiB"), text
        assert float(text[:-4].replace(",", "")) == pytest.approx(nbytes / 2**30, rel=0.05, abs=0.05)

    check()
