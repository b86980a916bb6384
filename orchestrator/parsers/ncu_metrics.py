"""What the ncu parser reads out of Nsight Compute's metrics, declared once: the frames'
columns, the unit normalisation, the key per-kernel metrics, the launch attributes and the
roofline's rates, and `NcuReport`, which both readers (ncu_rep, ncu_csv) return."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from reports.roofline import TENSOR_RATES

# by default a reader looks for the ranges gprof-orch's runner writes
from workloads.nvtx_ranges import NVTX_DOMAIN as DEFAULT_DOMAIN  # noqa: F401
from workloads.nvtx_ranges import RANGE_PREFIX as DEFAULT_PREFIX  # noqa: F401

KERNEL_ID_COLUMNS = ["id", "variant", "kernel"]
METRIC_COLUMNS = KERNEL_ID_COLUMNS + ["metric", "value", "unit", "raw_value", "raw_unit"]
RULE_COLUMNS = KERNEL_ID_COLUMNS + [
    "section",
    "rule",
    "rule_name",
    "type",
    "title",
    "message",
    "message_raw",
    "speedup_type",
    "estimated_speedup_pct",
    "focus_metrics",
]

# --------------------------------------------------------------------------------------------
# Units. ncu writes a unit per metric: base units in a report and with `--print-units base`
# ("ns", "byte", "byte/s", "%", "hz", "cycle", ...), scaled ones in its CSV by default ("us",
# "Mbyte", "Gbyte/s", "Ghz", "Kbyte/block"); older versions spelled time "nsecond", "usecond".
# Its prefixes are SI: the fixture has launch__shared_mem_config_size = 32768 byte in the report
# and 32.768000 Kbyte in the CSV, profiler__replayer_bytes_mem_accessible.avg = 29579730 byte and
# 29.579730 Mbyte. A unit is normalised by these tables, in this order (see normalize_unit).

UNIT_EXACT: dict[str, tuple[str, float]] = {
    "": ("", 1.0),  # dimensionless: attributes, ids, counts ncu gives no unit
    "%": ("pct", 1.0),  # kept in percent (0..100), as the backends report them
}
TIME_NS: dict[str, float] = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}
SI_PREFIX: dict[str, float] = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BASE_RENAME: dict[str, str] = {"byte": "bytes", "hz": "Hz"}

_PREFIXED = re.compile(r"([KMGTP]?)([a-z][a-z_]*)")


def normalize_unit(raw_unit: str) -> tuple[str, float]:
    """(normalised unit, factor): value_in_normalised_unit = raw_value * factor.

    Example:
        >>> normalize_unit("Gbyte/second")
        ('bytes/s', 1000000000.0)
        >>> normalize_unit("us")
        ('ns', 1000.0)
    """
    u = (raw_unit or "").strip()
    if u in UNIT_EXACT:
        return UNIT_EXACT[u]
    if u in TIME_NS:
        return "ns", TIME_NS[u]
    if "/" in u:
        num, den = u.split("/", 1)
        n_unit, n_factor = normalize_unit(num)
        if den in TIME_NS:  # a rate: per second
            return f"{n_unit}/s", n_factor / (TIME_NS[den] * 1e-9)
        d_unit, d_factor = normalize_unit(den)
        return f"{n_unit}/{d_unit}", n_factor / d_factor
    m = _PREFIXED.fullmatch(u)
    if m:
        return BASE_RENAME.get(m.group(2), m.group(2)), SI_PREFIX[m.group(1)]
    return u, 1.0  # "SM", "register", ...: kept as ncu wrote it


# --------------------------------------------------------------------------------------------
# The per-kernel columns, declared once. A key metric takes the first alternative whose metrics
# are all present (their sum, for dram bytes read + write); NaN when the section that holds it
# was not collected.


@dataclass(frozen=True)
class KeyMetric:
    """One per-kernel column read from ncu's metrics: the first alternative whose metrics are all
    present, summed, in `unit`; NaN when none is."""

    column: str
    unit: str  # the normalised unit its sources must have
    sources: tuple[tuple[str, ...], ...]  # alternatives, each summed


KEY_METRICS: tuple[KeyMetric, ...] = (
    KeyMetric("duration_ns", "ns", (("gpu__time_duration.sum",),)),
    KeyMetric(
        "dram_bytes", "bytes", (("dram__bytes.sum",), ("dram__bytes_read.sum", "dram__bytes_write.sum"))
    ),
    KeyMetric("dram_bytes_per_s", "bytes/s", (("dram__bytes.sum.per_second",),)),
    KeyMetric(
        "dram_throughput_pct",
        "pct",
        (
            ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",),
        ),
    ),
    KeyMetric(
        "memory_throughput_pct",
        "pct",
        (("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),),
    ),
    KeyMetric("sm_throughput_pct", "pct", (("sm__throughput.avg.pct_of_peak_sustained_elapsed",),)),
    KeyMetric("achieved_occupancy", "pct", (("sm__warps_active.avg.pct_of_peak_sustained_active",),)),
)

# integer launch attributes: column -> metric
LAUNCH_METRICS: dict[str, str] = {
    "device": "launch__device_id",
    "stream": "launch__stream_id",
    "grid_x": "launch__grid_dim_x",
    "grid_y": "launch__grid_dim_y",
    "grid_z": "launch__grid_dim_z",
    "block_x": "launch__block_dim_x",
    "block_y": "launch__block_dim_y",
    "block_z": "launch__block_dim_z",
    "registers_per_thread": "launch__registers_per_thread",
}


# --------------------------------------------------------------------------------------------
# The roofline's rates, as Nsight Compute's own roofline sections compute them
# (SpeedOfLight_RooflineChart.section of ncu 2025.3.1 for FP32 and FP64; the half-precision terms
# from SpeedOfLight_HierarchicalHalfRooflineChart.section): a weighted sum of per-cycle counts
# times a clock. Achieved work counts an FMA as 2 FLOPs (a packed half add or multiply as 2, a
# packed half FMA as 4) on the SMSPs' clock; the peaks take the SM clock and the DRAM clock. So
# gprof-orch's point is the one ncu's chart draws. NaN where a term is missing (the section was
# not collected).


@dataclass(frozen=True)
class RooflineRate:
    """One roofline rate, as ncu's roofline sections compute it: the weighted sum of per-cycle
    metrics (`terms`) times the `clock` metric, in `unit`."""

    column: str
    terms: tuple[tuple[str, float], ...]  # (per-cycle metric, weight), summed
    clock: str  # the cycles per second they are multiplied by
    unit: str  # the normalised unit of the result


_SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
_SASS_PEAK = "sm__sass_thread_inst_executed_op_{}_pred_on.sum.peak_sustained"
SMSP_CLOCK, SM_CLOCK, DRAM_CLOCK = (
    "smsp__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg.per_second",
    "dram__cycles_elapsed.avg.per_second",
)


def _flops(fadd: str, fmul: str, ffma: str, *, packed: int = 1) -> tuple[tuple[str, float], ...]:
    return ((_SASS.format(fadd), packed), (_SASS.format(fmul), packed), (_SASS.format(ffma), 2 * packed))


ROOFLINE_RATES: tuple[RooflineRate, ...] = (
    RooflineRate("fp32_flop_per_s", _flops("fadd", "fmul", "ffma"), SMSP_CLOCK, "flop/s"),
    RooflineRate("fp64_flop_per_s", _flops("dadd", "dmul", "dfma"), SMSP_CLOCK, "flop/s"),
    RooflineRate("fp16_flop_per_s", _flops("hadd", "hmul", "hfma", packed=2), SMSP_CLOCK, "flop/s"),
    RooflineRate("peak_fp32_flop_per_s", ((_SASS_PEAK.format("ffma"), 2),), SM_CLOCK, "flop/s"),
    RooflineRate("peak_fp64_flop_per_s", ((_SASS_PEAK.format("dfma"), 2),), SM_CLOCK, "flop/s"),
    RooflineRate("peak_fp16_flop_per_s", ((_SASS_PEAK.format("hfma"), 4),), SM_CLOCK, "flop/s"),
    RooflineRate("peak_dram_bytes_per_s", (("dram__bytes.sum.peak_sustained", 1),), DRAM_CLOCK, "bytes/s"),
)
# the section that holds the FP32/FP64 terms, the DRAM peak and the clocks
ROOFLINE_SECTION = "SpeedOfLight_RooflineChart"


# --------------------------------------------------------------------------------------------
# Tensor-core work, which the roofline sections above never count (they count SIMT instructions):
# the tensor pipe's FLOP counters by input format. On GH100 under ncu 2025.3.1 each
# `sm__ops_path_tensor_src_<format>[_dst_fp32].sum` counts exactly 2 x m x n x k per GEMM, wgmma
# (HGMMA) and Triton's tl.dot included (docs/nsight-facts.md). The names differ by chip (GH100
# names fp16 whole, other chips split it by accumulator), so a format takes the first alternative
# the report holds, and the ncu backend asks only for those the GPU has (ncu fails a run on an
# unknown metric). int8 and int1 count integer operations, not FLOPs: left out.


@dataclass(frozen=True)
class TensorFlops:
    """One input format's tensor-core FLOPs: the first alternative whose counters are all in the
    report, summed; `unit` is the format's name in workloads/devices.py (its datasheet peak)."""

    unit: str
    sources: tuple[tuple[str, ...], ...]

    @property
    def column(self) -> str:
        """The per-launch rate: the counted FLOPs over the launch's duration (its name declared
        once, where the roofline reads it)."""
        return TENSOR_RATES[self.unit]


