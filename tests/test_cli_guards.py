"""The CLI's guards: one JSON document on stdout with --json whatever happens, expected errors
with their exit codes and no traceback, a bounded import of a user's workload file and of a
profiler's version probe, statistics only where the samples have them, and every row of the
README's exit-code table produced by a test."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, REPO, run_cli, sigint_default

WORKLOADS = FIXTURES / "workloads"


def _cpu(*args):
    return ("--device", "cpu", *args)


def one_document(stdout: str) -> dict:
    """stdout parsed as exactly one JSON document (json.loads refuses trailing text)."""
    return json.loads(stdout)


def stand_in(tmp_path, name: str, body: str):
    """An executable `name` in tmp_path/bin running the shell `body` (a stand-in profiler)."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    exe = d / name
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def _damaged_run(h200_run, **manifest):
    path = h200_run("time-mean")
    man = json.loads((path / "manifest.json").read_text())
    man.update(manifest)
    (path / "manifest.json").write_text(json.dumps(man))
    return path


# -- item 5: --json ---------------------------------------------------------------------------------


def test_json_on_a_failed_run_is_one_document_on_stdout(tmp_path):
    out = tmp_path / "r"
    res = run_cli(
        "time",
        "mean",
        *_cpu("--size", "1000", "--iters", "3", "--fail-variant", "tensor_mean", "-o", str(out), "--json"),
    )
    assert res.returncode == 1, res.stderr
    doc = one_document(res.stdout)
    assert doc["status"] == "failed" and doc["exit_code"] == 1
    assert "tensor_mean: RuntimeError: injected failure" in doc["error"]["message"]
    rows = {r["variant"]: r for r in doc["variants"]}
    assert rows["tensor_mean"]["status"] == "failed" and rows["torch_mean"]["time_median_us"] > 0
    # human text on stderr, and only that
    assert "gprof-orch: error: 1 variant(s) failed" in res.stderr and "Traceback" not in res.stderr
    assert not res.stderr.lstrip().startswith("{")


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["time", "nosuch", "--json"], 2, "unknown workload 'nosuch'"),
        (["time", "square", "--format", "bogus", "--json"], 2, "Invalid value for '--format'"),
        (["time", "square", "--format", "json", "--iters", "x"], 2, "'x' is not a valid integer"),
        (["report", "/nonexistent/run", "--json"], 4, "no such run folder"),
        (["compare", "/nonexistent/a", "/nonexistent/b", "--json"], 4, "no such run folder"),
    ],
)
def test_json_errors_are_one_document_on_stdout(args, code, message):
    res = run_cli(*args)
    assert res.returncode == code, res.stderr
    doc = one_document(res.stdout)
    assert doc["status"] == "error" and doc["exit_code"] == code and message in doc["error"]["message"]
    assert message in res.stderr and "Traceback" not in res.stderr


def test_json_compare_gate_says_failed(cli, monkeypatch, tmp_path):
    from orchestrator import api

    table = pd.DataFrame(
        [
            {
                "variant": "mul",
                "a_median_us": 10.0,
                "b_median_us": 20.0,
                "change_pct": 100.0,
                "beyond_spread": True,
                "verdict": "slower",
            }
        ]
    )
    run = SimpleNamespace(workload={"workload": "square"}, backend="time")
    monkeypatch.setattr(api, "compare", lambda a, b, **kw: (table, run, run))
    res = cli("compare", "a", "b", "--json", "--fail-if-slower", "5")
    assert res.exit_code == 1
    doc = one_document(res.stdout)
    assert doc["status"] == "failed" and doc["exit_code"] == 1 and "mul +100.0%" in doc["error"]["message"]
    assert "slower than 5%" in res.stderr


# -- item 6: expected errors keep their codes; anything else is one line ---------------------------


