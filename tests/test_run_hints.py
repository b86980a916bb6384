"""What a run says about what it ran: a workload file's shapes and dtypes, a built-in it
replaces, the baseline --variants adds; and what it keeps when workload.json cannot be saved.
Every test runs the real CLI (run_cli) on the CPU."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import report_rows, run_cli

MINE = """
from workloads import Variant, Workload

triple = Workload("triple", "x*3", [Variant("mul3", lambda a: a * 3)], reference=lambda x: x * 3,
                  bytes_moved=lambda n, s: 2 * n * s, default_shape=(777,), dtypes=("float32", "float64"))
both = Workload("both", "x*2", [Variant("add", lambda a: a + a)], reference=lambda x: x * 2,
                bytes_moved=lambda n, s: 2 * n * s, default_shape=(5000,), cpu_default_shape=(333,))
square = Workload("square", "my own square", [Variant("mine", lambda a: a * a), Variant("again", lambda a: a * a)],
                  reference=lambda x: x * x, bytes_moved=lambda n, s: 2 * n * s, default_shape=(500,))
"""


@pytest.fixture
def mine(tmp_path) -> str:
    p = tmp_path / "mine.py"
    p.write_text(MINE)
    return str(p)


def _spec(*args: str) -> dict:
    res = run_cli(*args, "--dry-run")
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("# spec: "))
    return json.loads(line.removeprefix("# spec: "))


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _cpu_args(command: str, workload: str, out: Path, *opts: str, iters: int = 5) -> list[str]:
    """The CLI arguments of a short CPU run of `workload` into `out`, with OPTS of its own."""
    short = ["--device", "cpu", "--iters", str(iters), "--warmup", "1", "-o", str(out)]
    return [command, workload, *opts, *short]


def _run_in_shell(setup: str, args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """The real CLI with ARGS, exec'd by bash after SETUP (a umask, a ulimit) so it inherits them."""
    argv = [sys.executable, "-m", "orchestrator", *args]
    return subprocess.run(
        ["bash", "-c", f"{setup}; exec {shlex.join(argv)}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GPROF_NO_PROGRESS": "1", **(env or {})},
    )


# -- a workload file's default_shape holds on the CPU ---------------------------------------------


def test_a_workload_files_default_shape_holds_on_the_cpu(mine):
    assert _spec("time", "triple", "--workload-file", mine, "--device", "cpu")["shape"] == [777]
    assert _spec("time", "triple", "--workload-file", mine, "--device", "cuda")["shape"] == [777]
    # its own cpu_default_shape, where it sets one, wins on the CPU
    assert _spec("time", "both", "--workload-file", mine, "--device", "cpu")["shape"] == [333]
    assert _spec("time", "both", "--workload-file", mine, "--device", "cuda")["shape"] == [5000]
    # the built-ins keep their CPU default
    assert _spec("time", "mean", "--device", "cpu")["shape"] == [1000, 1000]


# -- list shows each workload's dtypes, and a built-in a file replaces ----------------------------


def test_list_shows_each_workloads_dtypes_and_what_a_file_replaces(mine):
    res = run_cli("list", "--workload-file", mine)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    at = {ln.split(":")[0]: i for i, ln in enumerate(lines) if not ln.startswith(" ")}
    assert lines[at["triple"] + 1] == "  dtypes: float32, float64"
    assert lines[at["mean"] + 1] == "  dtypes: float32, float16, bfloat16"
    assert lines[at["square"]] == f"square: my own square (from {mine}: replaces the built-in square)"
    assert "replaces" not in lines[at["mean"]]
    listed = {w["workload"]: w for w in json.loads(run_cli("list", "--workload-file", mine, "--json").stdout)}
    assert listed["square"]["replaces_builtin"] is True and listed["mean"]["replaces_builtin"] is False


# -- a workload file's `square` replaces the built-in, and says so --------------------------------


