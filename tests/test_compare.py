"""`compare`: runs that differ are refused (exit 2) unless --allow-mismatch, sweeps are matched
point by point, other GPUs compare % of peak bandwidth, skipped variants are `missing`, and
--fail-if-slower takes a finite number >= 0. On the committed H200 run folders (copied first)
and CPU runs made here."""

import json
import shutil

import pytest
from conftest import run_cli

from orchestrator import api
from orchestrator.errors import UsageError


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """square on the CPU at 1e6 and at 10 elements: torch_square and mul ran, numba was skipped
    (it needs CUDA)."""
    root = tmp_path_factory.mktemp("cpu-runs")
    for name, size in (("big", "1e6"), ("small", "10")):
        res = run_cli(
            "time",
            "square",
            "--device",
            "cpu",
            "--size",
            size,
            "--iters",
            "5",
            "-v",
            "torch_square,mul,numba",
            "-o",
            str(root / name),
        )
        assert res.returncode == 0, res.stderr
    return root


def _edit_workload(folder, **changes):
    path = folder / "workload.json"
    w = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "env":
            w["env"].update(value)
        elif key == "variant":
            name, fields = value
            next(v for v in w["variants"] if v["name"] == name).update(fields)
        else:
            w[key] = value
    path.write_text(json.dumps(w))
    return folder


def _copy(src, dest):
    shutil.copytree(src, dest)
    return dest


def test_sizes_that_differ_are_refused_not_called_faster(cpu_runs):
    big, small = cpu_runs / "big", cpu_runs / "small"
    res = run_cli("compare", str(big), str(small), "--fail-if-slower", "5")
    assert res.returncode == 2, res.stdout
    assert "size: A 1000000, B 10" in res.stderr and "--allow-mismatch" in res.stderr
    assert "faster" not in res.stdout and "Traceback" not in res.stderr
    # allowed: compared, and the footer says what differs; the gate still refuses to judge
    res = run_cli("compare", str(big), str(small), "--allow-mismatch")
    assert res.returncode == 0, res.stderr
    assert "warning: compared despite a mismatch: size: A 1000000, B 10" in res.stdout
    res = run_cli("compare", str(big), str(small), "--allow-mismatch", "--fail-if-slower", "5")
    assert res.returncode == 2 and "--fail-if-slower does not judge runs that differ: size" in res.stderr


def test_a_skipped_variant_is_missing_not_same(cpu_runs):
    table, _, _ = api.compare(cpu_runs / "big", cpu_runs / "big")
    t = table.set_index("variant")
    assert t.loc["mul", "verdict"] == "same within spread" and t.loc["mul", "ratio_b_over_a"] == 1.0
    assert t.loc["numba", "verdict"] == "missing" and not t.loc["numba", "beyond_spread"]
    assert t.loc["numba", "note"].startswith("skipped in A (") and "skipped in B (" in t.loc["numba", "note"]
    # skipped in both: nothing lost, the gate judges the rest
    assert table.attrs["lost"] == []
    assert (
        run_cli("compare", str(cpu_runs / "big"), str(cpu_runs / "big"), "--fail-if-slower", "5").returncode
        == 0
    )


def test_a_failed_variant_of_b_is_missing(h200_run, tmp_path):
    a = h200_run("time-square")
    b = _edit_workload(
        _copy(a, tmp_path / "b"), variant=("triton", {"status": "failed", "error": "RuntimeError: boom"})
    )
    t = api.compare(a, b)[0].set_index("variant")
    assert (
        t.loc["triton", "verdict"] == "missing"
        and t.loc["triton", "note"] == "failed in B (RuntimeError: boom)"
    )
    assert t.loc["mul", "verdict"] == "same within spread"
    # a gate does not pass a variant that crashed in B (it did: exit 0 with the row `missing`)
    res = run_cli("compare", str(a), str(b), "--fail-if-slower", "5")
    assert res.returncode == 1 and "missing" in res.stdout
    assert "measured in A, not in B: triton: failed in B (RuntimeError: boom)" in res.stderr
    doc = json.loads(run_cli("compare", str(a), str(b), "--fail-if-slower", "5", "--json").stdout)
    assert doc["exit_code"] == 1 and doc["error"]["kind"] == "MissingInBError"
    # one B has and A has not is no regression
    assert run_cli("compare", str(b), str(a), "--fail-if-slower", "5").returncode == 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"dtype": "bfloat16"}, "dtype: A float32, B bfloat16"),
        # how the calls were timed: a flushed kernel reads up to 2x a warm one, events without a hold
        # hold the host's launch, a graph replay no launch at all
        # (the H200 folders predate the hold's and the graph's records: the H100 one has them)
        ({"flush_l2": False}, "L2 flushed before each call: A on, B off"),
        ({"hold": "none", "from": "h100"}, "what held the GPU while the call was queued: A blocking, B none"),
        ({"cuda_graph": True, "from": "h100"}, "CUDA graph replays: A off, B on"),
        ({"shape": [100000000]}, "shape: A 10000x10000, B 100000000"),
        ({"workload": "cube"}, "different workloads: A square, B cube"),
    ],
)
def test_dtype_shape_or_workload_that_differ_are_refused(h200_run, tmp_path, change, message):
    change = dict(change)
    a = h200_run("time-square-kernel-clock", "h100") if change.pop("from", None) else h200_run("time-square")
    b = _edit_workload(_copy(a, tmp_path / "b"), **change)
    res = run_cli("compare", str(a), str(b))
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert run_cli("compare", str(a), str(b), "--allow-mismatch").returncode == 0


