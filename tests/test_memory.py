"""Each variant's memory: one extra call after the warm-up (workloads/call_memory.py), kept in
workload.json's `memory`, shown as peak MiB, alloc MiB/call, allocs/call and result MiB by every
backend that runs the workload, with a note on temporaries."""

import json
from pathlib import Path

import pytest
from conftest import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "workloads" / "temporaries.py"
N = 1_000_000  # the fixture's size on the CPU: float32, so a result of 4,000,000 bytes
MIB = 2**20


def _run(tmp_path: Path, backend: str, workload: str, *extra: str) -> tuple[dict, dict, str]:
    out = tmp_path / backend
    res = run_cli(backend, workload, "--device", "cpu", "--iters", "5", "--out", str(out), *extra)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    man = json.loads((out / "workload.json").read_text())
    return (
        {r["variant"]: r for r in report["variants"]},
        {v["name"]: v for v in man["variants"]},
        res.stdout,
    )


def test_time_shows_a_clean_call_at_its_result_and_a_temporary_above_it(tmp_path):
    rows, man, out = _run(tmp_path, "time", "temporaries", "--workload-file", str(FIXTURE))
    clean, temps = man["clean"]["memory"], man["temps"]["memory"]
    # a*a: its one allocation is its result, the peak that result
    assert clean["result_bytes"] == 4 * N
    assert clean["allocations"] == 1 and clean["allocated_bytes"] == 4 * N
    assert abs(clean["peak_bytes"] - clean["result_bytes"]) <= 4096
    # (a*a + |a*a|) / 2: a*a, a*a, |.|, +, * 0.5 (and the scalar): three results alive at its peak
    assert temps["result_bytes"] == 4 * N
    assert temps["peak_bytes"] == 3 * 4 * N
    assert temps["allocations"] >= 5 and temps["allocated_bytes"] >= 5 * 4 * N
    # the table's columns, in MiB and counts
    assert rows["clean"]["peak_mib"] == pytest.approx(4 * N / MIB, abs=4096 / MIB)
    assert rows["clean"]["result_mib"] == pytest.approx(4 * N / MIB)
    assert rows["clean"]["allocs_per_call"] == 1
    assert rows["clean"]["alloc_mib_per_call"] == pytest.approx(4 * N / MIB)
    assert rows["temps"]["peak_mib"] == pytest.approx(12 * N / MIB)
    assert "temporaries" not in rows["clean"]["note"]
    assert "temporaries: 7.63 MiB above the result" in rows["temps"]["note"]
    assert "peak MiB" in out and "allocs/call" in out and "result MiB" in out


def test_a_mean_returns_a_few_bytes(tmp_path):
    rows, man, _ = _run(tmp_path, "time", "mean")
    for name in ("torch_mean", "tensor_mean", "sum_div_numel"):
        assert man[name]["memory"]["result_bytes"] == 4  # one float32
        assert rows[name]["result_mib"] == pytest.approx(4 / MIB)
        assert rows[name]["peak_mib"] < 0.01
        assert "temporaries" not in rows[name]["note"]


def test_the_extra_call_is_outside_every_timed_call(tmp_path):
    """The memory call is one more than the warm-up and the timed iterations, and under
    torch.profiler it is outside the trace's variant ranges: the trace holds 5 iterations."""
    rows, man, _ = _run(tmp_path, "torch-trace", "temporaries", "--workload-file", str(FIXTURE))
    assert man["temps"]["memory"]["peak_bytes"] == 3 * 4 * N
    assert rows["temps"]["peak_mib"] == pytest.approx(12 * N / MIB)
    assert "temporaries: 7.63 MiB above the result" in rows["temps"]["note"]
    trace = json.loads((tmp_path / "torch-trace" / "trace.json").read_text())
    iters = [e for e in trace["traceEvents"] if e.get("name") == "iter" and e.get("ph") == "X"]
    assert len(iters) == 2 * 5  # two variants, five iterations each: no extra call inside


