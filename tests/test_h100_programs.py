"""A user's PyTorch programs profiled, unchanged, with the plain `gprof-orch exec nsys` (Nsight
Systems 2024.2.3) and `exec ncu` on an H100 (tests/fixtures/runs/h100-programs, see its README):
every range with every kernel, equal to nsys's own nvtx_kern_sum."""

import shutil

import pytest
from test_h200_programs import _kernels_per_variant, _nvtx_kern_sum, _t

from orchestrator import import_capture, load_run

NESTED = {"step": [15, 324002], "fwd": [10, 295489], "reduce": [5, 28513]}
# by thread (--attribute thread), as nvtx_kern_sum counts: backward holds only the main thread's
# launch; by window (the default) also the 280 kernels autograd's thread launched inside it
TRAIN = {
    "step": [352, 4119779],
    "forward": [160, 1637870],
    "backward": [20, 20161],
    "optimizer": [172, 2461748],
}
TRAIN_WINDOW = {**TRAIN, "step": [632, 5951222], "backward": [300, 1851604]}


def test_the_plain_exec_nsys_reports_every_range_of_a_pytorch_program(h200_run):
    """The command the README's first `exec` example reads, on nested torch.cuda.nvtx ranges: it
    printed one row (`step`, no GPU work) with exit 0 under nsys 2023.4.4."""
    run = load_run(h200_run("exec-nested-steps", "h100-programs"))
    t = _t(run)
    assert list(t.index) == ["step", "fwd", "reduce"] and (t["status"] == "ok").all()
    assert (t["samples"] == 5).all() and t["speedup_vs_baseline"].isna().all()
    assert _kernels_per_variant(run) == NESTED
    assert t.loc["step", "note"].startswith("nested: holds fwd, reduce")
    assert "H100" in run.title() and not any("lost" in w for w in run.warnings)


def test_a_training_script_needs_no_capture_range_with_nsys_2024(h200_run):
    path = h200_run("exec-train", "h100-programs")
    run = load_run(path)
    t = _t(run)
    assert list(t.index) == ["step", "forward", "backward", "optimizer"] and (t["status"] == "ok").all()
    assert _kernels_per_variant(run) == TRAIN_WINDOW
    assert _kernels_per_variant(load_run(path, write=True, attribute="thread")) == TRAIN
    assert not any("lost" in w for w in run.warnings)


@pytest.mark.nsys
@pytest.mark.parametrize("name, expect", [("exec-nested-steps", NESTED), ("exec-train", TRAIN)])
def test_every_range_equals_nvtx_kern_sum(h200_run, tmp_path, name, expect):
    path = h200_run(name, "h100-programs")
    run = load_run(path, write=True, attribute="thread")  # nvtx_kern_sum's view
    assert _nvtx_kern_sum(path, tmp_path) == _kernels_per_variant(run) == expect


def test_exec_ncu_counts_instances_and_names_the_gpu(h200_run, tmp_path):
    """The .ncu-rep of `exec ncu` on the same program, imported on its own (no run folder beside
    it): 5 instances of fwd and of reduce, counted from the kernels' order (it read 1 iteration),
    and the GPU ncu profiled on in the title (it read "on cuda")."""
    src = h200_run("exec-ncu-nested-steps", "h100-programs") / "report.ncu-rep"
    alone = tmp_path / "alone" / "nested.ncu-rep"
    alone.parent.mkdir()
    shutil.copyfile(src, alone)
    run = import_capture(alone, ranges="*@", out=tmp_path / "r")
    t = _t(run)
    assert list(t.index) == ["fwd", "reduce"] and (t["samples"] == 5).all()
    assert t.loc["fwd", "launches_per_iter"] == 2 and t.loc["reduce", "launches_per_iter"] == 1
    assert "on NVIDIA H100 80GB HBM3 |" in run.title() and t["speedup_vs_baseline"].isna().all()