def test_variants_that_ran_other_kernels_are_refused(h200_run, tmp_path):
    a = h200_run("torch-trace-square")
    b = _copy(a, tmp_path / "b")
    trace = b / "trace.json"
    # mul's kernel becomes a division in B
    trace.write_text(
        trace.read_text().replace(
            "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor",
            "BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor",
        )
    )
    with pytest.raises(UsageError) as exc:
        api.compare(a, b)
    assert exc.value.message.endswith(
        "kernels of mul: A ran vectorized_elementwise_kernel<MulFunctor>; "
        "B ran vectorized_elementwise_kernel<DivFunctor>"
    )
    res = run_cli("compare", str(a), str(b))
    assert res.returncode == 2 and "kernels of mul" in res.stderr
    # the time backend names no kernels: nothing to hold against it (on the kernel clock, whose
    # median times what torch-trace's does,
    # and the cache left as torch-trace's loop leaves it: --no-flush-l2)
    warm = _edit_workload(_on_kernel_clock(h200_run("time-square")), flush_l2=False)
    assert api.compare(a, warm)[0]["verdict"].ne("missing").all()


def _on_kernel_clock(folder, *names):
    """The time run's named variants (all without names) marked as timed by the kernel clock."""
    w = json.loads((folder / "workload.json").read_text())
    for v in w["variants"]:
        if not names or v["name"] in names:
            v["time_clock"] = "kernel"
    (folder / "workload.json").write_text(json.dumps(w))
    return folder


def test_medians_that_time_other_things_are_refused(h200_run):
    # CUDA events around each call (time) against nsys's kernel durations: a slow host side or a
    # launch-bound variant reads far apart on the two, so their ratio is no speedup
    events, nsys = h200_run("time-square"), h200_run("nsys-square")
    with pytest.raises(UsageError) as exc:
        api.compare(events, nsys)
    assert (
        "what the medians time (torch_square, mul, pow, triton, numba): A stream, the CUDA events"
        in exc.value.message
    )
    assert "B kernels, the GPU time of the variant's own kernels" in exc.value.message
    res = run_cli("compare", str(events), str(nsys), "--fail-if-slower", "5")
    assert res.returncode == 2 and "what the medians time" in res.stderr and "Traceback" not in res.stderr
    assert "hint: compare like with like: `time --no-kernel-clock` times the events" in res.stderr
    res = run_cli("compare", str(events), str(nsys), "--allow-mismatch")
    assert res.returncode == 0, res.stderr
    assert "warning: compared despite a mismatch: what the medians time" in res.stdout
    assert "their medians time the same thing" not in res.stdout
    # ncu's replay is a third thing
    with pytest.raises(UsageError, match=r"A kernels, .*; B replay, each kernel replayed alone"):
        api.compare(nsys, h200_run("ncu-square"))
    # two backends that both sum kernel durations: compared, and said
    res = run_cli("compare", str(nsys), str(h200_run("torch-trace-square")))
    assert res.returncode == 0, res.stderr
    assert "different backends (nsys vs torch-trace); their medians time the same thing" in res.stdout
    # time on the kernel clock times what nsys does; a variant CUPTI missed (its events median) does not
    _on_kernel_clock(events, "torch_square", "mul", "pow", "triton")
    with pytest.raises(UsageError) as exc:
        api.compare(events, nsys)
    assert "what the medians time (numba): A stream" in exc.value.message
    # a real kernel-clock run (time square --size 1e8 on an H100, 2026-12-06) against nsys on the
    # H200 (10000x10000): the shape and the cache differ, not what the medians time
    kernel = h200_run("time-square-kernel-clock", "h100")
    table, _, _ = api.compare(kernel, nsys, allow_mismatch=True)
    assert table["verdict"].ne("missing").all() and len(table) == 5
    assert table.attrs["mismatches"] == [
        "shape: A 100000000, B 10000x10000",
        "L2 flushed before each call: A on, B off",
    ]
    t = table.set_index("variant")
    assert t.loc["torch_square", "a_median_us"] == pytest.approx(266.981, abs=1e-3)


