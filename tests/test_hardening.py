"""Faults a profiling run can meet, driven for real: signals, concurrent runs, bad run folders,
workloads that raise or crash. Each checks the exit code, the message, the folder's status,
and that nothing is left running."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, report_rows, run_cli, sigint_default


@pytest.fixture
def slow_file(tmp_path):
    """slowsq (a fast and a slow square), oom (a variant raises MemoryError), badinput."""
    p = tmp_path / "slow.py"
    shutil.copy(REPO / "tests/fixtures/workloads/faults.py", p)
    return p


@pytest.fixture
def real_nsys() -> Path:
    """The nsys gprof-orch finds; the test is skipped where there is none."""
    from orchestrator import tools

    try:
        return tools.find("nsys", with_version=False).path
    except Exception:
        pytest.skip("nsys not found")


def _start(args):
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )


def _start_slowsq(command: str, slow_file: Path, out: Path, iters: int, *opts: str) -> subprocess.Popen:
    """A CPU run of slow_file's slowsq (its fast variant, then its slow one) into `out`."""
    args = ["slowsq", "--workload-file", str(slow_file), *opts, "--device", "cpu", "--iters", str(iters)]
    return _start([command, *args, "--warmup", "1", "-o", str(out)])


def _wait_for(pred, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _variant_done(out: Path, name: str) -> bool:
    try:
        man = json.loads((out / "workload.json").read_text())
    except (OSError, ValueError):
        return False
    return any(v["name"] == name and v["status"] == "ok" for v in man["variants"])


def _leftovers(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if marker in ln and "ps -eo" not in ln]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_run_keeps_what_was_measured(sig, slow_file, tmp_path):
    out = tmp_path / "run"
    p = _start_slowsq("time", slow_file, out, 2000)
    assert _wait_for(lambda: _variant_done(out, "fast")), "the fast variant never finished"
    time.sleep(0.3)  # inside the slow variant now
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=90)
    assert p.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["status"] == "interrupted"
    table = report_rows(out)
    assert table["fast"]["status"] == "ok" and table["fast"]["time_median_us"] > 0
    assert table["slow"]["status"] == "interrupted"
    assert json.loads((out / "workload.json").read_text())["status"] == "interrupted"
    assert _leftovers(str(out)) == []


@pytest.mark.nsys
def test_sigint_during_nsys_leaves_a_readable_report(slow_file, tmp_path, real_nsys):
    out = tmp_path / "run"
    p = _start_slowsq("nsys", slow_file, out, 2000)
    assert _wait_for(lambda: _variant_done(out, "fast"), timeout=180)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=180)
    assert p.returncode == 130, stderr
    # the workload was stopped, not nsys: nsys saw its target exit and wrote everything
    assert "stopping the workload; nsys keeps what it recorded" in stderr
    assert (out / "report.nsys-rep").exists() and (out / "report.sqlite").exists()
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    from orchestrator.parsers import nsys as ns

    ranges = ns.variant_ranges(ns.read_export(out / "report.sqlite"))
    assert "fast" in set(ranges["variant"])
    assert _leftovers(str(out)) == []


WRAPPED_NSYS = """#!{python}
# the real nsys, but `profile` takes 4 s more to write its report once the workload has ended,
# and notes each SIGINT it gets (gprof-orch must leave nsys alone while it writes)
import os, signal, subprocess, sys, time
real, args, mark = {real!r}, sys.argv[1:], {mark!r}
if args[:1] != ["profile"]:
    os.execv(real, [real, *args])
signal.signal(signal.SIGINT, lambda *_: open(mark, "a").write("SIGINT\\n"))
rc = subprocess.call([real, *args])
time.sleep(4)
sys.exit(rc)
"""


@pytest.mark.nsys
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_while_nsys_writes_its_report(presses, slow_file, tmp_path, real_nsys):
    """Once the workload has ended, the first Ctrl-C only waits for nsys's report (all variants
    in it); a second one goes to nsys itself."""
    wrapper, mark = tmp_path / "nsys", tmp_path / "sigints"
    wrapper.write_text(WRAPPED_NSYS.format(python=sys.executable, real=str(real_nsys), mark=str(mark)))
    wrapper.chmod(0o755)
    out = tmp_path / "run"
    p = _start_slowsq("nsys", slow_file, out, 20, "--nsys", str(wrapper))

    def ended():
        try:
            return json.loads((out / "workload.json").read_text())["status"] == "ok"
        except (OSError, ValueError, KeyError):
            return False

    assert _wait_for(ended, timeout=180)
    p.send_signal(signal.SIGINT)
    if presses == 2:
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=180)
    assert p.returncode == 130, stderr
    assert "the workload has ended and nsys is writing its report; waiting for it" in stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    assert _leftovers(str(out)) == []
    if presses == 1:
        assert not mark.exists(), "nsys was signalled while it wrote its report"
        from orchestrator.parsers import nsys as ns

        assert set(ns.variant_ranges(ns.read_export(out / "report.sqlite"))["variant"]) == {"fast", "slow"}
    else:
        assert mark.read_text() == "SIGINT\n"