_TENSOR = "sm__ops_path_tensor_src_{}.sum"
TENSOR_FLOPS: tuple[TensorFlops, ...] = (
    TensorFlops("bf16", ((_TENSOR.format("bf16_dst_fp32"),),)),
    TensorFlops(
        "fp16",
        ((_TENSOR.format("fp16"),), (_TENSOR.format("fp16_dst_fp32"), _TENSOR.format("fp16_dst_fp16"))),
    ),
    TensorFlops("tf32", ((_TENSOR.format("tf32_dst_fp32"),),)),
    TensorFlops("fp8", ((_TENSOR.format("fp8"),),)),
    TensorFlops("fp64-tensor", ((_TENSOR.format("fp64"),), (_TENSOR.format("fp64_dst_fp64"),))),
)


def tensor_counters() -> list[str]:
    """Every counter TENSOR_FLOPS may read, in declaration order (what the backend asks ncu for,
    of those the GPU has)."""
    return list(dict.fromkeys(m for t in TENSOR_FLOPS for alt in t.sources for m in alt))


KERNEL_COLUMNS = (
    KERNEL_ID_COLUMNS
    + ["kernel_demangled"]
    + list(LAUNCH_METRICS)
    + [k.column for k in KEY_METRICS]
    + [r.column for r in ROOFLINE_RATES]
    + [t.column for t in TENSOR_FLOPS]
)


