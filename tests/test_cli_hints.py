"""What the CLI says where something is off: the profiled program's own last words when it fails,
`doctor --check` leaving no scratch folder, headings without empty fields, compare's headers, and
`report` of a file. Through the real CLI (run_cli), with real nsys where a program is profiled."""
import json
import sys

import pytest

from conftest import run_cli
from test_nsys_parser import NSYS, needs_nsys

ENV = {"GPROF_NSYS": str(NSYS), "GPROF_NO_PROGRESS": "1"}


@pytest.mark.nsys
@needs_nsys
def test_a_failed_program_says_what_it_wrote_on_stderr(tmp_path):
    # Python's own reason (a missing script) was only in the log: now in the message
    res = run_cli("exec", "nsys", "--no-cuda", "-o", str(tmp_path / "a"), "--", sys.executable, "nosuch.py",
                  env=ENV, cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert (f"error: the program exited with status 2: {sys.executable}: can't open file "
            f"'{tmp_path}/nosuch.py': [Errno 2] No such file or directory") in res.stderr
    assert "Traceback" not in res.stderr
    # a traceback: its exception line in the message, its last lines under it; JSON carries the line too
    res = run_cli("exec", "nsys", "--no-cuda", "-o", str(tmp_path / "b"), "--json", "--", sys.executable, "-c",
                  "import json\njson.loads('{')", env=ENV, cwd=tmp_path)
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
