"""`gprof-orch ncu`: each variant's kernels, and only those, under Nsight Compute.

The NVTX filter is built from the variants' ranges, so input creation, warm-up and checks are
never profiled; the runner's --iters bounds the kernels per variant (ncu replays each kernel
once per pass, so its time grows with kernels x passes)."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click
import pandas as pd

from orchestrator import proc, tools
from orchestrator.backends import ncu_tool
from orchestrator.backends.base import Parsed, Step, ToolBackend, stop_workload_first
from orchestrator.backends.nsys import time_samples
from orchestrator.backends.options import BackendOptions, option, tool_path
from orchestrator.checks import check_row
from orchestrator.errors import GprofError, ParseError, PermissionDeniedError, ToolFailedError, UsageError
from orchestrator.parsers import compressed, ncu_rep
from orchestrator.request import Request, parse_list
from orchestrator.runfolder import RunFolder
from reports import schema
from reports.roofline import missing_note
from reports.schema import NO_ACTIVITY, NOT_IN_REPORT, MergedTime
from reports.unify import RowMaker, variant_facts
from workloads.nvtx_ranges import NVTX_DOMAIN
from workloads.nvtx_ranges import RANGE_PREFIX as PREFIX
from workloads.spec import RunSpec

REPORT = "report.ncu-rep"
LOG = "ncu.log"
# the small default: memory- or compute-bound, and how close to the roof; occupancy, launch shape;
# WarpStateStats and SchedulerStats because SpeedOfLight's "Latency Issue" finding (the lecture's
# CUDA square, 47% of DRAM peak) sends the reader to them: their rules (CPIStall,
# IssueSlotUtilization) name the dominant warp stall and how rarely the schedulers issue, with an
# estimated speedup. Both are small metric lists beside MemoryWorkloadAnalysis_Tables or
# SourceCounters (left to --set full).
# SpeedOfLight_RooflineChart: ncu's own roofline (FP32/FP64 FLOPs per cycle, the device's FLOP and
# DRAM peaks, the clocks): the HTML roofline and `% of roof` need it, and with it gprof-orch's point
# is the one ncu's chart draws. About a dozen metrics beside SpeedOfLight's; the FLOP counts are
# SASS instruction counts, which ncu may collect in passes of their own: not yet measured here.
# scripts/capture_roofline_fixture.sh times `ncu triton-mean` and `ncu square` with and without it
# on the H200 (the bound: at most 2x the run without it)
DEFAULT_SECTIONS = (
    "SpeedOfLight",
    "SpeedOfLight_RooflineChart",
    "LaunchStats",
    "Occupancy",
    "WarpStateStats",
    "SchedulerStats",
)
DEFAULT_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")

# report columns (from the parser's kernel frame) -> unified metric and unit
KERNEL_METRICS = {
    "duration_ns": ("kernel_time_ns", "ns"),
    "dram_bytes": ("dram_bytes", "bytes"),
    "dram_throughput_pct": ("dram_throughput_pct_of_peak", "pct"),
    "sm_throughput_pct": ("sm_throughput_pct_of_peak", "pct"),
    "memory_throughput_pct": ("memory_throughput_pct_of_peak", "pct"),
    "achieved_occupancy": ("achieved_occupancy_pct", "pct"),
    "registers_per_thread": ("registers_per_thread", "count"),
    # the roofline (reports/roofline.py): achieved and peak rates, time-weighted per variant there
    "dram_bytes_per_s": ("dram_bytes_per_s", "bytes/s"),
    **{r.column: (r.column, r.unit) for r in ncu_rep.ROOFLINE_RATES},
    **{t.column: (t.column, "flop/s") for t in ncu_rep.TENSOR_FLOPS},
}


def table_metrics() -> list[str]:
    """The ncu metrics the report's columns are read from (reports/schema.py, sources `ncu:...`):
    collected on every run, so a column declared there is filled."""
    return [
        c.source.removeprefix(NCU_SOURCE) for c in schema.REPORT_COLUMNS if c.source.startswith(NCU_SOURCE)
    ]


def tensor_metrics(exe: str) -> list[str]:
    """The tensor pipe's FLOP counters (ncu_rep.TENSOR_FLOPS) the attached GPU has: the roofline
    point of a tensor-core kernel. Asked of ncu first, as their names differ by chip."""
    return ncu_tool.on_this_gpu(exe, ncu_rep.tensor_counters())


# the program of `doctor --check`'s ncu run: one real kernel
_SELF_TEST_PROGRAM = "import torch; x = torch.ones(1 << 20, device='cuda'); print((x * 2).sum().item())"

# the frame's metric name of a raw ncu metric (frame_from_ncu_report keeps every metric as `ncu:<name>`)
NCU_SOURCE = "ncu:"


@dataclass(frozen=True)
class NcuOptions(BackendOptions):
    """--ncu and ncu's own options: section set, sections, metrics, clock and cache control, extra
    flags."""

    ncu: str | None = tool_path("ncu")
    ncu_set: str | None = option(
        None, "--set", help="ncu section set (e.g. full) instead of the small default."
    )
    ncu_sections: tuple[str, ...] = option(
        (), "--section", multiple=True, help="ncu section (repeatable), e.g. SpeedOfLight."
    )
    ncu_metrics: tuple[str, ...] = option(
        (), "--metrics", multiple=True, help="Extra metrics, comma-separated or repeated."
    )
    clock_control: str = option(
        "none",
        "--clock-control",
        show_default=True,
        type=click.Choice(["none", "base"]),
        help="ncu's --clock-control: none leaves the GPU's clocks as they are; base locks them.",
    )
    cache_control: str = option(
        "all",
        "--cache-control",
        show_default=True,
        type=click.Choice(["all", "none"]),
        help="ncu's --cache-control: all flushes caches before each replay pass.",
    )
    ncu_args: tuple[str, ...] = option(
        (), "--ncu-arg", multiple=True, help="Extra flag passed to ncu (repeatable)."
    )

    def __post_init__(self) -> None:
        # --metrics comma-separated or repeated: one list of names from the start
        object.__setattr__(self, "ncu_metrics", tuple(parse_list(self.ncu_metrics)))

    def validate(self) -> None:
        """Metric, section and set names: letters, digits and a few signs, never a flag."""
        for m in self.ncu_metrics:
            if not re.fullmatch(r"[A-Za-z0-9_.:@]+", m):
                raise UsageError(
                    f"--metrics {m!r} is not a metric name (letters, digits, _ . : only); "
                    "list them with `ncu --query-metrics`"
                )
        for s in self.ncu_sections + ((self.ncu_set,) if self.ncu_set else ()):
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", s):
                raise UsageError(
                    f"section/set {s!r} is not a name; list them with `ncu --list-sections` / `--list-sets`"
                )

    def sections(self) -> list[str]:
        """The sections collected: --section's, else none under --set, else the small default."""
        return list(self.ncu_sections) or ([] if self.ncu_set else list(DEFAULT_SECTIONS))


