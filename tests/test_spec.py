"""One run spec: the parent settles every option of the runner child once (request.resolve_spec),
writes it as spec.json into the run folder, and --dry-run prints it; nothing mutates a request."""

import json
import subprocess
import sys
from dataclasses import FrozenInstanceError

import pytest
from conftest import REPO

from orchestrator import backends, envinfo
from orchestrator.request import resolve_spec
from workloads.spec import SPEC_FILE, RunSpec

H200 = {"gpu": "NVIDIA H200", "driver": "580", "memory": "143771 MiB"}


def _spec(**kw):
    return backends.get(kw.get("backend", "time")).run_spec(backends.request(**kw))


def _dry_spec(output: str) -> dict:
    lines = [ln for ln in output.splitlines() if ln.startswith("# spec: ")]
    assert len(lines) == 1, output
    return json.loads(lines[0].removeprefix("# spec: "))


# -- resolution, in the parent --------------------------------------------------------------------


def test_the_default_shape_follows_the_device(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _spec(workload="square", device="cpu").shape == (1000, 1000)
    assert _spec(workload="square", device="cuda").shape == (10000, 10000)
    assert _spec(workload="square", device="cpu", size="2e3x10").shape == (2000, 10)
    # auto, settled the cheap way: nvidia-smi, never torch
    monkeypatch.setattr(envinfo, "nvidia_smi", lambda: H200)
    spec = _spec(workload="square")
    assert (spec.device, spec.shape) == (
        "cuda",
        (10000, 10000),
    ) and "nvidia-smi finds NVIDIA H200" in spec.device_reason
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    spec = _spec(workload="square")
    assert (spec.device, spec.shape) == ("cpu", (1000, 1000)) and "CUDA_VISIBLE_DEVICES" in spec.device_reason
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(envinfo, "nvidia_smi", lambda: None)
    spec = _spec(workload="square")
    assert (spec.device, spec.shape) == (
        "cpu",
        (1000, 1000),
    ) and "nvidia-smi finds no GPU" in spec.device_reason


def test_each_backend_puts_its_own_defaults_in_the_spec():
    time = _spec(workload="mean", device="cpu")
    assert (time.mode, time.iters, time.warmup, time.stop.max_noise_pct) == ("time", None, 10, 0.5)
    nsys = _spec(workload="mean", backend="nsys", device="cpu", variants=["sum_div_numel"])
    assert (nsys.mode, nsys.iters, nsys.warmup) == ("profile", 20, 3)
    assert nsys.variants == ("torch_mean", "sum_div_numel")  # the baseline always runs
    tt = _spec(workload="mean", backend="torch-trace", device="cpu", iters=4, warmup=0)
    assert (tt.mode, tt.iters, tt.warmup) == ("torch-trace", 4, 0)


def test_a_spec_says_what_its_run_flushes_and_holds():
    """A CPU run's spec said flush_l2 true and the blocking timer, which it never used."""
    cpu = _spec(workload="square", device="cpu", flush_l2=True, timer="sleep", gpu_sleep_us=500)
    assert (cpu.flush_l2, cpu.timer, cpu.gpu_sleep_us) == (False, "none", 0)
    nsys = _spec(workload="square", backend="nsys", device="cuda")  # profile mode holds nothing
    assert (nsys.flush_l2, nsys.timer, nsys.gpu_sleep_us) == (False, "none", 0)
    gpu = _spec(workload="square", device="cuda", timer="sleep", gpu_sleep_us=500)
    assert (gpu.flush_l2, gpu.timer, gpu.gpu_sleep_us) == (True, "sleep", 500)
    # what was asked and is off on the CPU stays, for the runner to say why
    asked = _spec(workload="square", device="cpu", cuda_graph=True, kernel_clock=True)
    assert (asked.cuda_graph, asked.kernel_clock) == (True, True)


def test_nothing_mutates_the_request():
    req = backends.request("square", "ncu", device="cpu", size="1e6", ncu_metrics=["a.sum,b.sum", "c.sum"])
    assert req.options.ncu_metrics == ("a.sum", "b.sum", "c.sum")  # one list of names from the start
    before = req.to_json()
    assert req.validate() is req and req.to_json() == before
    spec = resolve_spec(req, mode="profile", default_iters=3, default_warmup=3)
    assert req.to_json() == before and req.size == "1e6" and spec.shape == (1000000,)
    with pytest.raises(FrozenInstanceError):
        spec.shape = (1,)  # type: ignore[misc]


def test_the_spec_round_trips_through_json():
    spec = _spec(workload="square", device="cpu", size="4096", variants=["mul"])
    data = json.loads(json.dumps(spec.to_json()))
    assert "out" not in data and data["shape"] == [4096] and data["variants"] == ["torch_square", "mul"]
    assert RunSpec.from_json(data) == spec
    with pytest.raises(ValueError, match="unknown field"):
        RunSpec.from_json({**data, "size": "1e6"})
    with pytest.raises(ValueError, match="version"):
        RunSpec.from_json({**data, "version": 99})


def test_a_workload_files_default_shape_comes_from_its_listing(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text(
        "from workloads import Variant, Workload\n"
        "W = Workload('triple', 'x*3', [Variant('mul3', lambda a: a * 3)], reference=lambda x: x * 3,\n"
        "             bytes_moved=lambda n, s: 2 * n * s, cpu_default_shape=(777,))\n"
    )
    spec = _spec(workload="triple", device="cpu", workload_file=str(f))
    assert spec.shape == (777,) and spec.workload_file == str(f.resolve())


def test_resolving_imports_no_torch():
    code = (
        "import sys\nfrom orchestrator import backends\nfrom orchestrator.request import Request\n"
        "spec = backends.get('nsys').run_spec(Request(workload='square'))\n"
        "print(spec.shape, [m for m in ('torch', 'triton') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("[]"), out.stdout


# -- --dry-run and the run folder ----------------------------------------------------------------


def test_dry_run_prints_the_resolved_spec_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "r"
    res = cli("nsys", "square", "--device", "cpu", "--size", "1e6", "-v", "mul", "-o", str(out), "--dry-run")
    assert res.exit_code == 0, res.output
    assert f"-m workloads run --spec {out}/spec.json --out {out}" in res.output
    spec = _dry_spec(res.output)
    assert spec["shape"] == [1000000] and spec["variants"] == ["torch_square", "mul"]
    assert (spec["mode"], spec["iters"], spec["warmup"], spec["device"]) == ("profile", 20, 3, "cpu")
    assert not out.exists()
    res = cli("time", "mean", "--device", "cpu", "--dry-run")  # no --size: the default, shown
    assert res.exit_code == 0 and _dry_spec(res.output)["shape"] == [1000, 1000]


def test_the_run_folder_holds_the_spec_the_child_ran(tmp_path):
    from orchestrator import api

    out = tmp_path / "run"
    run = api.profile("mean", "time", device="cpu", iters=2, warmup=0, variants=["torch_mean"], out=out)
    assert run.status == "ok"
    spec = json.loads((out / SPEC_FILE).read_text())
    wman = json.loads((out / "workload.json").read_text())
    assert spec["shape"] == wman["shape"] == [1000, 1000] and spec["device"] == wman["device"] == "cpu"
    assert f"-m workloads run --spec {out}/spec.json --out {out}" in (out / "commands.sh").read_text()
    man = json.loads((out / "manifest.json").read_text())
    assert man["request"]["size"] is None  # as asked, not rewritten
    # what the spec says the run flushes and holds is what the runner did
    assert (spec["flush_l2"], spec["gpu_sleep_us"]) == (wman["flush_l2"], wman["gpu_sleep_us"]) == (False, 0)
    assert spec["timer"] == "none" and wman["hold"] is None
    # the recorded command reproduces the run from spec.json alone
    (out / "workload.json").unlink()
    again = subprocess.run(
        man["commands"][0]["argv"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "workload.json").read_text())["shape"] == [1000, 1000]


def test_each_point_of_a_sweep_has_its_own_spec(tmp_path):
    from orchestrator import api

    out = tmp_path / "sweep"
    api.sweep(
        "square", "time", ["100", "2e2"], [], device="cpu", iters=2, warmup=0, variants=["mul"], out=out
    )
    for name, shape in (("100-float32", [100]), ("200-float32", [200])):
        spec = json.loads((out / name / SPEC_FILE).read_text())
        assert spec["shape"] == shape and spec["variants"] == ["torch_square", "mul"]
        assert json.loads((out / name / "workload.json").read_text())["shape"] == shape
