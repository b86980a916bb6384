"""orchestrator.parsers.nsys on real exports (tests/fixtures/nsys/*/README.md says how each
was captured), on small synthetic frames for the attribution rules, and, where nsys is
installed, against nsys's own `nsys stats` reports."""

from __future__ import annotations

import csv
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator.errors import EXIT_PARSE, ParseError
from orchestrator.parsers import nsys as ns

REPO = Path(__file__).resolve().parent.parent
NSYS_FIX = Path(__file__).resolve().parent / "fixtures" / "nsys"
SQUARE = NSYS_FIX / "h200_square_nvtx0217" / "square_nsys_nvtx0217.sqlite"
VARIANTS = NSYS_FIX / "h200_nvtx_variants_nvtx0217" / "nvtx_variants_nvtx0217.sqlite"
CPU = NSYS_FIX / "cpu_nvtx0210_gprof" / "capture.sqlite"
CPU_PROGRAM = NSYS_FIX / "cpu_nvtx0210_gprof" / "program.py"


def find_nsys() -> Path | None:
    """$GPROF_NSYS, then PATH, then scripts/install-nsys.sh's default install."""
    for c in (
        os.environ.get("GPROF_NSYS"),
        shutil.which("nsys"),
        str(REPO / ".tools" / "nsys" / "target-linux-x64" / "nsys"),
    ):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return Path(c)
    return None


NSYS = find_nsys()
needs_nsys = pytest.mark.skipif(NSYS is None, reason="nsys not found ($GPROF_NSYS, PATH, .tools/nsys)")


@pytest.fixture(scope="module")
def square() -> ns.NsysExport:
    return ns.read_export(SQUARE)


@pytest.fixture(scope="module")
def variants() -> ns.NsysExport:
    return ns.read_export(VARIANTS)


@pytest.fixture(scope="module")
def cpu() -> ns.NsysExport:
    return ns.read_export(CPU)


# ------------------------------------------------------------------ h200 square, nvtx 0.2.17


def test_square_kernels(square):
    k = square.kernels
    assert len(k) == 40
    assert k["name"].value_counts().to_dict() == {
        "vectorized_elementwise_kernel": 39,
        "distribution_elementwise_grid_stride_kernel": 1,
    }
    assert k.groupby("name")["duration_ns"].sum().to_dict() == {
        "vectorized_elementwise_kernel": 1297119,
        "distribution_elementwise_grid_stride_kernel": 41376,
    }
    assert k["duration_ns"].sum() == 1338495
    assert list(k.columns) == ns.KERNEL_COLUMNS
    assert k["start"].is_monotonic_increasing
    assert k["demangled_name"].str.startswith("void at::native::").all()
    first = k.iloc[0]
    assert first["name"] == "distribution_elementwise_grid_stride_kernel"
    assert (first["start"], first["end"], first["correlation_id"]) == (4391889875, 4391931251, 157)
    assert (first["device_id"], first["stream_id"]) == (0, 7)
    assert square.meta["EXPORT_PRODUCT_VERSION"] == "2023.4.4.54"
    assert square.meta["EXPORT_SCHEMA_VERSION"] == "3.7.2"


def test_square_runtime(square):
    r = square.runtime
    assert len(r) == 99
    assert list(r.columns) == ns.RUNTIME_COLUMNS
    assert (r["name"] == "cudaLaunchKernel_v7000").sum() == 40
    assert r["global_tid"].nunique() == 1


def test_square_has_no_gprof_ranges_and_the_hint_says_why(square):
    n = square.nvtx
    assert n["event_type"].tolist() == [ns.NVTX_DOMAIN_CREATE, ns.NVTX_DOMAIN_DESTROY]
    assert n["text"].iloc[0] == "gprof" and n["domain"].tolist() == ["gprof", "gprof"]
    assert ns.variant_ranges(square).empty
    hint = ns.missing_ranges_hint(square)
    assert hint is not None
    assert "'gprof' was created but no range was recorded" in hint
    assert "0.2.13" in hint and "nvtx==0.2.10" in hint
    with pytest.raises(ParseError) as err:
        ns.require_variant_ranges(square)
    assert err.value.hint == hint and str(SQUARE) in str(err.value)