def test_two_runs_on_one_out(tmp_path):
    out = tmp_path / "same"
    args = ["time", "square", "--device", "cpu", "--size", "1000", "--iters", "200", "-o", str(out)]
    a, b = _start(args), _start(args)
    ra, rb = a.communicate(timeout=120), b.communicate(timeout=120)
    codes = sorted([a.returncode, b.returncode])
    assert codes == [0, 2], (ra, rb)
    loser = ra[1] if a.returncode == 2 else rb[1]
    assert "in use by another run" in loser or "not empty" in loser
    assert json.loads((out / "manifest.json").read_text())["status"] == "ok"


def test_variant_out_of_memory(slow_file, tmp_path):
    out = tmp_path / "r"
    res = run_cli(
        "time", "oom", "--workload-file", str(slow_file), "--device", "cpu", "--iters", "5", "-o", str(out)
    )
    assert res.returncode == 1 and "boom: MemoryError: simulated out of memory" in res.stderr
    table = report_rows(out)
    assert table["ok"]["time_median_us"] > 0 and table["boom"]["status"] == "failed"


def test_runner_crash(slow_file, tmp_path):
    out = tmp_path / "r"
    res = run_cli("time", "badinput", "--workload-file", str(slow_file), "--device", "cpu", "-o", str(out))
    assert res.returncode == 1
    assert (
        "the workload runner crashed: WorkloadCodeError: workload badinput: its make_input raised "
        "ZeroDivisionError: division by zero"
    ) in res.stderr
    # where it failed (the user's file), not the whole traceback: that stays in the log
    assert f'File "{slow_file}"' in res.stderr and "Traceback" not in res.stderr
    assert "Traceback" in (out / "logs" / "workload.stderr.log").read_text()
    assert f"log: {out}/logs/workload.stderr.log" in res.stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"


# -- run folders given to `report` ---------------------------------------------------------------


def _good_run(h200_run):
    return h200_run("time-mean")


def _edit_manifest(path, **fields):
    man = json.loads((path / "manifest.json").read_text())
    man.update(fields)
    (path / "manifest.json").write_text(json.dumps(man))


@pytest.mark.parametrize(
    "damage,message",
    [
        ("missing", "no such run folder"),
        ("no_manifest", "not a gprof-orch run folder"),
        ("corrupt_manifest", "corrupt manifest"),
        ("empty_manifest", "corrupt manifest"),
        ("newer_schema", "written by a newer gprof-orch"),
        ("no_workload", "the workload never started"),
        ("corrupt_workload", "corrupt"),
        # a null, negative or NaN sample read as an `ok` row (median -0.01 us, exit 0) or crashed
        ("null_samples", '"time_samples_ns" is not a list of durations'),
        ("negative_sample", '"time_samples_ns" is not a list of durations'),
        ("nan_sample", '"cpu_samples_ns" is not a list of durations'),
        (
            "newer_workload_schema",
            '"schema_version" is 99: written by a newer gprof-orch',
        ),  # read as if it were 1
    ],
)
def test_report_on_a_bad_run_folder(damage, message, h200_run, tmp_path):
    path = _good_run(h200_run)
    if damage == "missing":
        shutil.rmtree(path)
    elif damage == "no_manifest":
        (path / "manifest.json").unlink()
    elif damage == "corrupt_manifest":
        (path / "manifest.json").write_text('{"schema_version": 1, "backend": ')
    elif damage == "empty_manifest":
        (path / "manifest.json").write_text("")
    elif damage == "newer_schema":
        _edit_manifest(path, schema_version=99)
    elif damage == "no_workload":
        (path / "workload.json").unlink()
    elif damage == "corrupt_workload":
        (path / "workload.json").write_text("{nope")
    elif damage in ("null_samples", "negative_sample", "nan_sample", "newer_workload_schema"):
        wman = json.loads((path / "workload.json").read_text())
        v = wman["variants"][1]
        if damage == "newer_workload_schema":
            wman["schema_version"] = 99
        elif damage == "null_samples":
            v["time_samples_ns"] = None
        elif damage == "negative_sample":
            v["time_samples_ns"][3] = -10.0
        else:
            v["cpu_samples_ns"][0] = float("nan")
        (path / "workload.json").write_text(json.dumps(wman))
    res = run_cli("report", str(path))
    assert res.returncode == 4, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr


