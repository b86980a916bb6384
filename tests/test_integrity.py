"""Numbers no variant can fool: a replayed result fails its recheck, a rate above the device's
is `impossible`, a variant with no GPU work is said, and the check's errors are columns.

The variants are tests/fixtures/workloads/fooling.py's. On the CPU they run for real under
`time`, `torch-trace` and nsys; the GPU cases (another stream, no GPU work under each profiler)
are marked `gpu` and were run on the GPU, whose folders are committed under
tests/fixtures/runs/h100-integrity where a run made them."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli
from test_nsys_parser import needs_nsys

ROOT = Path(__file__).resolve().parents[1]
FOOLING = ROOT / "tests" / "fixtures" / "workloads" / "fooling.py"
RUNS = ROOT / "tests" / "fixtures" / "runs"


def _table(folder: Path) -> pd.DataFrame:
    from orchestrator import load_run

    return load_run(folder).table.set_index("variant")


def _wman(folder: Path) -> dict:
    return json.loads((folder / "workload.json").read_text())


@pytest.mark.parametrize("backend", ["time", "torch-trace"])
def test_a_result_replayed_by_address_fails_its_recheck_on_the_cpu(tmp_path, backend):
    out = tmp_path / "run"
    extra = ["--iters", "20"] if backend == "torch-trace" else ["--max-time", "0.3"]
    res = run_cli(
        backend,
        "fooling",
        "--workload-file",
        str(FOOLING),
        "--device",
        "cpu",
        "--size",
        "1e5",
        *extra,
        "--out",
        str(out),
    )
    assert res.returncode == 1, res.stderr
    assert "cached: its result did not follow its input" in res.stderr and "Traceback" not in res.stderr
    w = {v["name"]: v for v in _wman(out)["variants"]}
    assert w["cached"]["status"] == "stale result"
    same = w["cached"]["recheck"]["same buffer"]
    assert same["passed"] is False and same["rel_error"] > 0.5
    # a second buffer is a new key: the cache computes it, so that recheck passes
    assert w["cached"]["recheck"]["new buffer"]["passed"] is True
    for name in ("honest", "side_stream"):
        assert w[name]["status"] == "ok"
        assert all(r["passed"] and r["rel_error"] < 1e-6 for r in w[name]["recheck"].values())
    t = _table(out)
    assert t.loc["cached", "status"] == "stale result" and pd.isna(t.loc["cached", "speedup_vs_baseline"])
    assert t.loc["honest", "speedup_vs_baseline"] == 1.0
    assert "its result did not follow its input" in t.loc["cached", "note"]
    # the evidence is kept: its samples are in the table, never ranked
    if backend == "time":
        assert t.loc["cached", "samples"] > 0
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"


@pytest.mark.nsys
@needs_nsys
def test_a_replayed_result_fails_its_recheck_under_nsys(tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        "nsys",
        "fooling",
        "--workload-file",
        str(FOOLING),
        "--device",
        "cpu",
        "--size",
        "1e5",
        "--iters",
        "5",
        "--out",
        str(out),
        timeout=600,
    )
    assert res.returncode == 1, res.stderr
    t = _table(out)
    assert t.loc["cached", "status"] == "stale result" and pd.isna(t.loc["cached", "speedup_vs_baseline"])
    assert (t.loc[["honest", "side_stream"], "status"] == "ok").all()


def test_the_recheck_passes_every_builtin_square(tmp_path):
    """No honest variant is called stale: the lecture's squares rechecked on both buffers."""
    out = tmp_path / "run"
    res = run_cli(
        "time", "square", "--device", "cpu", "--size", "1e5", "--max-time", "0.2", "--out", str(out)
    )
    assert res.returncode == 0, res.stderr
    for v in _wman(out)["variants"]:
        if v["status"] == "ok":
            assert set(v["recheck"]) == {"same buffer", "new buffer"}
            assert all(r["passed"] for r in v["recheck"].values()), v["name"]