def test_square_everything_is_outside(square):
    att = ns.attribute_kernels(square)
    assert len(att) == 40 and att["variant"].isna().all() and (att["range_id"] == -1).all()
    # every kernel still finds the call that launched it
    assert (att["launch_api"] == "cudaLaunchKernel_v7000").all()
    assert att["launch_cpu_ns"].notna().all()
    s = ns.summarize(att, ns.variant_ranges(square))
    assert len(s) == 1
    out = s.iloc[0]
    assert pd.isna(out["variant"]) and out["launches"] == 40 and out["gpu_time_total_ns"] == 1338495
    assert out["kernels"] == ["distribution_elementwise_grid_stride_kernel", "vectorized_elementwise_kernel"]


# ------------------------------------------------------------- h200 six range kinds, nvtx 0.2.17


def test_variants_recorded_range_kinds(variants):
    n = variants.nvtx
    assert n["event_type"].tolist() == [75, 76, 76, 59, 60, 75, 76]
    ranges = n[n["event_type"].isin(ns.RANGE_EVENT_TYPES)]
    # only torch.cuda.nvtx's two ranges are recorded, in the default domain
    assert ranges["text"].tolist() == ["D_torch_push", "E_torch_startend"]
    assert ranges["event_type"].tolist() == [ns.NVTX_PUSHPOP_RANGE, ns.NVTX_STARTEND_RANGE]
    assert ranges["domain"].isna().all() and (ranges["domain_id"] == 0).all()
    # nvtx 0.2.17's annotate/push_range in named domains leave only create/destroy events
    created = n[n["event_type"] == ns.NVTX_DOMAIN_CREATE]
    assert created["text"].tolist() == ["gprof", "gprof2"]
    assert ns.variant_ranges(variants).empty
    assert ns.variant_ranges(variants, "gprof2", "").empty
    assert "nvtx==0.2.10" in ns.missing_ranges_hint(variants)


def test_variants_attribution_by_launch_not_gpu_time(variants):
    ranges = ns.variant_ranges(variants, domain=None, prefix="")
    assert ranges[["variant", "start", "end", "wall_ns", "event_type"]].values.tolist() == [
        ["D_torch_push", 7507375149, 7507434337, 59188, 59],
        ["E_torch_startend", 7507439689, 7507487930, 48241, 60],
    ]
    att = ns.attribute_kernels(variants, domain=None, prefix="")
    inside = att[att["variant"].notna()]
    assert inside[["variant", "correlation_id", "duration_ns", "launch_cpu_ns"]].values.tolist() == [
        ["D_torch_push", 223, 5760, 7507404472 - 7507393019],
        ["E_torch_startend", 238, 5697, 8942],
    ]
    assert att["variant"].isna().sum() == 5
    k = variants.kernels.set_index("correlation_id").loc[223]
    assert (k["grid_x"], k["grid_y"], k["block_x"], k["registers_per_thread"]) == (4096, 1, 128, 32)
    assert (k["static_shared_mem_bytes"], k["dynamic_shared_mem_bytes"]) == (0, 0)


def test_variants_summary(variants):
    att = ns.attribute_kernels(variants, domain=None, prefix="")
    s = ns.summarize(att, ns.variant_ranges(variants, None, ""))
    assert s["variant"].tolist()[:2] == ["D_torch_push", "E_torch_startend"] and pd.isna(s["variant"].iloc[2])
    d = s.iloc[0]
    assert d["kernels"] == ["vectorized_elementwise_kernel"]
    assert (d["ranges"], d["launches"], d["gpu_time_total_ns"], d["range_wall_ns"]) == (1, 1, 5760, 59188)
    assert (d["gpu_time_median_ns"], d["gpu_time_min_ns"], d["gpu_time_max_ns"]) == (5760, 5760, 5760)
    assert d["launch_cpu_total_ns"] == 11453
    # the kernel ran inside the range: span = range wall, busy = the kernel
    assert d["gpu_busy_ns"] == 5760 and d["gpu_span_ns"] == 59188
    assert d["gpu_busy_fraction"] == pytest.approx(5760 / 59188)
    out = s.iloc[2]
    assert (out["ranges"], out["launches"], out["gpu_time_total_ns"]) == (0, 5, 36577)
    assert pd.isna(out["range_wall_ns"]) and pd.isna(out["gpu_busy_fraction"])


