"""The runner, in-process on the CPU: inputs, checks, skips, failures, samples, the trace."""

import json

import pytest

from workloads.errors import RunnerUsageError
from workloads.runner import RunSpec, run
from workloads.shapes import parse_shape


def _run(tmp_path, **kw):
    spec = RunSpec(out=tmp_path, device="cpu", iters=kw.pop("iters", 5), warmup=kw.pop("warmup", 1), **kw)
    rc = run(spec)
    return rc, json.loads((tmp_path / "workload.json").read_text())


def _by_name(man):
    return {v["name"]: v for v in man["variants"]}


@pytest.mark.parametrize("shape", [(1,), (7,), (1000,), (4097,), (33, 65)])
def test_every_cpu_variant_is_correct(tmp_path, shape):
    for wl in ("square", "mean"):
        rc, man = _run(tmp_path / wl, workload=wl, shape=shape)
        assert rc == 0 and man["status"] == "ok"
        for v in man["variants"]:
            if v["status"] == "ok":
                assert v["check"]["passed"] and v["check"]["rel_error"] < 1e-6
                assert len(v["time_samples_ns"]) == 5 and min(v["time_samples_ns"]) > 0


def test_skips_say_why(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    rc, man = _run(tmp_path, workload="square", shape=(100,))
    v = _by_name(man)
    assert v["numba"]["status"] == "skipped" and "CUDA" in v["numba"]["reason"]
    assert v["triton"]["status"] == "skipped" and "--triton-interpret" in v["triton"]["reason"]
    assert man["env"]["peak_bandwidth_bytes_per_s"] is None
    assert man["variants"][0]["bytes_moved"] == 800


def test_triton_through_the_interpreter(tmp_path):
    rc, man = _run(tmp_path, workload="triton-mean", shape=(64, 130), triton_interpret=True, iters=2)
    v = _by_name(man)
    assert rc == 0, man
    for name in ("triton_lecture", "triton_fast"):
        assert v[name]["status"] == "ok", v[name]
        assert v[name]["check"]["rel_error"] < 1e-5


def test_a_failing_variant_keeps_the_others(tmp_path):
    rc, man = _run(tmp_path, workload="mean", shape=(100,), fail_variant="tensor_mean")
    v = _by_name(man)
    assert rc == 1 and man["status"] == "failed"
    assert v["tensor_mean"]["status"] == "failed" and "injected failure" in v["tensor_mean"]["error"]
    assert "Traceback" in v["tensor_mean"]["traceback"]
    assert v["torch_mean"]["status"] == "ok" and v["sum_div_numel"]["status"] == "ok"


def test_wrong_result_fails_the_check(tmp_path):
    from workloads import registry
    from workloads.registry import Variant, Workload

    registry.register(
        Workload(
            "wrong",
            "",
            [Variant("good", lambda a: a * a), Variant("bad", lambda a: a * a + 1)],
            reference=lambda x: x * x,
            bytes_moved=lambda n, s: n,
        ),
        replace=True,
    )
    rc, man = _run(tmp_path, workload="wrong", shape=(50,))
    v = _by_name(man)
    assert rc == 1 and v["bad"]["status"] == "failed" and "relative error" in v["bad"]["error"]
    assert v["bad"]["check"]["passed"] is False and v["good"]["status"] == "ok"


def test_too_large_is_refused_before_allocating(tmp_path):
    with pytest.raises(RunnerUsageError, match="Choose a smaller --size"):
        _run(tmp_path, workload="square", shape=(10**7, 10**7))


def test_torch_trace_mode_writes_a_chrome_trace_with_our_labels(tmp_path):
    rc, man = _run(tmp_path, workload="mean", shape=(1000,), mode="torch-trace", iters=3)
    assert rc == 0 and man["trace"] == "trace.json"
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert names.count("variant:torch_mean") == 1 and names.count("iter") == 9


@pytest.mark.parametrize(
    "text,shape", [("1e8", (10**8,)), ("10000x10000", (10000, 10000)), ("4097", (4097,))]
)
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "abc", "10x0", ""])
def test_parse_shape_rejects(text):
    with pytest.raises(ValueError):
        parse_shape(text)