def _overstated(tmp_path: Path, factor: float) -> Path:
    """The committed H100 `time square` folder with `mul`'s bytes_moved declared `factor` times
    over, as a workload that overstates its traffic would."""
    folder = tmp_path / "run"
    shutil.copytree(RUNS / "h100" / "time-square-kernel-clock", folder)
    path = folder / "workload.json"
    w = json.loads(path.read_text())
    mul = next(v for v in w["variants"] if v["name"] == "mul")
    mul["bytes_moved"] = int(mul["bytes_moved"] * factor)
    path.write_text(json.dumps(w))
    return folder


def test_a_bandwidth_above_the_memory_roof_is_impossible_and_exits_7(tmp_path):
    folder = _overstated(tmp_path, 50)
    res = run_cli("report", str(folder))
    assert res.returncode == 7, res.stderr
    assert "mul (impossible) cannot stand for their work" in res.stderr
    t = _table(folder)
    assert t.loc["mul", "status"] == "impossible" and pd.isna(t.loc["mul", "speedup_vs_baseline"])
    assert "149,932 GB/s is 44.8x the datasheet's memory peak (3,350 GB/s)" in t.loc["mul", "note"]
    assert "another stream, a result was reused" in t.loc["mul", "note"]
    assert (t.drop("mul")["status"] == "ok").all()
    doc = json.loads(run_cli("report", str(folder), "--json").stdout)
    assert doc["exit_code"] == 7 and doc["status"] == "suspect"


def test_a_bandwidth_within_ten_percent_over_the_roof_is_not_judged(tmp_path):
    # 89.5% of the peak x 1.2 = 107%: a measured kernel may pass the datasheet's figure by a little
    folder = _overstated(tmp_path, 1.2)
    assert run_cli("report", str(folder)).returncode == 0
    assert _table(folder).loc["mul", "status"] == "ok"


def test_a_tflops_above_the_datasheet_peak_is_impossible():
    from reports import plausibility

    env = {"peak_flops": {"bf16": 989.4e12}, "peak_bandwidth_bytes_per_s": 3.35e12, "l2_bytes": 50 * 2**20}
    wman = {"device": "cuda", "env": env, "flush_l2": True}
    row = {"status": "ok", "tflop_s": 1500.0, "achieved_gb_s": 10.0}
    clauses = plausibility.judge(row, {"flop_unit": "bf16", "bytes_moved": 2**30}, wman)
    assert row["status"] == "impossible"
    assert clauses == [
        "impossible: 1,500.0 TFLOP/s is 1.5x the datasheet's bf16 peak (989.4 TFLOP/s): "
        + plausibility.CAUSES
    ]
    row = {"status": "ok", "tflop_s": 800.0, "achieved_gb_s": 10.0}
    assert plausibility.judge(row, {"flop_unit": "bf16", "bytes_moved": 2**30}, wman) == []
    assert row["status"] == "ok"


def test_a_warm_working_set_is_said_and_its_bandwidth_not_judged():
    from reports import plausibility

    env = {"peak_bandwidth_bytes_per_s": 3.35e12, "l2_bytes": 50 * 2**20}
    row = {"status": "ok", "achieved_gb_s": 9000.0}
    small = {"bytes_moved": 8 * 2**20}
    unflushed = {"device": "cuda", "env": env, "flush_l2": False}
    assert plausibility.judge(row, small, unflushed) == [plausibility.WARM.format(mib=8.0, l2=50.0)]
    assert row["status"] == "ok"
    # the same rate with the L2 flushed, or a working set past the L2: the DRAM's roof judges it
    assert "impossible" in plausibility.judge(row, small, {**unflushed, "flush_l2": True})[0]
    row = {"status": "ok", "achieved_gb_s": 9000.0}
    assert "impossible" in plausibility.judge(row, {"bytes_moved": 2**30}, unflushed)[0]
    # the CPU: no peak, caches many times its DRAM: nothing is judged
    row = {"status": "ok", "achieved_gb_s": 9000.0}
    assert plausibility.judge(row, small, {**unflushed, "device": "cpu"}) == [] and row["status"] == "ok"


