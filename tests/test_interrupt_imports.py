"""Ctrl-C and SIGTERM while the report stack is being imported: the run exits 130 and its folder
ends `interrupted`. An interrupt half-way through `import pandas` leaves pandas' compiled modules in
sys.modules, tied to a pandas module that is gone; the next import of pandas raised a plain
AttributeError (`partially initialized module 'pandas' has no attribute '_pandas_datetime_CAPI'`),
which read as an internal error (exit 1) and left the folder `running`. The real CLI is stopped
inside that import (orchestrator/failpoints.py's "import" point) and signalled there."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import click
import pytest
from click.testing import CliRunner
from conftest import REPO
from test_report_interrupt import _stop_at

from orchestrator import errors, failpoints

RUN = "time square --variants torch_square,mul --device cpu --size 1000 --iters 3".split()
MESSAGE = "interrupted while the report was made"


def _manifest(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_the_import_point_is_inside_this_pandas():
    """A pandas without the module "import" waits at would let the tests below never pause."""
    assert importlib.util.find_spec(failpoints.IMPORT_POINT_MODULE) is not None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_run_stopped_inside_the_pandas_import_ends_interrupted(sig, tmp_path):
    out = tmp_path / "run"
    res = _stop_at("import", sig, [*RUN, "-o", str(out)], tmp_path)
    assert res.returncode == 130, res.stderr
    for text in ("internal error", "Traceback", "Aborted!"):
        assert text not in res.stderr
    assert f"gprof-orch: error: {MESSAGE}" in res.stderr
    man = _manifest(out)
    assert (man["status"], man["error"]) == ("interrupted", MESSAGE)
    assert not (out / ".lock").exists()
    # the variants were measured before the signal, and are kept for `report`
    wman = json.loads((out / "workload.json").read_text())
    assert {v["name"]: v["status"] for v in wman["variants"]} == {"torch_square": "ok", "mul": "ok"}


def test_the_json_document_of_a_run_stopped_there_says_interrupted(tmp_path):
    out = tmp_path / "run"
    res = _stop_at("import", signal.SIGINT, [*RUN, "-o", str(out), "--json"], tmp_path)
    assert res.returncode == 130, res.stderr
    assert "internal error" not in res.stderr
    doc = json.loads(res.stdout)  # one document: anything after it is "Extra data"
    assert (doc["status"], doc["exit_code"], doc["run"]) == ("interrupted", 130, str(out))
    assert doc["error"]["kind"] == "InterruptedRunError" and doc["error"]["message"] == MESSAGE
    assert doc["error"]["hint"] == f"the run's data is kept: `gprof-orch report {out}` writes the reports"
    # what the hint says holds: a new process imports pandas whole and writes the reports
    again = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", str(out), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert again.returncode == 130 and json.loads(again.stdout)["exit_code"] == 130, again.stderr
    assert json.loads((out / "report.json").read_text())["meta"]["status"] == "interrupted"


def test_a_sweep_stopped_inside_the_pandas_import_ends_interrupted(tmp_path):
    """A sweep first imports pandas as its first point's report starts: that point and the parent
    folder end interrupted, though the parent's own report, importing pandas again, raises."""
    out = tmp_path / "sweep"
    sweep = [a if a != "1000" else "1000,2000" for a in RUN]
    res = _stop_at("import", signal.SIGINT, [*sweep, "-o", str(out), "--json"], tmp_path)
    assert res.returncode == 130, res.stderr
    assert "internal error" not in res.stderr
    doc = json.loads(res.stdout)
    assert (doc["status"], doc["exit_code"]) == ("interrupted", 130)
    man = _manifest(out)
    assert man["status"] == "interrupted"
    assert {n: c["status"] for n, c in man["children"].items()} == {"1000-float32": "interrupted"}
    assert _manifest(out / "1000-float32")["status"] == "interrupted"
    assert not (out / "2000-float32").exists()  # the sweep stopped there


@pytest.fixture
def own_sigint():
    """The test process's SIGINT handler and the interrupt record as they were, after the test."""
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)
    errors.note_interrupt(False)


def test_an_error_raised_after_the_signal_is_the_interrupt(own_sigint):
    """An import the interrupt broke fails again later with no interrupt in its chain: after the
    signal, the CLI takes it as the interrupt (exit 130), not as a bug (exit 1)."""
    from orchestrator.cli import Group

    @click.group(cls=Group)
    def group() -> None:
        pass

    @group.command()
    def stopped() -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the signal is taken here, as Ctrl-C would be
        except KeyboardInterrupt:
            pass
        raise AttributeError("partially initialized module 'pandas' has no attribute '_pandas_datetime_CAPI'")

    @group.command()
    def broken() -> None:
        raise AttributeError("a bug")

    res = CliRunner().invoke(group, ["stopped"])
    assert res.exit_code == 130 and "internal error" not in res.output
    assert res.output.strip() == "gprof-orch: error: interrupted"
    # the next command starts unsignalled: a bug is a bug again
    res = CliRunner().invoke(group, ["broken"])
    assert res.exit_code == 1 and "internal error: AttributeError: a bug" in res.output
