"""The Request and its run folder's request record (manifest.json's "request"): the generic fields
beside the backend's own options, which each backend declares (orchestrator/backends/options.py).
Records of older versions, where every backend's options were flat fields of the Request, still
load: the committed run folders under tests/fixtures/runs are read back here."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from conftest import FIXTURES

from orchestrator import backends
from orchestrator.errors import UsageError
from orchestrator.request import Request

RECORDS = sorted(
    p
    for p in (FIXTURES / "runs").rglob("manifest.json")
    if "workload" in (json.loads(p.read_text()).get("request") or {})  # exec/import: ProgramRequest's
)


def test_the_request_holds_only_what_every_backend_takes():
    names = [f.name for f in fields(Request)]
    assert len(names) == 22 and "options" in names
    for own in ("nsys_args", "ncu_set", "clock_control", "timer", "kernel_clock", "max_noise", "flush_l2"):
        assert own not in names
    assert backends.backend_class("ncu").Options.names() == [
        "ncu",
        "ncu_set",
        "ncu_sections",
        "ncu_metrics",
        "clock_control",
        "cache_control",
        "ncu_args",
    ]
    assert backends.backend_class("nsys").Options.names() == ["nsys", "nsys_args", "trace_osrt", "ops"]
    assert backends.backend_class("time").Options.names() == [
        "flush_l2",
        "timer",
        "gpu_sleep_us",
        "cuda_graph",
        "kernel_clock",
        "max_noise",
        "min_samples",
        "min_time",
        "max_time",
    ]
    assert backends.backend_class("torch-trace").Options.names() == ["ops"]
    assert backends.backend_class("proton").Options.names() == []


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.parent.relative_to(FIXTURES / "runs")))
def test_an_old_flat_record_loads_and_round_trips(path):
    old = json.loads(path.read_text())["request"]
    req = backends.request_from_record(old)
    assert (req.workload, req.backend, req.size, req.dtype, req.device, req.iters) == (
        old["workload"],
        old["backend"],
        old["size"],
        old["dtype"],
        old["device"],
        old["iters"],
    )
    opts = req.options if isinstance(req.options, dict) else req.options.to_json()
    # every option of its backend that the old record held, as it held it
    assert {k: v for k, v in old.items() if k in opts} == {k: v for k, v in opts.items() if k in old}
    assert backends.request_from_record(req.to_json()) == req
    assert json.loads(json.dumps(req.to_json())) == req.to_json()


def test_a_record_names_its_backends_options_apart(fixture_runs=FIXTURES / "runs"):
    old = json.loads((fixture_runs / "h100" / "time-square-kernel-clock" / "manifest.json").read_text())
    req = backends.request_from_record(old["request"])
    assert (req.options.timer, req.options.gpu_sleep_us, req.options.max_time) == ("blocking", 100.0, 1.0)
    rec = req.to_json()
    assert rec["options"]["timer"] == "blocking" and "timer" not in rec and "ncu_set" not in rec
    ncu = backends.request("square", "ncu", ncu_sections=["SpeedOfLight"], clock_control="base")
    assert ncu.to_json()["options"] == {
        "ncu": None,
        "ncu_set": None,
        "ncu_sections": ["SpeedOfLight"],
        "ncu_metrics": [],
        "clock_control": "base",
        "cache_control": "all",
        "ncu_args": [],
    }


def test_an_option_of_another_backend_is_refused_by_name():
    with pytest.raises(UsageError, match="time takes no option ncu_set; its own: cuda_graph, flush_l2"):
        backends.request("square", "time", ncu_set="full")
    with pytest.raises(UsageError, match="--timer 'fast' unknown"):
        backends.request("square", "time", timer="fast").validate()
    with pytest.raises(UsageError, match="--metrics 'a b' is not a metric name"):
        backends.request("square", "ncu", ncu_metrics=["a b"]).validate()


# --------------------------------------------------------------------------- exec and import


def test_exec_nsys_options_are_the_program_backends_declaration():
    """`exec nsys`'s own flags are the program backend's Options (nsys's declarations reused):
    the same flags and defaults as NsysOptions', its --osrt help its own."""
    from orchestrator.backends.nsys import NsysOptions

    prog = backends.backend_class("program").Options
    assert prog.names() == ["nsys", "nsys_args", "trace_osrt", "cuda", "attribute"]
    nsys_fields, prog_fields = NsysOptions.__dataclass_fields__, prog.__dataclass_fields__
    for name in ("nsys", "nsys_args", "trace_osrt"):
        assert prog_fields[name].metadata["cli"][0] == nsys_fields[name].metadata["cli"][0]
    assert prog_fields["trace_osrt"].metadata["cli"][1]["help"] == (
        "Also trace OS runtime calls (always on without a GPU)."
    )


def test_an_import_records_the_program_options_under_options(tmp_path):
    from conftest import run_cli

    src = FIXTURES / "nsys" / "cpu_nvtx0210_gprof" / "capture.sqlite"
    res = run_cli("import", str(src), "--out", str(tmp_path / "run"))
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "run" / "manifest.json").read_text())["request"]
    assert rec["options"] == {
        "nsys": None,
        "nsys_args": [],
        "trace_osrt": False,
        "cuda": None,
        "attribute": None,
    }
    assert not {"nsys", "nsys_args", "trace_osrt", "cuda"} & set(rec)
    assert rec["capture"] == str(src.resolve()) and rec["backend"] == "program"


@pytest.mark.parametrize(
    "path", sorted((FIXTURES / "runs").glob("*-programs/*/manifest.json")), ids=lambda p: p.parent.name
)
def test_a_committed_capture_record_loads(path):
    """The exec/import folders committed before the options were nested: their flat keys read."""
    from orchestrator.capture_request import ProgramRequest

    rec = json.loads(path.read_text())["request"]
    req = ProgramRequest.from_record(rec)
    assert req.argv == rec.get("argv", []) and req.ranges == rec.get("ranges")
    # these records name no backend: `exec ncu`'s is told by its tool; each round trips with it
    assert "backend" not in rec and req.backend == ("program-ncu" if rec["tool"] == "ncu" else "program")
    assert ProgramRequest.from_record(req.to_json()) == req
    opts = backends.get("program").opts(req)
    assert opts.nsys_args == tuple(rec.get("nsys_args") or ()) and opts.trace_osrt is bool(
        rec.get("trace_osrt")
    )


def test_old_flat_program_options_still_build_the_command(tmp_path):
    from orchestrator.capture_request import ProgramRequest

    old = {"argv": ["python", "t.py"], "nsys": "/opt/nsys", "nsys_args": ["--x=1"], "trace_osrt": True}
    req = ProgramRequest.from_record({**old, "cuda": True})
    profile, _ = backends.get("program").commands(req, tmp_path)
    assert profile.argv[0] == "/opt/nsys"
    assert "--trace=cuda,nvtx,osrt" in profile.argv and profile.argv[-3:] == ["--x=1", "python", "t.py"]
    # the nested record wins over a flat key of the same name
    new = ProgramRequest.from_record({**old, "options": {"nsys_args": ["--y"], "cuda": False}})
    profile, _ = backends.get("program").commands(new, tmp_path)
    assert "--trace=nvtx,osrt" in profile.argv and "--y" in profile.argv and "--x=1" not in profile.argv