def test_a_workload_file_that_replaces_a_builtin_says_so(mine, tmp_path):
    out = tmp_path / "run"
    res = run_cli(*_cpu_args("time", "square", out, "--workload-file", mine))
    assert res.returncode == 0, res.stderr
    said = f"workload square is the one in {mine}, which replaces the built-in square"
    assert f"warning: {said}" in res.stderr
    assert said in res.stdout  # the note under the table
    w = _json(out / "workload.json")
    assert w["replaces_builtin"] is True and w["workload_source"] == mine
    assert [v["name"] for v in w["variants"]] == ["mine", "again"] and w["shape"] == [500]
    assert said in (out / "report.md").read_text()
    # a built-in run says nothing of the kind
    res = run_cli(*_cpu_args("time", "mean", tmp_path / "builtin", "--size", "1000"))
    assert res.returncode == 0 and "replaces" not in res.stderr + res.stdout
    assert _json(tmp_path / "builtin" / "workload.json")["replaces_builtin"] is False


# -- --variants runs the baseline too, and the table says so --------------------------------------


def test_variants_runs_the_baseline_too_and_says_so(tmp_path):
    res = run_cli("time", "square", "--help")
    assert "baseline" in res.stdout and "runs too" in " ".join(res.stdout.split())
    out = tmp_path / "run"
    res = run_cli(*_cpu_args("time", "square", out, "--variants", "mul", "--size", "1000"))
    assert res.returncode == 0, res.stderr
    note = "baseline torch_square run too, for the speedup column (--variants named mul)"
    assert note in res.stdout and note in (out / "report.md").read_text()
    assert [v["name"] for v in _json(out / "workload.json")["variants"]] == ["torch_square", "mul"]
    # naming the baseline: nothing to say
    res = run_cli(
        *_cpu_args("time", "square", tmp_path / "named", "--variants", "torch_square,mul", "--size", "1000")
    )
    assert res.returncode == 0 and "run too" not in res.stdout


# -- under nsys: workload.json keeps the user's umask; one sample each, no speedup ----------------


def test_nsys_on_the_cpu_keeps_the_umask_and_prints_no_speedup_from_one_sample(tmp_path):
    """nsys starts its target with umask 0 (workload.json came out 0666) and on the CPU times
    each variant's range once: a speedup of two single readings (3.07x) is noise."""
    from test_nsys_parser import NSYS

    if NSYS is None:
        pytest.skip("nsys not found")
    out = tmp_path / "run"
    res = _run_in_shell(
        "umask 027",
        _cpu_args("nsys", "square", out, "--variants", "mul,pow", "--size", "1000"),
        env={"GPROF_NSYS": str(NSYS)},
    )
    assert res.returncode == 0, res.stderr
    assert (out / "workload.json").stat().st_mode & 0o777 == 0o640
    assert (out / "manifest.json").stat().st_mode & 0o777 == 0o640
    rows = report_rows(out)
    for name in ("torch_square", "mul", "pow"):
        assert rows[name]["samples"] == 1 and rows[name]["speedup_vs_baseline"] is None
        assert rows[name]["note"] == "n=1: one sample, so no spread (IQR, CV) to show and no speedup"
    assert "speedup" not in res.stdout.splitlines()[1]  # no speedup column in the printed table
    assert (
        "no speedup for a variant timed once, nor over a baseline timed once: torch_square, mul, pow had "
        "one sample (nsys on the CPU times each variant's range once: its wall time over the iterations); "
        "one reading has no spread to tell a difference from noise"
    ) in res.stdout


def test_time_with_one_iteration_prints_no_speedup_either(tmp_path):
    """The same rule on every backend: `time --iters 1` has one sample a variant too."""
    pair = ("--variants", "torch_square,mul", "--size", "1000")
    res = run_cli(*_cpu_args("time", "square", tmp_path / "one", *pair, iters=1))
    assert res.returncode == 0, res.stderr
    rows = report_rows(tmp_path / "one")
    assert rows["mul"]["samples"] == 1 and rows["mul"]["speedup_vs_baseline"] is None
    assert "torch_square, mul had one sample; one reading" in res.stdout
    res = run_cli(*_cpu_args("time", "square", tmp_path / "three", *pair, iters=3))
    assert res.returncode == 0, res.stderr
    assert (
        report_rows(tmp_path / "three")["mul"]["speedup_vs_baseline"] > 0 and "timed once" not in res.stdout
    )


# -- the run folder stops taking workload.json: the last save kept, the loss said, never a result --


