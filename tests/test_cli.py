"""The command line: help, list, doctor, end-to-end CPU runs, and every bad input."""

import json
import subprocess
import sys
import time

import pytest
from conftest import run_cli

COMMANDS = ["list", "doctor", "time", "torch-trace", "nsys", "ncu", "report"]


def test_help_is_fast_and_imports_no_torch():
    code = (
        "import sys, time; t = time.perf_counter(); from orchestrator.cli import main\n"
        "try:\n    main(['--help'], prog_name='gprof-orch')\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'triton', 'pandas', 'numpy', 'ncu_report') if m in sys.modules]\n"
        "print('HEAVY', heavy, time.perf_counter() - t, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("HEAVY")][0]
    assert "HEAVY []" in line, line
    t0 = time.perf_counter()
    res = run_cli("--help")
    assert res.returncode == 0 and "gprof-orch time square" in res.stdout
    assert time.perf_counter() - t0 < 2.0  # the whole interpreter start included; the import is < 0.5 s
    assert float(line.split()[-1]) < 0.5


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help_with_an_example(cli, cmd):
    res = cli(cmd, "--help")
    assert res.exit_code == 0
    assert "Example" in res.output


def test_version(cli):
    res = cli("--version")
    assert res.exit_code == 0 and "0.1.0" in res.output


def test_list(cli):
    res = cli("list")
    assert res.exit_code == 0
    assert "square:" in res.output and "a**2" in res.output and "needs: cuda, numba" in res.output
    data = json.loads(cli("list", "--json").output)
    assert {w["workload"] for w in data} >= {"square", "mean", "triton-mean", "load-inline-square"}


def test_doctor_on_a_cpu_machine(cli):
    res = cli("doctor", "--json")
    data = json.loads(res.output)
    assert res.exit_code == 0 and data["torch"]["ok"]
    assert "nsys" in data and "ncu" in data
    if not data["ncu"]["ok"]:
        assert "Nsight Compute" in data["ncu"]["fix"]
    # time's kernel clock (CUPTI): off without a GPU, and the row says so
    assert data["cupti"] == {"ok": True, "version": "no GPU: time's kernel clock is off"}


def test_doctor_does_not_call_nvtx_ranges_ok_without_nsys(cli, tmp_path):
    gone = tmp_path / "nsys"
    res = cli("doctor", "--nsys", str(gone))
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert f"  [MISSING] nsys        --nsys {gone} is not an executable file" in lines
    assert (
        "  [skip   ] nvtx_ranges not checked: nsys is missing (whether it records the nvtx package's "
        "ranges depends on its version)"
    ) in lines
    assert not any("nvtx_ranges recorded" in line for line in lines)
    row = json.loads(cli("doctor", "--nsys", str(gone), "--json").output)["nvtx_ranges"]
    assert row["ok"] is None and row["version"].startswith("not checked: nsys is missing")


def test_kernel_clock_on_a_cpu_run_says_it_is_off(tmp_path):
    out = tmp_path / "k"
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "1000",
        "-v",
        "mul",
        "--iters",
        "5",
        "--kernel-clock",
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "spec.json").read_text())["kernel_clock"] is True
    assert (
        "--kernel-clock asked for, but off: a CPU run has no GPU kernels to clock"
        in (out / "report.md").read_text()
    )
    row = json.loads((out / "report.json").read_text())["variants"][0]
    assert row.get("events_median_us") is None and row["time_median_us"] > 0
    # not asked for (the default): a CPU run says nothing of it
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "1000",
        "-v",
        "mul",
        "--iters",
        "5",
        "-o",
        str(tmp_path / "d"),
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "d" / "spec.json").read_text())["kernel_clock"] is None
    assert "kernel clock" not in (tmp_path / "d" / "report.md").read_text()


