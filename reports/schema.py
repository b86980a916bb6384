"""The one schema of gprof-orch: a long-form frame, one row per measured value.

Units are normalised when a parser builds rows: times in ns, sizes in bytes, rates in
bytes/s, fractions as "fraction" (0..1), percentages of a peak as "pct" (0..100, as ncu
reports them), counts as "count".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workloads.statuses import NO_GPU_WORK, OTHER_STREAM, STALE

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported by the functions that build frames, not here: a backend declares its columns
# (MergedTime) at import, and a Dask worker that only runs a point never loads pandas
# (execution.execute_point; tests/test_cluster.py)
SCHEMA_VERSION = 1

COLUMNS = ["run", "backend", "workload", "variant", "kernel", "metric", "value", "unit"]

# a workload.json variant's statuses whose numbers are reported: stopped part-way (interrupted,
# timed out), it keeps what it took, and its row says so; a stale result or one with no GPU work
# keeps its samples as the evidence, never as a ranking (workloads/statuses.py)
PART_WAY = ("interrupted", "timed out")
SAMPLED = ("ok", *PART_WAY, STALE, NO_GPU_WORK)
# the statuses of a variant whose measured block ran whole: a profiler's report holds all its work
RAN = ("ok", STALE, NO_GPU_WORK)
# the status of a row whose rate is above what the device can do (reports/plausibility.py)
IMPOSSIBLE = "impossible"
# a row's statuses whose number must not be ranked: no speedup, whatever its median
UNRANKED = (STALE, NO_GPU_WORK, OTHER_STREAM, IMPOSSIBLE)
# a variant the runner was measuring when it stopped without saving workload.json again (a full
# disk, a SIGKILL): its result is lost, and `report` of the folder exits 1 (never a result)
NOT_SAVED = "not saved"
# kernel value for rows that describe a whole variant, not one kernel
ALL_KERNELS = "*"
# variant value for GPU work outside every variant's range (input creation, warm-up, checks)
OUTSIDE = "(outside variants)"
# metric of a variant the workload ran but the profiler's report does not hold; its value says
# what is missing: its range, or (on a GPU) any GPU activity in its range
NOT_IN_REPORT = "not_in_report"
NO_RANGE, NO_ACTIVITY = 1, 2
# metric of a variant whose launches (value: how many) do not split into its iterations: the
# report lost some (or holds extra), so it has no per-iteration time; the table marks it incomplete
UNEVEN_LAUNCHES = "uneven_launches"
# metric of a variant measured in a run whose profiler said it lost events (value 1): any of its
# GPU work may be missing from the report, so the table marks it incomplete
LOST_EVENTS = "lost_events"
# metric of a variant whose report holds (value) another number of iterations than it ran
ITERATIONS_IN_REPORT = "iterations_in_report"
# metric of a captured range (exec/import) in which its own thread launched no GPU work, so its
# time is the range's wall time; value: the kernel launches other threads made inside its span
WALL_TIME_ONLY = "wall_time_only"
# metric of a captured range with GPU work of its own, inside whose span other threads launched
# more (value: how many), which it does not count, as nvtx_kern_sum does not (PyTorch's backward)
OTHER_THREAD_LAUNCHES = "other_thread_launches"
# metrics of a captured range reported by window (exec/import --attribute window, the default): the
# GPU activities it counts that a thread with no range open launched inside it (PyTorch's backward:
# autograd's thread), their kernel launches (FROM_OTHER_THREADS, as launches/iter counts) and the GPU
# ns of all of them, memsets and copies too (FROM_OTHER_THREADS_NS, as its time counts), all instances
# together; OTHER_RANGE_LAUNCHES: how many other threads launched inside its span that ranges of
# their own took (or one open on a third thread that started later)
FROM_OTHER_THREADS = "from_other_threads_launches"
FROM_OTHER_THREADS_NS = "from_other_threads_gpu_ns"
OTHER_RANGE_LAUNCHES = "other_range_launches"
# metric of `time` on the kernel clock (workloads/kernel_clock.py), whose median is each call's own
# GPU work summed from CUPTI's records (nsys's figure): the CUDA events around the same call, ns,
# which also hold the GPU's processing of each launch (about 2.4 to 3.2 us a launch on the H200)
EVENT_CALL = "event_call_ns"

# metrics of a captured range (exec/import), one sample per range instance, each over that
# instance's iterations: the table's per-iteration figures are then the median instance's, as its
# time is. A training loop's first step (module loading, cuBLAS's first calls) idled the GPU 154 ms
# in the H100 exec-train capture: as a mean over 20 steps it read 8620 us/iter of idle against
# 926 us in a median step, and launch CPU above the range's own CPU time.
# LAUNCH_CPU_PER_ITER: the CUDA API calls that launched the instance's GPU work; IDLE_PER_ITER: the
# GPU's idle gaps between its activities; IDLE_TYPICAL_PER_ITER: its median gap x its gaps, the
# host-bound test's figure (reports/why.py)
LAUNCH_CPU_PER_ITER = "launch_cpu_ns_per_iter"
IDLE_PER_ITER = "gpu_idle_ns_per_iter"
IDLE_TYPICAL_PER_ITER = "gpu_idle_typical_ns_per_iter"
# metric of a captured range with more than one instance: its first instance's wall time per
# iteration (ns), one of its cpu_time_ns samples; FIRST_INSTANCE_RATIO times the median of the
# others, it is named under the table as start-up (reports/summary.py start_up_warnings)
FIRST_INSTANCE = "first_instance_cpu_time_ns"
FIRST_INSTANCE_RATIO = 3.0

# A median this many times the fastest sample is no steady time, whatever the stop rule says: the
# machine was busy for most of the samples, or the variant runs at two speeds (a bimodal
# distribution; 31 samples of 12 ms and 203 us have a narrow CI on the median and an IQR of 0).
# pyperf warns likewise when the fastest value is under half the mean; the median is used here,
# as everywhere in the table. Such a row reads `noisy`, its note says why, a warning line too.
TWO_SPEEDS_RATIO = 2.0


def two_speeds_note(median_us: float, min_us: float) -> str:
    """The note (and the warning's words) of a variant whose median is over TWO_SPEEDS_RATIO
    times its fastest sample."""
    return (
        f"two speeds: the median ({median_us:,.2f} us) is {median_us / min_us:.1f}x the fastest sample "
        f"({min_us:,.2f} us): a busy machine or a bimodal variant, whatever the noise % says"
    )


# What a run's median of a variant times (each backend says which, orchestrator/backends/base.py
# Backend.measures): `compare` refuses two runs whose medians time different things, as it does
# two sizes, since their ratio is not a speedup (a slow host side reads 12x on `stream`, 1x on
# `kernels`). Name -> what it is, for the refusal and the footer.
MEASURES = {
    "kernels": "the GPU time of the variant's own kernels, memsets and copies per call",
    "kernels-only": "the GPU time of the variant's own kernels per call, memsets and copies left out",
    "stream": "the CUDA events around each call: launch processing and gaps between kernels included",
    "replay": "each kernel replayed alone by ncu, serialised, caches flushed, at ncu's clock setting",
    "host": "the host's wall-clock time per call, no profiler attached",
    # on the CPU a profiler's times are the host's too, but with the profiler's own cost in them
    # (under torch.profiler, recording each op, mul of square once read +197% against `time` on the same CPU): a measure
    # of its own per profiler, never set beside the bare clock's
    "host-nsys": "the host's wall-clock time per call under nsys, its tracing's cost included",
    "host-torch-trace": "the host's wall-clock time per call under torch.profiler, its recording of each op "
    "included",
    "host-proton": "the host's wall-clock time per call under proton, its instrumentation included",
}


def make_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """Build a unified frame from dict rows with the COLUMNS keys (missing -> "")."""
    import pandas as pd

    df = pd.DataFrame.from_records(list(rows), columns=COLUMNS)
    if df.empty:
        return empty_frame()
    for col in COLUMNS:
        if col != "value":
            df[col] = df[col].fillna("").astype(str)
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype("float64")
    return df


def empty_frame() -> pd.DataFrame:
    """A unified frame with no rows: the schema's columns, `value` float64, the rest object."""
    import pandas as pd

    df = pd.DataFrame({c: pd.Series(dtype="float64" if c == "value" else "object") for c in COLUMNS})
    return df


def concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """The non-empty frames concatenated in the schema's column order (an empty frame when none)."""
    import pandas as pd

    frames = [f for f in frames if f is not None and not f.empty]
    if not frames:
        return empty_frame()
    return pd.concat(frames, ignore_index=True)[COLUMNS]


# -- The report's columns, declared once --------------------------------------------------------
# Every column of every table (per variant, per kernel, merged `all`, sweep, compare) is one
# Column here, in the order a person reads them. The summary takes the variant table's columns
# and its metric aggregations from here; the terminal, Markdown, HTML and the merged table take
# headers, formats and which backend fills what. A backend's own merged time column (events_us,
# nsys_us, ...) is declared by the backend (orchestrator/backends) through `register`.

# a count: whole numbers print whole (20000, not 2e+04), others to 3 significant digits
INT_OR_3G = "int-or-3g"
# a percentage: one decimal, and 2 significant digits below 0.1 (a 0.048% DRAM reading is not "0.0")
PCT = "pct"
# a rate: 3 significant digits, never an exponent (989, 12.3, 0.0412; 1,979 for FP8)
SIG3 = "sig3"
# how a variant's launches combine for a metric read per kernel: each launch weighted by its duration
TIME_WEIGHTED = "time-weighted"

VARIANT, KERNEL, MERGED, SWEEP, COMPARE, EACH_GPU, OPERATOR = (
    "variant",
    "kernel",
    "merged",
    "sweep",
    "compare",
    "each-gpu",
    "operator",
)

# The operator rows of the frame (reports/operators.py: `--ops`, key_averages() per variant): one
# kind of row, `kernel` holding an operator's path ("aten::square > aten::pow") or a GPU
# activity's name under its operator's path, each value per measured iteration. An activity's
# row has no OP_SELF_CPU; OUTSIDE_OPS is the GPU work no operator launched.
OP_CALLS, OP_SELF_CPU, OP_SELF_CUDA = (
    "op_calls_per_iter",
    "op_self_cpu_ns_per_iter",
    "op_self_cuda_ns_per_iter",
)
OP_METRICS = (OP_CALLS, OP_SELF_CPU, OP_SELF_CUDA)
OUTSIDE_OPS = "(outside operators)"
OP_SEP = " > "


@dataclass(frozen=True)
class Column:
    """One report column. `source`/`agg`/`scale`: the unified metric (a frame `metric`) the
    variant table aggregates into it, how its rows combine (TIME_WEIGHTED, or a pandas reduction
    such as "max", "median"), and the factor applied. `tables`: which tables carry it.
    `merged_from`: the backend whose variant-table value the merged `all` table copies.
    `shown`: in the terminal and Markdown (else JSON, CSV and HTML only). `blank`: its empty value."""

    name: str
    header: str
    fmt: str = "{}"
    tables: tuple[str, ...] = (VARIANT,)
    source: str = ""
    agg: str = ""
    scale: float = 1.0
    merged_from: str = ""
    shown: bool = True
    blank: object = float("nan")
    # shown in the terminal and Markdown only where some row's value is above this
    shown_above: float | None = None


_TIME = "{:.2f}"
REPORT_COLUMNS: list[Column] = [
    # --per-kernel in CSV: the one table holds both, this column says which a row is ("variants",
    # "kernels": the JSON's keys), so that a CSV reader gets one well-typed frame
    Column("table", "table", tables=(), shown=False),
    # a child run of an `all` or sweep folder (its per-kernel rows), or a worker's folder (each-gpu)
    Column("run", "run", tables=(EACH_GPU,)),
    Column("gpu", "GPU", tables=(EACH_GPU,)),
    Column("gpu_uuid", "GPU UUID", tables=(EACH_GPU,), shown=False),
    Column("numel", "size", "{:.0f}", tables=(SWEEP,)),
    Column("dtype", "dtype", tables=(SWEEP,)),
    Column("variant", "variant", tables=(VARIANT, KERNEL, MERGED, SWEEP, COMPARE, EACH_GPU, OPERATOR)),
    Column("label", "label", tables=(VARIANT, MERGED)),
    Column("status", "status", tables=(VARIANT, SWEEP, EACH_GPU)),
    Column("kernels", "kernels", tables=(VARIANT, MERGED)),
    # the full kernel names (hundreds of characters each) stay in the JSON, CSV and HTML
    Column("kernels_full", "kernels (full names)", tables=(VARIANT, MERGED), shown=False),
    Column("kernel", "kernel", tables=(KERNEL,)),
    Column("kernel_full", "kernel (full name)", tables=(KERNEL,), shown=False),
    Column("launches", "launches", INT_OR_3G, tables=(KERNEL,)),
    Column("launches_per_iter", "launches/iter", INT_OR_3G, tables=(VARIANT, KERNEL, MERGED)),
    Column("operator", "operator", tables=(OPERATOR,)),
    Column("path", "operator path", tables=(OPERATOR,), shown=False),
    Column("time_us_per_iter", "us/iter", _TIME, tables=(KERNEL,)),
    Column("op_calls_per_iter", "calls/iter", INT_OR_3G, tables=(OPERATOR,)),
    Column("self_cpu_us", "Self CPU us/iter", _TIME, tables=(OPERATOR,)),
    Column("self_cuda_us", "Self CUDA us/iter", _TIME, tables=(OPERATOR,)),
    Column("share_pct", "share %", PCT, tables=(KERNEL,)),
    # the backends' merged time columns (events_us, torch_trace_us, nsys_us, ncu_us, ...) go here
    Column("a_median_us", "A median us", _TIME, tables=(COMPARE,)),
    Column("b_median_us", "B median us", _TIME, tables=(COMPARE,)),
    Column("a_iqr_us", "A IQR us", _TIME, tables=(COMPARE,)),
    Column("b_iqr_us", "B IQR us", _TIME, tables=(COMPARE,)),
    Column("ratio_b_over_a", "B/A", "{:.3f}", tables=(COMPARE,)),
    Column("change_pct", "change %", "{:+.1f}", tables=(COMPARE, EACH_GPU)),
    Column("a_pct_of_peak_bw", "A % peak BW", "{:.1f}", tables=(COMPARE,)),
    Column("b_pct_of_peak_bw", "B % peak BW", "{:.1f}", tables=(COMPARE,)),
    Column("peak_bw_change_pct", "% peak BW change", "{:+.1f}", tables=(COMPARE,)),
    Column("verdict", "verdict", tables=(COMPARE, EACH_GPU)),
    # whether B/A is further from 1 than the runs' spread (IQR) allows: what --fail-if-slower gates on
    Column("beyond_spread", "beyond spread", tables=(COMPARE,)),
    Column("slow", "slow", tables=(EACH_GPU,), shown=False),  # the verdict, as a bool for scripts
    Column("time_median_us", "median us", _TIME, tables=(VARIANT, SWEEP, EACH_GPU)),
    Column("time_iqr_us", "IQR us", _TIME, tables=(VARIANT, SWEEP, EACH_GPU)),
    Column("time_min_us", "min us", _TIME),
    # kept in the JSON and CSV: the CV (standard deviation over the mean) is pulled up by one
    # outlier, and beside the IQR it reads as a contradiction (CV 420%, IQR 7%) that the note on
    # high spread already settles
    Column("time_cv_pct", "CV %", "{:.1f}", shown=False),
    Column("samples", "n", "{:.0f}"),
    Column("noise_pct", "noise %", "{:.2f}"),
    Column(
        "events_median_us",
        "events us",
        _TIME,
        tables=(VARIANT, SWEEP, EACH_GPU),
        source=EVENT_CALL,
        agg="median",
        scale=1e-3,
    ),
    # the warm-up check's errors against the float64 reference (workloads/accuracy.py): printed
    # where some variant's is above 1e-6 (a bfloat16 kernel at 4e-3 beside a float32 one at 3e-7)
    Column("max_abs_error", "max abs err", "{:.2g}", shown_above=1e-6),
    Column("max_rel_error", "max rel err", "{:.2g}", shown_above=1e-6),
    Column("cpu_median_us", "CPU us", "{:.1f}"),
    Column("launch_cpu_us", "launch CPU us", "{:.1f}"),
    Column("gpu_busy_pct", "GPU busy %", "{:.0f}", source="gpu_busy_fraction", agg="median", scale=100.0),
    # reports/flops.py: the FLOPs a variant declares (its workload's `flops`, or its Triton kernels'
    # launch_metadata under proton) over its median, against the datasheet's peak for its unit and
    # the measured compute roof (workloads/compute_roof.py); empty for a workload that declares none
    Column("tflop_s", "TFLOP/s", SIG3),
    Column("pct_of_peak_flops", "% peak FLOP/s", PCT),
    Column("pct_of_measured_flops", "% of measured FLOP roof", PCT),
    Column("flops_per_byte", "declared FLOP/byte", "{:.3g}", shown=False),
    Column("ridge_flops_per_byte", "ridge FLOP/byte", "{:.3g}", shown=False),
    Column("flops_source", "FLOPs from", shown=False, blank=""),
    Column("achieved_gb_s", "GB/s", "{:.0f}", tables=(VARIANT, MERGED, SWEEP, EACH_GPU)),
    Column("pct_of_peak_bw", "% peak BW", "{:.1f}", tables=(VARIANT, MERGED, SWEEP, EACH_GPU)),
    # ncu's readings are time-weighted over the variant's launches (reports/kernels.py): a median
    # across different kernels describes none of them
    Column(
        "dram_pct_of_peak",
        "DRAM % peak",
        PCT,
        tables=(VARIANT, KERNEL, MERGED),
        source="dram_throughput_pct_of_peak",
        agg=TIME_WEIGHTED,
        merged_from="ncu",
    ),
    Column(
        "sm_pct_of_peak",
        "SM % peak",
        PCT,
        tables=(VARIANT, KERNEL, MERGED),
        source="sm_throughput_pct_of_peak",
        agg=TIME_WEIGHTED,
        merged_from="ncu",
    ),
    # the roofline (reports/roofline.py): % of the roof at the variant's intensity; GFLOP/s and
    # FLOP/byte are in the HTML (beside its chart), JSON and CSV; the roofs are drawn in the chart
    Column("pct_of_roof", "% of roof", PCT),
    # DRAM bytes/s over the GPU's measured attainable bandwidth (workloads/memory_roof.py): how
    # close to what the memory delivers in practice; ncu's peak above is one no kernel meets
    Column("pct_of_measured_roof", "% of measured roof", PCT),
    Column("roofline_precision", "roofline precision", shown=False),
    Column("achieved_gflop_s", "GFLOP/s", "{:.1f}", shown=False),
    Column("arithmetic_intensity", "FLOP/byte", "{:.3g}", shown=False),
    Column("roof_gflop_s", "roof GFLOP/s", "{:.1f}", shown=False),
    Column("roof_dram_gb_s", "roof DRAM GB/s", "{:.0f}", shown=False),
    Column("measured_dram_gb_s", "measured DRAM GB/s", "{:.0f}", shown=False),
    Column(
        "achieved_occupancy_pct",
        "occupancy %",
        PCT,
        tables=(VARIANT, KERNEL),
        source="achieved_occupancy_pct",
        agg=TIME_WEIGHTED,
    ),
    Column(
        "l2_hit_pct",
        "L2 hit %",
        PCT,
        tables=(VARIANT, KERNEL),
        source="ncu:lts__t_sector_hit_rate.pct",
        agg=TIME_WEIGHTED,
    ),
    # the tensor cores' share of the kernel's cycles (any MMA: HMMA, HGMMA, QGMMA, IMMA): what a
    # compute-bound GEMM's verdict leads with beside its TFLOP/s; 0 for a kernel without MMA
    Column(
        "tensor_active_pct",
        "tensor active %",
        PCT,
        tables=(VARIANT, KERNEL),
        source="ncu:sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        agg=TIME_WEIGHTED,
    ),
    Column(
        "registers_per_thread",
        "regs",
        "{:.0f}",
        tables=(VARIANT, KERNEL),
        source="registers_per_thread",
        agg="max",
    ),
    Column("bound", "bound", tables=(VARIANT, MERGED), merged_from="ncu"),
    # reports/why.py: measured facts behind the one line of explanation
    Column("excess_traffic", "DRAM/min bytes", "{:.2f}x"),
    Column("gpu_idle_us_per_iter", "GPU idle us/iter", "{:.1f}"),
    Column("host_bound", "host-bound", blank=""),
    Column("extra_kernels_per_iter", "extra kernels/iter", INT_OR_3G),
    Column("why", "why", shown=False, blank=""),
    # one extra call's memory (workloads/call_memory.py): the caching allocator's view on CUDA
    Column("peak_mib", "peak MiB", "{:.2f}", source="call_peak_bytes", agg="max", scale=2.0**-20),
    Column(
        "alloc_mib_per_call",
        "alloc MiB/call",
        "{:.2f}",
        source="call_allocated_bytes",
        agg="max",
        scale=2.0**-20,
    ),
    Column("allocs_per_call", "allocs/call", INT_OR_3G, source="call_allocations", agg="max"),
    Column("result_mib", "result MiB", "{:.2f}", source="call_result_bytes", agg="max", scale=2.0**-20),
    Column("speedup_vs_baseline", "speedup", "{:.2f}x", tables=(VARIANT, MERGED, SWEEP)),
    Column("same_kernel_as", "same kernel as", tables=(VARIANT, MERGED)),
    # the same operator tree below a first operator that only calls another (reports/operators.py)
    Column("same_ops_as", "same operators as", tables=(VARIANT, MERGED), blank=""),
    Column("agreement", "agreement", tables=(MERGED,)),
    Column("note", "note"),
]
# where a backend's merged time column goes: after the per-kernel columns, before the compare ones
_MERGED_TIMES_AT = "a_median_us"


# the names of the columns declared through `register`
REGISTERED: set[str] = set()


def register(column: Column) -> Column:
    """Declare a column owned elsewhere (a backend's merged time column); idempotent by name."""
    REGISTERED.add(column.name)
    if not any(c.name == column.name for c in REPORT_COLUMNS):
        at = next(i for i, c in enumerate(REPORT_COLUMNS) if c.name == _MERGED_TIMES_AT)
        REPORT_COLUMNS.insert(at, column)
    return column


def columns(table: str) -> list[Column]:
    """The columns of one kind of table (VARIANT, KERNEL, MERGED, SWEEP, COMPARE), in order."""
    return [c for c in REPORT_COLUMNS if table in c.tables]


def column(name: str) -> Column | None:
    """The declared Column named `name`; None for a column nobody declared."""
    return next((c for c in REPORT_COLUMNS if c.name == name), None)


@dataclass(frozen=True)
class MergedTime:
    """How one backend's median enters the merged table of `all` (declared by the backend, see
    orchestrator/backends): its column and header; what it measures on a GPU and on the CPU (the
    legend under the table; None: not run there), under `label`; why its number may differ from
    the others'. A `distinct` backend times something other than kernel durations (the whole
    call, a replay): when it disagrees, its reason is the one named."""

    column: str
    header: str
    label: str
    on_gpu: str
    on_cpu: str | None
    reason: str
    distinct: bool = False
    # which backend's times the speedups use: the measured one of lowest rank (CUDA events of the
    # whole call first, then nsys, which sees every launch)
    rank: int = 9
    # the per-variant column(s) its median is read from, the first one present
    medians: tuple[str, ...] = ("time_median_us",)

    def declare(self) -> MergedTime:
        """Register the backend's column of the merged table here (so every renderer
        knows its header and format); returns self, to be used where the backend declares it."""
        register(Column(self.column, self.header, "{:.2f}", tables=(MERGED,)))
        return self