# ---------------------------------------------------------------- CPU capture, nvtx 0.2.10


def test_cpu_capture_has_no_cuda_tables_and_reads_empty_frames(cpu):
    assert "CUPTI_ACTIVITY_KIND_KERNEL" not in cpu.tables
    for df, cols in (
        (cpu.kernels, ns.KERNEL_COLUMNS),
        (cpu.runtime, ns.RUNTIME_COLUMNS),
        (cpu.memcpy, ns.MEMCPY_COLUMNS),
        (cpu.memset, ns.MEMSET_COLUMNS),
    ):
        assert df.empty and list(df.columns) == cols
    att = ns.attribute_kernels(cpu)
    assert att.empty and list(att.columns) == ns.ATTRIBUTED_COLUMNS


def test_cpu_capture_nvtx_events(cpu):
    n = cpu.nvtx
    assert list(n.columns) == ns.NVTX_COLUMNS
    assert n["event_type"].value_counts().to_dict() == {59: 12, 75: 2, 76: 3, 34: 1, 60: 1}
    # nvtx 0.2.10 registers messages: they come from StringIds through textId
    assert n.loc[n["event_type"] == 34, "text"].tolist() == ["checkpoint"]
    created = n[n["event_type"] == ns.NVTX_DOMAIN_CREATE]
    assert created[["text", "domain_id"]].values.tolist() == [["gprof", 1], ["other", 2]]
    assert n["start"].is_monotonic_increasing


def test_cpu_capture_variant_ranges(cpu):
    r = ns.variant_ranges(cpu)
    assert list(r.columns) == ns.RANGE_COLUMNS
    assert r["variant"].tolist() == ["a", "b", "a", "b", "c", "d", "t"]
    assert r["event_type"].tolist() == [59, 59, 59, 59, 59, 60, 59]
    assert r["wall_ns"].tolist() == [4284007, 4296996, 4292749, 4295023, 3156989, 3117209, 3117280]
    assert r["global_tid"].nunique() == 2  # "t" ran on the worker thread
    assert ns.missing_ranges_hint(cpu) is None
    # the same text in the default domain and in "other" is not a gprof variant
    assert ns.variant_ranges(cpu, None)["wall_ns"].tolist() == [2133185]
    assert ns.variant_ranges(cpu, "other")["variant"].tolist() == ["a"]
    # prefix "" keeps every range in the domain, including the nested "inner" ones
    assert ns.variant_ranges(cpu, "gprof", "")["variant"].tolist().count("inner") == 4


def test_cpu_capture_summary_keeps_variants_without_kernels(cpu):
    s = ns.summarize(ns.attribute_kernels(cpu), ns.variant_ranges(cpu))
    assert s["variant"].tolist()[:5] == ["a", "b", "c", "d", "t"]
    assert s["ranges"].tolist() == [2, 2, 1, 1, 1, 0]
    assert s["range_wall_ns"].tolist()[:5] == [
        4284007 + 4292749,
        4296996 + 4295023,
        3156989,
        3117209,
        3117280,
    ]
    assert (s["launches"] == 0).all() and s["gpu_busy_fraction"].isna().all()


def test_cpu_capture_missing_domain_hint(cpu):
    assert "never appears" in ns.missing_ranges_hint(cpu, domain="nope")
    assert "starts with 'zzz:'" in ns.missing_ranges_hint(cpu, prefix="zzz:")


# ------------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda p: p.write_bytes(b""), "empty file"),
        (lambda p: p.write_text("kernel,time\nsquare,1.0\n"), "not an SQLite file"),
        (lambda p: p.write_bytes(CPU.read_bytes()[: CPU.stat().st_size // 2]), "truncated"),
        (lambda p: None, "no such file"),
    ],
)
def test_unreadable_files_raise_parse_error_naming_the_file(tmp_path, make, reason):
    p = tmp_path / "bad.sqlite"
    make(p)
    with pytest.raises(ParseError) as err:
        ns.read_export(p)
    assert reason in err.value.reason
    assert str(p) in str(err.value) and err.value.path == p
    assert err.value.exit_code == EXIT_PARSE


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(ParseError, match="not an Nsight Systems SQLite export"):
        ns.read_export(p)


def test_corrupt_page_is_a_parse_error(tmp_path):
    p = tmp_path / "corrupt.sqlite"
    con = sqlite3.connect(VARIANTS)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    ).fetchone()[0]
    con.close()
    data = bytearray(VARIANTS.read_bytes())
    data[(root - 1) * page_size : root * page_size] = b"\xff" * page_size  # same size, a garbage page
    p.write_bytes(bytes(data))
    with pytest.raises(ParseError) as err:
        ns.read_export(p)
    assert str(p) in str(err.value) and "SQLite error" in err.value.reason