def test_a_folder_recorded_before_the_columns_has_them_empty(h200_run):
    from orchestrator import api

    run = api.load_run(h200_run("time-square"), write=False)
    for col in ("peak_mib", "alloc_mib_per_call", "allocs_per_call", "result_mib"):
        assert run.table[col].isna().all()


def test_memory_figures_that_are_not_numbers_leave_the_columns_empty(tmp_path):
    """A workload.json whose `memory` was damaged (text, null, a list) rebuilds: those figures
    are empty, the others and the times as they were."""
    rows, _, _ = _run(tmp_path, "time", "temporaries", "--workload-file", str(FIXTURE))
    path = tmp_path / "time" / "workload.json"
    data = json.loads(path.read_text())
    by = {v["name"]: v for v in data["variants"]}
    by["temps"]["memory"].update(peak_bytes="lots", allocations=None, result_bytes=[1])
    by["clean"]["memory"] = "gone"
    path.write_text(json.dumps(data))
    res = run_cli("report", str(tmp_path / "time"), "--format", "json")
    assert res.returncode == 0, res.stderr[-2000:]
    again = {r["variant"]: r for r in json.loads(res.stdout)["variants"]}
    assert again["temps"]["peak_mib"] is None and again["temps"]["allocs_per_call"] is None
    assert again["temps"]["alloc_mib_per_call"] == pytest.approx(rows["temps"]["alloc_mib_per_call"])
    assert again["clean"]["peak_mib"] is None and again["clean"]["result_mib"] is None
    assert "temporaries" not in again["temps"]["note"]
    assert again["temps"]["time_median_us"] == pytest.approx(rows["temps"]["time_median_us"])


def test_a_variant_whose_extra_call_raises_is_still_timed(tmp_path):
    """The memory call is an observation: a raise there is said in workload.json's `memory`,
    the columns stay empty, and the variant is timed as it would have been."""
    wfile = tmp_path / "third.py"
    wfile.write_text(
        "from workloads import Variant, Workload\n"
        "calls = []\n"
        "def third(a):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 3:\n"
        "        raise RuntimeError('the third call fails')\n"
        "    return a * a\n"
        "WORKLOADS = [Workload('third', 'fails on its third call', [Variant('third', third, 'a*a')],\n"
        "                      reference=lambda x: x * x, bytes_moved=lambda n, s: 2 * n * s,\n"
        "                      default_shape=(1000,))]\n"
    )
    rows, man, _ = _run(tmp_path, "time", "third", "--workload-file", str(wfile), "--warmup", "2")
    assert man["third"]["memory"]["error"] == "RuntimeError: the third call fails"
    assert man["third"]["status"] == "ok" and rows["third"]["samples"] == 5
    assert rows["third"]["peak_mib"] is None and rows["third"]["result_mib"] is None


@pytest.mark.gpu
def test_on_cuda_the_caching_allocators_counters_tell_the_same(tmp_path):
    """On a GPU: the allocator rounds each block to 512 bytes, so a clean call's peak is its
    result within 512 bytes; the scalar 0.5 stays on the host, so the temporary variant makes 5."""
    out = tmp_path / "gpu"
    res = run_cli(
        "time",
        "temporaries",
        "--workload-file",
        str(FIXTURE),
        "--device",
        "cuda",
        "--iters",
        "5",
        "--size",
        str(N),
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    man = {v["name"]: v for v in json.loads((out / "workload.json").read_text())["variants"]}
    rows = {r["variant"]: r for r in json.loads((out / "report.json").read_text())["variants"]}
    clean, temps = man["clean"]["memory"], man["temps"]["memory"]
    assert clean["source"] == "cuda-caching-allocator" and isinstance(clean["reserved_new"], bool)
    assert clean["result_bytes"] == 4 * N and clean["allocations"] == 1
    assert 0 <= clean["peak_bytes"] - clean["result_bytes"] < 512
    assert temps["allocations"] == 5 and 0 <= temps["peak_bytes"] - 3 * 4 * N < 3 * 512
    assert "temporaries: 7.63 MiB above the result" in rows["temps"]["note"]
    assert "temporaries" not in rows["clean"]["note"]
