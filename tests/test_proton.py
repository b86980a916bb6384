"""The proton backend (Triton's profiler): its hatchet reader, its rows, its exact command, the
bridge from the runner's ranges to proton scopes, and, on the H200, real runs.

Without a GPU: the reader on small hatchet files of the shape proton 3.6 writes (its
TreeData::dumpHatchet) and on damaged ones; the bridge with a stand-in for triton.profiler, on
the real runner. The reader on real captures (tests/fixtures/runs/h200-proton/, made by
scripts/capture_proton_fixture.sh on the H200) is skipped until they are committed."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.backends import proton as pb
from orchestrator.errors import ParseError, ToolNotFoundError, UsageError
from orchestrator.parsers import proton as pr
from orchestrator.request import Request
from reports.schema import (
    ALL_KERNELS,
    ITERATIONS_IN_REPORT,
    NO_ACTIVITY,
    NOT_IN_REPORT,
    OUTSIDE,
    UNEVEN_LAUNCHES,
)
from reports.unify import RowMaker
from workloads import proton_child as pc

REPO = Path(__file__).resolve().parent.parent
H200_PROTON = REPO / "tests" / "fixtures" / "runs" / "h200-proton"
needs_capture = pytest.mark.skipif(
    not (H200_PROTON / "proton-triton-mean").is_dir(),
    reason="no H200 proton capture yet: run scripts/capture_proton_fixture.sh on the H200, then "
    "scripts/import_h200_runs.py proton-runs.tar.xz --dest tests/fixtures/runs/h200-proton",
)
AXPY = REPO / "tests" / "fixtures" / "workloads" / "proton_axpy.py"
# torch's mean kernel as CUPTI names it (mangled) and as c++filt / torch.profiler spell it
MANGLED = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffffEEjfLi4ELi4EEEEEvT1_"
DEMANGLED = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float, float, float>, unsigned int, float, 4, 4>)"
)


# -- hatchet files of proton's shape ------------------------------------------------------------


def frame(name, metrics=None, children=()):
    return {"frame": {"name": name, "type": "function"}, "metrics": metrics or {}, "children": list(children)}


def kernel(name, time_ns, count=1, **declared):
    return frame(
        name, {"time (ns)": time_ns, "count": count, "device_id": "0", "device_type": "CUDA", **declared}
    )


def iteration(i, *kernels, cpu=None):
    return frame(f"iter:{i}", {"cpu_time (ns)": cpu} if cpu is not None else {}, kernels)


DEVICES = {
    "CUDA": {
        "0": {
            "arch": "90",
            "num_sms": 132,
            "clock_rate": 1980000,
            "memory_clock_rate": 2619000,
            "bus_width": 6144,
        }
    }
}


def hatchet(*children):
    return [frame("ROOT", {"time (ns)": 0, "count": 0, "flops32": 0, "bytes": 0}, children), DEVICES]


def mean_profile():
    """Three variants, two iterations each, as the proton backend's child leaves them: a torch
    kernel (mangled), a Triton kernel with declared work, two kernels in one iteration frame."""
    return hatchet(
        kernel(MANGLED, 9000),  # warm-up, outside every variant
        frame(
            "variant:torch_mean",
            {},
            [iteration(0, kernel(MANGLED, 5000), cpu=20000), iteration(1, kernel(MANGLED, 5200), cpu=21000)],
        ),
        frame(
            "variant:triton_fast",
            {},
            [
                iteration(0, kernel("fast_mean_kernel", 3000, flops32=1000, bytes=4000), cpu=9000),
                iteration(
                    1,
                    kernel("fast_mean_kernel", 3100, flops32=1000, bytes=4000),
                    frame(pr.METADATA_FRAME, {}, [kernel("fill_kernel", 50, count=3)]),
                    cpu=9500,
                ),
            ],
        ),
        frame(
            "variant:two_kernels",
            {},
            [
                iteration(0, kernel("a", 1000, count=2), kernel("b", 500)),
                iteration(1, kernel("a", 1200, count=2), kernel("b", 700)),
            ],
        ),
    )


def write(tmp_path, data, name="proton.hatchet") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else "\n" + json.dumps(data, indent=4) + "\n")
    return p


def test_reader_finds_variants_iterations_and_kernels(tmp_path):
    prof = pr.read_profile(write(tmp_path, mean_profile()))
    assert prof.variants == ["torch_mean", "triton_fast", "two_kernels"]
    assert prof.devices["CUDA"]["0"]["num_sms"] == 132
    k = prof.kernels
    assert list(k.columns) == pr.KERNEL_COLUMNS
    outside = k[k["variant"].isna()]
    assert outside[["kernel", "iteration", "launches", "time_ns"]].values.tolist() == [
        [DEMANGLED, -1, 1, 9000.0]
    ]
    fast = k[k["variant"] == "triton_fast"]
    assert fast["kernel"].tolist() == ["fast_mean_kernel"] * 2 and fast["iteration"].tolist() == [0, 1]
    assert fast["flops32"].tolist() == [1000.0, 1000.0] and fast["bytes"].tolist() == [4000.0, 4000.0]
    assert math.isnan(fast["flops16"].iloc[0])
    assert fast["path"].iloc[1] == "variant:triton_fast / iter:1 / fast_mean_kernel"
    # the launch-metadata frame is dropped, its launches counted
    assert "fill_kernel" not in set(k["kernel"]) and prof.metadata_launches == 3
    two = k[k["variant"] == "two_kernels"]
    assert two.groupby("iteration")["launches"].sum().tolist() == [3, 3]
    it = prof.iterations.set_index(["variant", "iteration"])["cpu_time_ns"]
    assert it[("torch_mean", 1)] == 21000.0 and math.isnan(it[("two_kernels", 0)])


def test_reader_takes_compressed_files(tmp_path):
    import lzma

    p = tmp_path / "proton.hatchet.xz"
    p.write_bytes(lzma.compress(json.dumps(mean_profile()).encode()))
    assert len(pr.read_profile(p).kernels) == 9


def test_demangle():
    assert pr.demangle(MANGLED) == DEMANGLED
    assert pr.demangle("fast_mean_kernel") == "fast_mean_kernel"
    assert pr.demangle("_Znot-a-name") == "_Znot-a-name"


@pytest.mark.parametrize(
    "content,reason",
    [
        ("", "not JSON"),
        ('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [{"fra', "not JSON"),
        ("{}", "not a proton hatchet profile"),
        ("[1, {}]", "not a proton hatchet profile"),
        ('[{"frame": {"name": "ROOT"}, "children": []}, 7]', "second element"),
        (hatchet(frame("variant:a", {}, [{"metrics": {}}])), 'has no "frame"'),
        (hatchet(frame("variant:a", {}, ["x"])), "is str, not a frame"),
        (hatchet(frame("variant:a", {}, [frame("k", {"time (ns)": 5})])), "has no 'count'"),
        (hatchet(frame("variant:a", {}, [frame("k", {"count": 1})])), "has no 'time (ns)'"),
        (hatchet(kernel("k", -5)), "time (ns) is -5"),
        (hatchet(kernel("k", "5")), "time (ns) is '5'"),
        (hatchet(kernel("k", 5, count=0)), "count is 0"),
        (hatchet(kernel("k", 5, count=1.5)), "count is 1.5"),
        (hatchet(kernel("k", 5, bytes="many")), "bytes is 'many'"),
        (hatchet({"frame": {"name": "variant:a"}, "metrics": [], "children": []}), "metrics of type list"),
        (hatchet({"frame": {"name": "variant:a"}, "metrics": {}, "children": {}}), "children of type dict"),
    ],
)
def test_damaged_profiles_are_parse_errors(tmp_path, content, reason):
    p = write(tmp_path, content)
    with pytest.raises(ParseError) as e:
        pr.read_profile(p)
    assert reason in str(e.value) and str(p) in str(e.value)


def test_missing_profile(tmp_path):
    with pytest.raises(ParseError, match="no such file"):
        pr.read_profile(tmp_path / "proton.hatchet")


def test_negative_declared_work_is_left_out_and_said(tmp_path):
    prof = pr.read_profile(write(tmp_path, hatchet(kernel("k", 5, bytes=-8))))
    assert math.isnan(prof.kernels["bytes"].iloc[0])
    assert prof.notes == ["kernel k declares bytes -8 (an overflow in its launch_metadata?): left out"]


# -- the unified rows ---------------------------------------------------------------------------


def wman(*names, iters=2, status="ok"):
    return {
        "workload": "w",
        "iters": iters,
        "variants": [{"name": n, "status": status, "bytes_moved": 8, "label": n} for n in names],
    }


def rows_of(frame_, variant, metric, kernel=ALL_KERNELS):
    sel = frame_[(frame_["variant"] == variant) & (frame_["metric"] == metric) & (frame_["kernel"] == kernel)]
    return sel["value"].tolist()


def build(tmp_path, data, manifest):
    prof = pr.read_profile(write(tmp_path, data))
    return pr.frame_from_profile(prof, RowMaker("r", "proton", "w"), manifest)


def test_rows_per_iteration_per_kernel_and_declared(tmp_path):
    f = build(tmp_path, mean_profile(), wman("torch_mean", "triton_fast", "two_kernels"))
    assert rows_of(f, "torch_mean", "time_ns") == [5000.0, 5200.0]
    assert rows_of(f, "torch_mean", "cpu_time_ns") == [20000.0, 21000.0]
    assert rows_of(f, "torch_mean", "kernel_time_ns", DEMANGLED) == [5000.0, 5200.0]
    assert rows_of(f, "triton_fast", "time_ns") == [3000.0, 3100.0]
    assert rows_of(f, "triton_fast", "declared_flops32", "fast_mean_kernel") == [2000.0]
    assert rows_of(f, "triton_fast", "declared_bytes", "fast_mean_kernel") == [8000.0]
    assert f.loc[f["metric"] == "declared_bytes", "unit"].tolist() == ["bytes"]
    # two launches in one frame: two samples of their mean; time per iteration is the sum
    assert rows_of(f, "two_kernels", "time_ns") == [1500.0, 1900.0]
    assert rows_of(f, "two_kernels", "kernel_time_ns", "a") == [500.0, 500.0, 600.0, 600.0]
    assert rows_of(f, "two_kernels", "cpu_time_ns") == []  # no cpu_time in its scopes
    assert rows_of(f, OUTSIDE, "kernel_time_ns", DEMANGLED) == [9000.0]
    assert not f["metric"].isin([NOT_IN_REPORT, UNEVEN_LAUNCHES, ITERATIONS_IN_REPORT]).any()


def test_rows_flag_what_the_profile_lacks(tmp_path):
    data = hatchet(
        frame("variant:short", {}, [iteration(0, kernel("k", 10))]),  # 1 of 2
        frame("variant:uneven", {}, [iteration(0, kernel("k", 10)), iteration(1, kernel("k", 10, count=2))]),
        frame(
            "variant:stray",
            {},
            [iteration(0, kernel("k", 10)), iteration(1, kernel("k", 10)), kernel("k", 10)],
        ),
    )  # outside iter
    f = build(tmp_path, data, wman("short", "uneven", "stray", "gone"))
    assert rows_of(f, "short", ITERATIONS_IN_REPORT) == [1.0]
    assert rows_of(f, "uneven", UNEVEN_LAUNCHES) == [3.0]
    assert rows_of(f, "stray", UNEVEN_LAUNCHES) == [3.0]
    assert rows_of(f, "gone", NOT_IN_REPORT) == [float(NO_ACTIVITY)]
    assert not f["metric"].eq("time_ns").any()
    assert len(rows_of(f, "uneven", "kernel_time_ns", "k")) == 3  # the launches are still listed


def test_stopped_variants_keep_their_kernels_but_no_times(tmp_path):
    f = build(tmp_path, mean_profile(), wman("torch_mean", status="failed"))
    assert set(f["variant"]) == {OUTSIDE, "torch_mean"}
    assert rows_of(f, "torch_mean", "kernel_time_ns", DEMANGLED) == [5000.0, 5200.0]
    assert rows_of(f, "torch_mean", "time_ns") == []
    skipped = build(tmp_path, mean_profile(), wman("torch_mean", status="skipped"))
    assert set(skipped["variant"]) == {OUTSIDE}


# -- the backend: command, check --------------------------------------------------------------


def test_command_is_the_runner_under_the_bootstrap(tmp_path):
    req = Request(workload="triton-mean", backend="proton", size="1000000")
    (step,) = pb.ProtonBackend().commands(req, tmp_path)
    assert step.name == "workload" and step.ok_codes == (0, 1)
    assert step.env == {"TRITON_ENABLE_NVTX": "0"}
    assert step.argv == [
        sys.executable,
        "-m",
        "workloads.proton_child",
        str(tmp_path / "proton"),
        "-m",
        "workloads",
        "run",
        "--spec",
        str(tmp_path / "spec.json"),
        "--out",
        str(tmp_path),
    ]
    spec = pb.ProtonBackend().run_spec(req)  # what spec.json holds: proton's defaults, the size as a shape
    assert (spec.mode, spec.iters, spec.warmup, spec.shape, spec.dtype) == (
        "profile",
        20,
        3,
        (1000000,),
        "float32",
    )


def test_dry_run_shows_the_child_module(tmp_path):
    from conftest import run_cli

    res = run_cli("proton", "mean", "--dry-run", "-o", str(tmp_path / "a"))
    assert res.returncode == 0, res.stderr
    (command,) = [line for line in res.stdout.splitlines() if "proton_child" in line]
    assert command.startswith(f"TRITON_ENABLE_NVTX=0 {sys.executable} -m workloads.proton_child ")
    assert " -m workloads run --spec " in command and "orchestrator" not in command


def test_backend_declares_its_command_and_merged_column():
    from orchestrator import backends

    b = backends.backend_class("proton")
    assert b is pb.ProtonBackend and backends.commands()["proton"]
    assert (b.name, b.mode, b.needs_gpu, b.merged.column, b.merged.header, b.merged.on_cpu) == (
        "proton",
        "profile",
        True,
        "proton_us",
        "proton us",
        None,
    )
    assert b.cli_options() == [] and b.merged.reason and b.help and b.description


def test_check_and_require_say_why_not(monkeypatch):
    from orchestrator import envinfo

    b = pb.ProtonBackend()
    monkeypatch.setattr(envinfo, "nvidia_smi", lambda: None)
    if pb.find_proton()[0] is not None:
        assert "needs an NVIDIA GPU" in b.check().detail and not b.check().ok
        with pytest.raises(ToolNotFoundError, match="needs an NVIDIA GPU"):
            b.require(Request(workload="mean", backend="proton"))
    with pytest.raises((UsageError, ToolNotFoundError)):
        b.require(Request(workload="mean", backend="proton", device="cpu"))
    monkeypatch.setattr(envinfo, "nvidia_smi", lambda: {"gpu": "NVIDIA H200", "driver": "580", "memory": "1"})
    cpu = b.check(Request(workload="mean", backend="proton", device="cpu"))
    if pb.find_proton()[0] is not None:
        assert not cpu.ok and "--device cpu" in cpu.detail
        assert b.check().ok
        with pytest.raises(UsageError, match="--triton-interpret"):
            b.require(Request(workload="mean", backend="proton", triton_interpret=True))
    monkeypatch.setattr(pb, "find_proton", lambda: (None, "triton is not installed"))
    assert b.check() == pb.Availability(False, "triton is not installed")
    with pytest.raises(ToolNotFoundError, match="triton is not installed"):
        b.require(Request(workload="mean", backend="proton"))


def test_cli_says_why_it_cannot_run_here(tmp_path):
    from conftest import HAS_CUDA, run_cli

    res = run_cli("proton", "mean", "--device", "cpu", "-o", str(tmp_path / "a"))
    assert res.returncode == 2 and "not with --device cpu" in res.stderr, res.stderr
    assert not (tmp_path / "a").exists()  # refused before a run folder is made
    if not HAS_CUDA and pb.find_proton()[0] is not None:
        res = run_cli("proton", "mean", "-o", str(tmp_path / "b"))
        assert res.returncode == 3 and "needs an NVIDIA GPU" in res.stderr, res.stderr


# -- the bridge ---------------------------------------------------------------------------------


class FakeProton:
    """triton.profiler's scope API as the bridge and the child (workloads.proton_child.main) use
    it: records what is done, and at finalize() writes a hatchet file of the scopes entered, one kernel `fake_kernel` of
    (n + 1) us and 5 us of host time in each iteration scope iter:<n>."""

    def __init__(self, fail_start=False):
        self.events, self.fail_start, self.session = [], fail_start, None
        self.root = frame("ROOT", {"time (ns)": 0, "count": 0})
        self.stack = [self.root]

    def _scope(self, kind):
        fake = self

        class Scope:
            def __init__(self, name):
                self.name = name

            def __enter__(self):
                fake.events.append(("enter", kind, self.name))
                node = frame(self.name)
                if kind == "cpu_timed_scope":
                    node["children"].append(kernel("fake_kernel", 1000 * (int(self.name.split(":")[1]) + 1)))
                    node["metrics"]["cpu_time (ns)"] = 5000
                fake.stack[-1]["children"].append(node)
                fake.stack.append(node)

            def __exit__(self, *exc):
                fake.events.append(("exit", kind, self.name))
                fake.stack.pop()

        return Scope

    @property
    def scope(self):
        return self._scope("scope")

    @property
    def cpu_timed_scope(self):
        return self._scope("cpu_timed_scope")

    def start(self, name, **kw):
        if self.fail_start:
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
        self.session = (name, kw)
        return 0

    def finalize(self):
        self.events.append(("finalize",))
        if self.session:
            Path(self.session[0] + ".hatchet").write_text(json.dumps([self.root, DEVICES]))
            Path(self.session[0] + ".events.json").write_text(json.dumps([self.session, self.events]))


def test_bridge_marks_variants_and_iterations():
    proton = FakeProton()
    bridge = pc.ScopeBridge(proton)
    for v in ("a", "b"):
        with bridge.variant("variant:" + v):
            for _ in range(2):
                with bridge.iteration():
                    pass
    assert proton.events == [
        ("enter", "scope", "variant:a"),
        ("enter", "cpu_timed_scope", "iter:0"),
        ("exit", "cpu_timed_scope", "iter:0"),
        ("enter", "cpu_timed_scope", "iter:1"),
        ("exit", "cpu_timed_scope", "iter:1"),
        ("exit", "scope", "variant:a"),
        ("enter", "scope", "variant:b"),
        ("enter", "cpu_timed_scope", "iter:0"),
        ("exit", "cpu_timed_scope", "iter:0"),
        ("enter", "cpu_timed_scope", "iter:1"),
        ("exit", "cpu_timed_scope", "iter:1"),
        ("exit", "scope", "variant:b"),
    ]


def test_child_says_when_proton_cannot_start():
    with pytest.raises(SystemExit) as e:
        pc.main(["/tmp/x/proton", "-m", "workloads", "run", "mean"], profiler=FakeProton(fail_start=True))
    assert e.value.code == 3


def test_child_refuses_a_bad_command_line(capsys):
    with pytest.raises(SystemExit) as e:
        pc.main(["/tmp/x/proton", "run", "mean"], profiler=FakeProton())
    assert e.value.code == 2
    assert "usage: python -m workloads.proton_child SESSION -m workloads run" in capsys.readouterr().err


def test_child_imports_nothing_of_the_parent():
    # the child is workloads/: it imports neither orchestrator nor reports (docs/architecture.md)
    code = (
        "import workloads.proton_child, sys; "
        "assert not any(m.startswith(('orchestrator', 'reports')) for m in sys.modules), "
        "sorted(m for m in sys.modules if m.startswith(('orchestrator', 'reports')))"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


# the backend's own command on the CPU, the child module given FakeProton for proton: the real
# runner marks its variants and iterations through profiled.observe, the profile lands where
# parse() reads it, and the report builds from it
FAKE_CHILD = f"""
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
from test_proton import FakeProton
from workloads.proton_child import main
main(profiler=FakeProton())
"""


def test_backend_runs_the_real_runner_under_the_bridge(tmp_path):
    from orchestrator import proc
    from orchestrator.api import build_report
    from orchestrator.runfolder import RunFolder

    b = pb.ProtonBackend()
    req = Request(workload="mean", backend="proton", device="cpu", size="1000", iters=3, warmup=1)
    rf = RunFolder.create("proton", "mean", out=tmp_path / "run")
    (step,) = b.commands(req, rf.path.resolve())
    assert step.argv[1:3] == ["-m", "workloads.proton_child"]
    step.argv[1:3] = ["-c", FAKE_CHILD]
    res = proc.run(step.argv, log_dir=rf.logs, name=step.name, env=step.env, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.tail(40)
    b.after_step(step, res, rf)
    session, recorded = json.loads((rf.path / "proton.events.json").read_text())
    assert session == [
        str(rf.path.resolve() / "proton"),
        {"context": "shadow", "data": "tree", "backend": "cupti", "hook": "triton"},
    ]
    ran = ["torch_mean", "tensor_mean", "sum_div_numel"]
    expected = []
    for v in ran:
        expected.append(["enter", "scope", f"variant:{v}"])
        for i in range(3):
            expected += [["enter", "cpu_timed_scope", f"iter:{i}"], ["exit", "cpu_timed_scope", f"iter:{i}"]]
        expected.append(["exit", "scope", f"variant:{v}"])
    assert recorded == expected + [["finalize"]]
    run = build_report(rf, write=False)
    t = run.table.set_index("variant")
    assert list(t.index) == ran and (t["status"] == "ok").all()
    assert (t["time_median_us"] == 2.0).all()  # iterations of 1, 2 and 3 us
    for v in ran:
        assert rows_of(run.frame, v, "kernel_time_ns", "fake_kernel") == [1000.0, 2000.0, 3000.0]
        assert rows_of(run.frame, v, "cpu_time_ns") == [5000.0] * 3


def test_no_profile_is_a_tool_failure(tmp_path):
    from orchestrator import proc
    from orchestrator.errors import ToolFailedError
    from orchestrator.runfolder import RunFolder

    rf = RunFolder.create("proton", "mean", out=tmp_path / "run")
    step = pb.Step("workload", [sys.executable, "-c", "pass"], ok_codes=(0, 1))
    res = proc.run(step.argv, log_dir=rf.logs, name=step.name)
    with pytest.raises(ToolFailedError, match=r"proton wrote no profile \(proton.hatchet\)"):
        pb.ProtonBackend().after_step(step, res, rf)


# -- the fixture workload -----------------------------------------------------------------------


def _axpy_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("proton_axpy_fixture", AXPY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_axpy_declares_its_work():
    import torch

    mod = _axpy_module()
    assert mod.declared((4,), None, {"x_ptr": torch.empty(10), "n": 10}) == {"flops32": 20, "bytes": 80}
    assert mod.declared((4,), None, {"x_ptr": torch.empty(10, dtype=torch.float16), "n": 10}) == {
        "flops16": 20,
        "bytes": 40,
    }
    (w,) = mod.WORKLOADS
    assert [v.name for v in w.variants] == ["torch_two_ops", "triton_axpy"]


# -- real captures (H200) -----------------------------------------------------------------------


@needs_capture
def test_h200_triton_mean(h200_run):
    """Once captured: every variant ok with one `time_ns` and one `cpu_time_ns` sample per
    iteration, the sum of its kernels' samples; torch.mean's reduce kernel, the fast Triton
    kernel, the lecture's kernel and the torch mean of its row means, one launch an iteration
    each (proton records no memset); the device is the H200 (arch 90)."""
    from orchestrator import load_run

    run = load_run(h200_run("proton-triton-mean", "h200-proton"), write=False)
    assert run.status == "ok" and run.workload["env"]["device_name"] == "NVIDIA H200"
    f, n = run.frame, int(run.workload["iters"])
    table = run.table.set_index("variant")
    reduce = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float"
    kernels = {
        "torch_mean": [reduce],
        "triton_fast": ["fast_mean_kernel"],
        "triton_lecture": ["lecture_row_mean_kernel", reduce],
    }
    for variant, names in kernels.items():
        assert table.loc[variant, "status"] == "ok" and table.loc[variant, "time_median_us"] > 0
        times = rows_of(f, variant, "time_ns")
        assert len(times) == n and len(rows_of(f, variant, "cpu_time_ns")) == n
        k = f[(f["variant"] == variant) & (f["metric"] == "kernel_time_ns")]
        launches = k.groupby("kernel", sort=False).size()
        assert len(launches) == len(names) and (launches == n).all(), launches
        for name in names:
            assert any(kn.startswith(name) for kn in launches.index), (name, list(launches.index))
        assert math.isclose(k["value"].sum(), sum(times), rel_tol=1e-9)
    prof = pr.read_profile(run.path / pr.HATCHET)
    assert prof.devices["CUDA"]["0"]["arch"] == "90"
    assert prof.metadata_launches == 0


@needs_capture
def test_h200_axpy_declared_work(h200_run):
    """Once captured: the Triton kernel carries its launch metadata's FLOPs (2 a element, at 32
    bits) and bytes (8 a element), summed over the iterations; the two torch ops, two kernels of
    one launch an iteration each and nothing declared."""
    from orchestrator import load_run

    run = load_run(h200_run("proton-axpy", "h200-proton"), write=False)
    f, n = run.frame, int(run.workload["iters"])
    numel = int(run.workload["numel"])
    assert rows_of(f, "triton_axpy", "declared_flops32", "axpy_kernel") == [2.0 * numel * n]
    assert rows_of(f, "triton_axpy", "declared_bytes", "axpy_kernel") == [8.0 * numel * n]
    two = f[(f["variant"] == "torch_two_ops") & (f["metric"] == "kernel_time_ns")]
    assert two["kernel"].nunique() == 2 and len(two) == 2 * n
    assert f[(f["variant"] == "torch_two_ops") & f["metric"].astype(str).str.startswith("declared_")].empty


@needs_capture
def test_h200_proton_agrees_with_nsys(h200_run):
    """Once captured: per variant, proton's kernel time per iteration (the sum of its kernels'
    durations over the iterations) within 25% of nsys's (both read CUPTI kernel records; same
    session, same size; nsys's memsets left out, proton records none)."""
    from orchestrator import load_run

    if not (H200_PROTON / "nsys-triton-mean-1e6").is_dir():
        pytest.skip("no nsys run in the capture (nsys was missing on the H200)")
    proton = load_run(h200_run("proton-triton-mean", "h200-proton"), write=False)
    nsys = load_run(h200_run("nsys-triton-mean-1e6", "h200-proton"), write=False)

    def per_iteration(run, variant):
        f = run.frame
        k = f[(f["variant"] == variant) & (f["metric"] == "kernel_time_ns")]
        return k["value"].sum() / int(run.workload["iters"])

    for v in ("torch_mean", "triton_lecture", "triton_fast"):
        p, q = per_iteration(proton, v), per_iteration(nsys, v)
        assert abs(p - q) <= 0.25 * q, (v, p, q)


# -- on a GPU -----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_proton_end_to_end_on_the_gpu(tmp_path):
    from orchestrator import profile

    run = profile("triton-mean", "proton", size="1e6", iters=5, out=tmp_path / "mean")
    assert run.status == "ok" and (run.path / pr.HATCHET).is_file()
    f = run.frame
    for v in ("torch_mean", "triton_lecture", "triton_fast"):
        assert len(rows_of(f, v, "time_ns")) == 5, v
    axpy = profile(
        "proton-axpy", "proton", size="1e6", iters=5, workload_file=str(AXPY), out=tmp_path / "axpy"
    )
    assert rows_of(axpy.frame, "triton_axpy", "declared_flops32", "axpy_kernel") == [2.0 * 1e6 * 5]
