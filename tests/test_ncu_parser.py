"""The Nsight Compute parser, on a real H200 report and on the CSVs ncu printed for it.

Fixtures (tests/fixtures/ncu/*/README.md says how each was captured): a .ncu-rep of 10 a*a
kernels under `nvtx.annotate("variant:a*a", domain="gprof")`, its `--csv --page raw` export, and
the mixed stdout of a direct `ncu --csv` run.
"""

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.backends import ncu_tool
from orchestrator.errors import ParseError, ToolFailedError, ToolNotFoundError
from orchestrator.parsers import ncu_csv, ncu_frames, ncu_rep
from reports.demangle import function_name

# the .ncu-rep tests need NVIDIA's ncu_report module (pyproject's `test` extra installs it);
# the CSV, unit and log tests do not
needs_ncu_report = pytest.mark.skipif(not ncu_rep.have_ncu_report(), reason="pip install ncu-report")

REP = "ncu/h200_square_mul_sol_mem/square_mul_sol_mem.ncu-rep"
RAW_CSV = "ncu/h200_square_mul_sol_mem/square_mul_sol_mem_raw.csv"
MIXED_CSV = "ncu/h200_csv_stdout_mixed/ncu_csv_stdout_mixed.csv"
HERE = Path(__file__).resolve().parent

# gpu__time_duration.sum of the 10 kernels, in report order (ns)
DURATIONS_NS = [4128, 4160, 4192, 4192, 4192, 4160, 4352, 4192, 4192, 4128]


@pytest.fixture(scope="module")
def rep():
    return ncu_tool.read_report(HERE / "fixtures" / REP)  # isolated: in a child process


@pytest.fixture(scope="module")
def csv_rep():
    return ncu_rep.read_csv_raw(HERE / "fixtures" / RAW_CSV)


def metric(report, kid, name):
    row = report.metrics[(report.metrics["id"] == kid) & (report.metrics["metric"] == name)]
    assert len(row) == 1, name
    return row.iloc[0]


# ---------------------------------------------------------------------------------- the report


@needs_ncu_report
def test_kernels_variants_and_launch(rep):
    k = rep.kernels
    assert rep.source == "ncu_report"
    assert list(k.columns) == ncu_rep.KERNEL_COLUMNS
    assert list(k["id"]) == list(range(10))
    assert list(k["duration_ns"]) == DURATIONS_NS
    assert set(k["variant"]) == {"a*a"}  # NVTX range gprof@variant:a*a
    assert set(k["kernel"]) == {"vectorized_elementwise_kernel"}
    assert (
        k["kernel_demangled"].str.startswith("void at::native::vectorized_elementwise_kernel<(int)4,").all()
    )
    assert k["kernel_demangled"].str.contains("MulFunctor<float>").all()  # a*a, not pow
    first = k.iloc[0]
    assert (first.grid_x, first.grid_y, first.grid_z) == (1024, 1, 1)  # 1024*1024 floats / 4 per thread / 128
    assert (first.block_x, first.block_y, first.block_z) == (128, 1, 1)
    assert (first.registers_per_thread, first.device, first.stream) == (32, 0, 7)