def test_cpu_runs_time_the_host_on_every_backend(cpu_runs):
    # a CPU run times the host whatever its backend said it would time on a GPU; under a profiler
    # the host's times hold the profiler's cost too, so each profiler's are a measure of their own
    # (torch-trace's once read mul +197% "slower" than time's on the same CPU)
    from orchestrator import backends
    from orchestrator.loading import load_run

    run = load_run(cpu_runs / "big", write=False)
    want = {
        "time": "host",
        "nsys": "host-nsys",
        "torch-trace": "host-torch-trace",
        "proton": "host-proton",
        "program": "host-nsys",
    }
    for name, measure in want.items():
        assert set(backends.get(name).measures(run.workload, run.frame).values()) == {measure}, name


def test_cpu_time_and_torch_trace_are_not_the_same_measure(cpu_runs):
    # time's bare host clock against torch.profiler's host times, which hold its recording of each
    # op: refused (exit 2), not called a slowdown of the code
    trace = cpu_runs / "trace"
    res = run_cli(
        "torch-trace",
        "square",
        "--device",
        "cpu",
        "--size",
        "1e6",
        "--iters",
        "5",
        "-v",
        "torch_square,mul,numba",
        "-o",
        str(trace),
    )
    assert res.returncode == 0, res.stderr
    big = cpu_runs / "big"
    res = run_cli("compare", str(big), str(trace))
    assert res.returncode == 2, res.stdout
    assert (
        "what the medians time (torch_square, mul): A host, the host's wall-clock time per call, no profiler "
        "attached; B host-torch-trace, the host's wall-clock time per call under torch.profiler"
    ) in res.stderr
    assert (
        "hint: on the CPU every backend times the host, and only `time` without a profiler's cost"
        in res.stderr
    )
    assert "slower" not in res.stdout + res.stderr and "Traceback" not in res.stderr
    res = run_cli("compare", str(big), str(trace), "--allow-mismatch")
    assert res.returncode == 0, res.stderr
    assert "warning: compared despite a mismatch: what the medians time (torch_square, mul)" in res.stdout
    assert "their medians time the same thing" not in res.stdout
    # one profiler's runs against each other: the same measure
    res = run_cli("compare", str(trace), str(trace))
    assert res.returncode == 0 and "what the medians time" not in res.stdout, res.stderr


def test_another_gpu_compares_pct_of_peak_bandwidth(h200_run, tmp_path):
    a = h200_run("time-square")
    b = _edit_workload(
        _copy(a, tmp_path / "b"),
        # a GPU whose memory could move what the H200 moved (against an A100's 2.039 TB/s the same
        # 4146 GB/s would be impossible: tests/test_integrity.py)
        env={"device_name": "NVIDIA B200", "peak_bandwidth_bytes_per_s": 8.0e12},
    )
    table, _, _ = api.compare(a, b)
    t = table.set_index("variant")
    assert t.loc["mul", "a_pct_of_peak_bw"] == pytest.approx(86.3, abs=0.1)
    assert t.loc["mul", "b_pct_of_peak_bw"] / t.loc["mul", "a_pct_of_peak_bw"] == pytest.approx(4.8 / 8.0)
    assert t.loc["mul", "peak_bw_change_pct"] == pytest.approx((4.8 / 8.0 - 1) * 100)
    res = run_cli("compare", str(a), str(b))
    assert res.returncode == 0, res.stderr
    assert (
        "different GPUs: A ran on NVIDIA H200, B on NVIDIA B200: % of peak bandwidth" in res.stdout
        and "A % peak BW" in res.stdout
        and "B % peak BW" in res.stdout
    )
    # the same GPU: time only
    assert "a_pct_of_peak_bw" not in api.compare(a, a)[0].columns


