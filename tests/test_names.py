"""Short kernel names (reports/names.py) on real demangled names, the full names beside them in
the JSON and HTML, and counts printed as integers."""

import json
import sqlite3

import pandas as pd
import pytest
from conftest import FIXTURES

from orchestrator import backends, load_run
from reports import merge, names, render
from reports.names import short_kernel_name
from reports.schema import OP_METRICS

NSYS_SQLITE = FIXTURES / "nsys" / "h200_square_nvtx0217" / "square_nsys_nvtx0217.sqlite"

# torch 2.11's demangled names (c++filt spelling, as torch.profiler and ncu give them) of the
# kernels behind torch.relu / torch.clamp_min (launch_clamp_scalar) and the comparison inside
# torch.where(a > 0, ...) (compare_scalar_kernel): before, both read `vectorized_elementwise_kernel`
CLAMP = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
    "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
    "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, "
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(float)#1}, std::array<char*, 2ul>)"
)
COMPARE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::compare_scalar_kernel"
    "<float>(at::TensorIteratorBase&, at::native::(anonymous namespace)::OpType, float)::{lambda(float)#1}, "
    "std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::compare_scalar_kernel<float>("
    "at::TensorIteratorBase&, at::native::(anonymous namespace)::OpType, float)::{lambda(float)#1}, "
    "std::array<char*, 2ul>)"
)


def _nsys_names() -> list[str]:
    with sqlite3.connect(NSYS_SQLITE) as db:
        return [
            v
            for (v,) in db.execute(
                "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
            )
        ]


def _frame_names() -> set[str]:
    """The kernel names of the committed H200 runs' frames, rebuilt from their raw files (a
    frame.csv is there only where something ran `report` in place)."""
    names: set[str] = set()
    for f in sorted((FIXTURES / "runs" / "h200").glob("*/manifest.json")):
        if json.loads(f.read_text()).get("backend") in ("nsys", "torch-trace", "ncu"):
            frame = load_run(f.parent).frame
            # the operator rows name an operator path in the kernel column, not a kernel
            frame = frame[~frame["metric"].isin(OP_METRICS)]
            names |= set(frame["kernel"].astype(str)) - {"*"}
    return names


def test_lambda_kernels_keep_their_enclosing_function():
    assert short_kernel_name(CLAMP) == "vectorized_elementwise_kernel<launch_clamp_scalar>"
    assert short_kernel_name(COMPARE) == "vectorized_elementwise_kernel<compare_scalar_kernel>"


def test_the_randn_kernel_of_the_nsys_fixture_is_short():
    randn = next(n for n in _nsys_names() if "distribution_elementwise" in n)
    assert len(randn) > 1300  # nsys spells `<unnamed>` namespaces: the old parser gave it whole
    assert short_kernel_name(randn) == "distribution_elementwise_grid_stride_kernel<normal_and_transform>"


def test_real_names_of_the_fixtures():
    real = _frame_names() | set(_nsys_names())
    assert len(real) > 20
    assert all(len(short_kernel_name(n)) <= names.MAX_LEN for n in real)
    by_short = {short_kernel_name(n) for n in real}
    assert "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>" in by_short  # both spellings
    assert "vectorized_elementwise_kernel<MulFunctor>" in by_short
    assert "reduce_kernel<MeanOps>" in by_short and "reduce_kernel<sum_functor>" in by_short
    assert "unrolled_elementwise_kernel<direct_copy_kernel_cuda>" in by_short
    # numba's ABI tags, spelled two ways by nsys and torch.profiler: one name
    numba = {short_kernel_name(n) for n in real if "_square_kernel_py" in n}
    assert numba == {"_square_kernel_py"}


def test_plain_and_overlong_names():
    assert short_kernel_name("square_kernel") == "square_kernel"
    assert (
        short_kernel_name("square_matrix_kernel(const float *, float *, int, int)") == "square_matrix_kernel"
    )
    long = "k" * 300
    assert short_kernel_name(long) == "k" * (names.MAX_LEN - 3) + "..."


def test_launches_per_iter_prints_as_an_integer():
    table = pd.DataFrame({"variant": ["a", "b"], "kernels": ["k", "k"], "launches_per_iter": [20000.0, 1.5]})
    text = render.to_text(table)
    assert "20000" in text and "2e+04" not in text and "1.5" in text


def test_a_short_name_is_not_cut_in_the_terminal():
    name = "distribution_elementwise_grid_stride_kernel<normal_and_transform>"  # 65 characters
    assert name in render.to_text(pd.DataFrame({"variant": ["randn"], "kernels": [name]}))


def test_full_names_in_json_and_html_not_in_the_terminal(h200_run):
    run = load_run(h200_run("nsys-square"), write=True)
    t = run.table.set_index("variant")
    assert t.loc["mul", "kernels"] == "vectorized_elementwise_kernel<MulFunctor>"
    full = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)3>>(int, T2, T3)"
    )
    assert t.loc["mul", "kernels_full"] == full
    rows = {r["variant"]: r for r in json.loads((run.path / "report.json").read_text())["variants"]}
    assert rows["mul"]["kernels_full"] == full and rows["mul"]["kernels"] == t.loc["mul", "kernels"]
    html = (run.path / "report.html").read_text()
    assert "binary_internal::MulFunctor&lt;float&gt;&gt;, std::array" in html
    assert "binary_internal" not in render.to_text(run.table) and "binary_internal" not in render.to_markdown(
        run.table
    )


def test_merged_table_keeps_the_full_names(h200_run):
    tables = {b: load_run(h200_run(f"{b}-square")).table for b in ("time", "nsys")}
    m = merge.merged_table(tables, backends.merged_sources(tables), "torch_square").set_index("variant")
    assert m.loc["pow", "kernels"] == "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"
    assert m.loc["pow", "kernels_full"].startswith(
        "void at::native::vectorized_elementwise_kernel<(int)4, void "
    )


@pytest.mark.parametrize("value, text", [(3.0, "3"), (2.5, "2.5"), (float("nan"), "-")])
def test_int_or_3g(value, text):
    assert render._fmt(value, render.INT_OR_3G) == text