@needs_ncu_report
def test_key_metrics_normalised(rep):
    first = rep.kernels.iloc[0]
    d = metric(rep, 0, "gpu__time_duration.sum")
    assert (d.value, d.unit, d.raw_value, d.raw_unit) == (4128.0, "ns", 4128.0, "ns")
    assert first.duration_ns == 4128.0
    # percent of peak, as ncu reports it (unit "pct"): 21.3 % of peak DRAM throughput
    assert first.dram_throughput_pct == 21.2887068380098
    assert metric(rep, 0, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed").unit == "pct"
    assert first.memory_throughput_pct == 25.04035004817458
    assert first.sm_throughput_pct == 5.103192231905104
    assert first.dram_bytes_per_s == pytest.approx(1017426356589.1473, rel=1e-15)  # 1.02 TB/s
    # rate x time gives back the bytes ncu counted: 4,199,936 (the mixed-stdout run has
    # dram__bytes.sum = 4,199,936 for the same kernel): the units line up
    assert first.dram_bytes_per_s * first.duration_ns * 1e-9 == pytest.approx(4199936, abs=0.5)
    # neither section collected holds dram__bytes.sum or achieved occupancy
    assert math.isnan(first.dram_bytes) and math.isnan(first.achieved_occupancy)


@needs_ncu_report
def test_every_metric_kept_with_normalised_units(rep):
    m = rep.metrics
    assert list(m.columns) == ncu_rep.METRIC_COLUMNS
    assert len(m) == 10 * 548 and (m.groupby("id").size() == 548).all()
    assert set(m["variant"]) == {"a*a"}
    units = dict(m.groupby("raw_unit")["unit"].first())
    assert units == {
        "": "",
        "%": "pct",
        "SM": "SM",
        "block": "block",
        "byte": "bytes",
        "byte/block": "bytes/block",
        "byte/s": "bytes/s",
        "cluster": "cluster",
        "cycle": "cycle",
        "hz": "Hz",
        "inst": "inst",
        "ns": "ns",
        "pass": "pass",
        "register/thread": "register/thread",
        "sector": "sector",
        "thread": "thread",
        "warp": "warp",
    }
    pct = m[(m["raw_unit"] == "%") & m["value"].notna()]
    assert len(pct) == 10 * 243  # 252 "%" metrics less 8 text breakdowns and 1 "no data"
    assert (pct["value"] == pct["raw_value"].astype(float)).all()
    # text values stay in raw_value, value is NaN
    name = metric(rep, 0, "device__attribute_display_name")
    assert name.raw_value == "NVIDIA H200" and math.isnan(name.value)
    assert math.isnan(metric(rep, 0, "derived__local_spilling_requests_pct").value)  # "no data"
    assert metric(rep, 0, "device__attribute_total_memory").value == 150109880320.0


@needs_ncu_report
def test_session_recorded_in_the_report(rep):
    assert rep.ncu_version == "2025.3.1.0"
    assert rep.clock_control == "none"
    assert rep.cache_control is None  # not on the command line: ncu's default applied
    assert "--nvtx-include gprof@variant:a*a/ --section SpeedOfLight" in rep.command_line
    assert rep.session["CUDA Version"] == "13.0"
    assert rep.session["Nsight Compute Target"].startswith("2025.3.1.0 (build")


@needs_ncu_report
def test_rules_kept(rep):
    r = rep.rules
    assert list(r.columns) == ncu_rep.RULE_COLUMNS
    assert list(r["id"]) == list(range(10))  # one rule result per kernel in these two sections
    first = r.iloc[0]
    assert (first.section, first.rule, first.rule_name, first.type, first.title) == (
        "SpeedOfLight",
        "SOLBottleneck",
        "Bottleneck",
        "optimization",
        "Small Grid",
    )
    assert (first.variant, first.kernel) == ("a*a", "vectorized_elementwise_kernel")
    assert "@section:LaunchStats:Launch Statistics@" in first.message_raw
    assert first.message == (
        "This kernel grid is too small to fill the available resources on this device, "
        "resulting in only 0.5 full waves across all SMs. Look at Launch Statistics for "
        "more details."
    )
    assert first.focus_metrics == "launch__waves_per_multiprocessor=0.484848"
    assert first.speedup_type is None and math.isnan(first.estimated_speedup_pct)


@needs_ncu_report
def test_isolated_and_in_process_reads_agree(rep, fixtures):
    direct = ncu_rep.read_report(fixtures / REP)
    pd.testing.assert_frame_equal(direct.kernels, rep.kernels)
    pd.testing.assert_frame_equal(direct.metrics, rep.metrics)
    pd.testing.assert_frame_equal(direct.rules, rep.rules)


@needs_ncu_report
def test_variant_needs_the_domain_and_prefix(fixtures):
    other = ncu_rep.read_report(fixtures / REP, domain="other")
    assert other.kernels["variant"].isna().all() and other.metrics["variant"].isna().all()
    any_domain = ncu_rep.read_report(fixtures / REP, domain=None, prefix="variant:a")
    assert set(any_domain.kernels["variant"]) == {"*a"}


# ------------------------------------------------------------------------- report vs. its CSV


@needs_ncu_report
def test_csv_export_equals_the_report(rep, csv_rep):
    """Every value ncu_report reads equals the CSV's, within the CSV's printing.

    The CSV prints each value in an auto-scaled unit (us, Mbyte, Tbyte/s, ...) with a fixed
    number of decimals. So the check is exact on the text: the report's value, converted to the
    CSV's unit and printed with as many decimals as the CSV cell has, is the CSV cell (without
    its thousands separators), for every numeric value. After normalisation both sides then
    differ by at most half a unit in the CSV's last printed place, times the unit's factor; the
    values ncu printed in full (integers, ns, base units) are equal exactly.
    """
    r = rep.metrics.set_index(["id", "metric"])
    c = csv_rep.metrics.set_index(["id", "metric"])
    only_report = set(r.index.get_level_values("metric")) - set(c.index.get_level_values("metric"))
    assert len(only_report) == 8 and all(name.startswith("breakdown:") for name in only_report)
    assert set(c.index) <= set(r.index) and len(c) == 10 * 540
    numeric = exact = 0
    for key, cv in c.iterrows():
        rv = r.loc[key]
        assert rv.unit == cv.unit, key
        if isinstance(rv.raw_value, (int, float)) and not (
            isinstance(rv.raw_value, float) and math.isnan(rv.raw_value)
        ):
            numeric += 1
            cell = cv.raw_value.replace(",", "")
            decimals = len(cell.split(".")[1]) if "." in cell else 0
            in_csv_unit = (
                float(rv.raw_value)
                * ncu_rep.normalize_unit(rv.raw_unit)[1]
                / ncu_rep.normalize_unit(cv.raw_unit)[1]
            )
            assert f"{in_csv_unit:.{decimals}f}" == cell, key
            half_ulp = 0.5 * 10.0**-decimals * ncu_rep.normalize_unit(cv.raw_unit)[1]
            assert abs(rv.value - cv.value) <= half_ulp * (1 + 1e-9), key
            exact += rv.value == cv.value
        elif rv.raw_value is None:  # no value: "no data" in the CSV
            assert cv.raw_value == "no data" and math.isnan(cv.value) and math.isnan(rv.value), key
        else:
            assert rv.raw_value == cv.raw_value, key  # text: "NVIDIA H200", "PolicySpread", ...
    assert numeric == 10 * 531 and exact == 3634


@needs_ncu_report
def test_csv_kernels_equal_the_report(rep, csv_rep):
    ck, rk = csv_rep.kernels, rep.kernels
    assert (
        csv_rep.source == "csv"
        and csv_rep.rules.empty
        and list(csv_rep.rules.columns) == ncu_rep.RULE_COLUMNS
    )
    same = ["id", "variant", "kernel", *ncu_rep.LAUNCH_METRICS, "duration_ns"]
    pd.testing.assert_frame_equal(ck[same], rk[same])  # 4.128000 us * 1000 is 4128.0 exactly
    # the CSV printed these with 6 decimals, in Tbyte/s and in %: half a unit in the last place
    # is 0.5e-6 * 1e12 bytes/s and 0.5e-6 %
    for col, half_ulp in [
        ("dram_bytes_per_s", 0.5e-6 * 1e12),
        ("dram_throughput_pct", 0.5e-6),
        ("memory_throughput_pct", 0.5e-6),
        ("sm_throughput_pct", 0.5e-6),
    ]:
        diff = (ck[col] - rk[col]).abs()
        assert (diff <= half_ulp * (1 + 1e-9)).all() and (diff > 0).any(), col
    # the CSV's kernel name is demangled differently (no namespaces) but names the same function
    assert ck["kernel_demangled"].iloc[0].startswith("void vectorized_elementwise_kernel<4, BinaryFunctor<")


@needs_ncu_report
def test_si_prefixes_seen_in_the_fixture(rep, csv_rep):
    # 1 Kbyte = 1000 bytes in ncu: the same value in the report and in its CSV export
    for name, report_raw, csv_raw in [
        ("launch__shared_mem_config_size", (32768, "byte"), ("32.768000", "Kbyte")),
        ("profiler__replayer_bytes_mem_accessible.avg", (29579730.0, "byte"), ("29.579730", "Mbyte")),
    ]:
        r, c = metric(rep, 0, name), metric(csv_rep, 0, name)
        assert (r.raw_value, r.raw_unit) == report_raw and (c.raw_value, c.raw_unit) == csv_raw
        assert r.value == c.value and r.unit == c.unit == "bytes"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("ns", ("ns", 1.0)),
        ("nsecond", ("ns", 1.0)),
        ("us", ("ns", 1e3)),
        ("usecond", ("ns", 1e3)),
        ("msecond", ("ns", 1e6)),
        ("second", ("ns", 1e9)),
        ("byte", ("bytes", 1.0)),
        ("Kbyte", ("bytes", 1e3)),
        ("Mbyte", ("bytes", 1e6)),
        ("Gbyte", ("bytes", 1e9)),
        ("Tbyte", ("bytes", 1e12)),
        ("byte/s", ("bytes/s", 1.0)),
        ("byte/second", ("bytes/s", 1.0)),
        ("Gbyte/second", ("bytes/s", 1e9)),
        ("Tbyte/s", ("bytes/s", 1e12)),
        ("Kbyte/usecond", ("bytes/s", 1e9)),
        ("%", ("pct", 1.0)),
        ("", ("", 1.0)),
        ("cycle", ("cycle", 1.0)),
        ("Mcycle", ("cycle", 1e6)),
        ("cycle/nsecond", ("cycle/s", 1e9)),
        ("hz", ("Hz", 1.0)),
        ("Ghz", ("Hz", 1e9)),
        ("Kinst", ("inst", 1e3)),
        ("Kbyte/block", ("bytes/block", 1e3)),
        ("register/thread", ("register/thread", 1.0)),
        ("SM", ("SM", 1.0)),
    ],
)
def test_normalize_unit(raw, expected):
    unit, factor = ncu_rep.normalize_unit(raw)
    assert unit == expected[0] and factor == pytest.approx(expected[1], rel=1e-15)


