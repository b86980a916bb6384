"""Faults of the profilers, driven for real with stand-in nsys/ncu executables on PATH that
fail the ways the real ones do (their log lines are ncu's and nsys's own wording)."""

import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import run_cli

from orchestrator import proc
from orchestrator.errors import ParseError, ToolTimeoutError

FAKE = textwrap.dedent("""\
    #!{python}
    # a stand-in for {tool}: writes LOG_LINES to --log-file / stderr, optionally runs the workload
    import os, subprocess, sys
    args = sys.argv[1:]
    if args[:1] == ["--version"]:
        print("NVIDIA (R) {tool} version 2025.3.1.0 (stand-in)"); sys.exit(0)
    log = None
    if "--log-file" in args:
        log = args[args.index("--log-file") + 1]
    text = {lines!r}
    if log:
        open(log, "w").write(text)
    else:
        sys.stderr.write(text)
    if {run_workload}:
        i = next(i for i, a in enumerate(args) if a.endswith(("python", "python3")) or "python3." in a)
        subprocess.run(args[i:])
    sys.exit({code})
    """)


def fake_tool(tmp_path, tool, lines, code=1, run_workload=False):
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    exe = d / tool
    exe.write_text(
        FAKE.format(python=sys.executable, tool=tool, lines=lines, code=code, run_workload=run_workload)
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def _run(*args, tmp_path):
    return run_cli(*args, "--device", "cpu", "--size", "1000", "--iters", "2", "-o", str(tmp_path / "run"))


def test_ncu_not_found(tmp_path):
    res = _run("ncu", "square", "--ncu", str(tmp_path / "nope"), tmp_path=tmp_path)
    assert (
        res.returncode == 3 and "is not an executable file" in res.stderr and "Nsight Compute" in res.stderr
    )


def test_nsys_not_found_says_how_to_get_it(tmp_path):
    res = run_cli("nsys", "square", "--device", "cpu", env={"GPROF_NSYS": str(tmp_path / "none")})
    assert res.returncode == 3 and "scripts/install-nsys.sh" in res.stderr and "Traceback" not in res.stderr


def test_ncu_counters_restricted(tmp_path):
    ncu = fake_tool(
        tmp_path,
        "ncu",
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
        "NVIDIA GPU Performance Counters on the target device 0.\n",
    )
    res = _run("ncu", "square", "--ncu", str(ncu), tmp_path=tmp_path)
    assert res.returncode == 5, res.stderr
    assert "ERR_NVGPUCTRPERM" in res.stderr and "NVreg_RestrictProfilingToAdminUsers=0" in res.stderr
    assert f"log: {tmp_path}/run/logs/ncu.log" in res.stderr and "Traceback" not in res.stderr
    assert '"status": "failed"' in (tmp_path / "run" / "manifest.json").read_text()


def test_ncu_no_kernels_lists_the_ranges_opened(tmp_path):
    ncu = fake_tool(tmp_path, "ncu", "==WARNING== No kernels were profiled.\n", code=0, run_workload=True)
    res = _run("ncu", "mean", "--ncu", str(ncu), tmp_path=tmp_path)
    assert res.returncode == 1, res.stderr
    assert "ncu profiled no kernels" in res.stderr
    assert "gprof@variant:torch_mean, gprof@variant:tensor_mean, gprof@variant:sum_div_numel" in res.stderr


def test_ncu_unknown_metric(tmp_path):
    ncu = fake_tool(tmp_path, "ncu", "==ERROR== Failed to find metric regex:^dram__nope$\n")
    res = _run("ncu", "square", "--ncu", str(ncu), "--metrics", "dram__nope", tmp_path=tmp_path)
    assert res.returncode == 2 and "ncu --query-metrics" in res.stderr


def test_ncu_argv_is_pinned(tmp_path):
    ncu = fake_tool(tmp_path, "ncu", "")
    res = run_cli("ncu", "mean", "-v", "tensor_mean", "--ncu", str(ncu), "--dry-run")
    argv = res.stdout.split()
    assert argv[:6] == [
        str(ncu),
        "--nvtx",
        "--nvtx-include",
        "gprof@variant:torch_mean/",
        "--nvtx-include",
        "gprof@variant:tensor_mean/",
    ]
    # WarpStateStats and SchedulerStats: their rules explain a latency-bound kernel (reports/why.py);
    # SpeedOfLight_RooflineChart: ncu's roofline rates (reports/roofline.py); the L2 hit rate: a
    # column of reports/schema.py read from an ncu metric, as is the tensor pipe's active share
    assert argv[6:20] == [
        "--section",
        "SpeedOfLight",
        "--section",
        "SpeedOfLight_RooflineChart",
        "--section",
        "LaunchStats",
        "--section",
        "Occupancy",
        "--section",
        "WarpStateStats",
        "--section",
        "SchedulerStats",
        "--metrics",
        "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,"
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    ]
    assert argv[20:24] == ["--clock-control", "none", "--cache-control", "all"]
    assert "--log-file" in argv and argv[argv.index("-m") + 1 : argv.index("-m") + 4] == [
        "workloads",
        "run",
        "--spec",
    ]


def test_nsys_argv_is_pinned(tmp_path):
    nsys = fake_tool(tmp_path, "nsys", "")
    res = run_cli(
        "nsys",
        "square",
        "--nsys",
        str(nsys),
        "--device",
        "cuda",
        "--nsys-arg=--cuda-memory-usage=true",
        "--dry-run",
        "-o",
        str(tmp_path / "r"),
    )
    lines = res.stdout.splitlines()
    assert lines[0].split()[:8] == [
        str(nsys),
        "profile",
        "--trace=cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--cuda-flush-interval=1000",
        f"--output={tmp_path}/r/report",
        "--force-overwrite=true",
    ]
    assert "--cuda-memory-usage=true" in lines[0]
    assert lines[1].split() == [
        str(nsys),
        "export",
        "--type=sqlite",
        f"--output={tmp_path}/r/report.sqlite",
        "--force-overwrite=true",
        f"{tmp_path}/r/report.nsys-rep",
    ]


def test_nsys_writes_no_report(tmp_path):
    nsys = fake_tool(
        tmp_path,
        "nsys",
        "Importer error status: An unknown error occurred.\nNo reports were generated\n",
        code=0,
    )
    res = _run("nsys", "square", "--nsys", str(nsys), tmp_path=tmp_path)
    assert res.returncode == 1 and "nsys wrote no report" in res.stderr
    assert "No reports were generated" in res.stderr and "Traceback" not in res.stderr


def test_nsys_losing_its_agent_is_said_to_be_nsys(tmp_path):
    # nsys 2023.4.4's own lines when its agent went away mid-run (a clean-clone CI run, 2026-12-06)
    nsys = fake_tool(
        tmp_path,
        "nsys",
        "Connection to Agent lost. This is most likely a bug. Internal reason: "
        "'Connection reset by peer'.\nPlease refer to the troubleshooting section "
        "of the docs:\n",
        code=0,
    )
    res = _run("nsys", "square", "--nsys", str(nsys), tmp_path=tmp_path)
    assert res.returncode == 1 and "nsys wrote no report" in res.stderr
    assert (
        "hint: nsys lost the connection to its own agent: a failure of nsys, not of the program" in res.stderr
    )


def test_missing_nvtx_ranges_explain_the_likely_cause(fixtures):
    from orchestrator.backends.nsys import frame_from_export

    wman = {
        "workload": "square",
        "iters": 10,
        "variants": [{"name": "mul", "status": "ok", "bytes_moved": 8}],
    }
    with pytest.raises(ParseError) as e:
        frame_from_export(
            fixtures / "nsys/h200_square_nvtx0217/square_nsys_nvtx0217.sqlite",
            wman,
            run="r",
            domain="gprof",
            prefix="variant:",
        )
    assert "variant(s) mul are not in the export" in e.value.message
    assert "nvtx==0.2.10" in e.value.hint


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for its parent counts as ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return fields.rpartition(")")[2].split()[0] not in ("Z", "X")


def test_timeout_ends_the_whole_process_group(tmp_path):
    # a child that starts a grandchild, both sleeping; the timeout must end both. Only the
    # processes this test started are looked at (by the pids they write), never the machine's
    # whole `ps`: on a shared machine someone else's `sleep 300` is not ours.
    pids = tmp_path / "pids"
    script = (
        "import os, subprocess, sys, time; g = subprocess.Popen(['sleep', '300']); "
        "open(sys.argv[1], 'w').write(f'{os.getpid()} {g.pid}'); time.sleep(300)"
    )
    t0 = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        proc.run([sys.executable, "-c", script, str(pids)], log_dir=tmp_path, name="hang", timeout=2.0)
    assert time.monotonic() - t0 < 15 and e.value.exit_code == 124
    child, grandchild = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5  # the grandchild is reaped by init, a moment after its kill
    while any(_running(p) for p in (child, grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child) and not _running(grandchild)


def test_timeout_from_the_cli(tmp_path):
    res = run_cli("time", "square", "--device", "cpu", "--timeout", "0.5", "-o", str(tmp_path / "r"))
    assert res.returncode == 124 and "ran past the timeout of 0.5 s" in res.stderr
    assert '"status": "failed"' in (tmp_path / "r" / "manifest.json").read_text()