class NcuBackend(ToolBackend):
    """`gprof-orch ncu`: the workload under Nsight Compute, filtered to the variants' NVTX ranges."""

    name = "ncu"
    tool = "ncu"
    mode = "profile"
    default_iters = 3
    default_warmup = 3
    needs_gpu = True
    measure = "replay"
    merged = MergedTime(
        "ncu_us",
        "ncu us",
        "ncu",
        on_gpu="kernel duration under replay",
        on_cpu=None,
        reason="ncu replays each kernel alone, serialised, with caches flushed (--cache-control "
        "all) and its own clock setting (--clock-control)",
        distinct=True,
        rank=3,
    ).declare()
    help = (
        "Profile each variant's kernels, and only those, with Nsight Compute; report duration, DRAM/SM "
        "throughput vs peak, occupancy, registers and launch shape."
    )

    def run_spec(self, req: Request, run_dir: Path | None = None) -> RunSpec:
        """The runner also measures the GPU's attainable DRAM bandwidth (workloads/memory_roof.py,
        cached per GPU, outside every range: ncu does not profile it), the roofline's second
        memory roof: ncu's peak is one no kernel reaches."""
        return replace(super().run_spec(req, run_dir), measure_roof=True)

    Options = NcuOptions

    description = "Nsight Compute: per-kernel DRAM/SM throughput vs peak, occupancy, registers, bytes"

    @staticmethod
    def nvtx_filters(req: Request) -> list[str]:
        """One --nvtx-include per variant: `gprof@variant:<name>/` (push/pop ranges need the `/`)."""
        names = req.selected_variants()
        domain = f"{NVTX_DOMAIN}@" if importlib.util.find_spec("nvtx") is not None else ""
        out: list[str] = []
        for n in names:
            out += ["--nvtx-include", f"{domain}{PREFIX}{n}/"]
        return out

    def commands(self, req: Request, run_dir: Path) -> list[Step]:
        """The one ncu command: the runner under `ncu --nvtx`, the default sections and metrics
        unless --set/--section/--metrics replace them, plus every metric a table column reads and
        the tensor FLOP counters this GPU has (one `ncu --query-metrics`, nothing else runs)."""
        o: NcuOptions = self.opts(req)  # type: ignore[assignment]
        exe = self.exe(req)
        argv = [exe, "--nvtx", *self.nvtx_filters(req)]
        if o.ncu_set:
            argv += ["--set", o.ncu_set]
        for s in o.sections():
            argv += ["--section", s]
        metrics = list(
            dict.fromkeys(
                list(o.ncu_metrics)
                + ([] if o.ncu_set or o.ncu_sections else list(DEFAULT_METRICS))
                + table_metrics()
                + tensor_metrics(exe)
            )
        )
        if metrics:
            argv += ["--metrics", ",".join(metrics)]
        argv += [
            "--clock-control",
            o.clock_control,
            "--cache-control",
            o.cache_control,
            "--export",
            str(run_dir / REPORT),
            "--force-overwrite",
            "--log-file",
            str(run_dir / "logs" / LOG),
            *o.ncu_args,
            *self.runner_argv(req, run_dir),
        ]
        return [Step("ncu", argv, ok_codes=(0, 1))]

    @staticmethod
    def program_argv(exe: str, argv: list[str], run_dir: Path, ncu_args: list[str]) -> list[str]:
        """`exec ncu`'s command: ncu over a whole program, every kernel with its NVTX stack
        (`--nvtx`), the sections and metrics `gprof-orch ncu` collects (so the table has the same
        columns; the tensor counters as this GPU names them, one `ncu --query-metrics`), one report."""
        metrics = ",".join(dict.fromkeys([*DEFAULT_METRICS, *table_metrics(), *tensor_metrics(exe)]))
        return [
            exe,
            "--nvtx",
            *[a for s in DEFAULT_SECTIONS for a in ("--section", s)],
            "--metrics",
            metrics,
            "--export",
            str(run_dir / REPORT),
            "--force-overwrite",
            "--log-file",
            str(run_dir / "logs" / LOG),
            *ncu_args,
            *argv,
        ]

    def execute(self, req: Request, rf: RunFolder) -> None:
        """Run ncu once, record its command and settings in the manifest, then raise what its log
        says went wrong (check_result)."""
        (step,) = self.commands(req, rf.path.resolve())
        rf.add_command(step.name, step.argv)
        o: NcuOptions = self.opts(req)  # type: ignore[assignment]
        rf.update(
            ncu_settings={
                "clock_control": o.clock_control,
                "cache_control": o.cache_control,
                "set": o.ncu_set,
                "sections": o.sections(),
            }
        )
        res = proc.run(
            step.argv,
            log_dir=rf.logs,
            name=step.name,
            timeout=req.timeout,
            on_interrupt=stop_workload_first(rf.path.resolve(), "ncu"),
        )
        self.check_result(res, rf)

    def check_result(self, res: proc.Result, rf: RunFolder) -> None:
        """Raise the typed error ncu's log stands for (counter permission, unknown metric, no GPU,
        no kernel profiled, another exit status); return quietly when the report is there."""
        log_path = rf.logs / LOG
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        log_text += "\n" + res.tail(40)
        kind = ncu_tool.classify_ncu_failure(log_text)
        errors = "\n".join(ncu_tool.ncu_errors(log_text)) or res.tail(15)
        if kind == "permission":
            raise PermissionDeniedError(
                "ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM)",
                argv=res.argv,
                returncode=res.returncode,
                log_tail=errors,
                log=log_path,
                hint="counters are restricted to admin users: run as root, or set the driver option "
                "NVreg_RestrictProfilingToAdminUsers=0 (see NVIDIA's ERR_NVGPUCTRPERM page)",
            )
        if kind == "unknown_metric":
            raise UsageError(
                f"ncu does not know a requested metric or section:\n{errors}",
                hint="list them with `ncu --query-metrics` / `ncu --list-sections` / `ncu --list-sets`",
                log=log_path,
            )
        if kind == "no_gpu":
            raise ToolFailedError(
                "ncu found no supported GPU",
                argv=res.argv,
                returncode=res.returncode,
                log_tail=errors,
                log=log_path,
                hint="ncu needs an NVIDIA GPU; use --device cpu "
                "with the time or torch-trace backends on this machine",
            )
        if res.returncode == 2 and not (rf.path / REPORT).exists():
            raise self.failure(Step("workload", res.argv), res)
        if kind == "no_kernels" or not (rf.path / REPORT).exists():
            opened = self._opened_ranges(rf)
            raise ToolFailedError(
                "ncu profiled no kernels: no kernel ran inside the NVTX ranges it was told to include",
                argv=res.argv,
                returncode=res.returncode,
                log_tail=errors,
                log=log_path,
                hint=f"the workload opened these ranges: {opened or 'none (see logs/ncu.stdout.log)'}; "
                "check the variants need the GPU (--device cuda) and that nvtx is installed",
            )
        if res.returncode not in (0, 1):
            raise ToolFailedError(
                f"ncu exited with status {res.returncode}",
                argv=res.argv,
                returncode=res.returncode,
                log_tail=errors,
                log=log_path,
            )

    @staticmethod
    def _opened_ranges(rf: RunFolder) -> str:
        try:
            wman = rf.workload_manifest()
        except ParseError:
            return ""
        domain = (wman.get("nvtx") or {}).get("domain")
        return ", ".join(
            f"{domain + '@' if domain else ''}{PREFIX}{v['name']}"
            for v in wman.get("variants", [])
            if v.get("status") in schema.RAN
        )

    def parse(self, rf: RunFolder) -> Parsed:
        """The run's report, read once: its unified frame, ncu's rule results as the findings, and
        the warnings (_warnings); `meta["report"]`: the ncu_rep.NcuReport read."""
        return self.parsed_from(rf, _load_report(rf))

    def parsed_from(self, rf: RunFolder, rep) -> Parsed:
        """The Parsed of a report already read (an import's, read for its workload.json)."""
        return Parsed(
            frame_from_ncu_report(rep, rf.workload_manifest(), run=rf.path.name),
            findings=rep.rules,
            warnings=_warnings(rf, rep),
            meta={"report": rep},
        )

    @classmethod
    def self_test(cls, tmp: Path, timeout: float, explicit: str | None = None) -> dict:
        """`gprof-orch doctor --check`'s proof that ncu works here: a tiny real run that must read
        one counter (gpu__time_duration.sum) of a real kernel; its check row
        (orchestrator.checks.check_row), with the fix when it fails (root, for the counters).
        Needs a CUDA GPU (doctor skips it without one). `explicit`: the --ncu path."""
        try:
            t = tools.find(cls.tool, explicit, timeout=timeout)
            rep = tmp / "ncu-check.ncu-rep"
            log = tmp / "ncu.log"
            res = proc.run(
                [
                    str(t.path),
                    "--clock-control",
                    "none",
                    "--metrics",
                    "gpu__time_duration.sum",
                    "--launch-count",
                    "1",
                    "--export",
                    str(rep),
                    "--force-overwrite",
                    "--log-file",
                    str(log),
                    sys.executable,
                    "-c",
                    _SELF_TEST_PROGRAM,
                ],
                log_dir=tmp,
                name="ncu",
                timeout=timeout,
            )
            text = log.read_text(errors="replace") if log.exists() else res.tail(20)
            if ncu_tool.classify_ncu_failure(text) == "permission":
                return check_row(
                    "ncu",
                    False,
                    "ERR_NVGPUCTRPERM: counters are restricted to admin users",
                    "run as root, or set NVreg_RestrictProfilingToAdminUsers=0 for the nvidia module",
                )
            if not rep.exists():
                return check_row(
                    "ncu",
                    False,
                    f"ncu {t.version} wrote no report: " + "; ".join(ncu_tool.ncu_errors(text)[:3]),
                    "see " + str(log),
                )
            k = ncu_tool.load(rep, domain=None, prefix="").kernels
            ns_ = float(k["duration_ns"].iloc[0]) if len(k) else float("nan")
            return check_row(
                "ncu",
                len(k) > 0,
                f"ncu {t.version} read gpu__time_duration.sum = {ns_:.0f} ns "
                f"of {k['kernel'].iloc[0] if len(k) else '?'}",
                "see " + str(log),
            )
        except GprofError as exc:  # not found, hangs on --version, or a run that failed to start
            return check_row("ncu", False, exc.message, exc.hint)