def test_minimal_export_reads_empty(tmp_path):
    p = tmp_path / "min.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    con.commit()
    con.close()
    ex = ns.read_export(p)
    assert ex.kernels.empty and ex.nvtx.empty and list(ex.nvtx.columns) == ns.NVTX_COLUMNS
    assert "no NVTX events at all" in ns.missing_ranges_hint(ex)
    s = ns.summarize(ns.attribute_kernels(ex), ns.variant_ranges(ex))
    assert len(s) == 1 and s["launches"].tolist() == [0]


def test_unsorted_rows_and_null_columns_are_read(tmp_path):
    """Row order is not promised by newer nsys; nullable columns may hold NULL."""
    p = tmp_path / "shuffled.sqlite"
    shutil.copyfile(VARIANTS, p)
    con = sqlite3.connect(p)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
        con.execute(f"CREATE TABLE tmp AS SELECT * FROM {table} ORDER BY start DESC")
        con.execute(f"DELETE FROM {table}")
        con.execute(f"INSERT INTO {table} SELECT * FROM tmp")
        con.execute("DROP TABLE tmp")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE correlationId = 157")
    con.commit()
    con.close()
    ex = ns.read_export(p)
    assert ex.kernels["start"].is_monotonic_increasing and ex.runtime["start"].is_monotonic_increasing
    assert ex.nvtx["event_type"].tolist() == [75, 76, 76, 59, 60, 75, 76]
    assert ex.kernels.loc[ex.kernels["correlation_id"] == 157, "global_pid"].tolist() == [-1]
    att = ns.attribute_kernels(ex, domain=None, prefix="")
    assert att.dropna(subset=["variant"])["correlation_id"].tolist() == [223, 238]


# ------------------------------------------------------------------ attribution, synthetic

PID = 7 << 24  # globalPid of process 7; its threads are PID | tid


def make_export(kernels=(), runtime=(), nvtx=(), memcpy=(), memset=()) -> ns.NsysExport:
    """An NsysExport from short tuples:
    kernels (start, end, correlation_id[, global_pid, name]); runtime (start, end, tid,
    correlation_id[, global_pid]); nvtx (start, end, event_type, text, tid[, domain])."""

    def frame(rows, cols, fill):
        return pd.DataFrame([{**fill(r), **dict(zip(cols, r))} for r in rows])

    def kern(r):
        return {
            "device_id": 0,
            "stream_id": 7,
            "global_pid": PID,
            "name": "k",
            "demangled_name": "void k()",
            "grid_x": 1,
            "grid_y": 1,
            "grid_z": 1,
            "block_x": 32,
            "block_y": 1,
            "block_z": 1,
            "registers_per_thread": 16,
            "static_shared_mem_bytes": 0,
            "dynamic_shared_mem_bytes": 0,
        }

    k = frame(kernels, ["start", "end", "correlation_id", "global_pid", "name"], kern)
    k = (
        k.assign(duration_ns=k["end"] - k["start"])[ns.KERNEL_COLUMNS]
        if len(k)
        else pd.DataFrame(columns=ns.KERNEL_COLUMNS)
    )
    rt = [(s, e, (rest[0] if rest else PID) | tid, c) for (s, e, tid, c, *rest) in runtime]
    r = pd.DataFrame(rt, columns=["start", "end", "global_tid", "correlation_id"])
    r = r.assign(duration_ns=r["end"] - r["start"], name="cudaLaunchKernel_v7000")[ns.RUNTIME_COLUMNS]
    nv = pd.DataFrame(
        [
            {
                "start": s,
                "end": e,
                "event_type": et,
                "text": t,
                "global_tid": PID | tid,
                "domain_id": 1,
                "domain": rest[0] if rest else "gprof",
            }
            for (s, e, et, t, tid, *rest) in nvtx
        ],
        columns=ns.NVTX_COLUMNS,
    )
    nv["end"] = nv["end"].astype("Int64")

    def copies(rows, kind_cols):
        df = pd.DataFrame(
            [
                {
                    "start": s,
                    "end": e,
                    "correlation_id": c,
                    "device_id": 0,
                    "stream_id": 7,
                    "global_pid": PID,
                    "bytes": 1024,
                    **kind_cols,
                }
                for (s, e, c) in rows
            ]
        )
        cols = ns.MEMCPY_COLUMNS if "copy_kind" in kind_cols else ns.MEMSET_COLUMNS
        return df.assign(duration_ns=df["end"] - df["start"])[cols] if len(df) else pd.DataFrame(columns=cols)

    return ns.NsysExport(
        Path("synthetic.sqlite"),
        k,
        r,
        nv,
        copies(memcpy, {"copy_kind": "Host-to-Device"}),
        copies(memset, {"value": 0, "mem_kind": "Device"}),
    )