def test_a_single_run_is_matched_to_the_sweep_point_of_its_size(h200_run, tmp_path):
    sweep = h200_run("sweep-triton-mean")
    point = _copy(sweep / "10000000-float32", tmp_path / "point")
    table, _, _ = api.compare(sweep, point)
    assert set(table["numel"]) == {10000000} and set(table["dtype"]) == {"float32"}
    assert list(table["variant"]) == ["torch_mean", "triton_lecture", "triton_fast"]
    assert (table["ratio_b_over_a"] == 1.0).all()  # the point against itself, not 1e6 against 1e7
    table, _, _ = api.compare(point, sweep)
    assert (table["ratio_b_over_a"] == 1.0).all()
    assert (
        f"{point} is one run: compared with the sweep's point of its size and dtype (size 10000000 float32)"
        in table.attrs["notes"]
    )
    # a size the sweep did not run: refused, even with --allow-mismatch
    other = _edit_workload(_copy(point, tmp_path / "other"), numel=5000000, shape=[5000000])
    for extra in ([], ["--allow-mismatch"]):
        res = run_cli("compare", str(sweep), str(other), *extra)
        assert res.returncode == 2 and "no point of the same size and dtype" in res.stderr, res.stderr
        assert "size 5000000 float32" in res.stderr


def test_sweeps_compare_point_by_point(h200_run, tmp_path):
    a = h200_run("sweep-triton-mean")
    table, _, _ = api.compare(a, a)
    assert list(table["numel"].unique()) == [1000000, 10000000, 100000000] and len(table) == 9
    b = _copy(a, tmp_path / "b")
    shutil.rmtree(b / "1000000-float32")
    res = run_cli("compare", str(a), str(b))
    assert res.returncode == 2 and "only " in res.stderr and "size 1000000 float32" in res.stderr
    res = run_cli("compare", str(a), str(b), "--allow-mismatch", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {r["numel"] for r in doc["variants"]} == {10000000, 100000000}
    assert any(n.startswith("warning: compared despite a mismatch: only ") for n in doc["meta"]["notes"])
    res = run_cli("compare", str(a), str(b), "--allow-mismatch", "--fail-if-slower", "5")
    assert res.returncode == 2 and "--fail-if-slower does not judge runs that differ: only " in res.stderr


@pytest.mark.parametrize("pct", ["nan", "inf", "-1"])
def test_fail_if_slower_takes_a_finite_number_at_least_zero(h200_run, pct):
    a = h200_run("time-square")
    res = run_cli("compare", str(a), str(a), "--fail-if-slower", pct)
    assert res.returncode == 2 and "not a finite number >= 0" in res.stderr and "Traceback" not in res.stderr


def test_a_variant_lost_in_b_is_missing_not_a_mismatch(h200_run, tmp_path):
    # B's numba was skipped (no clock recorded): a gate fails on it as lost (exit 1), not refuses
    # the runs as timing different things (exit 2)
    a = h200_run("time-square-kernel-clock", "h100")
    b = _copy(a, tmp_path / "b")
    w = json.loads((b / "workload.json").read_text())
    numba = next(v for v in w["variants"] if v["name"] == "numba")
    for key in [k for k in numba if k.endswith("_samples_ns") or k == "time_clock"]:
        del numba[key]
    numba["status"] = "skipped"
    (b / "workload.json").write_text(json.dumps(w))
    res = run_cli("compare", str(a), str(b), "--fail-if-slower", "5")
    assert res.returncode == 1, res.stderr
    assert (
        "measured in A, not in B: numba: skipped in B" in res.stderr
        and "what the medians time" not in res.stderr
    )


def test_proton_times_kernels_without_memsets(h200_run):
    # torch.mean's memset is in nsys's median, not in proton's: once read 13% "faster"
    nsys = h200_run("nsys-triton-mean-1e6", "h200-proton")
    proton = h200_run("proton-triton-mean", "h200-proton")
    res = run_cli("compare", str(nsys), str(proton))
    assert (
        res.returncode == 2
        and "B kernels-only, the GPU time of the variant's own kernels per call, memsets and copies left out"
        in res.stderr
    ), res.stderr
    assert "their medians time the same thing" not in res.stdout


def test_a_captured_range_without_gpu_work_times_the_host(h200_run):
    # exec-train's forward and optimizer hold no GPU work (nsys lost the main thread's launches
    # under CUDA 13), so their times are wall times, taken under nsys; step and backward hold the
    # kernels autograd's thread launched inside them; exec-train-steady's hold their kernels
    from orchestrator import backends
    from orchestrator.loading import load_run

    lost, steady = h200_run("exec-train", "h200-programs"), h200_run("exec-train-steady", "h200-programs")
    wall = {"forward": "host-nsys", "optimizer": "host-nsys"}
    for folder, want in ((lost, wall), (steady, {})):
        run = load_run(folder, write=False)
        assert backends.get("program").measures(run.workload, run.frame) == {
            v: want.get(v, "kernels") for v in ("step", "forward", "backward", "optimizer")
        }
    # and nsys said it lost events there: its rows are incomplete, no result to set against B's
    res = run_cli("compare", str(lost), str(steady), "--allow-mismatch")
    assert res.returncode != 0 and "the runs share no variant that ran" in res.stderr