# ------------------------------------------------------------------------ ncu --csv stdout


def test_mixed_stdout_csv(fixtures):
    path = fixtures / MIXED_CSV
    assert path.read_text().startswith("==WARNING== Note: Running with unmodified GPU clocks")
    rep = ncu_rep.read_csv_raw(path)
    k = rep.kernels
    assert (
        len(k) == 10
        and set(k["variant"]) == {"a*a"}
        and set(k["kernel"]) == {"vectorized_elementwise_kernel"}
    )
    assert list(k["duration_ns"]) == [4160, 4160, 4160, 4384, 4160, 4160, 4320, 4160, 4128, 4320]
    assert k["dram_bytes"].iloc[0] == 4199936.0  # "4,199,936" byte
    assert k["memory_throughput_pct"].iloc[0] == 24.76  # "24.76" %
    assert math.isnan(k["dram_throughput_pct"].iloc[0])  # not among the --metrics asked for
    assert (rep.metrics.groupby("id").size() == 274).all()
    d = metric(rep, 0, "gpu__time_duration.sum")
    assert (d.value, d.unit, d.raw_value, d.raw_unit) == (4160.0, "ns", "4,160", "ns")
    # the same text handed over as a string
    again = ncu_rep.read_csv_raw(path.read_text())
    assert again.path is None
    pd.testing.assert_frame_equal(again.metrics, rep.metrics)