def test_out_naming_an_existing_file_is_exit_2(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    res = run_cli("time", "square", *_cpu("-o", str(f)))
    assert res.returncode == 2, res.stderr
    assert f"--out {f} exists and is a file" in res.stderr and "Traceback" not in res.stderr


def test_non_integer_schema_version_is_exit_4(h200_run):
    path = _damaged_run(h200_run, schema_version="1.x")
    res = run_cli("report", str(path))
    assert res.returncode == 4, res.stderr
    assert "schema_version '1.x' is not an integer" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "text,what",
    [
        ('{"variants": "x"}', '"variants" is str, not a list'),
        (
            '{"workload": "mean", "baseline": "torch_mean", "device": "cpu", "iters": 5, "variants": [{"label": "no name"}]}',
            '"variants"[0] is not an object with a "name" string',
        ),
        ("[1, 2]", "not a JSON object but list"),
    ],
)
def test_malformed_workload_json_is_exit_4_naming_the_file(text, what, h200_run):
    path = h200_run("time-mean")
    (path / "workload.json").write_text(text)
    res = run_cli("report", str(path))
    assert res.returncode == 4, res.stderr
    assert f"{path}/workload.json" in res.stderr and what in res.stderr and "Traceback" not in res.stderr


def test_an_unexpected_exception_is_one_line_exit_1(cli, monkeypatch):
    from orchestrator import api

    def broken(path, **kw):
        raise KeyError("oops")

    monkeypatch.setattr(api, "load_run", broken)
    res = cli("report", "somewhere")
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.strip() == (
        "gprof-orch: internal error: KeyError: 'oops' (a bug; run with --debug for the traceback)"
    )
    res = cli("report", "somewhere", "--json")
    assert res.exit_code == 1 and one_document(res.stdout)["error"]["kind"] == "internal"
    res = cli("--debug", "report", "somewhere")
    assert res.exit_code == 1 and "Traceback" in res.stderr and "internal error: KeyError" in res.stderr


# -- item 7: the user's workload file and the profiler's version probe are bounded -------------------


@pytest.mark.parametrize("cmd", [["time", "slowsq", *_cpu()], ["list"]], ids=["time", "list"])
def test_workload_file_that_exits_on_import_is_exit_2(cmd):
    f = WORKLOADS / "exits_on_import.py"
    res = run_cli(*cmd, "--workload-file", str(f))
    assert res.returncode == 2, res.stderr
    assert f"workload file {f} called sys.exit(0) on import" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("cmd", [["time", "slowsq", *_cpu()], ["list"]], ids=["time", "list"])
def test_workload_file_that_hangs_on_import_meets_the_timeout(cmd):
    f = WORKLOADS / "sleeps_on_import.py"
    t0 = time.monotonic()
    res = run_cli(*cmd, "--workload-file", str(f), "--timeout", "2", "--json", timeout=60)
    assert time.monotonic() - t0 < 12, "the import was not ended at the timeout"
    assert res.returncode == 124, res.stderr
    doc = one_document(res.stdout)
    assert (
        doc["exit_code"] == 124 and f"importing workload file {f} ran past the timeout of 2 s" in res.stderr
    )
    assert 'sleeps_on_import.py", line 4' in res.stderr and "Traceback" not in res.stderr


def test_a_user_workload_still_runs_under_ncu_dry_run():
    # the parent no longer imports the file: ncu's NVTX filters come from the child's listing
    res = run_cli(
        "ncu", "oom", *_cpu("--workload-file", str(WORKLOADS / "faults.py"), "-v", "boom", "--dry-run")
    )
    assert res.returncode == 0, res.stderr
    assert "--nvtx-include" in res.stdout and "variant:ok/" in res.stdout and "variant:boom/" in res.stdout