# -- the runner's command line: --spec, flag by flag, and no --out -------------------------------


def _runner(*args, cwd):
    """`python -m workloads run ARGS` in `cwd` (the checkout on the path: cwd is not it)."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "workloads", "run", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_without_out_it_is_a_usage_error_and_writes_nothing(tmp_path):
    res = _runner("mean", "--device", "cpu", "--size", "100", "--iters", "2", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "--out DIR is required" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # no workload.json in the current folder
    (tmp_path / "spec.json").write_text(json.dumps(RunSpec("mean", shape=(100,), device="cpu").to_json()))
    res = _runner("--spec", "spec.json", cwd=tmp_path)
    assert res.returncode == 2 and "--out DIR is required" in res.stderr


def test_spec_and_flags_run_the_same(tmp_path):
    spec = RunSpec(
        "mean", variants=("torch_mean",), shape=(100,), device="cpu", iters=2, warmup=0, mode="profile"
    )
    (tmp_path / "spec.json").write_text(json.dumps(spec.to_json()))
    res = _runner("--spec", "spec.json", "--out", "a", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = _runner(
        "mean",
        "--variants",
        "torch_mean",
        "--size",
        "100",
        "--device",
        "cpu",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--mode",
        "profile",
        "--out",
        "b",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    a, b = (json.loads((tmp_path / d / "workload.json").read_text()) for d in "ab")
    for key in ("workload", "shape", "dtype", "device", "iters", "warmup", "mode"):
        assert a[key] == b[key], key
    assert [v["name"] for v in a["variants"]] == [v["name"] for v in b["variants"]] == ["torch_mean"]


def test_a_spec_is_not_mixed_with_flags_nor_read_unchecked(tmp_path):
    (tmp_path / "spec.json").write_text(json.dumps({**RunSpec("mean").to_json(), "sizes": [1]}))
    res = _runner("--spec", "spec.json", "--out", "a", "--iters", "3", cwd=tmp_path)
    assert res.returncode == 2 and "give only --out with it, not --iters" in res.stderr
    res = _runner("--spec", "spec.json", "--out", "a", cwd=tmp_path)
    assert res.returncode == 2 and "unknown field(s) sizes" in res.stderr
    res = _runner("--spec", "nope.json", "--out", "a", cwd=tmp_path)
    assert res.returncode == 2 and "cannot read --spec nope.json" in res.stderr


def test_the_runner_settles_an_unresolved_spec_without_changing_it(tmp_path):
    spec = RunSpec("mean", variants=("torch_mean",), device="cpu", iters=2, warmup=0, out=tmp_path)
    assert run(spec) == 0
    assert spec.shape is None  # frozen: the runner settled a copy
    man = json.loads((tmp_path / "workload.json").read_text())
    assert man["shape"] == [1000, 1000] and man["device_reason"] == "asked for (--device cpu)"
    with pytest.raises(RunnerUsageError, match="--out"):
        run(RunSpec("mean", device="cpu"))


def test_kernel_clock_says_why_it_is_off(monkeypatch):
    """Where the kernel clock cannot be exact it is off, and says why (the manifest keeps it)."""
    from workloads import kernel_clock

    monkeypatch.setenv("GPROF_MARK_CALLS", "1")  # the same-loop check, under nsys
    clock, why = kernel_clock.open_clock()
    assert clock is None and "holds CUPTI" in why and "GPROF_MARK_CALLS" in why
    monkeypatch.delenv("GPROF_MARK_CALLS")
    monkeypatch.setenv("NSYS_PROFILING_SESSION_ID", "7")  # inside an nsys capture
    assert "NSYS_PROFILING_SESSION_ID" in kernel_clock.open_clock()[1]


class _Cupti:
    """Just enough of cupti-python's module for the kernel clock's bookkeeping on a CPU: a clock,
    the activity switches, and a flush that hands over the records a test queued (kinds as
    small ints, records with cupti-python's field names)."""

    class ActivityKind:
        RUNTIME, DRIVER, CONCURRENT_KERNEL, MEMSET, MEMCPY = range(5)

    def __init__(self):
        self.t, self.queued, self.enabled = 0, [], set()

    def get_timestamp(self):
        self.t += 10
        return self.t

    def activity_register_callbacks(self, requested, completed):
        self.completed = completed

    def activity_enable(self, kind):
        self.enabled.add(kind)

    def activity_disable(self, kind):
        self.enabled.discard(kind)

    def activity_flush_all(self, flag):
        queued, self.queued = self.queued, []
        self.completed(queued)


def test_kernel_clock_keeps_one_reading_per_call_across_batches():
    """Each window's GPU work, batch after batch: the records of API calls made inside a call's
    window (the call's launches) count, the flush's and the hold's (launched outside) do not.
    The clock of commit cbe45a1 kept only the first batch's windows (its wrapper appended to a
    list that take() had replaced): 10 readings for 31 samples on the H200."""
    from types import SimpleNamespace as R

    from workloads.kernel_clock import KernelClock

    cu = _Cupti()
    K = cu.ActivityKind
    clock = KernelClock(cu)
    assert cu.enabled == {K.RUNTIME, K.DRIVER, K.CONCURRENT_KERNEL, K.MEMSET, K.MEMCPY}
    corr = iter(range(1000))

    def launch(kind, ns):  # an API call now, and the GPU work it launched
        c = next(corr)
        t = cu.get_timestamp()
        cu.queued += [
            R(kind=K.RUNTIME, start=t, end=t + 1, correlation_id=c),
            R(kind=kind, start=10**6 + t, end=10**6 + t + ns, correlation_id=c),
        ]

    call = clock.window(lambda: (launch(K.MEMSET, 5), launch(K.CONCURRENT_KERNEL, 100)))
    got = []
    for batch in (3, 4):
        for _ in range(batch):
            launch(K.CONCURRENT_KERNEL, 7000)  # the L2 flush, before the window
            call()
        got += clock.take()
    assert got == [105.0] * 7
    clock.window(lambda: None)()  # a call that launches nothing
    assert clock.take() == [None]
    clock.close()
    assert not cu.enabled


def test_the_median_is_the_kernel_clocks_where_every_call_has_a_reading():
    """On the kernel clock the samples the median is taken from are each call's own GPU work, the
    events kept beside them; one call with no GPU work of its own sends the variant back to the
    events (its note says so), never a median over part of its calls."""
    from types import SimpleNamespace as R

    from workloads.kernel_clock import KernelClock
    from workloads.timed import Samples

    cu = _Cupti()
    K = cu.ActivityKind
    clock = KernelClock(cu)
    corr = iter(range(1000))

    def launch(ns):
        c, t = next(corr), cu.get_timestamp()
        cu.queued += [
            R(kind=K.DRIVER, start=t, end=t + 1, correlation_id=c),
            R(kind=K.CONCURRENT_KERNEL, start=10**6 + t, end=10**6 + t + ns, correlation_id=c),
        ]

    entry: dict = {}
    samples = Samples(entry, R(save=lambda: None), cuda=True, clock=clock)
    call = clock.window(lambda: launch(250))
    for _ in range(4):
        call()
        samples.add(900)
    samples.keep()
    assert entry["time_clock"] == "kernel" and entry["time_samples_ns"] == [250.0] * 4
    assert entry["cpu_samples_ns"] == [900] * 4 and samples.times is samples.kernel_ns
    clock.window(lambda: None)()  # a call that launched nothing
    samples.add(900)
    samples.keep()
    assert entry["time_clock"] == "events" and entry["time_samples_ns"] is samples.gpu_ns
    assert entry["kernel_samples_ns"] == [250.0] * 4 + [None]


def test_an_event_read_cut_off_by_an_interrupt_is_read_once():
    """SIGTERM (a KeyboardInterrupt here) while the events are read: the interrupt's own keep
    reads the rest, and none twice (the events read before it used to stay queued)."""
    from types import SimpleNamespace as R

    from workloads.timed import Samples

    entry: dict = {}
    samples = Samples(entry, R(save=lambda: None), cuda=True)
    reads = iter(range(1, 100))

    def elapsed_ms(start, end):
        n = next(reads)
        if n == 3:
            raise KeyboardInterrupt
        return end.ms

    samples._elapsed_ms = elapsed_ms
    for i in range(5):
        samples.add(1000, (R(ms=0.0), R(ms=float(i + 1), query=lambda: True)))
    with pytest.raises(KeyboardInterrupt):
        samples.keep(wait=False)
    samples.keep("interrupted", wait=False)
    assert entry["time_samples_ns"] == [1e6, 2e6, 3e6, 4e6, 5e6] and entry["status"] == "interrupted"


def test_the_check_reduces_in_slices_to_the_whole_norm(monkeypatch):
    # the check runs where the reference lies, a slice at a time; slices must not change it
    import torch

    from workloads import accuracy

    g = torch.Generator().manual_seed(1)
    ref = torch.randn(10_001, generator=g, dtype=torch.float64)
    out = (ref * (1 + 1e-3 * torch.randn(10_001, generator=g, dtype=torch.float64))).float()
    want = float(torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref))
    worst = float((out.double() - ref).abs().max())
    monkeypatch.setattr(accuracy, "CHUNK", 1000)  # ten full slices and one of one element
    found = accuracy.errors(out, ref)
    assert found["rel_error"] == pytest.approx(want, rel=1e-12)
    assert found["max_abs_error"] == pytest.approx(worst, rel=1e-12)
    assert found["max_rel_error"] == pytest.approx(worst / float(ref.abs().max()), rel=1e-12)
    assert accuracy.errors(out.reshape(73, 137), ref)["rel_error"] == pytest.approx(want, rel=1e-12)
    out[5000] = float("nan")
    assert accuracy.errors(out, ref) == {k: float("inf") for k in found}
    zeros = accuracy.errors(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
    assert zeros == {"rel_error": 0.0, "max_abs_error": 0.0, "max_rel_error": 0.0}
    with pytest.raises(ValueError, match="3 elements, the reference 4"):
        accuracy.errors(torch.zeros(3), torch.zeros(4, dtype=torch.float64))


def test_workload_json_says_where_the_runners_time_went(tmp_path):
    rc, man = _run(tmp_path, workload="square", shape=(1000,), variants=["mul", "pow"])
    assert rc == 0
    phases = man["phases_s"]
    assert list(phases) == ["start", "settle", "describe", "warm_up", "memory", "measure", "recheck", "total"]
    assert all(s >= 0 for s in phases.values())
    # the phases run back to back from run()'s start: together at most the process's total
    assert (
        sum(phases[k] for k in ("start", "settle", "describe", "warm_up", "memory", "measure", "recheck"))
        <= phases["total"] + 0.01
    )
    for v in _by_name(man).values():
        assert v["warm_up_s"] >= v["setup_s"] >= 0 and v["measure_s"] >= 0


def test_a_reference_that_raises_fails_the_run_and_says_whose_code_it_was(tmp_path):
    """A ValueError in the workload's own reference used to be a usage error (exit 2, the bare
    message, workload.json left `running`): it is the workload's failure (exit 1), marked."""
    from conftest import run_cli

    wfile = tmp_path / "refboom.py"
    wfile.write_text(
        "from workloads import Variant, Workload\n"
        "def ref(x):\n    raise ValueError('ref broke')\n"
        "w = Workload('rb', 'x', [Variant('v', lambda a: a * 3)], reference=ref,\n"
        "             bytes_moved=lambda n, i: 2 * n * i)\n"
    )
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "rb",
        "--workload-file",
        str(wfile),
        "--device",
        "cpu",
        "--iters",
        "3",
        "-o",
        str(out),
        env={"GPROF_NO_PROGRESS": "1"},
    )
    assert res.returncode == 1, res.stderr
    assert "workload rb: its reference raised ValueError: ref broke" in res.stderr
    assert "Traceback" not in res.stderr
    assert json.loads((out / "workload.json").read_text())["status"] == "failed"