def test_csv_errors(tmp_path):
    with pytest.raises(ParseError, match="no such file"):
        ncu_rep.read_csv_raw(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ParseError, match="empty file"):
        ncu_rep.read_csv_raw(tmp_path / "empty.csv")
    log = (
        "==PROF== Connected to process 42 (/usr/bin/python3)\nok\n==PROF== Disconnected from process 42\n"
        "==WARNING== No kernels were profiled.\n"
    )
    with pytest.raises(ParseError, match="no ncu CSV header.*No kernels were profiled"):
        ncu_rep.read_csv_raw(log)
    header = '"ID","Kernel Name","gpu__time_duration.sum"\n"","","ns"\n'
    with pytest.raises(ParseError, match="no kernel rows"):
        ncu_rep.read_csv_raw(header)
    with pytest.raises(ParseError, match="kernel row 1 has 2 fields, the header 3"):
        ncu_rep.read_csv_raw(header + '"0","k"\n')
    ok = ncu_rep.read_csv_raw(header + '"0","void k(int)","1,024"\n')
    assert ok.kernels["duration_ns"].tolist() == [1024.0] and ok.kernels["kernel"].tolist() == ["k"]
    assert ok.kernels["variant"].isna().all()


def test_csv_nvtx_column_with_colons_in_the_range_name():
    cell = '646  "gprof:outer:none:none:none:none:REGISTERED:outer" "gprof:variant:a:b:none:none:RGB:0xff:ASCII:variant:a:b" '
    assert ncu_csv._csv_nvtx(cell, "x") == [("gprof", "outer"), ("gprof", "variant:a:b")]
    assert ncu_frames.variant_of(ncu_csv._csv_nvtx(cell, "x"), "gprof", "variant:") == "a:b"