def test_range_boundaries_are_inclusive_and_threads_must_match():
    ex = make_export(
        kernels=[(200, 210, 1), (300, 310, 2), (400, 410, 3), (500, 510, 4)],
        runtime=[(100, 105, 1, 1), (150, 155, 1, 2), (120, 125, 2, 3), (151, 160, 1, 4)],
        nvtx=[(100, 150, 59, "variant:a", 1)],
    )
    att = ns.attribute_kernels(ex)
    # launch at the range's start and at its end are inside; another thread's is not; after is not
    assert att["variant"].tolist()[:2] == ["a", "a"]
    assert att["variant"].isna().tolist() == [False, False, True, True]
    assert att["launch_cpu_ns"].tolist() == [5, 5, 5, 9]


def test_gpu_time_does_not_decide_the_variant():
    # the kernel runs long after its range closed, during the next range
    ex = make_export(
        kernels=[(5_000, 6_000, 1), (6_000, 6_500, 2)],
        runtime=[(110, 120, 1, 1), (4_100, 4_110, 1, 2)],
        nvtx=[(100, 200, 59, "variant:a", 1), (4_000, 7_000, 59, "variant:b", 1)],
    )
    assert ns.attribute_kernels(ex)["variant"].tolist() == ["a", "b"]


def test_nested_and_overlapping_ranges_innermost_wins():
    ex = make_export(
        kernels=[(1000 + i, 1001 + i, i) for i in range(6)],
        runtime=[
            (5, 6, 1, 0),
            (15, 16, 1, 1),
            (35, 36, 1, 2),
            (55, 56, 1, 3),
            (95, 96, 1, 4),
            (150, 151, 1, 5),
        ],
        nvtx=[
            (0, 100, 59, "variant:outer", 1),
            (10, 20, 59, "variant:inner", 1),
            (30, 60, 60, "variant:cross", 1),
            (50, 70, 60, "variant:late", 1),
        ],
    )
    att = ns.attribute_kernels(ex)
    assert att["variant"].tolist()[:5] == ["outer", "inner", "cross", "late", "outer"]
    assert pd.isna(att["variant"].iloc[5])


def test_correlation_ids_are_per_process():
    other = 9 << 24
    ex = make_export(
        kernels=[(500, 510, 1, PID), (600, 610, 1, other)],
        runtime=[(10, 20, 1, 1), (300, 310, 1, 1, other)],
        nvtx=[(0, 100, 59, "variant:a", 1)],
    )
    att = ns.attribute_kernels(ex)
    assert att["variant"].tolist()[0] == "a" and pd.isna(att["variant"].iloc[1])
    assert att["launch_start"].tolist() == [10, 300]


