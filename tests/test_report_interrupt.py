"""Ctrl-C and SIGTERM in the report phase (after the variants were measured, or while a saved
folder is read back): every command exits 130 with one message, marks a folder it was writing
`interrupted` (never `running`), leaves a folder it only re-renders as it was, and with --json
prints exactly one JSON document. The real CLI is stopped at a named point of its report phase
(orchestrator/failpoints.py's GPROF_TEST_PAUSE) and signalled there."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, REPO, sigint_default
from test_nsys_parser import NSYS, needs_nsys

SQLITE = FIXTURES / "nsys" / "cpu_nvtx0210_gprof" / "capture.sqlite"
PROGRAM = FIXTURES / "programs" / "nvtx_steps.py"
REPORTS = ("report.md", "report.csv", "report.json", "report.html", "frame.parquet", "frame.csv")


def _stop_at(point: str, sig: signal.Signals, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run the CLI with `args`, wait until it reaches `point` of its report phase, send `sig`."""
    marker = tmp_path / f"paused-{point}"
    env = {
        **os.environ,
        "GPROF_TEST_PAUSE": f"{point}:{marker}",
        "PYTHONPATH": str(REPO),
        "GPROF_NO_PROGRESS": "1",
    }
    p = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    try:
        t0 = time.monotonic()
        while not marker.exists():
            assert p.poll() is None, f"ended before its report phase ({p.returncode}): {p.communicate()}"
            assert time.monotonic() - t0 < 180, "never reached the report phase"
            time.sleep(0.05)
        p.send_signal(sig)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)


def _assert_interrupted(res: subprocess.CompletedProcess, message: str) -> dict:
    """Exit 130, one line of error (no traceback, no click "Aborted!"), exactly one JSON document."""
    assert res.returncode == 130, res.stderr
    for text in ("Traceback", "internal error", "Aborted!"):
        assert text not in res.stderr
    assert f"gprof-orch: error: {message}" in res.stderr
    doc = json.loads(res.stdout)  # one document: anything after it is "Extra data"
    assert (doc["status"], doc["exit_code"]) == ("interrupted", 130)
    assert doc["error"]["kind"] == "InterruptedRunError" and doc["error"]["message"] == message
    return doc


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "point,sig",
    [("write", signal.SIGINT), ("build", signal.SIGTERM)],
    ids=["SIGINT-writing", "SIGTERM-building"],
)
def test_a_run_stopped_after_measuring_ends_interrupted(point, sig, tmp_path):
    out = tmp_path / "run"
    res = _stop_at(
        point,
        sig,
        [
            "time",
            "square",
            "--variants",
            "torch_square,mul",
            "--device",
            "cpu",
            "--size",
            "1000",
            "--iters",
            "3",
            "-o",
            str(out),
            "--json",
        ],
        tmp_path,
    )
    doc = _assert_interrupted(res, "interrupted while the report was made")
    assert doc["error"]["hint"] == f"the run's data is kept: `gprof-orch report {out}` writes the reports"
    man = _manifest(out)
    assert man["status"] == "interrupted" and man["error"] == "interrupted while the report was made"
    # every variant was measured and is kept; the reports written before the signal said `ok`: gone
    wman = json.loads((out / "workload.json").read_text())
    assert {v["name"]: v["status"] for v in wman["variants"]} == {"torch_square": "ok", "mul": "ok"}
    assert [n for n in REPORTS if (out / n).exists()] == []
    _no_temporaries(out)
    assert not (out / ".lock").exists()
    if point == "write":  # the table was built: the document holds it, with the folder's status
        assert doc["meta"]["status"] == "interrupted"
        assert {r["variant"] for r in doc["variants"]} == {v["name"] for v in wman["variants"]}
    else:
        assert doc["run"] == str(out)
    # what the hint says: `report` writes them, with the status the folder ended with, and exits as
    # the run did
    again = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", str(out), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert again.returncode == 130 and json.loads(again.stdout)["exit_code"] == 130, again.stderr
    assert json.loads((out / "report.json").read_text())["meta"]["status"] == "interrupted"


@pytest.mark.parametrize(
    "point,sig",
    [("write", signal.SIGINT), ("build", signal.SIGTERM)],
    ids=["SIGINT-writing", "SIGTERM-building"],
)
def test_report_stopped_leaves_the_folder_as_it_was(point, sig, h200_run, tmp_path):
    folder = h200_run("time-square")
    before = (folder / "manifest.json").read_bytes()
    res = _stop_at(point, sig, ["report", str(folder), "--json"], tmp_path)
    doc = _assert_interrupted(res, f"interrupted while reporting {folder}")
    assert doc["run"] == str(folder)
    assert (folder / "manifest.json").read_bytes() == before  # still `ok`: re-rendering changes no status
    assert _manifest(folder)["status"] == "ok"
    _no_temporaries(folder)
    if point == "write":  # those written are whole; report.html was not reached
        assert json.loads((folder / "report.json").read_text())["meta"]["status"] == "ok"
        assert not (folder / "report.html").exists()


