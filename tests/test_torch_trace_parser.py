"""The torch.profiler Chrome-trace parser, on a real H200 trace and on real CPU traces."""

import json

import pytest

from orchestrator.errors import ParseError
from orchestrator.parsers import torch_trace as tt
from reports.names import short_kernel_name

H200 = "torch_trace/h200_mean_square_loadinline/trace.json"


def test_h200_trace_groups_by_top_level_operator(fixtures):
    trace = tt.read_trace(fixtures / H200)
    s = tt.summarize(trace)
    gpu = s["gpu"]
    assert len(gpu) == 20  # 15 kernels + 5 memsets
    by = gpu.groupby(["variant", "kernel"], dropna=False)["duration_ns"].agg(["count", "sum"])
    mean = by.loc[("aten::mean", [k for v, k in by.index if v == "aten::mean" and "reduce_kernel" in k][0])]
    assert mean["count"] == 5 and mean["sum"] == 542593  # 108.5 us a launch: 0.11 ms
    sq = gpu[gpu["variant"] == "aten::square"]
    assert len(sq) == 5 and sq["duration_ns"].sum() == 926172
    assert (
        short_kernel_name(sq["kernel"].iloc[0])
        == "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"
    )
    memset = gpu[gpu["kind"] == "memset"]
    assert len(memset) == 5 and set(memset["variant"]) == {"aten::mean"}
    # the load_inline kernel is launched from Python, outside every operator
    lecture = gpu[gpu["kernel"] == "sq(float const*, float*, int, int)"]
    assert len(lecture) == 5 and lecture["variant"].isna().all()
    assert lecture["duration_ns"].sum() == 1850431
    assert trace.device_properties[0]["name"] == "NVIDIA H200"


def test_attribution_uses_the_launch_not_gpu_time(fixtures):
    trace = tt.read_trace(fixtures / H200)
    gpu = tt.attribute(trace)
    # every kernel of aten::square started on the GPU after its operator ended on the CPU
    ranges, _ = tt.variant_ranges(trace)
    sq = gpu[gpu["variant"] == "aten::square"]
    first = ranges[ranges["variant"] == "aten::square"].iloc[0]
    assert sq["start_ns"].iloc[0] > first["end_ns"] - 10**9  # sanity: same clock
    assert (sq["launch_ns"] > 0).all()


@pytest.mark.parametrize(
    "content,reason",
    [
        (b"", "not a JSON"),
        (b'{"traceEvents": [{"ph": "X", "ts"', "not a JSON"),
        (b'{"foo": 1}', "no 'traceEvents'"),
        (b"\x00\x01binary", "not a JSON"),
    ],
)
def test_bad_traces_are_parse_errors(tmp_path, content, reason):
    p = tmp_path / "t.json"
    p.write_bytes(content)
    with pytest.raises(ParseError) as e:
        tt.read_trace(p)
    assert reason in str(e.value) and str(p) in str(e.value)


def test_missing_trace(tmp_path):
    with pytest.raises(ParseError, match="no such file"):
        tt.read_trace(tmp_path / "nope.json")


def test_self_cpu_time_subtracts_children(tmp_path):
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "variant:v", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "iter", "pid": 1, "tid": 1, "ts": 1, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 1, "tid": 1, "ts": 2, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::b", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 5,
            "args": {"correlation": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 9,
            "ts": 300,
            "dur": 3.5,
            "args": {"correlation": 7},
        },
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    s = tt.summarize(tt.read_trace(p))
    # a: 40 - 10 (b) - 5 (launch) = 25; b: 10; launch: 5 -> 40 us
    assert s["self_cpu_ns"].set_index("variant").loc["v", "self_cpu_ns"] == 40_000
    k = s["gpu"].iloc[0]
    assert (k["variant"], k["iteration"], k["duration_ns"], k["launch_ns"]) == ("v", 0, 3500, 5000)
    assert s["iterations"]["wall_ns"].tolist() == [50_000]


def test_a_kernel_before_its_launch_call_is_damage(h200_run):
    """The fuzz's open case: event 276 of torch-trace-mean (torch.mean's reduce kernel) with its
    `ts` swapped for the string "1.0" moved "GPU idle us/iter" to 2.7e11 with exit 0. The text is
    now refused as not a JSON number; the same time as a number is a kernel before its launch."""
    import json as _json

    from orchestrator import load_run
    from orchestrator.errors import ParseError

    path = h200_run("torch-trace-mean") / "trace.json"
    data = _json.loads(path.read_text())
    events = data["traceEvents"]
    assert events[276]["cat"] == "kernel" and "reduce_kernel" in events[276]["name"]
    events[276]["ts"] = 1.0
    path.write_text(_json.dumps(data))
    folder = path.parent
    with pytest.raises(ParseError, match="start before the CUDA call that launched them"):
        load_run(folder)
    events[276]["ts"] = "1.0"
    path.write_text(_json.dumps(data))
    with pytest.raises(ParseError, match="is not a JSON number"):
        load_run(folder)


def test_a_kernel_without_a_duration_is_damage(h200_run):
    """Found by the 5,000-case fuzz: deleting `dur` of event 276 (a reduce kernel) read as a
    0 ns kernel and moved torch.mean's median, exit 0."""
    import json as _json

    from orchestrator import load_run
    from orchestrator.errors import ParseError

    path = h200_run("torch-trace-mean") / "trace.json"
    data = _json.loads(path.read_text())
    del data["traceEvents"][276]["dur"]
    path.write_text(_json.dumps(data))
    with pytest.raises(ParseError, match="has no duration"):
        load_run(path.parent)


def test_a_manifest_backend_that_is_not_a_name_is_an_error(h200_run):
    """Found by the 5,000-case fuzz: "backend": [] crashed with a TypeError (unhashable list)."""
    import json as _json

    from orchestrator import load_run
    from orchestrator.errors import ParseError

    folder = h200_run("torch-trace-mean")
    man = _json.loads((folder / "manifest.json").read_text())
    man["backend"] = []
    (folder / "manifest.json").write_text(_json.dumps(man))
    with pytest.raises(ParseError, match="unknown backend"):
        load_run(folder)