def test_the_checks_errors_are_columns_and_printed_only_above_1e_6(tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "1e5",
        "--max-time",
        "0.2",
        "--variants",
        "mul,pow",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    t = _table(out)
    w = {v["name"]: v for v in _wman(out)["variants"]}
    for name in ("torch_square", "mul", "pow"):
        assert t.loc[name, "max_abs_error"] == w[name]["check"]["max_abs_error"]
        assert 0 <= t.loc[name, "max_rel_error"] < 1e-6
    assert "max rel err" not in res.stdout  # float32 squares are all far below 1e-6
    csv = pd.read_csv(out / "report.csv")
    assert {"max_abs_error", "max_rel_error"} <= set(csv.columns)

    out16 = tmp_path / "bf16"
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "1e5",
        "--max-time",
        "0.2",
        "--variants",
        "mul",
        "--dtype",
        "bfloat16",
        "--out",
        str(out16),
    )
    assert res.returncode == 0, res.stderr
    t16 = _table(out16)
    assert 1e-4 < t16.loc["mul", "max_rel_error"] < 1e-2  # bfloat16 rounds to 8 bits
    assert "max rel err" in res.stdout and "max abs err" in res.stdout


def test_the_stream_verdicts():
    from workloads import streams

    same = {"gpu_activities": 1, "timer_stream": 7, "other_streams": [], "torch_streams": []}
    assert streams.verdict(same, kernel_clock=False) == ("same", "")
    how, words = streams.verdict({**same, "gpu_activities": 0}, kernel_clock=True)
    assert how == "no GPU work" and "launched no kernel, memset or copy" in words
    side = {**same, "other_streams": [13], "torch_streams": [[3, 0, 1]]}
    assert streams.verdict(side, kernel_clock=False)[0] == "joined"
    raw = {**side, "torch_streams": []}
    assert streams.verdict(raw, kernel_clock=True)[0] == "kernel clock"
    how, words = streams.verdict(raw, kernel_clock=False)
    assert how == "other stream" and "not timed" in words
    assert streams.verdict({"error": "CUPTI busy"}, kernel_clock=False) == (
        "",
        "the stream probe could not be read (CUPTI busy): timed on its stream alone",
    )


def test_an_other_stream_row_exits_7(tmp_path):
    """A run whose variant could not be bracketed: the CPU `time` folder with its side_stream
    entry marked as the runner marks one on a GPU without the kernel clock."""
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "fooling",
        "--workload-file",
        str(FOOLING),
        "--device",
        "cpu",
        "--size",
        "1e5",
        "--max-time",
        "0.2",
        "--variants",
        "side_stream",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    w = _wman(out)
    side = next(v for v in w["variants"] if v["name"] == "side_stream")
    side.update(status="other stream", reason="its GPU work ran on 1 stream(s) beside the timed one ...")
    for k in ("time_samples_ns", "cpu_samples_ns"):
        side.pop(k)
    (out / "workload.json").write_text(json.dumps(w))
    res = run_cli("report", str(out))
    assert res.returncode == 7
    t = _table(out)
    assert t.loc["side_stream", "status"] == "other stream" and pd.isna(
        t.loc["side_stream", "time_median_us"]
    )


@pytest.mark.gpu
def test_fooling_variants_on_the_gpu_never_read_faster(tmp_path):
    """On a GPU under `time`: the side-stream variant reads within 3% of honest and never faster,
    the cached one is a stale result, the run exits 1; the view reads `no GPU work`."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    out = tmp_path / "run"
    res = run_cli("time", "fooling", "--workload-file", str(FOOLING), "--size", "1e8", "--out", str(out))
    assert res.returncode == 1, res.stderr
    t = _table(out)
    honest, side = t.loc["honest", "time_median_us"], t.loc["side_stream", "time_median_us"]
    assert side >= 0.99 * honest and abs(side / honest - 1) < 0.03, (side, honest)
    assert t.loc["side_stream", "status"] == "ok" and "joined" in t.loc["side_stream", "note"]
    assert t.loc["cached", "status"] == "stale result"
    out = tmp_path / "view"
    res = run_cli("time", "fooling_view", "--workload-file", str(FOOLING), "--size", "1e7", "--out", str(out))
    assert res.returncode == 0, res.stderr
    t = _table(out)
    assert t.loc["no_gpu", "status"] == "no GPU work" and pd.isna(t.loc["no_gpu", "speedup_vs_baseline"])
