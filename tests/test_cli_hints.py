"""What the CLI says where something is off: the profiled program's own last words when it fails,
`doctor --check` leaving no scratch folder, headings without empty fields, compare's headers, and
`report` of a file. Through the real CLI (run_cli), with real nsys where a program is profiled."""

import json
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from test_nsys_parser import NSYS, needs_nsys

ENV = {"GPROF_NSYS": str(NSYS), "GPROF_NO_PROGRESS": "1"}


@pytest.mark.nsys
@needs_nsys
def test_a_failed_program_says_what_it_wrote_on_stderr(tmp_path):
    # Python's own reason (a missing script) was only in the log: now in the message
    res = run_cli(
        "exec",
        "nsys",
        "--no-cuda",
        "-o",
        str(tmp_path / "a"),
        "--",
        sys.executable,
        "nosuch.py",
        env=ENV,
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    assert (
        f"error: the program exited with status 2: {sys.executable}: can't open file "
        f"'{tmp_path}/nosuch.py': [Errno 2] No such file or directory"
    ) in res.stderr
    assert "Traceback" not in res.stderr
    # a traceback: its exception line in the message, its last lines under it; JSON carries the line too
    res = run_cli(
        "exec",
        "nsys",
        "--no-cuda",
        "-o",
        str(tmp_path / "b"),
        "--json",
        "--",
        sys.executable,
        "-c",
        "import json\njson.loads('{')",
        env=ENV,
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    said = "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    assert f"the program exited with status 1: {said}" in res.stderr
    assert "the program's last lines on stderr:\n" in res.stderr and f"  | {said}" in res.stderr
    assert '  |   File "' in res.stderr and 'json/decoder.py", line' in res.stderr
    assert said in json.loads(res.stdout)["error"]["message"]


@pytest.mark.nsys
@needs_nsys
def test_doctor_check_leaves_no_scratch_folder(tmp_path):
    # each call left a gprof-doctor-* folder of about 700 KB (the checks' reports) in $TMPDIR
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = run_cli("doctor", "--check", env={**ENV, "TMPDIR": str(tmp)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[pass] nsys" in res.stdout and "[pass] torch.profiler" in res.stdout
    assert not list(tmp.glob("gprof-doctor-*"))
    # --debug keeps it, and says where
    res = run_cli("--debug", "doctor", "--check", env={**ENV, "TMPDIR": str(tmp)})
    assert res.returncode == 0, res.stdout + res.stderr
    kept = list(tmp.glob("gprof-doctor-*"))
    assert len(kept) == 1 and f"the checks' reports and logs are kept in {kept[0]}" in res.stderr
    assert (kept[0] / "nsys-check.nsys-rep").is_file() and (kept[0] / "nsys.stdout.log").is_file()


CAPTURE = Path(__file__).resolve().parent / "fixtures" / "nsys" / "cpu_nvtx0210_gprof" / "capture.sqlite"


def test_a_heading_drops_its_empty_fields(tmp_path):
    # a capture has no shape nor dtype: its heading read "program capture |   on cpu | ..."
    res = run_cli("import", str(CAPTURE), "-o", str(tmp_path / "imp"))
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert first == f"program capture | on cpu | iterations per variant | {tmp_path / 'imp'}"
    res = run_cli("report", str(tmp_path / "imp"), "--format", "markdown")
    assert res.returncode == 0 and "program capture | on cpu | iterations per variant" in res.stdout, (
        res.stderr
    )
    assert "program capture | on cpu | iterations per variant" in (tmp_path / "imp" / "report.md").read_text()


def test_compare_names_its_spread_column(h200_run):
    a = h200_run("time-square")
    res = run_cli("compare", str(a), str(a))
    assert res.returncode == 0, res.stderr
    header = res.stdout.splitlines()[1]
    assert "  verdict  " in header and "  beyond spread" in header
    assert "beyond_spread" not in res.stdout
    # JSON and CSV keep the column's name
    assert "beyond_spread" in json.loads(run_cli("compare", str(a), str(a), "--json").stdout)["variants"][0]


def test_report_of_a_file_says_it_is_one(tmp_path, h200_run):
    loose = tmp_path / "loose.sqlite"
    loose.write_bytes(CAPTURE.read_bytes())
    notes = tmp_path / "notes.txt"
    notes.write_text("not a run\n")
    folder = h200_run("time-square")
    for path, hint in (
        (loose, f"hint: a capture: `gprof-orch import {loose}` reads it into a run folder"),
        (notes, "hint: report and compare read run folders, which every run writes (--out FOLDER)"),
        (folder / "workload.json", f"hint: it is in the run folder {folder}: `gprof-orch report {folder}`"),
    ):
        res = run_cli("report", str(path))
        assert res.returncode == 4, res.stderr
        assert f"error: cannot read {path}: a file, not a run folder\n{hint}\n" in res.stderr
        assert "no such run folder" not in res.stderr and res.stdout == ""
    res = run_cli("compare", str(loose), str(folder))
    assert (
        res.returncode == 4 and "a file, not a run folder" in res.stderr and "gprof-orch import" in res.stderr
    )
    # a path that is nothing at all is still no run folder
    res = run_cli("report", str(tmp_path / "none"))
    assert res.returncode == 4 and "no such run folder" in res.stderr