@pytest.mark.parametrize(
    "demangled, name",
    [
        (
            "void vectorized_elementwise_kernel<4, BinaryFunctor<float, float, float, MulFunctor<float>>, "
            "array<char *, 3>>(int, T2, T3)",
            "vectorized_elementwise_kernel",
        ),
        (
            "void at::native::(anonymous namespace)::reduce_kernel<512, 1, ReduceOp<float>>(T3)",
            "reduce_kernel",
        ),
        ("sq(float const*, float*, int, int)", "sq"),
        ("triton_poi_fused_mul_0", "triton_poi_fused_mul_0"),
    ],
)
def test_function_name(demangled, name):
    assert function_name(demangled) == name


# ---------------------------------------------------------------------------- unreadable files


@needs_ncu_report
def test_missing_empty_truncated_and_foreign_files(tmp_path, fixtures):
    data = (fixtures / REP).read_bytes()
    cases = {
        "missing.ncu-rep": (None, "no such file"),
        "empty.ncu-rep": (b"", "empty file"),
        "first1000.ncu-rep": (
            data[:1000],
            r"truncated: the record at byte 197 needs 3716673 bytes, 799 are left",
        ),
        "short_by_10.ncu-rep": (data[:-10], "truncated: the record at byte 4154427"),
        "text.ncu-rep": (b"hello, not a report\n", r"not an Nsight Compute report \(no NVR header\)"),
        "csv.ncu-rep": ((fixtures / RAW_CSV).read_bytes(), "no NVR header"),
        "header_only.ncu-rep": (data[:10], "holds no profiled kernels"),
    }
    for name, (content, reason) in cases.items():
        p = tmp_path / name
        if content is not None:
            p.write_bytes(content)
        for read in (ncu_tool.read_report, ncu_rep.read_report):  # in a child, and in this process
            with pytest.raises(ParseError, match=reason) as err:
                read(p)
            assert err.value.path == p and str(p) in err.value.render()


@needs_ncu_report
def test_ncu_report_itself_does_not_notice_truncation(tmp_path, fixtures):
    """Why the framing is checked first: ncu_report returns no or fewer kernels, silently."""
    import ncu_report

    data = (fixtures / REP).read_bytes()
    (tmp_path / "a.ncu-rep").write_bytes(data[:1000])
    (tmp_path / "b.ncu-rep").write_bytes(data[:4_100_000])
    assert ncu_report.load_report(str(tmp_path / "a.ncu-rep")).num_ranges() == 0
    assert ncu_report.load_report(str(tmp_path / "b.ncu-rep")).range_by_idx(0).num_actions() == 8


