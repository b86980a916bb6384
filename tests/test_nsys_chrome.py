"""nsys SQLite export -> Chrome trace, on the real H200 exports of our workloads
(tests/fixtures/runs/h200/nsys-*/report.sqlite), cross-checked with the torch.profiler trace
parser reading the converted file."""

import dataclasses
import gzip
import json
import time
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

from orchestrator.errors import ParseError
from orchestrator.parsers import nsys as ns
from orchestrator.parsers import torch_trace as tt
from orchestrator.parsers.nsys import chrome as nc

RUNS = ["nsys-square", "nsys-mean", "nsys-triton-mean", "nsys-load-inline-square"]
# every committed nsys export (plain or .xz), each read by the Chrome trace export
EXPORTS = sorted(
    p.relative_to(FIXTURES).as_posix()
    for p in FIXTURES.rglob("*")
    if p.name.endswith((".sqlite", ".sqlite.xz"))
)


def _export(fixtures, run: str) -> ns.NsysExport:
    return ns.read_export(fixtures / "runs" / "h200" / run / "report.sqlite")


def _events(trace: dict, ph: str, cat: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


@pytest.mark.parametrize("run", RUNS)
def test_every_kernel_call_and_range_becomes_one_event(fixtures, run):
    ex = _export(fixtures, run)
    trace = ns.to_chrome_trace(ex)
    json.loads(json.dumps(trace, allow_nan=False))  # plain JSON types only
    assert len(_events(trace, "X", "kernel")) == len(ex.kernels)
    assert len(_events(trace, "X", "gpu_memcpy")) == len(ex.memcpy)
    assert len(_events(trace, "X", "gpu_memset")) == len(ex.memset)
    calls = _events(trace, "X", "cuda_runtime") + _events(trace, "X", "cuda_driver")
    assert len(calls) == len(ex.runtime)
    assert all(
        e["name"].startswith("cu") and not e["name"].startswith("cuda")
        for e in _events(trace, "X", "cuda_driver")
    )
    ranges = ex.nvtx[
        ex.nvtx["event_type"].isin([ns.NVTX_PUSHPOP_RANGE, ns.NVTX_STARTEND_RANGE, ns.NVTX_MARK])
    ]
    nvtx = (
        _events(trace, "X", "user_annotation")
        + _events(trace, "X", "nvtx")
        + _events(trace, "b", "nvtx")
        + _events(trace, "i", "nvtx")
    )
    assert len(nvtx) == len(ranges) > 0
    assert [e["name"] for e in _events(trace, "X", "user_annotation")] == [
        "variant:" + v for v in ns.variant_ranges(ex)["variant"]
    ]


@pytest.mark.parametrize("run", RUNS)
def test_times_round_trip_to_the_ns(fixtures, run):
    ex = _export(fixtures, run)
    trace = ns.to_chrome_trace(ex)
    t0 = trace["otherData"]["time_origin_ns"]
    kernels = _events(trace, "X", "kernel")
    assert [round(e["ts"] * 1000) + t0 for e in kernels] == ex.kernels["start"].tolist()
    assert [round(e["dur"] * 1000) for e in kernels] == ex.kernels["duration_ns"].tolist()
    calls = [e for e in trace["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    assert [round(e["dur"] * 1000) for e in calls] == ex.runtime["duration_ns"].tolist()
    assert min(e["ts"] for e in trace["traceEvents"] if "ts" in e) == 0.0


@pytest.mark.parametrize("run", RUNS)
def test_complete_events_nest_on_every_track(fixtures, run):
    """Perfetto drops 'X' slices that overlap without nesting on one thread: there are none
    (ranges hold calls; one stream runs one thing at a time)."""
    trace = ns.to_chrome_trace(_export(fixtures, run))
    tracks: dict[tuple, list] = {}
    for e in _events(trace, "X"):
        tracks.setdefault((e["pid"], e["tid"]), []).append(
            (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        )
    assert len(tracks) == 2  # the Python thread, stream 7 of GPU 0
    for spans in tracks.values():
        stack: list[int] = []
        for start, end in sorted(spans, key=lambda se: (se[0], -se[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1]
            stack.append(end)


def test_kernel_args_and_variants(fixtures):
    ex = _export(fixtures, "nsys-square")
    trace = ns.to_chrome_trace(ex)
    kernels = _events(trace, "X", "kernel")
    assert Counter(e["args"]["variant"] for e in kernels) == {
        "torch_square": 20,
        "mul": 20,
        "pow": 20,
        "triton": 20,
        "numba": 20,
        None: 17,
    }
    first = kernels[0]
    k = ex.kernels.iloc[0]
    assert first["name"] == k["demangled_name"] and first["args"]["short name"] == k["name"]
    assert first["args"]["grid"] == [195313, 1, 1] and first["args"]["block"] == [128, 1, 1]
    assert first["args"]["registers per thread"] == 38
    assert (first["pid"], first["tid"], first["args"]["correlation"]) == (0, 7, 174)
    memcpy = _events(trace, "X", "gpu_memcpy")
    assert memcpy[0]["name"] == "[CUDA memcpy Host-to-Device]" and memcpy[0]["args"]["bytes"] == 400_000_000
    names = {(e["name"], e["pid"], e["tid"]): e["args"] for e in _events(trace, "M")}
    assert names[("thread_name", 0, 7)] == {"name": "stream 7"}
    assert names[("process_name", 0, 0)] == {"name": "GPU 0"}
    assert names[("process_labels", 1377, 0)] == {"labels": "CPU"}


@pytest.mark.parametrize("rel", EXPORTS)
def test_memcpy_and_memset_events_spell_out_their_rows(fixtures, rel):
    """Each memcpy and memset row becomes one event whose fields and args, in this order, hold
    the row's values; compared as JSON text, so the order of keys counts too."""
    ex = ns.read_export(fixtures / rel)
    trace = ns.to_chrome_trace(ex)
    att = ns.attribute_kernels(ex)
    t0 = trace["otherData"]["time_origin_ns"]
    for kind, table in (("memcpy", ex.memcpy), ("memset", ex.memset)):
        a = att[att["kind"] == kind]
        want = []
        for r, name, variant in zip(table.itertuples(), a["name"], a["variant"]):
            args = {
                "device": r.device_id,
                "stream": r.stream_id,
                "correlation": r.correlation_id,
                "bytes": r.bytes,
            }
            if kind == "memcpy":
                args["copy kind"] = r.copy_kind
            else:
                args |= {"value": r.value, "memory kind": r.mem_kind}
            args["variant"] = variant
            ts, dur = (r.start - t0) / 1000, r.duration_ns / 1000
            event = {"ph": "X", "cat": f"gpu_{kind}", "name": name, "pid": r.device_id, "tid": r.stream_id}
            want.append(event | {"ts": ts, "dur": dur, "args": args})
        got = _events(trace, "X", f"gpu_{kind}")
        assert len(got) == len(table)
        assert json.dumps(got) == json.dumps(want, default=int)


@pytest.mark.parametrize("run", RUNS)
def test_flow_arrows_join_each_launch_to_its_gpu_activity(fixtures, run):
    ex = _export(fixtures, run)
    trace = ns.to_chrome_trace(ex)
    calls = {
        (e["pid"], e["tid"], e["ts"]): e
        for cat in ("cuda_runtime", "cuda_driver")
        for e in _events(trace, "X", cat)
    }
    gpu = {
        (e["pid"], e["tid"], e["ts"]): e
        for cat in ("kernel", "gpu_memcpy", "gpu_memset")
        for e in _events(trace, "X", cat)
    }
    starts = {e["id"]: e for e in _events(trace, "s", "ac2g")}
    finishes = _events(trace, "f", "ac2g")
    # every GPU activity of these captures was launched by a call in the export
    assert len(finishes) == len(starts) == len(ex.kernels) + len(ex.memcpy) + len(ex.memset)
    for f in finishes:
        s = starts[f["id"]]
        call, act = calls[(s["pid"], s["tid"], s["ts"])], gpu[(f["pid"], f["tid"], f["ts"])]
        assert call["args"]["correlation"] == act["args"]["correlation"]
        assert f["bp"] == "e"


@pytest.mark.parametrize("run", RUNS)
def test_torch_trace_parser_reads_the_converted_trace_alike(fixtures, tmp_path, run):
    """read_trace + summarize on the converted file give each variant the kernels, GPU ns,
    memcpys and memsets that nsys.summarize gives it on the export."""
    path = ns.write_chrome_trace(fixtures / "runs" / "h200" / run / "report.sqlite", tmp_path / "trace.json")
    ex = _export(fixtures, run)
    want = ns.summarize(ns.attribute_kernels(ex), ns.variant_ranges(ex)).dropna(subset=["variant"])
    gpu = tt.summarize(tt.read_trace(path))["gpu"]
    for row in want.itertuples():
        mine = gpu[gpu["variant"] == row.variant]
        kernels = mine[mine["kind"] == "kernel"]
        assert len(kernels) == row.launches > 0
        assert kernels["duration_ns"].sum() == row.gpu_time_total_ns
        assert (mine["kind"] == "memcpy").sum() == row.memcpy_count
        assert (mine["kind"] == "memset").sum() == row.memset_count
    # the kernels of the whole trace, in start order, keep their exact ns
    ev = tt.read_trace(path).events
    k = ev[ev["cat"] == "kernel"]
    assert (k["end_ns"] - k["start_ns"]).tolist() == ex.kernels["duration_ns"].tolist()
    assert k["correlation"].tolist() == ex.kernels["correlation_id"].tolist()


def test_write_gzip_and_speed(fixtures, tmp_path):
    src = fixtures / "runs" / "h200" / "nsys-square" / "report.sqlite"
    t = time.perf_counter()
    out = ns.write_chrome_trace(src, tmp_path / "square.trace.json.gz")
    assert time.perf_counter() - t < 1.0  # ~0.05 s; the bound only catches a per-row blow-up
    trace = json.loads(gzip.decompress(out.read_bytes()))
    assert len(_events(trace, "X", "kernel")) == 117
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ParseError, match="no such file"):
        ns.write_chrome_trace(tmp_path / "missing.sqlite", tmp_path / "x.json")


def test_the_json_fallback_writes_the_same_trace(fixtures, tmp_path, monkeypatch):
    src = fixtures / "runs" / "h200" / "nsys-mean" / "report.sqlite"
    fast = json.loads(ns.write_chrome_trace(src, tmp_path / "a.json").read_text())
    monkeypatch.setattr(nc, "_orjson", None)
    plain = json.loads(ns.write_chrome_trace(src, tmp_path / "b.json").read_text())
    assert fast == plain and len(plain["traceEvents"]) > 600


def test_other_domains_start_end_ranges_marks_and_unclosed_ranges(fixtures):
    ex = _export(fixtures, "nsys-square")
    n = ex.nvtx
    tid = int(n["global_tid"].iloc[0])
    t = int(n["start"].iloc[1])
    extra = pd.DataFrame(
        {
            "start": [t + 10, t + 20, t + 30, t + 40],
            "end": pd.array([t + 500, None, t + 60, None], dtype="Int64"),
            "event_type": [
                ns.NVTX_STARTEND_RANGE,
                ns.NVTX_PUSHPOP_RANGE,
                ns.NVTX_PUSHPOP_RANGE,
                ns.NVTX_MARK,
            ],
            "text": ["load", "open", "variant:fake", "tick"],
            "global_tid": [tid] * 4,
            "domain_id": [2, 0, 0, 0],
            "domain": ["io", None, None, None],
        }
    )
    nvtx = pd.concat([n, extra], ignore_index=True).sort_values("start", kind="stable").reset_index(drop=True)
    trace = ns.to_chrome_trace(dataclasses.replace(ex, nvtx=nvtx))
    t0 = trace["otherData"]["time_origin_ns"]
    b, e = _events(trace, "b", "nvtx"), _events(trace, "e", "nvtx")
    assert [(x["name"], x["id"]) for x in b] == [(x["name"], x["id"]) for x in e] == [("io:load", b[0]["id"])]
    assert round(e[0]["ts"] * 1000) + t0 == t + 500
    pushpop = {x["name"]: x for x in _events(trace, "X", "nvtx")}
    # a default-domain range named like a variant is not one: the variants live in "gprof"
    assert set(pushpop) == {"open", "variant:fake"}
    assert pushpop["open"]["args"]["unclosed"] is True
    assert round((pushpop["open"]["ts"] + pushpop["open"]["dur"]) * 1000) + t0 == ns.last_timestamp(ex)
    assert [x["name"] for x in _events(trace, "i", "nvtx")] == ["tick"]
    assert len(_events(trace, "X", "user_annotation")) == 5


def test_default_domain_and_no_prefix(fixtures):
    ex = _export(fixtures, "nsys-square")
    trace = ns.to_chrome_trace(ex, domain=None, prefix="")
    assert _events(trace, "X", "user_annotation") == []
    assert [e["name"] for e in _events(trace, "X", "nvtx")][:2] == [
        "gprof:variant:torch_square",
        "gprof:variant:mul",
    ]
    assert {e["args"]["variant"] for e in _events(trace, "X", "kernel")} == {None}


def test_a_process_whose_pid_is_a_device_id(fixtures, tmp_path):
    """In a container the profiled process can have pid 0..7: the GPU rows then take string
    pids, so CPU and GPU events never share a process."""
    ex = _export(fixtures, "nsys-square")
    low = np.int64(0xFF << 48)  # hardware/VM bits kept, pid 0, tid 5
    rt = ex.runtime.assign(global_tid=(ex.runtime["global_tid"] & low) | 5)
    nvtx = ex.nvtx.assign(global_tid=(ex.nvtx["global_tid"] & low) | 5)
    gpu_tables = {
        name: getattr(ex, name).assign(global_pid=getattr(ex, name)["global_pid"] & low)
        for name in ("kernels", "memcpy", "memset")
    }
    trace = ns.to_chrome_trace(dataclasses.replace(ex, runtime=rt, nvtx=nvtx, **gpu_tables))
    assert {e["pid"] for e in _events(trace, "X", "kernel")} == {"GPU 0"}
    assert {e["pid"] for e in _events(trace, "X", "cuda_runtime")} == {0}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    gpu = tt.summarize(tt.read_trace(path))["gpu"]
    assert (gpu[gpu["kind"] == "kernel"]["variant"] == "mul").sum() == 20
