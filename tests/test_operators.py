"""The operator view (--ops, reports/operators.py): each variant's aten operators as a tree with
the GPU work they launched, calls, Self CPU and Self CUDA per iteration (key_averages()'s numbers).
Through the real CLI on the CPU (real torch.profiler, real nsys), the committed H200 traces (real
GPU kernels under their operators), and a live GPU run where there is one."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli
from test_nsys_parser import NSYS, needs_nsys

ENV = {"GPROF_NSYS": str(NSYS), "GPROF_NO_PROGRESS": "1"}
RUNS = Path(__file__).resolve().parent / "fixtures" / "runs" / "h200"


def _ops(doc: dict, variant: str) -> dict[str, float]:
    """path -> calls/iter of one variant's operators in report.json (not the GPU work under them,
    which has no Self CPU)."""
    return {
        r["path"]: r["op_calls_per_iter"]
        for r in doc["operators"]
        if r["variant"] == variant and r["self_cpu_us"] is not None
    }


def _run(tmp_path: Path, backend: str, workload: str, *more: str):
    out = tmp_path / f"{backend}-{workload}"
    res = run_cli(
        backend,
        workload,
        "--device",
        "cpu",
        "--size",
        "10000",
        "--iters",
        "4",
        "--ops",
        "-o",
        str(out),
        *more,
        env=ENV,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res, json.loads((out / "report.json").read_text()), out


def test_torch_trace_square_ops_tree_on_the_cpu(tmp_path):
    res, doc, out = _run(tmp_path, "torch-trace", "square")
    sq, mul, pw = _ops(doc, "torch_square"), _ops(doc, "mul"), _ops(doc, "pow")
    assert sq["aten::square"] == 1 and sq["aten::square > aten::pow"] == 1
    assert mul == {"aten::mul": 1.0}
    assert pw["aten::pow"] == 1 and "aten::square" not in pw
    # the tree under the table: aten::pow indented under aten::square
    text = res.stdout.split("operators per variant")[1]
    lines = [ln for ln in text.splitlines() if ln.startswith("torch_square")]
    assert lines[0].split()[1] == "aten::square" and lines[1].startswith("torch_square    aten::pow ")
    assert "Self CPU us/iter" in text and "Self CUDA us/iter" not in text  # no GPU: no Self CUDA column
    same = {v["variant"]: v["same_ops_as"] for v in doc["variants"]}
    assert same["torch_square"] == "pow" and same["pow"] == "torch_square" and same["mul"] == ""
    assert "same operators as" in res.stdout.splitlines()[1]
    assert doc["operator_chains"]["mul"] == ["aten::mul"]
    frame = pd.read_parquet(out / "frame.parquet")
    rows = frame[(frame["metric"] == "op_calls_per_iter") & (frame["variant"] == "torch_square")]
    assert set(rows["kernel"]) >= {"aten::square", "aten::square > aten::pow"}
    assert (rows["unit"] == "count").all()
    page = (out / "report.html").read_text()
    assert 'id="operators"' in page and 'data-plot="time_vs_memory"' in page


def test_torch_trace_mean_sum_div_numel_on_the_cpu(tmp_path):
    _, doc, _ = _run(tmp_path, "torch-trace", "mean")
    ops = _ops(doc, "sum_div_numel")
    assert ops["aten::sum"] == 1 and ops["aten::div"] == 1
    tops = [r["operator"] for r in doc["operators"] if r["variant"] == "sum_div_numel" and r["depth"] == 0]
    assert tops == ["aten::sum", "aten::div"]  # in call order


def test_report_ops_of_the_committed_h200_square_trace(tmp_path):
    """A real GPU trace: each kernel under the operator that launched it, and the variant's GPU
    time split over its operators (plus what no operator launched) within 1%."""
    folder = tmp_path / "torch-trace-square"
    shutil.copytree(RUNS / "torch-trace-square", folder)
    res = run_cli("report", str(folder), "--ops")
    assert res.returncode == 0, res.stderr
    doc = json.loads((folder / "report.json").read_text())
    chains = doc["operator_chains"]
    assert (
        "aten::square > aten::pow > vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"
        in chains["torch_square"]
    )
    assert "aten::mul > vectorized_elementwise_kernel<MulFunctor>" in chains["mul"]
    assert chains["triton"][-1] == "(outside operators) > square_kernel"
    _assert_self_cuda_sums(doc, folder)
    assert "Self CUDA us/iter" in res.stdout


def _assert_self_cuda_sums(doc: dict, folder: Path) -> None:
    """Per variant, Self CUDA over its operators and `(outside operators)` (GPU work rows, which
    have no Self CPU, repeat their operator's) is the mean GPU time of its iterations, within 1%."""
    frame = pd.read_parquet(folder / "frame.parquet")
    for v in (v["variant"] for v in doc["variants"] if v["status"] == "ok"):
        ops = [
            r
            for r in doc["operators"]
            if r["variant"] == v and (r["self_cpu_us"] is not None or r["path"] == "(outside operators)")
        ]
        cuda = sum(r["self_cuda_us"] for r in ops)
        t = frame[(frame["variant"] == v) & (frame["metric"] == "time_ns")]["value"].mean() / 1e3
        assert t > 0 and abs(cuda - t) <= 0.01 * t, (v, cuda, t)


@pytest.mark.nsys
@needs_nsys
@pytest.mark.parametrize("workload", ["square", "mean"])
def test_nsys_ops_on_the_cpu_agrees_with_torch_trace(tmp_path, workload):
    """nsys --ops: the measured iterations run with an NVTX range per operator (emit_nvtx; on a
    CPU-only PyTorch, which has none, workloads/op_nvtx.py's observer), and the nsys reader finds
    the same operators, in the same tree, with the same calls per iteration as torch-trace."""
    res, doc, out = _run(tmp_path, "nsys", workload)
    import torch

    via = "record-function observer" if torch.version.cuda is None else "emit_nvtx"
    assert json.loads((out / "workload.json").read_text())["ops"] == {"nvtx": True, "via": via}
    _, tt_doc, _ = _run(tmp_path, "torch-trace", workload)
    variants = ("torch_square", "mul", "pow") if workload == "square" else ("torch_mean", "sum_div_numel")
    for v in variants:
        assert _ops(doc, v) and _ops(doc, v) == _ops(tt_doc, v), v
        assert doc["operator_chains"][v] == tt_doc["operator_chains"][v]
    same = {v["variant"]: v["same_ops_as"] for v in doc["variants"]}
    assert same == {v["variant"]: v["same_ops_as"] for v in tt_doc["variants"]}
    assert "aten::" in res.stdout.split("operators per variant")[1]


@pytest.mark.gpu
@pytest.mark.nsys
@needs_nsys
def test_gpu_ops_lecture_statements(tmp_path):
    """On a GPU: torch.square dispatches aten::square > aten::pow > pow's kernel, as a**2 does;
    nsys --ops and torch-trace see the same operators, counts and kernels; Self CUDA sums to the
    variant's GPU time within 1%."""
    docs = {}
    for backend in ("torch-trace", "nsys"):
        out = tmp_path / backend
        res = run_cli(backend, "square", "--size", "1e6", "--iters", "10", "--ops", "-o", str(out), env=ENV)
        assert res.returncode == 0, res.stdout + res.stderr
        docs[backend] = json.loads((out / "report.json").read_text())
        chains = docs[backend]["operator_chains"]
        assert any(
            c.startswith("aten::square > aten::pow > vectorized_elementwise_kernel<pow")
            for c in chains["torch_square"]
        )
        assert any(c.startswith("aten::pow > vectorized_elementwise_kernel<pow") for c in chains["pow"])
        assert any(c.startswith("aten::mul > vectorized_elementwise_kernel<") for c in chains["mul"])
        same = {v["variant"]: v["same_ops_as"] for v in docs[backend]["variants"]}
        assert "pow" in same["torch_square"].split(", ")
        _assert_self_cuda_sums(docs[backend], out)
    for v in ("torch_square", "mul", "pow"):
        assert _ops(docs["nsys"], v) == _ops(docs["torch-trace"], v)
        assert docs["nsys"]["operator_chains"][v] == docs["torch-trace"]["operator_chains"][v]


def test_a_workload_file_gets_the_operator_view_with_no_code(tmp_path):
    """A user's workload file (tests/fixtures/workloads/temporaries.py defines variants, nothing
    of operators): `(a*a + |a*a|) * 0.5` calls aten::mul three times per iteration."""
    f = Path(__file__).resolve().parent / "fixtures" / "workloads" / "temporaries.py"
    res, doc, out = _run(tmp_path, "torch-trace", "temporaries", "--workload-file", str(f))
    temps = _ops(doc, "temps")
    assert temps["aten::mul"] == 3 and temps["aten::abs"] == 1 and temps["aten::add"] == 1
    assert _ops(doc, "clean") == {"aten::mul": 1.0}
    page = (out / "report.html").read_text()
    assert page.count('data-plot="time_vs_memory"') == 1 and "tradeoff-point-1" in page


def test_report_ops_of_a_run_without_operators_says_so(tmp_path):
    """A `time` run records no operators: `report --ops` prints the table and says so, exit 0."""
    folder = tmp_path / "time-square"
    shutil.copytree(RUNS / "time-square", folder)
    res = run_cli("report", str(folder), "--ops")
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith(
        "no operators: this run recorded none (torch-trace, or nsys with --ops, records them)"
    )
    assert "operators" not in json.loads((folder / "report.json").read_text())


@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="no /usr/bin/chromium")
def test_chromium_renders_the_operator_tree_and_the_time_memory_chart(tmp_path):
    from test_html import Dom, chromium, console_problems

    _, _, out = _run(tmp_path, "torch-trace", "square")
    page = (out / "report.html").read_text()
    dom_text, err, requested = chromium(tmp_path, "--dump-dom", (out / "report.html").as_uri(), name="ops")
    assert console_problems(err) == [] and requested == []
    dom = Dom(dom_text)
    assert "time_vs_memory" in [a["data-plot"] for _, a in dom.having("gprof-plot")]
    assert dom.tables == Dom(page).tables
    cells = [c for t in dom.tables for row in t for c in row]
    assert "aten::square" in cells and "aten::pow" in cells
    assert "\u2003aten::pow<" in page  # indented under aten::square (the parser strips the em space)