def test_cuda_graph_on_a_cpu_run_says_it_is_off(tmp_path):
    off = "--cuda-graph asked for, but off: a CPU run has no CUDA graphs to capture; each call was timed as it is"
    cpu = ["time", "square", "--device", "cpu", "--size", "1000", "-v", "mul", "--iters", "5"]
    out = tmp_path / "g"
    res = run_cli(*cpu, "--cuda-graph", "--format", "csv", "-o", str(out))
    assert res.returncode == 0, res.stderr
    # said before the run, where a CSV on stdout has no footer to say it in
    assert f"gprof-orch: warning: {off}" in res.stderr.splitlines()
    assert json.loads((out / "spec.json").read_text())["cuda_graph"] is True
    assert json.loads((out / "workload.json").read_text())["cuda_graph"] is False
    assert f"warning: {off}" in (out / "report.md").read_text().splitlines()
    again = run_cli("report", str(out))
    assert again.returncode == 0 and f"warning: {off}" in again.stdout.splitlines()
    # not asked for: nothing said
    res = run_cli(*cpu, "-o", str(tmp_path / "d"))
    assert res.returncode == 0 and "cuda-graph" not in res.stderr + res.stdout


def test_time_end_to_end_on_the_cpu(tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "4096",
        "--iters",
        "20",
        "-o",
        str(out),
        env={"TRITON_INTERPRET": "0"},
    )
    assert res.returncode == 0, res.stderr
    assert "no CUDA GPU in use" in res.stderr
    assert "torch.square" in res.stdout and "skipped" in res.stdout
    man = json.loads((out / "manifest.json").read_text())
    assert man["status"] == "ok" and man["backend"] == "time" and man["schema_version"] == 1
    assert man["machine"]["packages"]["torch"]
    assert f"-m workloads run --spec {out}/spec.json --out {out}" in (out / "commands.sh").read_text()
    assert json.loads((out / "spec.json").read_text())["shape"] == [4096]
    wman = json.loads((out / "workload.json").read_text())
    assert wman["gpu_sleep_us"] == 0 and wman["flush_l2"] is False  # neither applies on the CPU
    table = json.loads((out / "report.json").read_text())["variants"]
    ok = [r for r in table if r["status"] == "ok"]
    assert [r["variant"] for r in ok] == ["torch_square", "mul", "pow"]
    assert all(r["time_median_us"] > 0 and r["achieved_gb_s"] > 0 for r in ok)
    assert ok[0]["speedup_vs_baseline"] == 1.0
    import pandas as pd

    frame = pd.read_csv(out / "frame.csv")
    assert list(frame.columns) == [
        "run",
        "backend",
        "workload",
        "variant",
        "kernel",
        "metric",
        "value",
        "unit",
    ]
    assert (frame["metric"] == "time_ns").sum() == 60
    assert (out / "report.md").read_text().startswith("### time square")