@pytest.mark.parametrize(
    "point,sig",
    [("build", signal.SIGINT), ("write", signal.SIGTERM)],
    ids=["SIGINT-building", "SIGTERM-writing"],
)
def test_an_import_stopped_ends_interrupted(point, sig, tmp_path):
    out = tmp_path / "imported"
    res = _stop_at(point, sig, ["import", str(SQLITE), "-o", str(out), "--json"], tmp_path)
    _assert_interrupted(res, "interrupted while the report was made")
    man = _manifest(out)
    assert man["status"] == "interrupted" and man["kind"] == "import"
    assert (out / "report.sqlite").stat().st_size == SQLITE.stat().st_size  # the capture's copy is kept
    assert [n for n in REPORTS if (out / n).exists()] == []
    _no_temporaries(out)


def test_a_point_stopped_as_it_lands_stops_the_cluster_run(tmp_path):
    """On a cluster, the client builds each point's report as it lands: stopped there, the point
    and the parent folder end interrupted, and the session stops (exit 130), not going on with the
    other point as if that one had failed (exit 1)."""
    pytest.importorskip("distributed")
    out = tmp_path / "sweep"
    res = _stop_at(
        "build",
        signal.SIGINT,
        [
            "time",
            "square",
            "--variants",
            "torch_square",
            "--device",
            "cpu",
            "--size",
            "1000,2000",
            "--iters",
            "3",
            "--cluster",
            "local:1",
            "-o",
            str(out),
            "--json",
        ],
        tmp_path,
    )
    doc = _assert_interrupted(res, "interrupted")
    assert doc["meta"]["status"] == "interrupted"
    man = _manifest(out)
    assert man["status"] == "interrupted"
    first = next(iter(man["children"]))  # the point whose report was being built
    assert man["children"][first]["error"] == "interrupted while the report was made"
    # the other was stopped, or had ended before the signal; none is left `running`
    assert {_manifest(out / n)["status"] for n in man["children"]} <= {"interrupted", "ok"}


@pytest.mark.nsys
@needs_nsys
def test_exec_stopped_after_the_program_ended_ends_interrupted(tmp_path):
    pytest.importorskip("nvtx")
    out = tmp_path / "prog"
    res = _stop_at(
        "build",
        signal.SIGINT,
        [
            "exec",
            "nsys",
            "--nsys",
            str(NSYS),
            "--no-cuda",
            "--ranges",
            "@step",
            "--out",
            str(out),
            "--json",
            "--",
            sys.executable,
            str(PROGRAM),
            "--steps",
            "2",
        ],
        tmp_path,
    )
    _assert_interrupted(res, "interrupted while the report was made")
    assert _manifest(out)["status"] == "interrupted"
    assert (out / "report.nsys-rep").exists() and (out / "report.sqlite").exists()  # nsys's, kept
    wman = json.loads((out / "workload.json").read_text())
    assert [(v["name"], v["iters"]) for v in wman["variants"]] == [("step", 2)]


def test_compare_stopped_exits_130_with_one_document(h200_run, tmp_path):
    a, b = h200_run("time-square"), h200_run("time-mean")
    res = _stop_at("build", signal.SIGINT, ["compare", str(a), str(b), "--json"], tmp_path)
    _assert_interrupted(res, "interrupted")
    assert [n for f in (a, b) for n in REPORTS if (f / n).exists()] == []  # compare writes nothing


def test_compare_stopped_without_json_says_so_on_stderr_only(h200_run, tmp_path):
    a = h200_run("time-square")
    res = _stop_at("build", signal.SIGTERM, ["compare", str(a), str(a)], tmp_path)
    assert res.returncode == 130 and res.stdout == ""
    assert res.stderr.strip() == "gprof-orch: error: interrupted"


def test_an_import_an_interrupt_broke_reads_as_interrupted():
    """pybind11 modules (matplotlib's) raise ImportError("initialization failed") from the
    KeyboardInterrupt that stopped their import: `report` once said `internal error` for it."""
    from orchestrator.cli import Group

    @click.group(cls=Group)
    def group() -> None:
        pass

    @group.command()
    @click.option("--json", "as_json", is_flag=True)
    def lazy(as_json) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    res = CliRunner().invoke(group, ["lazy", "--json"])
    assert res.exit_code == 130
    assert json.loads(res.stdout) == {
        "status": "interrupted",
        "exit_code": 130,
        "error": {"kind": "InterruptedRunError", "message": "interrupted", "hint": None, "log": None},
    }
    plain = CliRunner().invoke(group, ["lazy"])
    assert plain.exit_code == 130 and "internal error" not in plain.output
