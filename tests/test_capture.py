"""`gprof-orch import` and `gprof-orch exec nsys` (orchestrator/capture.py, backends/program.py):
range selection on committed captures, an imported run folder equal to its own `report`, and a
user's program profiled by real nsys on the CPU, checked against `nsys stats -r nvtx_sum`."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_nsys_parser import CPU, NSYS, SQUARE, VARIANTS, needs_nsys, nsys_stats

from orchestrator import api, capture, capture_ranges
from orchestrator.capture_ranges import RangeFilter
from orchestrator.errors import (
    EXIT_PARSE,
    ParseError,
    UsageError,
)
from orchestrator.nvtx_support import nvtx_problem
from orchestrator.parsers import nsys as ns

PROGRAM = Path(__file__).resolve().parent / "fixtures" / "programs" / "nvtx_steps.py"


# ------------------------------------------------------------------------------ range filters


@pytest.mark.parametrize(
    "spec, expect",
    [
        (None, RangeFilter("*", "", False)),  # every range, nested ones too, as nvtx_kern_sum lists them
        ("gprof@variant:", RangeFilter("gprof", "variant:", False)),
        ("@step", RangeFilter(None, "step", False)),
        ("@", RangeFilter(None, "", False)),
        ("*@", RangeFilter("*", "", False)),
        ("step", RangeFilter("*", "step", False)),
    ],
)
def test_range_filter_parse(spec, expect):
    assert RangeFilter.parse(spec) == expect
    assert RangeFilter.from_json(expect.to_json()) == expect


def test_range_filter_refuses_nesting_separator():
    with pytest.raises(UsageError, match="'/'"):
        RangeFilter.parse("gprof@a/b")


def test_cpu_capture_selections():
    ex = ns.read_export(CPU)
    assert RangeFilter.parse(None) == RangeFilter.parse("*@")
    top = RangeFilter("*", "", top_level=True).select(ex)
    # `inner` is nested in variant:a/b: not top-level; the other domains are named nsys's way
    assert list(dict.fromkeys(top["variant"])) == [
        "gprof:variant:a",
        "gprof:variant:b",
        "gprof:variant:c",
        "gprof:variant:d",
        "variant:a",
        "other:variant:a",
        "gprof:variant:t",
    ]
    g = RangeFilter.parse("gprof@variant:").select(ex)
    assert g["variant"].tolist() == ["a", "b", "a", "b", "c", "d", "t"]
    # the same ranges, the same numbers as the parser's own selection
    mine = g.groupby("variant")["wall_ns"].agg(["size", "sum"])
    ref = ns.variant_ranges(ex).groupby("variant")["wall_ns"].agg(["size", "sum"])
    pd.testing.assert_frame_equal(mine, ref)
    assert list(RangeFilter.parse("@").select(ex)["variant"]) == ["variant:a"]
    assert set(RangeFilter.parse("gprof@").select(ex)["variant"]) == {
        "variant:a",
        "variant:b",
        "inner",
        "variant:c",
        "variant:d",
        "variant:t",
    }


def test_attribution_through_a_selection_equals_domain_and_prefix():
    ex = ns.read_export(VARIANTS)
    by_filter = ns.attribute_kernels(ex, ranges=RangeFilter.parse("@").select(ex))
    by_args = ns.attribute_kernels(ex, domain=None, prefix="")
    pd.testing.assert_frame_equal(by_filter, by_args)


def test_nvtx_problem():
    assert nvtx_problem("0.2.10", "2023.4.4.54") is None
    assert "0.2.17" in nvtx_problem("0.2.17", "2023.4.4.54")
    assert nvtx_problem("0.2.13", "2023.4.4") is not None
    assert nvtx_problem("0.2.17", "2024.5.1") is None
    assert nvtx_problem(None, "2023.4.4") is None


# ------------------------------------------------------------------------------ import


def test_import_of_a_run_folders_export_equals_its_report(h200_run, tmp_path):
    folder = h200_run("nsys-square")
    original = api.load_run(folder)
    imported = capture.import_capture(folder / "report.sqlite", out=tmp_path / "imported")
    assert imported.manifest["backend"] == "program" and imported.status == "ok"
    assert imported.workload["workload"] == "square"
    pd.testing.assert_frame_equal(original.table, imported.table)
    assert imported.table["time_median_us"].round(2).tolist() == [189.02, 189.18, 189.26, 189.25, 199.79]
    # report and compare work on the imported folder as on any run
    again = api.load_run(tmp_path / "imported")
    pd.testing.assert_frame_equal(again.table, imported.table)
    table, _, _ = api.compare(folder, tmp_path / "imported")
    assert (table["change_pct"].abs() < 1e-9).all()


def test_import_of_a_bare_gpu_export_every_top_level_range(tmp_path):
    run = capture.import_capture(VARIANTS, out=tmp_path / "r")
    t = run.table.set_index("variant")
    assert list(t.index) == ["D_torch_push", "E_torch_startend"]
    assert run.workload["device"] == "cuda"
    # nvtx_kern_sum's numbers (tests/test_nsys_parser.py): one kernel each, 5760 and 5697 ns
    assert t["time_median_us"].tolist() == [5.760, 5.697]
    assert t["launches_per_iter"].tolist() == [1, 1]


def test_import_cpu_capture_with_ranges(tmp_path):
    run = capture.import_capture(CPU, ranges="gprof@variant:", out=tmp_path / "r")
    f = run.frame
    wall = f[f["metric"] == "time_ns"].groupby("variant")["value"].agg(["size", "sum"])
    assert wall.loc["a"].tolist() == [2, 4284007 + 4292749]
    assert run.workload["device"] == "cpu"
    assert {v["name"]: v["iters"] for v in run.workload["variants"]} == {
        "a": 2,
        "b": 2,
        "c": 1,
        "d": 1,
        "t": 1,
    }


def test_import_without_a_matching_range_lists_what_it_holds(cli, tmp_path):
    res = cli("import", str(CPU), "--ranges", "nope@x", "--out", str(tmp_path / "r"))
    assert res.exit_code == EXIT_PARSE
    assert "no NVTX range matches nope@x" in res.output
    assert "gprof@variant:a x2" in res.output and "gprof@inner x4" in res.output
    assert "(default)@variant:a x1" in res.output
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["status"] == "failed"


def test_import_of_ranges_nsys_dropped_says_why(tmp_path):
    with pytest.raises(ParseError) as info:
        capture.import_capture(SQUARE, out=tmp_path / "r")
    assert info.value.exit_code == EXIT_PARSE
    assert "0.2.13" in info.value.hint and "nvtx==0.2.10" in info.value.hint


def test_import_cli_json_and_unknown_files(cli, tmp_path):
    res = cli("import", str(VARIANTS), "--json", "--out", str(tmp_path / "r"))
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["status"] == "ok" and [r["variant"] for r in doc["variants"]] == [
        "D_torch_push",
        "E_torch_startend",
    ]
    bad = tmp_path / "x.txt"
    bad.write_text("hello")
    assert cli("import", str(bad)).exit_code == 2
    assert cli("import", str(tmp_path / "missing.sqlite")).exit_code == EXIT_PARSE


@pytest.mark.nsys
@needs_nsys
@pytest.mark.parametrize(
    "content, said",
    [
        (b"", "Cannot read from stream."),
        (random.Random(0).randbytes(5000), "Exportation error:"),
        ("cut", "Exportation error:"),
    ],
    ids=["empty", "random", "cut"],
)
def test_import_of_a_damaged_nsys_rep_is_unreadable_input(tmp_path, monkeypatch, content, said):
    """nsys export cannot read it: the input is damaged, exit 4 with nsys's own words (it was
    exit 1, "nsys export exited with status 1", as if the tool were broken)."""
    monkeypatch.setenv("GPROF_NSYS", str(NSYS))
    src = tmp_path / "bad.nsys-rep"
    if content == "cut":  # the first half of a real capture
        pytest.importorskip("nvtx")
        run = capture.profile_program(
            [sys.executable, str(PROGRAM), "--steps", "1"],
            "nsys",
            ranges="*@",
            out=tmp_path / "whole",
            cuda=False,
        )
        whole = (run.path / "report.nsys-rep").read_bytes()
        content = whole[: len(whole) // 2]
    src.write_bytes(content)
    with pytest.raises(ParseError) as info:
        capture.import_capture(src, out=tmp_path / "r")
    assert info.value.exit_code == EXIT_PARSE and said in info.value.message
    assert info.value.message.startswith(f"cannot read {src}: Exportation error: ")
    assert info.value.log is not None and info.value.log.exists()


# ------------------------------------------------------------------------------ exec nsys (real nsys, CPU)


def _program_env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path)}


@pytest.mark.nsys
@needs_nsys
def test_exec_nsys_ranges_equal_nvtx_sum(tmp_path, monkeypatch):
    pytest.importorskip("nvtx")
    monkeypatch.setenv("GPROF_NSYS", str(NSYS))
    run = capture.profile_program(
        [sys.executable, str(PROGRAM), "--steps", "4"], "nsys", ranges="*@", out=tmp_path / "run", cuda=False
    )
    assert run.status == "ok" and run.manifest["backend"] == "program"
    rows = nsys_stats("nvtx_sum", run.path / "report.sqlite", tmp_path)
    theirs = {r["Range"]: (int(r["Instances"]), int(r["Total Time (ns)"])) for r in rows}
    f = run.frame[run.frame["metric"] == "time_ns"]
    mine = {v: (len(g), int(round(g["value"].sum()))) for v, g in f.groupby("variant", sort=False)}
    assert theirs == mine
    assert {k: n for k, (n, _) in mine.items()} == {
        "load": 1,
        "step": 4,
        "forward": 4,
        "backward": 4,
        "train:loss": 4,
        "train:eval": 1,
    }
    # the table: one sample per instance, nested ranges reported on their own; counts differ,
    # so the heading names no one count (it read "sampled to +-?%", time's stop rule)
    assert " | iterations per variant | " in run.title()
    t = run.table.set_index("variant")
    assert t.loc["step", "samples"] == 4 and t.loc["forward", "time_median_us"] > 0
    # the same capture, imported, with the default (every range, as nvtx_sum) and a domain selection
    every = capture.import_capture(run.path / "report.nsys-rep", out=tmp_path / "every")
    assert list(every.table["variant"]) == ["load", "step", "forward", "backward", "train:loss", "train:eval"]
    assert every.table["speedup_vs_baseline"].isna().all()  # a program's parts, not alternatives
    train = capture.import_capture(run.path / "report.sqlite", ranges="train@", out=tmp_path / "train")
    assert list(train.table["variant"]) == ["loss", "eval"]
    tf = train.frame[train.frame["metric"] == "time_ns"].groupby("variant")["value"].sum()
    assert int(round(tf["loss"])) == theirs["train:loss"][1]


@pytest.mark.nsys
@needs_nsys
def test_exec_nsys_cli_failed_program_and_no_match(tmp_path, monkeypatch):
    pytest.importorskip("nvtx")
    from conftest import run_cli

    env = {"GPROF_NSYS": str(NSYS), "GPROF_NO_PROGRESS": "1"}
    res = run_cli(
        "exec",
        "nsys",
        "--no-cuda",
        "--ranges",
        "@step",
        "--out",
        str(tmp_path / "a"),
        "--",
        sys.executable,
        str(PROGRAM),
        "--steps",
        "2",
        "--exit",
        "3",
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    assert "the program exited with status 3" in res.stderr
    assert (
        "step" in res.stdout and "step" not in res.stderr.split("error:")[0]
    )  # the partial table: data, on stdout
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert man["status"] == "failed" and man["backend"] == "program"
    assert (tmp_path / "a" / "report.md").exists()
    wman = json.loads((tmp_path / "a" / "workload.json").read_text())
    assert [(v["name"], v["iters"]) for v in wman["variants"]] == [("step", 2)]

    res = run_cli(
        "exec",
        "nsys",
        "--no-cuda",
        "--ranges",
        "@nothing",
        "--out",
        str(tmp_path / "b"),
        "--",
        sys.executable,
        str(PROGRAM),
        "--steps",
        "1",
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == EXIT_PARSE, res.stderr
    assert "no NVTX range matches @nothing" in res.stderr and "(default)@step x1" in res.stderr


@pytest.mark.nsys
@needs_nsys
def test_exec_nsys_timeout_exits_124(tmp_path, monkeypatch):
    pytest.importorskip("nvtx")
    from conftest import run_cli

    env = {"GPROF_NSYS": str(NSYS), "GPROF_NO_PROGRESS": "1"}
    res = run_cli(
        "exec",
        "nsys",
        "--no-cuda",
        "--timeout",
        "6",
        "--out",
        str(tmp_path / "a"),
        "--",
        sys.executable,
        str(PROGRAM),
        "--sleep",
        "60",
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 124, res.stderr
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["status"] == "failed"
    if not (tmp_path / "a" / "report.json").exists():
        # nsys 2024.2.3, at times, records a range only once it ends: the one stopped inside is not
        # in the capture, and the message says why no range is there (not a bare "no range matches")
        assert "2024.2.3 records a range only once it ends" in res.stderr, res.stderr
        return
    # the range it was stopped inside is timed to the stop, and says so (it read `ok`)
    row = {r["variant"]: r for r in json.loads((tmp_path / "a" / "report.json").read_text())["variants"]}[
        "sleep"
    ]
    assert row["status"] == "timed out" and 1e6 < row["time_median_us"] < 6.5e6
    assert row["note"].startswith("1 of its 1 instance(s) never closed: timed to the end of the capture")
    # the same capture imported: no stop to blame, the note alone
    imported = capture.import_capture(tmp_path / "a" / "report.sqlite", out=tmp_path / "b")
    assert imported.table.set_index("variant").loc["sleep", "status"] == "ok"
    assert imported.workload["variants"][0]["unclosed"] == 1


def test_exec_dry_run_and_usage(cli):
    res = cli(
        "exec",
        "nsys",
        "--dry-run",
        "--no-cuda",
        "--nsys",
        sys.executable,
        "--ranges",
        "@step",
        "--",
        "python",
        "train.py",
        "--steps",
        "5",
    )
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert "profile --trace=nvtx,osrt --sample=none --cpuctxsw=none" in first
    assert first.endswith("python train.py --steps 5")
    assert (
        cli("exec", "ncu", "--ncu", "/nonexistent/ncu", "--", "python", "x.py").exit_code == 3
    )  # tool not found


def test_python_api_is_exported():
    import orchestrator

    assert orchestrator.profile_program is capture.profile_program
    assert orchestrator.import_capture is capture.import_capture


# ------------------------------------------------------------------------------ nested ranges


def test_nesting_and_inclusive_activity_on_gpu_kernels():
    """A range around D_torch_push and E_torch_startend (same thread): it holds both, and its
    inclusive kernels are theirs, as nvtx_kern_sum counts D and E (5760 + 5697 ns)."""
    ex = ns.read_export(VARIANTS)
    sel = RangeFilter.parse("@").select(ex)
    assert sel["global_tid"].nunique() == 1
    outer = pd.DataFrame(
        {
            "range_id": [0],
            "variant": ["outer"],
            "start": [sel["start"].min() - 1],
            "end": [sel["end"].max() + 1],
            "wall_ns": [sel["end"].max() - sel["start"].min() + 2],
            "global_tid": [sel["global_tid"].iloc[0]],
            "event_type": [59],
            "domain": [None],
        }
    )
    ranges = pd.concat([outer, sel.assign(range_id=sel["range_id"] + 1)], ignore_index=True)
    assert capture_ranges.nesting(ranges) == {"outer": ["D_torch_push", "E_torch_startend"]}
    att = ns.attribute_kernels(ex, ranges=ranges)
    own = att[(att["variant"] == "outer") & (att["kind"] == "kernel")]
    assert own.empty  # innermost wins: the variants keep their kernels
    inc = capture_ranges.inclusive_activity(att, ranges, "outer")
    k = inc[inc["kind"] == "kernel"]
    assert len(k) == 2 and int(k["duration_ns"].sum()) == 5760 + 5697
    assert set(k["range_id"]) == {0} and set(k["variant"]) == {"outer"}
    assert capture_ranges.nesting(sel) == {}


@pytest.mark.nsys
@needs_nsys
def test_import_nested_cpu_capture_marked_inclusive_no_speedup(tmp_path):
    run = capture.import_capture(CPU, ranges="gprof@", out=tmp_path / "r", compare_ranges=True)
    holds = {v["name"]: v.get("holds") for v in run.workload["variants"]}
    assert holds["variant:a"] == ["inner"] and holds["variant:b"] == ["inner"] and holds["inner"] is None
    assert run.workload["baseline"] == "inner"  # the first range that holds none
    t = run.table.set_index("variant")
    assert t.loc["variant:a", "note"].startswith("nested: holds inner")
    assert t[["speedup_vs_baseline"]].loc[["variant:a", "variant:b"]].isna().all().all()
    assert t.loc["inner", "speedup_vs_baseline"] == 1.0 and t["speedup_vs_baseline"].notna().sum() == 1
    # c, d and t ran once: a ratio of one reading is noise, so none
    assert (t.loc[["variant:c", "variant:d", "variant:t"], "samples"] == 1).all()
    # counts and wall time: inclusive, as nsys's own nvtx_sum gives them
    rows = nsys_stats("nvtx_sum", CPU, tmp_path)
    theirs = {
        r["Range"].removeprefix("gprof:"): (int(r["Instances"]), int(r["Total Time (ns)"]))
        for r in rows
        if r["Range"].startswith("gprof:")
    }
    f = run.frame[run.frame["metric"] == "time_ns"]
    mine = {v: (len(g), int(round(g["value"].sum()))) for v, g in f.groupby("variant", sort=False)}
    assert mine == theirs


@pytest.mark.nsys
@needs_nsys
def test_exec_nsys_nested_ranges(tmp_path, monkeypatch):
    pytest.importorskip("nvtx")
    monkeypatch.setenv("GPROF_NSYS", str(NSYS))
    run = capture.profile_program(
        [sys.executable, str(PROGRAM), "--steps", "3"],
        "nsys",
        ranges="*@",
        out=tmp_path / "run",
        cuda=False,
        compare_ranges=True,
    )
    assert run.status == "ok"
    holds = {v["name"]: v["holds"] for v in run.workload["variants"] if v.get("holds")}
    assert holds == {"step": ["forward", "backward", "train:loss"]}
    assert run.workload["baseline"] == "load"
    t = run.table.set_index("variant")
    assert t.loc["step", "note"].startswith("nested: holds forward, backward, train:loss")
    # the baseline (load) ran once: no speedup over one reading, on any row
    assert t.loc["load", "samples"] == 1 and t["speedup_vs_baseline"].isna().all()
    # a step's wall time holds its children's
    f = run.frame[run.frame["metric"] == "time_ns"].groupby("variant")["value"].sum()
    assert f["step"] > f["forward"] + f["backward"] + f["train:loss"]
    # report on the folder reads the same
    pd.testing.assert_frame_equal(api.load_run(run.path).table, run.table)


# ------------------------------------------------------------------------------ import of torch.profiler traces

TORCH_RUN = Path(__file__).resolve().parent / "fixtures" / "runs" / "h200" / "torch-trace-mean"
MEASURED = [
    "variant",
    "kernels",
    "launches_per_iter",
    "time_median_us",
    "time_iqr_us",
    "samples",
    "cpu_median_us",
]


def test_import_torch_trace_equals_report(tmp_path):
    import lzma
    import shutil

    original = api.load_run(TORCH_RUN)
    run = capture.import_capture(TORCH_RUN / "trace.json", ranges="variant:", out=tmp_path / "json")
    assert run.status == "ok" and run.manifest["backend"] == "torch-trace"
    pd.testing.assert_frame_equal(original.table, run.table)
    assert run.table["time_median_us"].round(2).tolist() == [101.92, 101.73, 103.25]
    pd.testing.assert_frame_equal(api.load_run(tmp_path / "json").table, run.table)
    # trace.json.xz in a copy of the folder: the same
    folder = tmp_path / "folder"
    shutil.copytree(TORCH_RUN, folder)
    (folder / "trace.json.xz").write_bytes(lzma.compress((folder / "trace.json").read_bytes()))
    (folder / "trace.json").unlink()
    xz = capture.import_capture(folder / "trace.json.xz", ranges="variant:", out=tmp_path / "xz")
    pd.testing.assert_frame_equal(original.table, xz.table)
    # a bare trace (no run folder beside it): the same measurements, named by the ranges
    bare = tmp_path / "t.json.xz"
    shutil.copyfile(folder / "trace.json.xz", bare)
    b = capture.import_capture(bare, ranges="variant:", out=tmp_path / "bare")
    pd.testing.assert_frame_equal(original.table[MEASURED], b.table[MEASURED])
    assert b.workload["device"] == "cuda" and b.workload["iters"] == 20


def test_import_torch_trace_no_match_and_domain(cli, tmp_path):
    res = cli("import", str(TORCH_RUN / "trace.json"), "--ranges", "nope", "--out", str(tmp_path / "a"))
    assert res.exit_code == EXIT_PARSE
    assert "no record_function range starts with 'nope'" in res.output
    assert "iter x60" in res.output and "variant:torch_mean x1" in res.output
    res = cli(
        "import", str(TORCH_RUN / "trace.json"), "--ranges", "gprof@variant:", "--out", str(tmp_path / "b")
    )
    assert res.exit_code == 2 and "no NVTX domains" in res.output


def _record_nested_trace(path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(128, 128)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("my:step"):
                with record_function("my:fwd"):
                    y = x @ x
                with record_function("my:bwd"):
                    x = (y @ x) / 128
        with record_function("other"):
            x.sum()
    prof.export_chrome_trace(str(path))


def test_import_cpu_torch_trace_with_nested_record_functions(tmp_path):
    trace = tmp_path / "trace.json"
    _record_nested_trace(trace)
    run = capture.import_capture(trace, ranges="my:", out=tmp_path / "r", compare_ranges=True)
    assert run.status == "ok" and run.workload["device"] == "cpu"
    assert [v["name"] for v in run.workload["variants"]] == ["step", "fwd", "bwd"]
    assert {v["name"]: v.get("holds") for v in run.workload["variants"]} == {
        "step": ["fwd", "bwd"],
        "fwd": None,
        "bwd": None,
    }
    assert run.workload["baseline"] == "fwd"
    # every instance one iteration; its time is the range's wall time, as the trace gives it
    events = json.loads(trace.read_text())["traceEvents"]
    ann = [e for e in events if e.get("cat") == "user_annotation" and e.get("ph") == "X"]
    f = run.frame[run.frame["metric"] == "time_ns"]
    for name in ("step", "fwd", "bwd"):
        theirs = sorted(float(e["dur"]) * 1000 for e in ann if e["name"] == f"my:{name}")
        ours = sorted(f.loc[f["variant"] == name, "value"])
        # the parser takes end - start of microsecond timestamps in ns: within 1 ns of dur
        assert len(ours) == len(theirs) and all(abs(a - b) <= 1 for a, b in zip(ours, theirs)), (ours, theirs)
    t = run.table.set_index("variant")
    assert t["samples"].tolist() == [3, 3, 3]
    assert t.loc["step", "note"].startswith("nested: holds fwd, bwd")
    assert pd.isna(t.loc["step", "speedup_vs_baseline"]) and t.loc["fwd", "speedup_vs_baseline"] == 1.0
    pd.testing.assert_frame_equal(api.load_run(tmp_path / "r").table, run.table)
