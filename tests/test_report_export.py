"""`gprof-orch report` of a folder whose run stopped during `nsys export` (report.nsys-rep, no
report.sqlite): it makes the export, recorded in commands.sh, and reports the same table; without
nsys it says where the report can still be read (exit 3); `compare`, which writes nothing, says
how to make it (exit 4). Real nsys runs on the CPU: `nsys square` and `exec nsys`."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from test_nsys_parser import NSYS, needs_nsys

pytestmark = [pytest.mark.nsys, needs_nsys]
PROGRAM = Path(__file__).resolve().parent / "fixtures" / "programs" / "nvtx_steps.py"
ENV = {"GPROF_NSYS": str(NSYS), "GPROF_NO_PROGRESS": "1"}


@pytest.fixture(scope="module")
def nsys_run(tmp_path_factory):
    """A real `nsys square` on the CPU, whole."""
    out = tmp_path_factory.mktemp("nsys") / "run"
    res = run_cli(
        "nsys",
        "square",
        "--device",
        "cpu",
        "--size",
        "1000",
        "--iters",
        "3",
        "-v",
        "torch_square,mul",
        "-o",
        str(out),
        "--json",
        env=ENV,
    )
    assert res.returncode == 0, res.stderr
    return out, json.loads(res.stdout)


def _stopped_in_export(src: Path, dest: Path, *also: str) -> Path:
    """A copy of a run folder as a run stopped during `nsys export` leaves it: no export (nor what
    is written from it: `also`), no reports, the manifest `interrupted`."""
    shutil.copytree(src, dest)
    for name in (
        "report.sqlite",
        "trace.json",
        "report.md",
        "report.json",
        "report.csv",
        "report.html",
        "frame.parquet",
        "frame.csv",
        *also,
    ):
        (dest / name).unlink(missing_ok=True)
    man = json.loads((dest / "manifest.json").read_text())
    man.update(status="interrupted", error="interrupted")
    (dest / "manifest.json").write_text(json.dumps(man))
    return dest


def _medians(doc: dict) -> dict:
    return {r["variant"]: r["time_median_us"] for r in doc["variants"]}


def test_report_exports_what_nsys_wrote_and_gives_the_same_table(nsys_run, tmp_path):
    src, whole = nsys_run
    folder = _stopped_in_export(src, tmp_path / "stopped")
    # compare writes nothing: it says the export is missing and how to make it
    res = run_cli("compare", str(src), str(folder), env=ENV)
    assert res.returncode == 4, res.stderr
    assert (
        "report.sqlite: no such file: nsys wrote report.nsys-rep, but the run stopped before its SQLite export was made"
        in res.stderr
    )
    assert f"hint: `gprof-orch report {folder}` makes the export" in res.stderr
    assert not (folder / "report.sqlite").exists()

    res = run_cli("report", str(folder), "--json", env=ENV)
    assert res.returncode == 0, res.stderr
    assert "the run stopped before its SQLite export was made; making it now" in res.stderr
    doc = json.loads(res.stdout)
    assert _medians(doc) == _medians(whole) and set(_medians(doc)) == {"torch_square", "mul"}
    assert all(v is not None for v in _medians(doc).values())
    assert (folder / "report.sqlite").is_file() and (folder / "trace.json").is_file()
    # recorded as every step is: the export of this folder's report, last
    man = json.loads((folder / "manifest.json").read_text())
    assert man["commands"][-1]["step"] == "nsys-export"
    assert man["commands"][-1]["argv"][-1] == str(folder.resolve() / "report.nsys-rep")
    assert man["commands"][-1]["argv"][1:] == [
        "export",
        "--type=sqlite",
        f"--output={folder.resolve()}/report.sqlite",
        "--force-overwrite=true",
        f"{folder.resolve()}/report.nsys-rep",
    ]
    assert Path(man["commands"][-1]["argv"][0]).resolve() == NSYS.resolve()
    assert (folder / "commands.sh").read_text().rstrip().splitlines()[-2:] == [
        "# nsys-export",
        " ".join(man["commands"][-1]["argv"]),
    ]
    # made once: the next report reads it
    again = run_cli("report", str(folder), env=ENV)
    assert again.returncode == 0 and "making it now" not in again.stderr, again.stderr


def test_without_nsys_report_says_where_the_report_can_be_read(nsys_run, tmp_path):
    src, _ = nsys_run
    folder = _stopped_in_export(src, tmp_path / "stopped")
    man = json.loads((folder / "manifest.json").read_text())
    man["tools"]["nsys"] = "/nonexistent/nsys"  # the run's nsys is gone, and none is found here
    (folder / "manifest.json").write_text(json.dumps(man))
    res = run_cli("report", str(folder), env={"GPROF_NSYS": "/nonexistent/nsys"})
    assert res.returncode == 3, res.stderr
    assert (
        f"cannot report {folder}: nsys wrote report.nsys-rep, but the run stopped before its SQLite export was made"
        in res.stderr
    )
    assert "nsys is needed to make it: $GPROF_NSYS=/nonexistent/nsys is not an executable file" in res.stderr
    assert f"or, where nsys is, `gprof-orch import {folder}/report.nsys-rep`" in res.stderr
    assert "Traceback" not in res.stderr and not (folder / "report.sqlite").exists()
    assert res.stdout == ""


def test_report_of_an_exec_folder_stopped_in_its_export(tmp_path):
    pytest.importorskip("nvtx")
    src = tmp_path / "run"
    res = run_cli(
        "exec",
        "nsys",
        "--no-cuda",
        "--ranges",
        "@step",
        "-o",
        str(src),
        "--json",
        "--",
        sys.executable,
        str(PROGRAM),
        "--steps",
        "3",
        env=ENV,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    whole = json.loads(res.stdout)
    # the run writes workload.json from the export: it is missing too
    folder = _stopped_in_export(src, tmp_path / "stopped", "workload.json")
    res = run_cli("report", str(folder), "--json", env=ENV)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert _medians(doc) == _medians(whole) and list(_medians(doc)) == ["step"]
    wman = json.loads((folder / "workload.json").read_text())
    assert [(v["name"], v["iters"]) for v in wman["variants"]] == [("step", 3)]
    assert json.loads((folder / "manifest.json").read_text())["commands"][-1]["step"] == "nsys-export"


def test_a_cut_short_report_is_unreadable_not_a_failed_tool(nsys_run, tmp_path):
    # stopped while nsys wrote the report: `nsys export` cannot read it (exit 4, nsys's own words)
    src, _ = nsys_run
    folder = _stopped_in_export(src, tmp_path / "stopped")
    data = (src / "report.nsys-rep").read_bytes()
    (folder / "report.nsys-rep").write_bytes(data[: len(data) // 10])
    res = run_cli("report", str(folder), env=ENV)
    assert res.returncode == 4, res.stderr
    assert f"error: cannot read {folder}/report.nsys-rep: Exportation error:" in res.stderr
    assert (
        "hint: cut short: the run was stopped while nsys wrote it, so there is nothing to export"
        in res.stderr
    )
    assert "Traceback" not in res.stderr and res.stdout == ""
