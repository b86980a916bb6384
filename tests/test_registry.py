"""The workload registry, variants' declarations, user workload files."""

import pytest

from orchestrator.errors import UnknownNameError, UsageError
from workloads import registry
from workloads.registry import Variant, Workload


def test_builtins_and_their_variants():
    w = registry.all_workloads()
    assert {"square", "mean", "triton-mean", "load-inline-square"} <= set(w)
    assert [v.name for v in w["square"].variants][:3] == ["torch_square", "mul", "pow"]
    assert [v.label for v in w["square"].variants][:3] == ["torch.square", "a*a", "a**2"]
    assert [v.label for v in w["mean"].variants] == ["torch.mean", "tensor.mean", "sum/numel"]
    assert w["triton-mean"].baseline == "torch_mean"
    assert {v.name for v in w["triton-mean"].variants} == {"torch_mean", "triton_lecture", "triton_fast"}
    assert w["load-inline-square"].variant("cuda_lecture").needs == {"cuda", "compiler"}
    # bytes each must move at least: square reads and writes, mean reads
    assert w["square"].bytes_moved(10**8, 4) == 8 * 10**8
    assert w["mean"].bytes_moved(10**8, 4) == 4 * 10**8


def test_no_variant_name_can_break_an_nvtx_filter():
    for w in registry.all_workloads().values():
        for v in w.variants:
            assert "/" not in v.name and " " not in v.name
    with pytest.raises(ValueError, match="no '/'"):
        Variant("sum/numel", lambda a: a)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(UnknownNameError) as e:
        registry.get("nope")
    assert "square" in e.value.valid and e.value.exit_code == 2
    with pytest.raises(UnknownNameError, match="torch_square, mul, pow"):
        registry.get("square").variant("a*a")


def test_select_keeps_the_baseline():
    w = registry.get("square")
    assert [v.name for v in w.select(["pow"])] == ["torch_square", "pow"]


def test_workload_validation():
    with pytest.raises(ValueError, match="duplicate"):
        Workload("w", "", [Variant("a", abs), Variant("a", abs)], reference=abs, bytes_moved=lambda n, s: n)
    with pytest.raises(ValueError, match="baseline"):
        Workload("w", "", [Variant("a", abs)], reference=abs, bytes_moved=lambda n, s: n, baseline="b")
    with pytest.raises(ValueError, match="unknown"):
        Variant("a", abs, needs=frozenset({"tpu"}))


USER_FILE = """
from workloads import Variant, Workload

def ref(x):
    return x * 3

cube = Workload("triple", "x*3 three ways",
                [Variant("mul3", lambda a: a * 3, label="a*3"), Variant("add3", lambda a: a + a + a, label="a+a+a")],
                reference=ref, bytes_moved=lambda n, s: 2 * n * s, cpu_default_shape=(1000,))
"""


def test_user_workload_file(tmp_path):
    p = tmp_path / "mine.py"
    p.write_text(USER_FILE)
    found = registry.load_file(p)
    assert [w.name for w in found] == ["triple"]
    assert registry.get("triple").source == str(p.resolve())
    assert registry.get("triple").baseline == "mul3"


def test_a_workload_file_that_is_not_python_says_what_one_is(tmp_path, cli):
    p = tmp_path / "bad.json"
    p.write_text('{"workloads": ["square"]}\n')
    what = (
        "a workload file is a Python file (.py) that builds Workload(...) objects at module level or "
        "lists them in WORKLOADS (see README: Adding a workload)"
    )
    with pytest.raises(UsageError) as err:
        registry.load_file(p)
    assert str(err.value) == f"workload file {p} is not a Python file: {what}"
    res = cli("time", "square", "--device", "cpu", "--workload-file", str(p))
    assert res.exit_code == 2
    assert f"workload file {p} is not a Python file: {what}" in res.stderr


def test_bad_user_files(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        registry.load_file(tmp_path / "none.py")
    p = tmp_path / "broken.py"
    p.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(UsageError, match="RuntimeError: boom"):
        registry.load_file(p)
    p.write_text("x = 1\n")
    with pytest.raises(UsageError, match="defines no Workload"):
        registry.load_file(p)
