"""read_trace's fast path (orjson where installed, the cyclic GC paused, one list comprehension
a column) gives exactly the frame the plain loop it replaced gave, on real traces, on a
replicated one, and on odd inputs; benchmarks/bench_torch_trace_parse.py times it."""

import gc
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator.errors import ParseError
from orchestrator.parsers import torch_trace as tt

REPO_FIXTURES = [
    "runs/h200/torch-trace-square/trace.json",
    "runs/h200/torch-trace-mean/trace.json",
    "torch_trace/h200_mean_square_loadinline/trace.json",
]


def reference_events(path) -> pd.DataFrame:
    """The events frame as read_trace built it before the fast path (one tuple per event)."""
    with open(path, "rb") as fh:
        data = json.load(fh)
    if isinstance(data, list):
        data = {"traceEvents": data}
    rows = []
    for e in data["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "X" or "ts" not in e:
            continue
        args = e.get("args") or {}
        ts = float(e["ts"])
        rows.append(
            (
                e.get("cat", ""),
                e.get("name", ""),
                str(e.get("pid", "")),
                str(e.get("tid", "")),
                ts,
                ts + float(e.get("dur", 0.0)),
                args.get("correlation", -1),
            )
        )
    ev = pd.DataFrame(rows, columns=tt.EVENT_COLUMNS)
    for col in ("start_ns", "end_ns"):
        ev[col] = np.rint(ev[col].to_numpy(dtype="float64") * 1000.0).astype("int64")
    ev["correlation"] = pd.to_numeric(ev["correlation"], errors="coerce").fillna(-1).astype("int64")
    return ev.sort_values("start_ns", kind="stable").reset_index(drop=True)


@pytest.fixture(params=["orjson", "json"])
def json_lib(request, monkeypatch):
    """Run each test with orjson (where installed) and with the standard-library fallback."""
    if request.param == "orjson":
        if tt._orjson is None:
            pytest.skip("orjson is not installed")
    else:
        monkeypatch.setattr(tt, "_orjson", None)
    return request.param


def _same(path) -> tt.TorchTrace | None:
    """read_trace gives the reference's frame, or fails as the reference fails (pandas backed
    by pyarrow cannot store a lone surrogate, for one)."""
    try:
        want = reference_events(path)
    except Exception as exc:
        with pytest.raises(type(exc)):
            tt.read_trace(path)
        return None
    trace = tt.read_trace(path)
    pd.testing.assert_frame_equal(trace.events, want, check_exact=True)
    return trace


@pytest.mark.parametrize("name", REPO_FIXTURES)
def test_real_traces_read_exactly_as_before(fixtures, json_lib, name):
    trace = _same(fixtures / name)
    assert trace.device_properties[0]["name"] == "NVIDIA H200"
    assert trace.meta["displayTimeUnit"] == "ms" and "traceEvents" not in trace.meta


def test_replicated_trace_reads_exactly_as_before(tmp_path, json_lib):
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_torch_trace_parse.py"
    spec = importlib.util.spec_from_file_location("bench_torch_trace_parse", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path / "trace.json"
    built = bench.build(path, 2)  # MiB: 9 replicas of the square trace
    trace = _same(path)
    k = trace.events[trace.events["cat"] == "kernel"]
    assert len(k) == 100 * built["replicas"] and k["correlation"].is_unique


ODD = {
    "empty": '{"traceEvents": []}',
    "bare_array": '[{"ph": "X", "ts": 1, "dur": 2, "name": "a", "cat": "c", "pid": 1, "tid": 2}]',
    "mixed": json.dumps(
        {
            "traceEvents": [
                1,
                "x",
                None,
                {"ph": "X"},
                {"ph": "B", "ts": 1},
                {"ph": "X", "ts": "12.5", "dur": True, "pid": 1.0, "tid": None, "args": None},
                {
                    "ph": "X",
                    "ts": 3,
                    "pid": "a",
                    "tid": [1],
                    "cat": 5,
                    "name": None,
                    "args": {"correlation": "17"},
                },
                {"ph": "X", "ts": 3.0004, "args": {"correlation": 12.7}},
                {"ph": "X", "ts": 2, "args": {"correlation": "zz"}},
            ],
            "deviceProperties": None,
        }
    ),
    "nan_infinity": '{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1}, {"ph": "X", "ts": 1, "dur": Infinity}]}',
    "int_over_64_bits": '{"traceEvents": [{"ph": "X", "ts": 1, "args": {"correlation": '
    + str(10**30)
    + "}}]}",
    "lone_surrogate": '{"traceEvents": [{"ph": "X", "ts": 1, "name": "\\ud800"}]}',
}


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_traces_read_exactly_as_before(tmp_path, json_lib, case):
    path = tmp_path / "t.json"
    path.write_text(ODD[case])
    _same(path)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_other_encodings_fall_back_to_json(tmp_path, json_lib, encoding):
    path = tmp_path / "t.json"
    path.write_bytes('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "name": "\u00e9"}]}'.encode(encoding))
    assert _same(path).events["name"].tolist() == ["\u00e9"]


def test_a_timestamp_that_is_not_a_number_is_a_parse_error(tmp_path, json_lib):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "ts": null, "dur": 1}]}')
    with pytest.raises(ParseError, match="not a number") as e:
        tt.read_trace(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cyclic_gc_is_left_as_it_was(fixtures, tmp_path, enabled):
    bad = tmp_path / "bad.json"
    bad.write_text('{"foo": 1}')
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        tt.read_trace(fixtures / REPO_FIXTURES[0])
        assert gc.isenabled() is enabled
        with pytest.raises(ParseError):
            tt.read_trace(bad)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