def corrupt_copy(fixtures, tmp_path):
    # one byte zeroed inside a small record: the framing is intact, ncu_report aborts on it
    data = bytearray((fixtures / REP).read_bytes())
    data[3827888] = 0
    p = tmp_path / "corrupt.ncu-rep"
    p.write_bytes(bytes(data))
    return p


@needs_ncu_report
def test_corrupt_report_is_a_parse_error_not_a_crash(tmp_path, fixtures):
    p = corrupt_copy(fixtures, tmp_path)
    with pytest.raises(
        ParseError, match=r"ncu_report could not read it \(killed by signal 6\).*Check failed"
    ):
        ncu_tool.read_report(p)


@needs_ncu_report
def test_ncu_report_aborts_the_interpreter_on_that_file(tmp_path, fixtures):
    """Why ncu_tool.read_report runs ncu_report in a child process (seen with ncu-report 2026.3.1)."""
    p = corrupt_copy(fixtures, tmp_path)
    code = "import ncu_report, sys; c = ncu_report.load_report(sys.argv[1]); print(c.num_ranges())"
    proc = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        pytest.skip("this ncu_report no longer aborts on the corrupt file")
    assert proc.returncode == -6 and "Check failed: count >= 0" in proc.stderr


def test_module_imports_neither_torch_nor_ncu_report():
    code = (
        "import sys, orchestrator.parsers.ncu_rep; "
        "assert 'torch' not in sys.modules and 'ncu_report' not in sys.modules, sorted(sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(HERE.parent)
    )
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------- load()


def test_import_argv():
    assert ncu_tool.import_argv("/opt/ncu", "r.ncu-rep") == [
        "/opt/ncu",
        "--import",
        "r.ncu-rep",
        "--csv",
        "--page",
        "raw",
    ]


@needs_ncu_report
def test_load_uses_ncu_report(fixtures):
    assert ncu_tool.load(fixtures / REP).source == "ncu_report"