def test_unmatched_launch_and_memcpy_memset_kinds():
    ex = make_export(
        kernels=[(500, 510, 1), (520, 530, 99)],
        runtime=[(10, 20, 1, 1), (30, 40, 1, 2), (50, 60, 1, 3)],
        memcpy=[(400, 450, 2)],
        memset=[(460, 470, 3)],
        nvtx=[(0, 100, 59, "variant:a", 1)],
    )
    att = ns.attribute_kernels(ex)
    assert att["kind"].tolist() == ["memcpy", "memset", "kernel", "kernel"]
    assert att["name"].tolist()[:2] == ["[CUDA memcpy Host-to-Device]", "[CUDA memset]"]
    assert att["variant"].tolist()[:3] == ["a", "a", "a"] and pd.isna(att["variant"].iloc[3])
    assert att["launch_start"].isna().tolist() == [False, False, False, True]
    s = ns.summarize(att, ns.variant_ranges(ex))
    a = s.iloc[0]
    assert (
        a["launches"],
        a["memcpy_count"],
        a["memcpy_time_total_ns"],
        a["memset_count"],
        a["memset_time_total_ns"],
    ) == (1, 1, 50, 1, 10)
    assert s.iloc[1]["launches"] == 1


def test_open_range_extends_to_the_last_timestamp():
    ex = make_export(
        kernels=[(900, 950, 1)], runtime=[(500, 510, 1, 1)], nvtx=[(100, None, 59, "variant:open", 1)]
    )
    r = ns.variant_ranges(ex)
    assert r[["variant", "start", "end"]].values.tolist() == [["open", 100, 950]]
    assert ns.attribute_kernels(ex)["variant"].tolist() == ["open"]


def test_busy_fraction_counts_overlap_once_and_waits_for_the_last_kernel():
    # two range instances of "a": [0,100] with kernels 50-80 and 70-120 on two streams (busy 70,
    # span max(100,120)-0 = 120); [200,300] with one kernel 210-220 (busy 10, span 100)
    ex = make_export(
        kernels=[(50, 80, 1), (70, 120, 2), (210, 220, 3)],
        runtime=[(10, 11, 1, 1), (20, 21, 1, 2), (205, 206, 1, 3)],
        nvtx=[(0, 100, 59, "variant:a", 1), (200, 300, 59, "variant:a", 1)],
    )
    s = ns.summarize(ns.attribute_kernels(ex), ns.variant_ranges(ex))
    a = s.iloc[0]
    assert (a["ranges"], a["range_wall_ns"], a["launches"], a["gpu_time_total_ns"]) == (2, 200, 3, 90)
    assert (a["gpu_busy_ns"], a["gpu_span_ns"]) == (80, 220)
    assert a["gpu_busy_fraction"] == pytest.approx(80 / 220)
    assert a["gpu_time_median_ns"] == 30 and a["gpu_time_min_ns"] == 10 and a["gpu_time_max_ns"] == 50


def brute_force(ex: ns.NsysExport, ranges: pd.DataFrame) -> list:
    """The definition, one launch at a time: latest-starting range containing the call's start."""
    rt = ex.runtime.set_index("correlation_id")
    out = []
    for corr in ex.kernels["correlation_id"]:
        call = rt.loc[corr]
        hit = ranges[
            (ranges["global_tid"] == call["global_tid"])
            & (ranges["start"] <= call["start"])
            & (call["start"] <= ranges["end"])
        ]
        out.append(
            None
            if hit.empty
            else hit.sort_values(["start", "end"], ascending=[True, False]).iloc[-1]["variant"]
        )
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_attribution_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_k, n_r = 400, 40
    starts = rng.integers(0, 10_000, n_r)
    ends = starts + rng.integers(0, 3_000, n_r)
    tids = rng.integers(1, 3, n_r)
    nvtx = [
        (int(s), int(e), 59, f"variant:v{i}", int(t)) for i, (s, e, t) in enumerate(zip(starts, ends, tids))
    ]
    calls = rng.integers(0, 13_000, n_k)
    runtime = [(int(c), int(c) + 5, int(rng.integers(1, 3)), i) for i, c in enumerate(calls)]
    kernels = [(int(c) + 100, int(c) + 150, i) for i, c in enumerate(calls)]
    ex = make_export(kernels=kernels, runtime=runtime, nvtx=nvtx)
    ranges = ns.variant_ranges(ex)
    att = ns.attribute_kernels(ex).sort_values("correlation_id")
    expected = brute_force(ex, ranges)
    got = [
        None if pd.isna(v) else v
        for v in att.set_index("correlation_id").loc[ex.kernels["correlation_id"], "variant"]
    ]
    assert got == expected