def test_report_of_several_folders_reports_every_readable_one(h200_run, tmp_path):
    """One bad folder among several: the others are reported (the command used to stop at the
    bad one, and the JSON held only the error), the bad one named, exit 4."""
    good, other = _good_run(h200_run), h200_run("nsys-mean")
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    (bad / "workload.json").write_text("{nope")
    res = run_cli("report", str(good), str(bad), str(other))
    assert res.returncode == 4, res.stderr
    assert f"| {good}\n" in res.stdout and f"| {other}\n" in res.stdout  # each one's table, under its title
    assert f"could not read {bad}/workload.json: corrupt" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("report", str(good), str(bad), str(other), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 4 and doc["exit_code"] == 4 and doc["status"] == "failed"
    assert [d["meta"]["backend"] for d in doc["runs"]] == ["time", "nsys"]
    assert f"{bad}/workload.json" in doc["error"]["message"]
    # a missing folder among others: its own exit code (2), the others still reported
    res = run_cli("report", str(good), str(tmp_path / "gone"))
    assert (
        res.returncode == json.loads(run_cli("report", str(tmp_path / "gone"), "--json").stdout)["exit_code"]
    )
    assert f"| {good}\n" in res.stdout and "no such run folder" in res.stderr


def test_report_never_follows_a_path_outside_the_folder(h200_run, tmp_path):
    path = h200_run("torch-trace-mean")
    wman = json.loads((path / "workload.json").read_text())
    wman["trace"] = "../../../../etc/passwd"
    (path / "workload.json").write_text(json.dumps(wman))
    res = run_cli("report", str(path))
    assert res.returncode == 4 and "outside the run folder" in res.stderr


def test_truncated_raw_report(h200_run):
    path = h200_run("nsys-mean")
    data = (path / "report.sqlite").read_bytes()
    (path / "report.sqlite").write_bytes(data[: len(data) // 3])
    res = run_cli("report", str(path))
    assert res.returncode == 4 and "report.sqlite" in res.stderr and "Traceback" not in res.stderr


def test_full_output_folder(tmp_path):
    mnt = tmp_path / "full"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=80k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        (mnt / "filler").write_bytes(b"x" * 60_000)
        res = run_cli(
            "torch-trace",
            "mean",
            "--device",
            "cpu",
            "--size",
            "100000",
            "--iters",
            "50",
            "-o",
            str(mnt / "run"),
        )
        assert res.returncode in (1, 4), res.stderr
        assert "No space left on device" in res.stderr and "Traceback" not in res.stderr
    finally:
        subprocess.run(["umount", str(mnt)])


def _interrupted_h200_run(h200_run, name: str):
    """A committed H200 folder of runs/h200-faults, loaded (each of them ended interrupted), and
    its table by variant."""
    from orchestrator import load_run

    run = load_run(h200_run(name, group="h200-faults"))
    assert run.status == "interrupted"
    return run, run.table.set_index("variant")


def test_report_of_an_nsys_run_that_lost_its_events(h200_run):
    """A real H200 folder: 60,000 launches (3 variants x 20,000), past what nsys 2023.4.4
    processes, and a SIGINT sent to nsys while it processed them (before gprof-orch stopped the
    workload instead). The export holds one range and no kernels; the report keeps every row
    and says what is missing."""
    run, t = _interrupted_h200_run(h200_run, "nsys-sigint-lost")
    assert list(t.index) == ["torch_square", "mul", "pow"]
    assert (t["status"] == "not in report").all()
    assert "no GPU activity in its range" in t.loc["torch_square", "note"]
    assert "no range for it" in t.loc["mul", "note"] and "no range for it" in t.loc["pow", "note"]
    footer = "\n".join(run.footer())
    assert "run interrupted: interrupted while running nsys" in footer
    assert "nsys reported errors while processing the raw events (logs/nsys-profile.stderr.log)" in footer
    res = run_cli("report", str(run.path))  # exits as the run did: interrupted
    assert res.returncode == 130 and "not in report" in res.stdout and "Traceback" not in res.stderr


def test_an_interrupt_marks_each_variant(tmp_path):
    """The variant being measured becomes interrupted; those not started, skipped with the reason."""
    from workloads import manifest

    (tmp_path / "workload.json").write_text(
        json.dumps(
            {
                "status": "running",
                "variants": [
                    {"name": "a", "status": "ok"},
                    {"name": "b", "status": "measuring"},
                    {"name": "c", "status": "pending"},
                ],
            }
        )
    )
    manifest.mark(tmp_path, "interrupted")
    w = json.loads((tmp_path / "workload.json").read_text())
    assert w["status"] == "interrupted"
    assert [(v["name"], v["status"]) for v in w["variants"]] == [
        ("a", "ok"),
        ("b", "interrupted"),
        ("c", "skipped"),
    ]
    assert w["variants"][2]["reason"] == "not run: the run stopped before it"


@pytest.mark.parametrize("name, tool", [("nsys-sigint-measuring", "nsys"), ("ncu-sigint-measuring", "ncu")])
def test_h200_sigint_while_measuring(name, tool, h200_run):
    """Real H200 runs, SIGINT sent while the third variant ran (scripts/h200_session.sh sigint):
    the two measured variants are complete, the third is marked interrupted with what was caught."""
    run, t = _interrupted_h200_run(h200_run, name)
    assert list(t["status"]) == ["ok", "ok", "interrupted"]
    # 4e8 float32 under nsys (~752 us), 1e8 under ncu (~187 us), at ~88% of the 4.8 TB/s peak
    expect_us = 752.5 if tool == "nsys" else 187.0
    for v in ("torch_square", "mul"):
        assert t.loc[v, "time_median_us"] == pytest.approx(expect_us, rel=0.01)
        assert 85 < t.loc[v, "pct_of_peak_bw"] < 92
    assert pd.isna(t.loc["pow", "time_median_us"]) and pd.isna(t.loc["pow", "speedup_vs_baseline"])
    assert t.loc["pow", "kernels"] == "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"
    caught = len(run.frame[(run.frame["variant"] == "pow") & (run.frame["metric"] == "kernel_time_ns")])
    assert 0 < caught < int(run.workload["iters"])
    assert t.loc["pow", "note"].startswith(f"interrupted part-way: {caught} GPU activities recorded")
    assert f"interrupted while running {tool}" in run.footer()[0]


def test_h200_sigint_while_nsys_writes(h200_run):
    """Real H200 run, SIGINT once the workload had ended: gprof-orch waited for nsys, so every
    variant is in the report, and the folder still says interrupted."""
    run, t = _interrupted_h200_run(h200_run, "nsys-sigint-writing")
    assert (t["status"] == "ok").all() and list(t.index) == ["torch_square", "mul", "pow"]
    assert t["time_median_us"].between(745, 760).all()
    assert t.loc["torch_square", "same_kernel_as"] == "pow"


def test_nsys_analysis_failure_is_named(tmp_path):
    """nsys 2023.4.4's own stderr when it could not process 20,000 launches on the H200."""
    from test_faults import fake_tool

    text = (REPO / "tests/fixtures/nsys/h200-analysis-failed.stderr.log").read_text()
    nsys = fake_tool(tmp_path, "nsys", text, code=1, run_workload=True)
    res = run_cli(
        "nsys",
        "square",
        "--nsys",
        str(nsys),
        "--device",
        "cpu",
        "--size",
        "1000",
        "--iters",
        "2",
        "-o",
        str(tmp_path / "run"),
    )
    assert res.returncode == 1, res.stderr
    assert (
        "nsys could not process the events it recorded (Wrong event order has been detected when adding "
        "events to the collection)"
    ) in res.stderr
    assert "past about 10,000 kernel launches" in res.stderr and "Traceback" not in res.stderr
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "failed"


def test_nsys_flush_interval_and_launch_warning(capsys):
    from types import SimpleNamespace

    from orchestrator.backends import request
    from orchestrator.backends.nsys import NsysBackend

    be = NsysBackend()
    be._found = SimpleNamespace(version="2023.4.4.54", path="/opt/nsys")
    zero = ["--cuda-flush-interval=0"]
    be._warn_if_too_many_launches(
        request(
            "square",
            "nsys",
            device="cuda",
            iters=4000,
            variants=["mul", "pow"],
            nsys_args=zero,
        )
    )
    assert (
        "warning: at least 12,000 kernel launches (3 variants x 4000 iterations): nsys 2023.4.4.54 with "
        "--cuda-flush-interval=0 failed to process 20,000 on the H200 (10,000 worked)"
    ) in capsys.readouterr().err
    for quiet in (
        dict(iters=3000, variants=["mul", "pow"], nsys_args=zero),
        dict(iters=20000, nsys_args=zero, device="cpu"),
        dict(iters=20000),
        dict(iters=20000, nsys_args=["--cuda-flush-interval", "500"]),
    ):
        be._warn_if_too_many_launches(request("square", "nsys", **{"device": "cuda", **quiet}))
        assert capsys.readouterr().err == ""
    be._found = SimpleNamespace(version="2025.1.1", path="/opt/nsys")
    be._warn_if_too_many_launches(request("square", "nsys", device="cuda", iters=20000, nsys_args=zero))
    assert capsys.readouterr().err == ""
    # the flag gprof-orch sets by default, unless the user sets it
    argv = be.commands(request("square", "nsys", device="cuda"), Path("/r"))[0].argv
    assert "--cuda-flush-interval=1000" in argv
    argv = be.commands(request("square", "nsys", device="cuda", nsys_args=zero), Path("/r"))[0].argv
    assert "--cuda-flush-interval=1000" not in argv and zero[0] in argv