def fake_ncu(tmp_path, csv_path, rc=0):
    """An `ncu` that records its argv and prints a captured --page raw CSV."""
    script = tmp_path / "ncu"
    script.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        printf '%s\\n' "$@" >> "{tmp_path}/argv.txt"
        cat "{csv_path}"
        exit {rc}
    """)
    )
    script.chmod(0o755)
    return script


def test_load_falls_back_to_ncu_import(tmp_path, fixtures, csv_rep):
    ncu = fake_ncu(tmp_path, fixtures / RAW_CSV)
    rep = ncu_tool.load(fixtures / REP, ncu=ncu, reader="ncu")
    # the raw page for the numbers, then the details page for ncu's findings (this fake prints the
    # raw page there too: the findings are missing and the report says why)
    assert (tmp_path / "argv.txt").read_text().splitlines() == [
        "--import",
        str(fixtures / REP),
        "--csv",
        "--page",
        "raw",
        "--import",
        str(fixtures / REP),
        "--csv",
        "--page",
        "details",
    ]
    assert rep.source == "csv" and rep.path == fixtures / REP
    assert rep.rules.empty and rep.rules_note.startswith("ncu's findings were not read")
    pd.testing.assert_frame_equal(rep.kernels, csv_rep.kernels)
    pd.testing.assert_frame_equal(rep.metrics, csv_rep.metrics)


def test_load_reports_a_failing_ncu(tmp_path, fixtures):
    ncu = fake_ncu(tmp_path, fixtures / RAW_CSV, rc=1)
    with pytest.raises(ToolFailedError, match="exited with status 1") as err:
        ncu_tool.load(fixtures / REP, ncu=ncu, reader="ncu")
    assert err.value.argv[1:] == ["--import", str(fixtures / REP), "--csv", "--page", "raw"]


def test_load_without_ncu_report_or_ncu(tmp_path, fixtures, monkeypatch):
    from orchestrator import tools

    monkeypatch.setattr(ncu_rep, "have_ncu_report", lambda: False)
    monkeypatch.delenv("GPROF_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(tools.SEARCH, "ncu", [])
    with pytest.raises(ToolNotFoundError, match="ncu_report module is not installed and no ncu") as err:
        ncu_tool.load(fixtures / REP)
    assert "pip install ncu-report" in err.value.hint


# ------------------------------------------------------------------------ ncu's log

# Sample log lines. Each is ncu's wording as it appears in ncu output quoted by users (public
# repositories, ncu 2022.4 to 2025.x), except the unknown-section line: its exact wording was not
# found in the stored sources, so that sample is an assumption and the classifier matches it
# loosely.
LOG_PERMISSION = """\
==PROF== Connected to process 87374 (/usr/bin/python3)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 87374
==WARNING== No kernels were profiled.
"""
LOG_NO_KERNELS = """\
==PROF== Connected to process 621 (/usr/bin/python3.12)
ok square
==PROF== Disconnected from process 621
==WARNING== No kernels were profiled.
"""
LOG_UNKNOWN_METRIC = """\
==PROF== Connected to process 20101 (/usr/bin/python3.10)
==ERROR== Failed to find metric regex:^flop_count_sp\\.(sum|min|max|avg|pct|ratio|max_rate)$
"""
LOG_UNKNOWN_SECTION_ASSUMED = "==ERROR== Could not find section 'SpeedOfLite'.\n"  # assumed wording
LOG_NO_GPU = """\
==PROF== Connected to process 4613 (/home/user/add1.exe)
==ERROR== Profiling is not supported on device 0. To find out supported GPUs refer --list-chips option.
==PROF== Disconnected from process 4613
==WARNING== No kernels were profiled.
"""
LOG_NO_DRIVER = """\
==ERROR== Nsight Compute failed to connect to the CUDA driver (stub libcuda.so[.1] on path?).
==ERROR== The application returned an error code (1).
==WARNING== No kernels were profiled.
"""
LOG_APP_FAILED = """\
==PROF== Connected to process 706 (/usr/bin/python3.12)
==PROF== Disconnected from process 706
==ERROR== The application returned an error code (1).
"""


def test_ncu_errors():
    assert ncu_tool.ncu_errors(LOG_PERMISSION) == [
        LOG_PERMISSION.splitlines()[1],
        "==WARNING== No kernels were profiled.",
    ]
    assert ncu_tool.ncu_errors(LOG_NO_KERNELS) == ["==WARNING== No kernels were profiled."]
    assert ncu_tool.ncu_errors("") == [] and ncu_tool.ncu_errors("==PROF== Connected\nok\n") == []


def test_ncu_errors_of_the_mixed_stdout_fixture(fixtures):
    assert ncu_tool.ncu_errors((fixtures / MIXED_CSV).read_text()) == [
        "==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, profiling results "
        "may be inconsistent."
    ]


@pytest.mark.parametrize(
    "log, kind",
    [
        (LOG_PERMISSION, "permission"),  # also says "No kernels were profiled": the cause wins
        (LOG_NO_KERNELS, "no_kernels"),
        (LOG_UNKNOWN_METRIC, "unknown_metric"),
        (LOG_UNKNOWN_SECTION_ASSUMED, "unknown_metric"),
        (LOG_NO_GPU, "no_gpu"),
        (LOG_NO_DRIVER, "no_gpu"),
        (LOG_APP_FAILED, "other"),
        ("", "other"),
    ],
)
def test_classify_ncu_failure(log, kind):
    assert kind in ncu_tool.FAILURE_KINDS
    assert ncu_tool.classify_ncu_failure(log) == kind


def test_read_report_without_ncu_report(fixtures, monkeypatch):
    monkeypatch.setattr(ncu_rep, "have_ncu_report", lambda: False)
    with pytest.raises(ToolNotFoundError, match="ncu_report module is not installed") as err:
        ncu_rep.read_report(fixtures / REP)
    assert "pip install ncu-report" in err.value.hint
