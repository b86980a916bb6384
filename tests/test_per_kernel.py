"""Multi-kernel variants: each variant's kernels one by one (`run.kernels`,
`--per-kernel`, report.html), and ncu's readings time-weighted over a variant's kernels instead
of a median across different kernels. On the committed H200 run folders; the expected numbers
are computed here from the rebuilt run's unified frame rows, apart from reports/kernels.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_html import CHROMIUM, Dom, chromium, console_problems, needs_chromium

from orchestrator import load_run

REDUCE, DIVIDE = "reduce_kernel<sum_functor>", "vectorized_elementwise_kernel<MulFunctor>"


def _frame_rows(run, variant: str) -> pd.DataFrame:
    """The variant's rows of the rebuilt run's unified frame (what frame.csv holds), in launch
    order; load_run only reads, so the folder has no frame.csv to read back."""
    f = run.frame
    return f[f["variant"].astype(str) == variant].astype({"kernel": str, "metric": str})


def _weighted_by_hand(rows: pd.DataFrame, metric: str) -> float:
    """sum(reading x duration) / sum(duration) over launches: each kernel's n-th reading is its
    n-th launch's (ncu writes a launch's rows together)."""
    num = den = 0.0
    for _, g in rows[rows["kernel"] != "*"].groupby("kernel"):
        t = g.loc[g["metric"] == "kernel_time_ns", "value"].to_numpy()
        x = g.loc[g["metric"] == metric, "value"].to_numpy()
        assert len(t) == len(x) > 0
        num += float((x * t).sum())
        den += float(t.sum())
    return num / den


def test_ncu_sum_div_numel_lists_its_reduction_and_its_division_apart(h200_run):
    run = load_run(h200_run("ncu-mean"))
    k = run.kernels[run.kernels["variant"] == "sum_div_numel"].set_index("kernel")
    assert list(k.index) == [REDUCE, DIVIDE]  # in launch order
    assert (k["launches"] == 3).all() and (k["launches_per_iter"] == 1).all()
    assert k["kernel_full"].str.startswith("void at::native::").all()
    rows = _frame_rows(run, "sum_div_numel")
    for short, full in zip(k.index, k["kernel_full"]):
        mine = rows[rows["kernel"] == full]
        for metric, col in [
            ("dram_throughput_pct_of_peak", "dram_pct_of_peak"),
            ("sm_throughput_pct_of_peak", "sm_pct_of_peak"),
            ("achieved_occupancy_pct", "achieved_occupancy_pct"),
        ]:
            assert k.loc[short, col] == pytest.approx(_weighted_by_hand(mine, metric), rel=1e-12), (
                short,
                col,
            )
        t = mine.loc[mine["metric"] == "kernel_time_ns", "value"]
        assert k.loc[short, "time_us_per_iter"] == pytest.approx(t.sum() / 3 / 1e3, rel=1e-12)
    # its own DRAM %: the reduction reads at 80% of peak, the one-element division at 0.05%
    assert 79 < k.loc[REDUCE, "dram_pct_of_peak"] < 82
    assert 0.04 < k.loc[DIVIDE, "dram_pct_of_peak"] < 0.06
    assert k.loc[DIVIDE, "achieved_occupancy_pct"] < 5 and (k["registers_per_thread"] == 32).all()
    assert k.loc[REDUCE, "share_pct"] == pytest.approx(97.90, abs=0.01)


def test_ncu_variant_dram_is_time_weighted_over_its_kernels_not_a_median(h200_run):
    run = load_run(h200_run("ncu-mean"))
    t = run.table.set_index("variant")
    rows = _frame_rows(run, "sum_div_numel")
    expected = _weighted_by_hand(rows, "dram_throughput_pct_of_peak")
    assert expected == pytest.approx(78.87, abs=0.01)
    assert t.loc["sum_div_numel", "dram_pct_of_peak"] == pytest.approx(expected, rel=1e-12)
    # the median across its two kernels' launches (40%) described neither kernel
    median = rows.loc[rows["metric"] == "dram_throughput_pct_of_peak", "value"].median()
    assert abs(t.loc["sum_div_numel", "dram_pct_of_peak"] - median) > 30
    for metric, col in [
        ("sm_throughput_pct_of_peak", "sm_pct_of_peak"),
        ("achieved_occupancy_pct", "achieved_occupancy_pct"),
    ]:
        assert t.loc["sum_div_numel", col] == pytest.approx(_weighted_by_hand(rows, metric), rel=1e-12)
    # one kernel: time-weighted over its own launches
    one = _frame_rows(run, "torch_mean")
    assert t.loc["torch_mean", "dram_pct_of_peak"] == pytest.approx(
        _weighted_by_hand(one, "dram_throughput_pct_of_peak"), rel=1e-12
    )
    # and it says so: in the note of a variant with several kernels, and in the legend
    assert "time-weighted over 2 kernels" in t.loc["sum_div_numel", "note"]
    assert "time-weighted" not in t.loc["torch_mean", "note"]
    legend = [line for line in run.footer() if "time-weighted" in line]
    assert len(legend) == 1 and "sum_div_numel over 2 kernels" in legend[0]
    assert "never a median across different kernels" in legend[0]


@pytest.mark.parametrize(
    "name", ["ncu-mean", "nsys-mean", "torch-trace-mean", "nsys-triton-mean", "ncu-triton-mean"]
)
def test_share_sums_to_100_per_variant(h200_run, name):
    run = load_run(h200_run(name))
    k = run.kernels
    assert set(k["variant"]) == set(run.table.loc[run.table["status"] == "ok", "variant"])
    assert k.groupby("variant")["share_pct"].sum().to_numpy() == pytest.approx(100.0, abs=1e-9)
    assert (k["share_pct"] > 0).all()


def test_nsys_mean_launches_and_times_match_the_frame(h200_run):
    run = load_run(h200_run("nsys-mean"), write=True)
    f = pd.read_csv(run.path / "frame.csv")
    act = f[f["metric"].isin(["kernel_time_ns", "memset_time_ns", "memcpy_time_ns"]) & (f["kernel"] != "*")]
    k = run.kernels
    assert len(k) == 7  # 3 variants x (their kernels + their memset)
    for r in k.itertuples():
        g = act[(act["variant"] == r.variant) & (act["kernel"] == r.kernel_full)]
        assert r.launches == len(g) == 20
        assert r.launches_per_iter == 1
        assert r.time_us_per_iter == pytest.approx(g["value"].sum() / 20 / 1e3, rel=1e-12)
        assert pd.isna(r.dram_pct_of_peak) and pd.isna(r.registers_per_thread)  # nsys has no such reading
    sdn = k[k["variant"] == "sum_div_numel"]
    assert list(sdn["kernel"]) == [REDUCE, DIVIDE, "[memset]"]  # kernels in launch order, then memsets
    # the kernels' time per iteration adds up to the variant's per-iteration samples
    samples = f[(f["variant"] == "sum_div_numel") & (f["metric"] == "time_ns")]["value"]
    assert sdn["time_us_per_iter"].sum() == pytest.approx(samples.mean() / 1e3, rel=1e-9)
    assert sdn.set_index("kernel").loc[DIVIDE, "time_us_per_iter"] == pytest.approx(1.1696, abs=1e-4)
    # no ncu readings, no legend
    assert not any("time-weighted" in line for line in run.footer())


def test_time_runs_have_no_kernels(h200_run):
    run = load_run(h200_run("time-mean"), write=True)
    assert run.kernels.empty and "variant" in run.kernels.columns
    page = (run.path / "report.html").read_text()
    assert 'id="kernels"' in page and "no kernels" in page


def test_per_kernel_json_has_the_list_beside_the_variants(h200_run, cli):
    path = h200_run("ncu-mean")
    res = cli("report", str(path), "--per-kernel", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [v["variant"] for v in doc["variants"]] == ["torch_mean", "tensor_mean", "sum_div_numel"]
    kernels = [k for k in doc["kernels"] if k["variant"] == "sum_div_numel"]
    assert [k["kernel"] for k in kernels] == [REDUCE, DIVIDE]
    assert 0.04 < kernels[1]["dram_pct_of_peak"] < 0.06
    assert sum(k["share_pct"] for k in kernels) == pytest.approx(100)
    plain = json.loads(cli("report", str(path), "--json").stdout)
    assert "kernels" not in plain and plain["variants"] == doc["variants"]


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_per_kernel_under_the_main_table(h200_run, cli, fmt):
    path = h200_run("ncu-mean")
    out = cli("report", str(path), "--per-kernel", "--format", fmt).stdout
    without = cli("report", str(path), "--format", fmt).stdout
    if fmt == "csv":  # one table, `table` saying which rows are kernels (tests/test_exits.py)
        k = pd.read_csv(__import__("io").StringIO(out))
        assert list(k.columns[:2]) == ["table", "variant"] and "\n\n" not in out.rstrip("\n")
        k = k[k["table"] == "kernels"]
        assert list(k["kernel"][k["variant"] == "sum_div_numel"]) == [REDUCE, DIVIDE]
        return
    assert out.startswith(without.rstrip("\n"))  # the main table first, unchanged
    under = out[len(without.rstrip("\n")) :]
    assert REDUCE in under and DIVIDE in under
    assert "per kernel" in under and ("0.048" in under)  # the division's own DRAM %, not "0.0"


def test_per_kernel_is_an_option_of_every_backend_command(cli):
    for cmd in ("time", "torch-trace", "nsys", "ncu", "all", "report", "import"):
        assert "--per-kernel" in cli(cmd, "--help").stdout, cmd


def test_all_mean_merged_dram_is_time_weighted_and_kernels_carry_the_backend(h200_run):
    multi = load_run(h200_run("all-mean"), write=True)
    m = multi.table.set_index("variant")
    ncu = multi.runs["ncu"]
    assert (
        m.loc["sum_div_numel", "dram_pct_of_peak"]
        == ncu.table.set_index("variant").loc["sum_div_numel", "dram_pct_of_peak"]
    )
    assert m.loc["sum_div_numel", "dram_pct_of_peak"] > 70
    assert any(line.startswith("ncu: ") and "time-weighted" in line for line in multi.footer())
    k = multi.kernels
    assert list(k.columns[:3]) == ["run", "variant", "kernel"]
    assert set(k["run"]) == {"torch-trace", "nsys", "ncu"}  # CUDA events see no kernels
    page = Dom((multi.path / "report.html").read_text())
    assert any(a.get("id") == "kernels" for t, a in page.elements if t == "section")


def _kernel_table(dom: Dom) -> list[list[str]]:
    """The rows (header first) of the table inside the page's per-kernel section."""
    tables = [t for t in dom.tables if t and t[0][:2] == ["variant", "kernel"]]
    assert len(tables) == 1
    return tables[0]