@dataclass
class NcuReport:
    """What one Nsight Compute result holds.

    kernels: one row per profiled kernel, columns KERNEL_COLUMNS (id = index in the report);
        the key metrics (KEY_METRICS) in ns, bytes, bytes/s, and percent of peak for the
        *_pct columns and achieved_occupancy (0..100); NaN where the report lacks them.
    metrics: long form, one row per kernel and metric the report holds, columns METRIC_COLUMNS;
        `value` normalised (NaN for text or missing values), `raw_value`/`raw_unit` as read.
    rules: ncu's rule results (empty from CSV), columns RULE_COLUMNS.
    ncu_version, clock_control, cache_control, command_line: as the report recorded them
        (None from CSV, or where the report does not say; None for clock/cache control means
        the option was not on ncu's command line, so ncu's default applied).
    """

    path: Path | None
    kernels: pd.DataFrame
    metrics: pd.DataFrame
    rules: pd.DataFrame
    source: str  # "ncu_report" or "csv"
    ncu_version: str | None = None
    clock_control: str | None = None
    cache_control: str | None = None
    command_line: str | None = None
    session: dict[str, str] = field(default_factory=dict)
    # why `rules` is empty although the report may hold rule results: the CSV fallback could not
    # read them from `ncu --import --page details` (None when they were read, or with ncu_report)
    rules_note: str | None = None