def test_torch_trace_end_to_end_on_the_cpu(tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        "torch-trace", "mean", "--device", "cpu", "--size", "10000", "--iters", "4", "--json", "-o", str(out)
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [r["variant"] for r in data["variants"]] == ["torch_mean", "tensor_mean", "sum_div_numel"]
    assert all(r["cpu_median_us"] > 0 for r in data["variants"])
    trace = json.loads((out / "trace.json").read_text())
    assert any(e.get("name") == "variant:sum_div_numel" for e in trace["traceEvents"])
    import pandas as pd

    frame = pd.read_csv(out / "frame.csv")
    self_cpu = frame[frame["metric"] == "self_cpu_time_ns"]
    assert set(self_cpu["variant"]) == {"torch_mean", "tensor_mean", "sum_div_numel"}
    assert (self_cpu["value"] > 0).all()
    # and the report can be rebuilt from the folder alone
    again = run_cli("report", str(out), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["variants"][0]["variant"] == "torch_mean"


@pytest.mark.parametrize(
    "args,message",
    [
        (["time", "nosuch"], "unknown workload 'nosuch'; valid: "),
        (["time", "square", "-v", "a*a"], "valid: torch_square, mul, pow"),
        (["time", "square", "--size", "0"], "is not a positive integer"),
        (["time", "square", "--size", "12abc"], "is not a positive integer"),
        (["time", "square", "--size", "-4"], "is not a positive integer"),
        (
            ["time", "square", "--dtype", "int8"],
            "--dtype 'int8' unknown; workload square takes float32, float16, bfloat16",
        ),
        (["time", "load-inline-square", "--dtype", "float16"], "supports --dtype float32"),
        (["time", "square", "--iters", "0"], "--iters must be >= 1"),
        (["time", "square", "--gpu-sleep", "-5"], "--gpu-sleep must be between 0 and 10000 us, not -5"),
        (["ncu", "square", "--metrics", "dram bytes; rm -rf"], "is not a metric name"),
    ],
)
def test_bad_input_is_exit_2_without_traceback(args, message):
    res = run_cli(*args, "--device", "cpu")
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr


def test_size_too_large_is_refused(tmp_path):
    res = run_cli(
        "time", "square", "--device", "cpu", "--size", "100000x100000x100000", "-o", str(tmp_path / "r")
    )
    assert res.returncode == 2 and "Choose a smaller --size" in res.stderr and "Traceback" not in res.stderr


def test_unwritable_out(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    res = run_cli("time", "square", "--device", "cpu", "-o", str(ro / "run"))
    ro.chmod(0o700)
    if res.returncode == 0:  # root ignores permissions: use a path under a file instead
        pass
    res = run_cli("time", "square", "--device", "cpu", "-o", "/proc/version/run")
    assert res.returncode == 2 and "cannot create" in res.stderr and "Traceback" not in res.stderr


def test_out_in_use_or_not_empty(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "something").write_text("x")
    res = run_cli("time", "square", "--device", "cpu", "-o", str(out))
    assert res.returncode == 2 and "not empty" in res.stderr


def test_failing_variant_exit_1_keeps_the_rest(tmp_path):
    out = tmp_path / "r"
    res = run_cli(
        "time",
        "mean",
        "--device",
        "cpu",
        "--size",
        "1000",
        "--iters",
        "5",
        "--fail-variant",
        "tensor_mean",
        "-o",
        str(out),
    )
    assert res.returncode == 1
    assert "tensor_mean: RuntimeError: injected failure" in res.stderr
    assert f"log: {out}/logs/workload.stderr.log" in res.stderr and "Traceback" not in res.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["status"] == "failed"
    table = {r["variant"]: r for r in json.loads((out / "report.json").read_text())["variants"]}
    assert table["tensor_mean"]["status"] == "failed"
    assert table["torch_mean"]["time_median_us"] > 0 and table["sum_div_numel"]["time_median_us"] > 0


def test_debug_shows_the_traceback():
    res = run_cli("--debug", "time", "nosuch")
    assert res.returncode == 2 and "Traceback" in res.stderr


def test_dry_run_prints_the_exact_command():
    res = run_cli("time", "square", "--device", "cpu", "--size", "1e6", "--dry-run")
    assert res.returncode == 0
    command, spec = res.stdout.splitlines()
    assert command.endswith("-m workloads run --spec '<run-folder>/spec.json' --out '<run-folder>'")
    # every default settled in the parent, spelled out in the spec so spec.json reproduces the run
    spec = json.loads(spec.removeprefix("# spec: "))
    assert (
        spec["shape"] == [1000000]
        and spec["device"] == "cpu"
        and spec["warmup"] == 10
        and spec["mode"] == "time"
    )
    # no --iters: time samples until the stop rule
    assert spec["iters"] is None and spec["stop"] == {
        "max_noise_pct": 0.5,
        "min_samples": 10,
        "min_time_s": 0.0,
        "max_time_s": 1.0,
    }
    # a CPU run flushes no L2 and holds no stream: the spec says so, not the GPU's defaults
    assert (spec["flush_l2"], spec["timer"], spec["gpu_sleep_us"]) == (False, "none", 0)
    res = run_cli(
        "time",
        "square",
        "--device",
        "cuda",
        "--gpu-sleep",
        "0",
        "--timer",
        "sleep",
        "--iters",
        "7",
        "--dry-run",
    )
    assert res.returncode == 0
    spec = json.loads(res.stdout.splitlines()[-1].removeprefix("# spec: "))
    assert (spec["iters"], spec["timer"], spec["gpu_sleep_us"], spec["stop"]) == (7, "sleep", 0, None)
    assert spec["shape"] == [10000, 10000]  # no --size: the workload's default on a GPU


def test_nsys_traces_what_the_settled_device_runs():
    # --device auto that settles on the CPU (here: every GPU hidden) traced CUDA and no OS calls,
    # while the same run with --device cpu traced NVTX and OS calls
    env = {"CUDA_VISIBLE_DEVICES": ""}
    auto = run_cli("nsys", "mean", "--dry-run", env=env).stdout.splitlines()[0]
    cpu = run_cli("nsys", "mean", "--device", "cpu", "--dry-run", env=env).stdout.splitlines()[0]
    assert "--trace=nvtx,osrt " in auto and "--cuda-flush-interval" not in auto
    assert auto.split("--output")[0] == cpu.split("--output")[0]


def test_dry_run_of_a_sweep_and_of_all_prints_every_run():
    # a list of sizes or `all` was refused ("--size '1e5,1e6' is not a positive integer",
    # "unknown backend 'all'") though the runs themselves work
    res = run_cli(
        "time", "square", "--device", "cpu", "--size", "1e5,1e6", "--dtype", "float32,bfloat16", "--dry-run"
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    points = [ln[2:] for ln in lines if ln.startswith("# ") and not ln.startswith("# spec")]
    assert points == ["100000-float32", "1000000-float32", "100000-bfloat16", "1000000-bfloat16"]
    specs = [json.loads(ln.removeprefix("# spec: ")) for ln in lines if ln.startswith("# spec: ")]
    assert [(s["shape"], s["dtype"]) for s in specs] == [
        ([100000], "float32"),
        ([1000000], "float32"),
        ([100000], "bfloat16"),
        ([1000000], "bfloat16"),
    ]
    assert "--out '<run-folder>/1000000-bfloat16'" in lines[lines.index("# 1000000-bfloat16") + 1]
    res = run_cli("all", "mean", "--device", "cpu", "--dry-run")
    assert res.returncode == 0, res.stderr
    from orchestrator import backends

    heads = [ln[2:] for ln in res.stdout.splitlines() if ln.startswith("# ") and not ln.startswith("# spec")]
    assert heads == backends.of_all() and "nsys" in heads
    assert run_cli("time", "square", "--size", "1e3,1000", "--dry-run").returncode == 2  # a point twice


@pytest.mark.parametrize(
    "args",
    [
        ["--timer", "spin"],
        ["--max-noise", "0"],
        ["--max-noise", "nan"],
        ["--min-samples", "2"],
        ["--max-time", "0"],
        ["--min-time", "5", "--max-time", "1"],
    ],
)
def test_bad_timing_options_exit_2(args):
    res = run_cli("time", "square", "--device", "cpu", *args, "--dry-run")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "--" + args[0].lstrip("-").split()[0] in res.stderr


def test_two_runs_never_share_a_folder(tmp_path):
    from orchestrator.runfolder import RunFolder

    a = RunFolder.create("time", "square", root=tmp_path)
    b = RunFolder.create("time", "square", root=tmp_path)
    assert a.path != b.path and a.path.parent == b.path.parent
    assert b.path.name.startswith(a.path.name)


def test_git_commit_prefers_the_callers_word(monkeypatch):
    import re

    from orchestrator import envinfo

    monkeypatch.setenv("GPROF_COMMIT", "abc1234")
    assert envinfo.git_commit() == "abc1234"
    monkeypatch.delenv("GPROF_COMMIT")
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", envinfo.git_commit() or "")
