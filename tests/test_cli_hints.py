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