def test_a_full_disk_keeps_the_last_workload_json_and_report_passes_nothing_off(tmp_path):
    """A real write failure: `ulimit -f 16` lets no file of the run grow past 16 KiB, so the
    runner's save of its samples fails part-way (EFBIG, as ENOSPC does on a full disk; SIGXFSZ
    ignored, so the write returns the error instead of killing the runner). The old code left a
    truncated workload.json.tmp, said the runner "crashed", and `report` printed the
    measuring/pending rows with exit 0."""
    out = tmp_path / "run"
    args = _cpu_args("time", "square", out, "--variants", "mul", "--size", "1000", iters=5000)
    res = _run_in_shell("ulimit -f 16; trap '' XFSZ", args)
    assert res.returncode == 1, res.stderr
    assert (
        f"gprof-orch: error: the workload runner could not save its samples (cannot write {out}/workload.json: "
        "File too large): what it measured since workload.json was last saved is lost; workload.json keeps "
        "that last save"
    ) in res.stderr
    assert "hint: free some space and run again" in res.stderr and "Traceback" not in res.stderr
    # the last complete save, whole; no temporary beside it
    assert not (out / "workload.json.tmp").exists()
    w = _json(out / "workload.json")
    assert w["status"] == "running" and [v["status"] for v in w["variants"]] == ["measuring", "pending"]
    assert _json(out / "manifest.json")["status"] == "failed"
    rows = report_rows(out)
    assert rows["torch_square"]["status"] == "not saved" and rows["torch_square"]["time_median_us"] is None
    assert rows["mul"]["status"] == "skipped" and rows["mul"]["note"] == "not run: the run stopped before it"
    assert "| torch_square | torch.square | not saved |" in (out / "report.md").read_text()
    assert "torch_square  torch.square  not saved" in res.stdout and "pending" not in res.stdout
    # a later report of the folder: the same rows, and exit 1, never a result
    again = run_cli("report", str(out))
    assert again.returncode == 1, again.stderr
    assert "torch_square  torch.square  not saved" in again.stdout and "pending" not in again.stdout
    assert f"gprof-orch: {out}: the run ended failed (exit 1): " in again.stderr
    doc = json.loads(run_cli("report", str(out), "--json").stdout)
    assert (doc["status"], doc["exit_code"], doc["error"]["kind"]) == ("failed", 1, "SamplesLostError")


# -- a median far above the fastest sample: a busy machine or two speeds, whatever the stop rule --


def test_a_median_59x_its_fastest_sample_is_flagged_whatever_the_noise(h200_run):
    """The committed H200 `time square` folder, mul's samples replaced by 31 like the ones a busy
    machine gave: 27 near 11,986.84 us and 4 of 203 us. The median's CI is narrow (noise 0.0x%)
    and the IQR small, so the old report read `ok`."""
    import numpy as np

    folder = h200_run("time-square")
    w = _json(folder / "workload.json")
    mul = next(v for v in w["variants"] if v["name"] == "mul")
    slow = (11_986_840 + np.linspace(-1_100, 1_500, 27)).tolist()  # its 12th is the median of the 31
    mul["time_samples_ns"] = [203_000.0] * 4 + slow
    mul["cpu_samples_ns"] = mul["cpu_samples_ns"][:31]
    (folder / "workload.json").write_text(json.dumps(w))
    res = run_cli("report", str(folder))
    assert res.returncode == 0, res.stderr
    rows = report_rows(folder)
    m = rows["mul"]
    assert (m["samples"], round(m["time_median_us"], 2), m["time_min_us"]) == (31, 11986.84, 203.0)
    assert m["noise_pct"] < 0.5 and m["status"] == "noisy"
    said = (
        "two speeds: the median (11,986.84 us) is 59.0x the fastest sample (203.00 us): a busy machine or a "
        "bimodal variant, whatever the noise % says"
    )
    assert m["note"] == said
    assert (
        f"warning: mul: {said.removeprefix('two speeds: ')}; its median and every speedup over it are no "
        "steady time: rerun on a quieter machine before ranking"
    ) in res.stdout
    # the other variants, steady, keep their status and say nothing of it
    assert rows["torch_square"]["status"] == "ok" and "two speeds" not in rows["torch_square"]["note"]