def test_a_hanging_profiler_version_probe_meets_the_timeout(tmp_path):
    # a stand-in nsys that never answers, not even --version, and leaves a grandchild behind
    pids = tmp_path / "pids"
    nsys = stand_in(tmp_path, "nsys", f"sleep 300 &\necho $! $$ >> {pids}\nexec sleep 299")
    t0 = time.monotonic()
    res = run_cli(
        "nsys",
        "square",
        *_cpu("--size", "1000", "--nsys", str(nsys), "--timeout", "2", "--json", "-o", str(tmp_path / "r")),
        timeout=120,
    )
    assert time.monotonic() - t0 < 15, "the version probe was not ended at the timeout"
    assert res.returncode == 124, res.stderr
    assert f"`{nsys} --version` did not answer within 2 s" in res.stderr and "Traceback" not in res.stderr
    assert one_document(res.stdout)["exit_code"] == 124
    # only the processes this stand-in started (by the pids it wrote), never the machine's whole
    # `ps`: on a shared machine someone else's `sleep 300` is not ours
    from test_faults import _running

    mine = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 5  # the grandchild is reaped by init, a moment after its kill
    while any(_running(p) for p in mine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mine and not any(_running(p) for p in mine)


def test_version_probe_is_capped_without_a_timeout(tmp_path, monkeypatch):
    from orchestrator import tools
    from orchestrator.errors import ToolTimeoutError

    monkeypatch.setattr(tools, "VERSION_TIMEOUT_S", 1.0)
    t0 = time.monotonic()
    with pytest.raises(ToolTimeoutError, match="did not answer within 1 s"):
        tools.version_of(stand_in(tmp_path, "ncu", "exec sleep 30"))
    assert time.monotonic() - t0 < 10


# -- item 8: no precision the data does not have ------------------------------------------------------


def _frame(samples: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {
            "run": "r",
            "backend": "nsys",
            "workload": "w",
            "variant": v,
            "kernel": "",
            "metric": "time_ns",
            "value": x,
            "unit": "ns",
        }
        for v, xs in samples.items()
        for x in xs
    ]
    return pd.DataFrame(rows)


def test_one_sample_has_no_spread():
    from reports import render, summary

    wman = {
        "variants": [{"name": "one", "status": "ok"}, {"name": "many", "status": "ok"}],
        "iters": 1,
        "baseline": "one",
    }
    table = summary.variant_table(_frame({"one": [1000.0], "many": [1000.0, 1100.0, 1050.0]}), wman)
    one, many = table.set_index("variant").loc["one"], table.set_index("variant").loc["many"]
    assert np.isnan(one.time_iqr_us) and np.isnan(one.time_cv_pct) and one.time_median_us == 1.0
    assert "n=1: one sample" in one.note
    assert many.time_iqr_us > 0 and many.time_cv_pct > 0 and "n=1" not in many.note
    text = render.to_text(table)
    line = next(ln for ln in text.splitlines() if ln.startswith("one "))
    assert "0.00" not in line.replace("1.00", "")  # no IQR of 0.00 for one sample


def test_cv_is_left_out_of_the_terminal_and_markdown_tables():
    from reports import render, summary

    wman = {"variants": [{"name": "v", "status": "ok"}], "iters": 3, "baseline": "v"}
    table = summary.variant_table(_frame({"v": [100.0, 107.0, 4000.0, 103.0]}), wman)
    assert "CV %" not in render.to_text(table) and "CV %" not in render.to_markdown(table)
    assert "IQR us" in render.to_text(table)
    assert "time_cv_pct" in json.loads(render.to_json(table))["variants"][0]
    assert "time_cv_pct" in render.render(table, "csv").splitlines()[0]


def test_compare_of_one_sample_claims_no_change_beyond_spread():
    from reports import merge, summary

    wman = {"variants": [{"name": "v", "status": "ok"}], "iters": 1, "baseline": "v"}
    fa, fb = _frame({"v": [1000.0]}), _frame({"v": [2000.0]})
    out = merge.compare_runs(fa, fb, summary.variant_table(fa, wman), summary.variant_table(fb, wman))
    assert not out.beyond_spread.iloc[0] and out.verdict.iloc[0].startswith("n=1")


def test_all_on_the_cpu_says_host_clock_not_cuda_events(tmp_path):
    from orchestrator.api import MultiRun

    def multi(device):
        child = SimpleNamespace(workload={"device": device, "workload": "mean"})
        return MultiRun(tmp_path, {"status": "ok", "kind": "all"}, {"time": child}, {}, pd.DataFrame(), "all")

    cpu, gpu = " ".join(multi("cpu").footer()), " ".join(multi("cuda").footer())
    assert "CUDA events" not in cpu.replace("no CUDA events", "") and "host clock" in cpu
    assert "events = CUDA events per call" in gpu


# -- item 9 --------------------------------------------------------------------------------------------


def test_sweep_without_a_size_names_its_folders_default(tmp_path):
    out = tmp_path / "sweep"
    res = run_cli(
        "time",
        "mean",
        *_cpu(
            "--dtype", "float32,bfloat16", "--iters", "1", "--warmup", "0", "-v", "torch_mean", "-o", str(out)
        ),
    )
    assert res.returncode == 0, res.stderr
    kids = sorted(p.name for p in out.iterdir() if p.is_dir() and p.name != "logs")
    assert kids == ["default-bfloat16", "default-float32"]


def test_help_offers_the_dtypes_the_workloads_take():
    from workloads import registry

    res = run_cli("time", "--help")
    assert res.returncode == 0
    helptext = " ".join(res.stdout.split())
    offered = {d for d in registry.DTYPES if d in helptext}
    taken = {d for w in registry.all_workloads().values() for d in w.dtypes}
    assert offered == taken and "float64" not in helptext


@pytest.mark.parametrize("given", ["", ",", " , "])
def test_empty_variants_is_a_usage_error(given, tmp_path):
    res = run_cli("time", "square", *_cpu("--variants", given, "-o", str(tmp_path / "r")))
    assert res.returncode == 2, res.stderr
    assert "names no variant" in res.stderr and not (tmp_path / "r").exists()


# -- every row of the README's exit-code table -----------------------------------------------------------


def _exit_0(tmp_path):
    return run_cli(
        "time", "mean", *_cpu("--size", "1000", "--iters", "2", "-v", "torch_mean", "-o", str(tmp_path / "r"))
    )


def _exit_1(tmp_path):  # doctor --check found a tool that does not work (the nsys run fails)
    nsys = stand_in(
        tmp_path,
        "nsys",
        'case "$1" in --version) echo "NVIDIA Nsight Systems version '
        '2023.4.4.54-0 (stand-in)";; *) echo "broken" >&2; exit 1;; esac',
    )
    return run_cli("doctor", "--check", "--nsys", str(nsys))


def _exit_2(tmp_path):
    (tmp_path / "f").write_text("")
    return run_cli("time", "square", *_cpu("-o", str(tmp_path / "f")))


def _exit_3(tmp_path):
    return run_cli("nsys", "square", *_cpu(), env={"GPROF_NSYS": str(tmp_path / "none")})


def _exit_4(tmp_path):
    return run_cli("report", str(tmp_path / "nothing-here"))


def _exit_5(tmp_path):
    ncu = stand_in(
        tmp_path,
        "ncu",
        'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to '
        'access NVIDIA GPU Performance Counters on the target device 0." >&2; exit 1',
    )
    return run_cli("ncu", "square", *_cpu("--size", "1000", "--ncu", str(ncu), "-o", str(tmp_path / "r")))


def _exit_6(tmp_path):
    # a program capture whose nsys said it lost events (nsys 2023.4.4 under a CUDA 13 program)
    import lzma
    import shutil

    src = REPO / "tests" / "fixtures" / "runs" / "h200-programs" / "exec-train"
    shutil.copytree(src, tmp_path / "r")
    (tmp_path / "r" / "report.sqlite").write_bytes(lzma.decompress((src / "report.sqlite.xz").read_bytes()))
    (tmp_path / "r" / "report.sqlite.xz").unlink()
    return run_cli("report", str(tmp_path / "r"))


def _exit_7(tmp_path):
    # a GB/s above the memory's (tests/test_integrity.py's folder), judged again by `report`
    from test_integrity import _overstated

    return run_cli("report", str(_overstated(tmp_path, 50)))


def _exit_124(tmp_path):
    return run_cli("list", "--workload-file", str(WORKLOADS / "sleeps_on_import.py"), "--timeout", "1")


def _exit_130(tmp_path):
    out = tmp_path / "r"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "time",
            "slowsq",
            "--workload-file",
            str(WORKLOADS / "faults.py"),
            *_cpu("--iters", "2000", "--warmup", "0", "-o", str(out)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and '"measuring"' not in _read(out / "workload.json"):
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)


def _exit_141(tmp_path):
    """stdout's reader gone before the table (`| head -1`): it was an internal error (exit 1)."""
    out = tmp_path / "r"
    r, w = os.pipe()
    os.close(r)  # nobody reads: the first write fails with EPIPE (Python ignores SIGPIPE)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "time",
            "square",
            *_cpu("--size", "100", "--iters", "3", "-o", str(out)),
        ],
        stdout=w,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    os.close(w)
    assert json.loads((out / "manifest.json").read_text())["status"] == "ok"  # written before the table
    assert "internal error" not in p.stderr
    return p