def test_the_html_report_always_has_the_per_kernel_section(h200_run):
    run = load_run(h200_run("ncu-mean"), write=True)
    page = (run.path / "report.html").read_text()
    dom = Dom(page)
    assert dom.mismatched == []
    assert any(t == "section" and a.get("id") == "kernels" for t, a in dom.elements)
    assert any(t == "a" and a.get("href") == "#kernels" for t, a in dom.elements)
    header, *rows = _kernel_table(dom)
    assert header[:5] == ["variant", "kernel", "kernel (full name)", "launches", "launches/iter"]
    col = {h: i for i, h in enumerate(header)}
    sdn = [r for r in rows if r[0] == "sum_div_numel"]
    assert [r[1] for r in sdn] == [REDUCE, DIVIDE]
    assert sdn[1][col["DRAM % peak"]] == "0.048" and sdn[0][col["DRAM % peak"]] == "80.6"
    assert "time-weighted over 2 kernels" in page  # the note, and the legend among the notes


@pytest.mark.browser
@needs_chromium
def test_chromium_shows_the_per_kernel_section(tmp_path, h200_run):
    run = load_run(h200_run("ncu-mean"), write=True)
    path = run.path / "report.html"
    dom_text, err, requested = chromium(tmp_path, "--dump-dom", path.as_uri(), name="per-kernel")
    assert console_problems(err) == [] and requested == []
    source, dom = Dom(path.read_text()), Dom(dom_text)
    assert _kernel_table(dom) == _kernel_table(source)
    assert CHROMIUM.exists()