def _warnings(rf: RunFolder, rep) -> list[str]:
    """Says so when the report `rep` holds no roofline metrics (the roofline and `% of roof` are
    then left out rather than guessed), and when ncu's findings could not be read."""
    out = [rep.rules_note] if rep.rules_note else []
    k = rep.kernels[rep.kernels["variant"].notna()]
    if k.empty or k["peak_dram_bytes_per_s"].notna().any():
        return out
    return out + [missing_note(_collected(rf))]


def _collected(rf: RunFolder) -> list[str]:
    """The --set/--section/--metrics options of the ncu command the run folder recorded."""
    argv = next((c.get("argv") or [] for c in rf.manifest.get("commands", []) if c.get("step") == "ncu"), [])
    out = []
    for i, tok in enumerate(argv[:-1]):
        if tok in ("--set", "--section", "--metrics"):
            out += [tok, argv[i + 1]]
    return out


def _load_report(rf: RunFolder):
    nv = rf.workload_manifest().get("nvtx") or {}
    return read_report(compressed.locate(rf.file(REPORT)), nv.get("domain") or None, nv.get("prefix", PREFIX))


def read_report(located: Path, domain: str | None, prefix: str):
    """The ncu_rep.NcuReport of the report at `located` (.xz/.gz too), for these ranges."""
    if not located.is_file():
        raise ParseError(located, "no such file (ncu wrote no report)")
    # an archived folder holds report.ncu-rep.xz (or .gz): ncu_report reads a temporary copy
    with compressed.plain_file(located) as path:
        return ncu_tool.load(path, domain=domain, prefix=prefix)