@pytest.mark.slow
def test_a_million_kernels_attribute_quickly():
    n, per = 1_000_000, 1000
    i = np.arange(n, dtype=np.int64)
    launch = i * 1000
    k = pd.DataFrame({c: np.zeros(n, dtype=np.int64) for c in ns.KERNEL_COLUMNS})
    k["start"], k["end"], k["duration_ns"], k["correlation_id"] = launch + 500, launch + 900, 400, i
    k["global_pid"] = PID
    k["name"] = "k"
    k["demangled_name"] = "void k()"
    r = pd.DataFrame(
        {
            "start": launch,
            "end": launch + 10,
            "duration_ns": 10,
            "global_tid": PID | 1,
            "correlation_id": i,
            "name": "cudaLaunchKernel_v7000",
        }
    )[ns.RUNTIME_COLUMNS]
    rs = np.arange(0, n, per) * 1000
    nv = pd.DataFrame(
        {
            "start": rs,
            "end": pd.array(rs + per * 1000 - 1, dtype="Int64"),
            "event_type": 59,
            "text": [f"variant:v{j % 10}" for j in range(len(rs))],
            "global_tid": PID | 1,
            "domain_id": 1,
            "domain": "gprof",
        }
    )[ns.NVTX_COLUMNS]
    ex = ns.NsysExport(Path("big"), k, r, nv, make_export().memcpy, make_export().memset)
    t0 = time.perf_counter()
    att = ns.attribute_kernels(ex)
    s = ns.summarize(att, ns.variant_ranges(ex))
    elapsed = time.perf_counter() - t0
    assert s["launches"].tolist() == [100_000] * 10 + [0]
    assert elapsed < 10, f"attribute + summarize of 1e6 kernels took {elapsed:.1f} s"


# ------------------------------------------------------------------- against real nsys