def _read(path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


EXIT_CODE_CASES = {
    0: _exit_0,
    1: _exit_1,
    2: _exit_2,
    3: _exit_3,
    4: _exit_4,
    5: _exit_5,
    6: _exit_6,
    7: _exit_7,
    124: _exit_124,
    130: _exit_130,
    141: _exit_141,
}


def readme_exit_codes() -> list[int]:
    text = (REPO / "README.md").read_text()
    table = text.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    return [int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)]


def test_every_readme_exit_code_has_a_case():
    assert sorted(readme_exit_codes()) == sorted(EXIT_CODE_CASES)


@pytest.mark.parametrize("code", sorted(EXIT_CODE_CASES))
def test_readme_exit_code_row(code, tmp_path):
    res = EXIT_CODE_CASES[code](tmp_path)
    assert res.returncode == code, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    if code:
        assert "gprof-orch" in res.stderr


@pytest.mark.parametrize(
    "cmd",
    [
        ["time", "square", *_cpu("--size", "100"), "--timeout", "{}"],
        ["list", "--timeout", "{}"],
        ["exec", "nsys", "--no-cuda", "--timeout", "{}", "--", "true"],
    ],
    ids=["time", "list", "exec"],
)
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_a_timeout_is_a_positive_finite_number_of_seconds(cli, cmd, value):
    # `--timeout nan` compared false with everything and ran with no limit at all
    res = cli(*[a.format(value) for a in cmd])
    assert res.exit_code == 2, res.output
    assert f"--timeout must be a positive number of seconds, not {float(value)}" in res.output