def test_time_weighted_pairs_each_launch_with_its_duration():
    from reports.kernels import time_weighted

    def rows(*items):
        return pd.DataFrame([{"variant": "v", "kernel": k, "metric": m, "value": x} for k, m, x in items])

    # a: 10 ns at 90%, 30 ns at 50%; b: 60 ns at 1%  ->  (900 + 1500 + 60) / 100
    f = rows(
        ("a", "kernel_time_ns", 10),
        ("a", "dram_throughput_pct_of_peak", 90),
        ("a", "kernel_time_ns", 30),
        ("a", "dram_throughput_pct_of_peak", 50),
        ("b", "kernel_time_ns", 60),
        ("b", "dram_throughput_pct_of_peak", 1),
        ("*", "time_ns", 100),
    )
    assert time_weighted(f, "dram_throughput_pct_of_peak") == pytest.approx(24.6)
    assert np.isnan(time_weighted(f, "sm_throughput_pct_of_peak"))
    # a reading missing on one launch: the kernel's readings weighed by its mean launch time (20 ns)
    g = f.drop(index=3)
    assert time_weighted(g, "dram_throughput_pct_of_peak") == pytest.approx((90 * 20 + 1 * 60) / 80)
    # no durations at all: the plain mean
    assert time_weighted(f[f["metric"] != "kernel_time_ns"], "dram_throughput_pct_of_peak") == pytest.approx(
        47
    )