def frame_from_report(path: Path, wman: dict, *, run: str, domain: str | None, prefix: str) -> pd.DataFrame:
    """The unified rows of the .ncu-rep at `path` (read with ncu_tool.load), for the workload in wman."""
    return frame_from_ncu_report(ncu_tool.load(path, domain=domain, prefix=prefix), wman, run=run)


def frame_from_ncu_report(rep, wman: dict, *, run: str) -> pd.DataFrame:
    """The unified rows of one read report (`ncu_rep.NcuReport`)."""
    rows = RowMaker(run, "ncu", wman["workload"])
    variant_facts(rows, wman)
    k = rep.kernels.copy()
    # the demangled name tells torch's elementwise kernels apart (mul vs pow), the short one not
    k["full_name"] = (
        k["kernel_demangled"].where(
            k["kernel_demangled"].notna() & (k["kernel_demangled"] != ""), k["kernel"]
        )
        if "kernel_demangled" in k
        else k["kernel"]
    )
    full = dict(zip(k["id"], k["full_name"]))
    iters = {v["name"]: int(v.get("iters") or wman.get("iters") or 1) for v in wman.get("variants", [])}
    profiled = set(k["variant"].dropna())
    for v in wman.get("variants", []):
        if v.get("status") in schema.RAN and v["name"] not in profiled:
            # it ran, but the report holds none of its kernels: ncu records a range only through
            # the kernels in it, and replays each one (it loses none), so it launched none
            rows.add(v["name"], NOT_IN_REPORT, NO_ACTIVITY, "flag")
    for variant, g in k[k["variant"].notna()].groupby("variant", sort=False):
        for _, kr in g.iterrows():
            for col, (metric, unit) in KERNEL_METRICS.items():
                if col in kr and pd.notna(kr[col]):
                    rows.add(variant, metric, float(kr[col]), unit, kernel=kr["full_name"])
        if "duration_ns" in g:
            time_samples(
                rows, variant, g["duration_ns"].to_numpy(), iters.get(variant, int(wman.get("iters") or 1))
            )
    # every metric the report holds, for deeper analysis
    m = rep.metrics
    if m is not None and not m.empty:
        for r in m[m["variant"].notna()].itertuples(index=False):
            if isinstance(r.value, (int, float)) and pd.notna(r.value):
                rows.add(
                    r.variant,
                    f"{NCU_SOURCE}{r.metric}",
                    float(r.value),
                    r.unit,
                    kernel=full.get(r.id, r.kernel),
                )
    return rows.frame()