def nsys_stats(report: str, sqlite: Path, tmp_path: Path) -> list[dict[str, str]]:
    """Rows of `nsys stats --report REPORT --format csv` on a copy of the export."""
    copy = tmp_path / sqlite.name
    if not copy.exists():
        shutil.copyfile(sqlite, copy)
        copy.chmod(0o644)
    proc = subprocess.run(
        [str(NSYS), "stats", "--report", report, "--format", "csv", "--output", "-", str(copy)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    # nsys prints "Processing [...]" and a blank line before the CSV header
    head = next(
        i
        for i, ln in enumerate(lines)
        if ln.startswith('"')
        or ln.startswith("Time")
        or ln.startswith("NVTX Range")
        or ln.startswith("Range")
    )
    return list(csv.DictReader(io.StringIO("\n".join(lines[head:]))))


@pytest.mark.nsys
@needs_nsys
def test_kernels_per_range_equal_nvtx_kern_sum(variants, tmp_path):
    rows = nsys_stats("nvtx_kern_sum:base", VARIANTS, tmp_path)
    theirs: dict[str, list[int]] = {}
    for row in rows:
        acc = theirs.setdefault(row["NVTX Range"], [0, 0])
        acc[0] += int(row["Kern Inst"])
        acc[1] += int(row["Total Time (ns)"])
    s = ns.summarize(
        ns.attribute_kernels(variants, domain=None, prefix=""), ns.variant_ranges(variants, None, "")
    )
    # nsys names a range "domain:text", or just text in the default domain; "" = outside
    mine = {
        (v if isinstance(v, str) else ""): [int(n), int(t)]
        for v, n, t in zip(s["variant"], s["launches"], s["gpu_time_total_ns"])
    }
    assert theirs == mine == {"D_torch_push": [1, 5760], "E_torch_startend": [1, 5697], "": [5, 36577]}
    names = {r["NVTX Range"]: r["Kernel Name"] for r in rows if r["NVTX Range"]}
    assert names == {
        "D_torch_push": "vectorized_elementwise_kernel",
        "E_torch_startend": "vectorized_elementwise_kernel",
    }


@pytest.mark.nsys
@needs_nsys
@pytest.mark.parametrize("path", [SQUARE, VARIANTS], ids=["square", "variants"])
def test_kernels_equal_cuda_gpu_kern_sum(path, tmp_path):
    rows = nsys_stats("cuda_gpu_kern_sum:base", path, tmp_path)
    theirs = {
        r["Name"]: [int(r["Instances"]), int(r["Total Time (ns)"]), int(r["Min (ns)"]), int(r["Max (ns)"])]
        for r in rows
    }
    k = ns.read_export(path).kernels
    g = k.groupby("name")["duration_ns"]
    mine = {
        name: [int(g.size()[name]), int(g.sum()[name]), int(g.min()[name]), int(g.max()[name])]
        for name in g.size().index
    }
    assert theirs == mine


@pytest.mark.nsys
@needs_nsys
def test_cpu_ranges_equal_nvtx_sum(cpu, tmp_path):
    rows = nsys_stats("nvtx_sum", CPU, tmp_path)
    theirs = {r["Range"]: (int(r["Instances"]), int(r["Total Time (ns)"])) for r in rows}
    mine = {}
    for domain in ("gprof", "other", None):
        r = ns.variant_ranges(cpu, domain, "")
        for text, g in r.groupby("variant", sort=False):
            mine[f"{domain}:{text}" if domain else text] = (len(g), int(g["wall_ns"].sum()))
    assert theirs == mine
    assert theirs["gprof:variant:a"] == (2, 4284007 + 4292749)


@pytest.mark.nsys
@pytest.mark.slow
@needs_nsys
def test_live_capture_records_the_projects_ranges(tmp_path):
    """nsys + the installed nvtx must record `nvtx.annotate("variant:x", domain="gprof")` ranges:
    with nvtx >= 0.2.13 and nsys 2023.4.4 they silently vanish."""
    pytest.importorskip("nvtx")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for var in ("PYTHONPATH", "LD_LIBRARY_PATH"):  # nvtx beside the interpreter, nsys's own libraries
        if os.environ.get(var):  # (both set so on the H200 by .device/setup.sh)
            env[var] = os.environ[var]
    # `-t nvtx` alone records no NVTX event under nsys 2024.2.3 on a process with no CUDA
    prof = subprocess.run(
        [
            str(NSYS),
            "profile",
            "-t",
            "nvtx,osrt",
            "--sample=none",
            "--cpuctxsw=none",
            "-o",
            str(tmp_path / "live"),
            "--force-overwrite",
            "true",
            sys.executable,
            str(CPU_PROGRAM),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert prof.returncode == 0, prof.stdout[-2000:] + prof.stderr[-2000:]
    exp = subprocess.run(
        [
            str(NSYS),
            "export",
            "--type",
            "sqlite",
            "-o",
            str(tmp_path / "live.sqlite"),
            "--force-overwrite",
            "true",
            str(tmp_path / "live.nsys-rep"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exp.returncode == 0, exp.stderr[-2000:]
    ex = ns.read_export(tmp_path / "live.sqlite")
    assert ns.missing_ranges_hint(ex) is None
    r = ns.variant_ranges(ex)
    assert r["variant"].tolist() == ["a", "b", "a", "b", "c", "d", "t"]
    assert (r["wall_ns"] >= 3_000_000).all()


def test_summarize_refuses_ranges_of_another_selection(variants):
    att = ns.attribute_kernels(variants, domain=None, prefix="")
    with pytest.raises(ValueError, match="same export, domain and prefix"):
        ns.summarize(att, ns.variant_ranges(variants, None, "D_"))


def test_wide_correlation_ids_take_the_exact_path():
    big = 2**33
    ex = make_export(
        kernels=[(500, 510, big + 1), (520, 530, 5)],
        runtime=[(10, 20, 1, big + 1), (30, 40, 1, 5), (35, 45, 1, big + 1)],
        nvtx=[(0, 100, 59, "variant:a", 1)],
    )
    att = ns.attribute_kernels(ex)
    assert att["variant"].tolist() == ["a", "a"] and att["launch_start"].tolist() == [10, 30]


def test_non_integer_in_an_integer_column_is_a_parse_error(tmp_path):
    p = tmp_path / "real.sqlite"
    shutil.copyfile(VARIANTS, p)
    con = sqlite3.connect(p)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 1.5 WHERE correlationId = 223")
    con.commit()
    con.close()
    with pytest.raises(ParseError, match="other than integers"):
        ns.read_export(p)