@pytest.mark.parametrize(
    "flag, values, named",
    [("--size", "1e3,2000,1000", "1000"), ("--dtype", "float32,bfloat16,float32", "float32")],
)
def test_a_point_named_twice_is_refused_before_anything_runs(cli, tmp_path, flag, values, named):
    # the first of the two ran, then the second failed on its folder (exit 1) part-way through
    res = cli("time", "square", *_cpu(), flag, values, "-o", str(tmp_path / "s"))
    assert res.exit_code == 2, res.output
    assert f"{flag} names {named} more than once: each point runs once" in res.output
    assert not (tmp_path / "s").exists()


def test_a_sweep_whose_every_point_failed_is_reported_not_an_internal_error(tmp_path):
    # no point wrote a table (each child ended by --timeout before it started): the parent's
    # page had no sweep columns to draw and crashed ("internal error: ValueError: the sweep frame lacks")
    out = tmp_path / "s"
    res = run_cli("time", "square", *_cpu("--size", "10,20", "--timeout", "0.05", "-o", str(out)))
    assert res.returncode == 1, res.stderr
    assert (
        "internal error" not in res.stderr
        and "10-float32: the workload runner ran past the timeout" in res.stderr
    )
    assert (out / "report.html").exists() and json.loads((out / "manifest.json").read_text())[
        "status"
    ] == "failed"
