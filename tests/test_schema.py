"""Columns declared once (reports/schema.py): a column read from an ncu metric is one
line there, and the ncu backend then collects the metric and the tables fill it; a column nobody
declared is shown, not dropped; a backend's merged column comes from the backend."""

from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from orchestrator import backends
from orchestrator.backends import ncu, ncu_tool
from orchestrator.parsers import ncu_rep
from reports import kernels, render, schema, summary

HERE = Path(__file__).resolve().parent
REP = HERE / "fixtures" / "ncu" / "h200_square_mul_sol_mem" / "square_mul_sol_mem.ncu-rep"
L2 = "lts__t_sector_hit_rate.pct"


def test_the_l2_hit_rate_is_one_declared_line():
    col = schema.column("l2_hit_pct")
    assert col.source == f"ncu:{L2}" and col.agg == schema.TIME_WEIGHTED
    assert schema.VARIANT in col.tables and schema.KERNEL in col.tables
    src = (HERE.parent / "reports" / "schema.py").read_text()
    assert sum(L2 in line for line in src.splitlines()) == 1
    assert L2 in ncu.table_metrics()


def test_ncu_collects_the_metric_of_every_declared_column():
    res = run_cli("ncu", "square", "--dry-run", "--device", "cpu", "--section", "SpeedOfLight")
    assert res.returncode == 0, res.stderr
    metrics = res.stdout.split("--metrics ")[1].split()[0].split(",")
    assert L2 in metrics  # with --section too: the default metrics are left out, the table's are not


@pytest.mark.skipif(not ncu_rep.have_ncu_report(), reason="pip install ncu-report")
def test_the_l2_column_is_filled_from_a_real_h200_report():
    """square's a*a, 10 launches profiled with MemoryWorkloadAnalysis on the H200: the variant's
    L2 hit rate is the launches' readings weighted by their durations, and the per-kernel row
    holds the same (one kernel)."""
    rep = ncu_tool.load(REP, domain=None, prefix="variant:")
    wman = {
        "workload": "square",
        "iters": 10,
        "variants": [{"name": "a*a", "label": "a*a", "status": "ok", "bytes_moved": 8e8}],
    }
    frame = ncu.frame_from_ncu_report(rep, wman, run="r")
    m = rep.metrics[rep.metrics["metric"] == L2].sort_values("id")
    d = rep.kernels.sort_values("id")["duration_ns"].to_numpy(dtype=float)
    expect = float(np.average(m["value"].to_numpy(dtype=float), weights=d))
    assert len(m) == 10 and 51 < expect < 53
    table = summary.variant_table(frame, wman).set_index("variant")
    assert table.loc["a*a", "l2_hit_pct"] == pytest.approx(expect, rel=1e-12)
    k = kernels.kernel_table(frame, wman)
    assert k["l2_hit_pct"].tolist() == pytest.approx([expect], rel=1e-12)
    text = render.to_text(table.reset_index())
    assert "L2 hit %" in text and f"{expect:.1f}" in text


def test_a_column_nobody_declared_is_shown_not_dropped():
    import pandas as pd

    t = pd.DataFrame({"variant": ["a"], "time_median_us": [1.5], "my_metric": [42]})
    headers, rows = render.display_rows(t)
    assert headers == ["variant", "median us", "my_metric"] and rows == [["a", "1.50", "42"]]


def test_each_backend_of_all_declares_its_merged_column():
    names = backends.of_all()
    assert names[:4] == ["time", "torch-trace", "nsys", "ncu"]
    sources = backends.merged_sources(names)
    assert {n: s.column for n, s in sources.items() if n != "proton"} == {
        "time": "events_us",
        "torch-trace": "torch_trace_us",
        "nsys": "nsys_us",
        "ncu": "ncu_us",
    }
    shown = {c for c, _, _ in render.DISPLAY}
    assert {s.column for s in sources.values()} <= shown
    assert backends.backend_class("ncu").needs_gpu and not backends.backend_class("time").needs_gpu


def test_the_coloured_table_keeps_a_column_nobody_declared():
    import pandas as pd

    from reports import term

    t = pd.DataFrame(
        {
            "variant": ["a", "b"],
            "status": ["ok", "ok"],
            "my_metric": [42, 7],
            "speedup_vs_baseline": [1.0, 2.0],
        }
    )
    import re

    coloured = term.to_text_colored(t, "t", [], color=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    row = next(line for line in text.splitlines() if line.lstrip().startswith("b "))
    # after the declared columns, and each colour still on its own column's cell
    assert "my_metric" in text and row.split()[1:] == ["ok", "2.00x", "7"]
    assert "\x1b[32m2.00x" in coloured and "\x1b[32m7" not in coloured