def test_an_operator_moved_to_another_thread_leaves_same_operators_as(tmp_path):
    """Fuzz case: event 4 of torch-trace-mean's trace (torch_mean's first aten::mean) moved to
    thread "1" leaves that iteration's inner aten::mean at the top. The tree shows it (calls/iter
    0.95 and 0.05), and `same operators as` still pairs torch_mean with tensor_mean: an operator
    fewer than half the iterations called is not part of the variant's tree."""
    folder = tmp_path / "torch-trace-mean"
    shutil.copytree(RUNS / "torch-trace-mean", folder)
    doc = json.loads((folder / "trace.json").read_text())
    assert (doc["traceEvents"][4]["name"], doc["traceEvents"][4]["tid"]) == ("aten::mean", 1207)
    doc["traceEvents"][4]["tid"] = "1"
    (folder / "trace.json").write_text(json.dumps(doc))
    res = run_cli("report", str(folder), "--ops")
    assert res.returncode == 0, res.stderr
    rep = json.loads((folder / "report.json").read_text())
    ops = _ops(rep, "torch_mean")
    assert ops["aten::mean"] == 1 and ops["aten::mean > aten::mean"] == 0.95
    assert ops["aten::mean > aten::as_strided"] == 0.05
    same = {v["variant"]: v["same_ops_as"] for v in rep["variants"]}
    assert same == {"torch_mean": "tensor_mean", "tensor_mean": "torch_mean", "sum_div_numel": ""}
