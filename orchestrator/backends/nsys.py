"""`gprof-orch nsys`: the workload under Nsight Systems, every kernel attributed to its variant
through the runtime call that launched it."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import proc, tools
from orchestrator.backends.base import Parsed, Step, ToolBackend, stop_workload_first
from orchestrator.backends.nsys_export import REPORT, SQLITE, export_pending, export_step, pending_export
from orchestrator.backends.ops_option import ops_field
from orchestrator.backends.options import BackendOptions, option, tool_path
from orchestrator.checks import check_row
from orchestrator.errors import GprofError, InterruptedRunError, ParseError, ToolFailedError
from orchestrator.nvtx_support import nvtx_problem
from orchestrator.parsers import compressed
from orchestrator.request import Request
from orchestrator.runfolder import RunFolder
from reports import schema
from reports.schema import NO_ACTIVITY, NO_RANGE, NOT_IN_REPORT, OUTSIDE, UNEVEN_LAUNCHES, MergedTime
from workloads.nvtx_ranges import NVTX_DOMAIN, RANGE_PREFIX

if TYPE_CHECKING:  # pandas and numpy at run time only where a report is built (parse)
    import numpy as np
    import pandas as pd

    from reports.unify import RowMaker

# `nsys profile` failing (nsys 2023.4.4, the version CI runs): the limits and the words it says
# measured with nsys 2023.4.4 on the H200 (scripts/h200_session.sh nsys-limit): with its default
# --cuda-flush-interval=0, one variant of 10,000 iterations was processed and 20,000 ended in
# "Status: AnalysisFailed" (no report); with --cuda-flush-interval=1000 (nsys-flush, nsys-limit)
# 20,000, 40,000, 60,000 (three variants) and 100,000 were processed
SAFE_LAUNCHES, ANALYSIS_FAILED_AT = 10_000, 20_000
CUDA_FLUSH_MS = 1000
# how nsys 2023.4.4 says its agent process went away mid-run ("Connection to Agent lost. This is most
# likely a bug. Internal reason: 'Connection reset by peer'."): no report, whatever the program did
AGENT_LOST = "Connection to Agent lost"
# what to do when nsys lost a thread's events on a CUDA runtime call it does not know (nsys 2023.4.4
# under CUDA 12.8+ programs: cudaGetDriverEntryPointByVersion, cudaEventElapsedTime_v12080)
NEWER_NSYS = (
    "use an nsys at least as new as the CUDA runtime (scripts/install-nsys.sh installs Nsight Systems "
    "2024.2.3, which records CUDA 13 PyTorch programs whole), or start the capture after the program's "
    "warm-up: torch.cuda.profiler.start() in the program and --nsys-arg=--capture-range=cudaProfilerApi"
)
TRACE = "trace.json"
# the program of `doctor --check`'s nsys run: one range of ours, in our domain
_SELF_TEST_PROGRAM = f"""
import time, nvtx
with nvtx.annotate("{RANGE_PREFIX}doctor-check", domain="{NVTX_DOMAIN}"):
    time.sleep(0.01)
"""


def no_report(res: proc.Result, log: str) -> ToolFailedError:
    """nsys ended without a report. When its analysis failed (nsys 2023.4.4 on the H200 past
    about 10,000 launches: "Wrong event order has been detected"), say that, with its own words."""
    text = proc.log_tail(res.stderr, 400) + "\n" + proc.log_tail(res.stdout, 400)
    said = re.search(r'ErrorText\s+Value: "([^"\\]+)', text)
    if "AnalysisFailed" in text or said:
        detail = said.group(1).strip().rstrip(":") if said else "Status: AnalysisFailed"
        return ToolFailedError(
            f"nsys could not process the events it recorded ({detail})",
            argv=res.argv,
            returncode=res.returncode,
            log_tail=said.group(0) if said else log,
            log=res.stderr,
            hint=f"nsys 2023.4.4 with --cuda-flush-interval=0 fails so on the H200 past about {SAFE_LAUNCHES:,} "
            f"kernel launches in one run ({ANALYSIS_FAILED_AT:,} failed; gprof-orch sets "
            f"--cuda-flush-interval={CUDA_FLUSH_MS} unless told otherwise): profile fewer --iters or "
            "variants; workload.json holds the workload's own results and report.qdstrm nsys's raw events",
        )
    lost = AGENT_LOST in text
    return ToolFailedError(
        "nsys wrote no report (No reports were generated)",
        argv=res.argv,
        returncode=res.returncode,
        log_tail=log,
        log=res.stderr,
        hint="nsys lost the connection to its own agent: a failure of nsys, not of the program "
        "(seen once with nsys 2023.4.4 on a loaded 2-core machine); run again"
        if lost
        else None,
    )


@dataclass(frozen=True)
class NsysOptions(BackendOptions):
    """--nsys, --nsys-arg (extra `nsys profile` flags), --osrt and --ops (the operator view)."""

    nsys: str | None = tool_path("nsys")
    nsys_args: tuple[str, ...] = option(
        (), "--nsys-arg", multiple=True, help="Extra flag passed to `nsys profile` (repeatable)."
    )
    trace_osrt: bool = option(
        False,
        "--osrt",
        is_flag=True,
        help="Also trace OS runtime calls (always on for a CPU run: --device cpu, or auto without a GPU).",
    )
    # the measured iterations under emit_nvtx: an NVTX range per aten operator (workloads/profiled.py)
    ops: bool = ops_field()


class NsysBackend(ToolBackend):
    """`gprof-orch nsys`: the workload under Nsight Systems, each kernel attributed to its variant
    through the runtime call that launched it."""

    name = "nsys"
    tool = "nsys"
    mode = "profile"
    host_measure = "host-nsys"
    default_iters = 20
    default_warmup = 3
    merged = MergedTime(
        "nsys_us",
        "nsys us",
        "nsys",
        on_gpu="kernel durations per iteration",
        on_cpu="host wall-clock time per iteration under each profiler",
        reason="nsys sums kernel durations only (no launch gaps)",
        rank=1,
    ).declare()
    help = (
        "Profile the workload under Nsight Systems; attribute every kernel to its variant through the "
        "runtime call that launched it."
    )

    Options = NsysOptions

    def spec_fields(self, req: Request) -> dict:
        """The runner's spec with `ops` (--ops): the measured iterations under emit_nvtx, an NVTX
        range per aten operator for the operator view."""
        return {"ops": bool(self.opts(req).ops)}  # type: ignore[attr-defined]

    description = "Nsight Systems: kernels per variant, GPU time, launch CPU time, busy fraction"

    def once_note(self, workload: dict) -> str:
        """On the CPU nsys times each variant's range once."""
        if workload.get("device") != "cpu":
            return ""
        return " (nsys on the CPU times each variant's range once: its wall time over the iterations)"

    def commands(self, req: Request, run_dir: Path) -> list[Step]:
        """`nsys profile` of the runner (profile_argv) and `nsys export` to SQLite (pure)."""
        exe = self.exe(req)
        o = self.opts(req)
        profile = profile_argv(
            exe, cuda=not req.on_cpu(), trace_osrt=o.trace_osrt, nsys_args=o.nsys_args, run_dir=run_dir
        )
        profile += self.runner_argv(req, run_dir)
        return [Step("nsys-profile", profile, ok_codes=(0, 1)), export_step(exe, run_dir)]

    def execute(self, req: Request, rf: RunFolder) -> None:
        """Profile, then export whatever report nsys wrote, even on a timeout or Ctrl-C (a partial
        timeline is still read); raise when it wrote none, naming nsys's own words."""
        self._warn_if_too_many_launches(req)
        profile, export = self.commands(req, rf.path.resolve())
        rf.add_command(profile.name, profile.argv)
        interrupted: GprofError | None = None
        try:
            res = proc.run(
                profile.argv,
                log_dir=rf.logs,
                name=profile.name,
                timeout=req.timeout,
                on_interrupt=stop_workload_first(rf.path.resolve(), "nsys"),
            )
        except InterruptedRunError as exc:
            interrupted = exc  # nsys had its time to write the report: export what it wrote
            res = None
        except ToolFailedError as exc:  # timeout: keep whatever report nsys managed to write
            if (rf.path / REPORT).exists():
                self._export(export, rf)
            raise exc
        if res is not None:
            log = res.tail(30)
            if res.returncode == 2 and not (rf.path / REPORT).exists():
                raise self.failure(Step("workload", profile.argv), res)
            if "No reports were generated" in log or not (rf.path / REPORT).exists():
                raise no_report(res, log)
            if res.returncode not in profile.ok_codes:
                raise self.failure(profile, res)
        if (rf.path / REPORT).exists():
            self._export(export, rf)
        if interrupted:
            raise interrupted

    def _warn_if_too_many_launches(self, req: Request) -> None:
        """nsys 2023.4 cannot process runs past about 10,000 launches here: say so before it runs."""
        found = getattr(self, "_found", None)
        if (
            req.on_cpu()
            or found is None
            or not str(found.version).startswith("2023.")
            or not sets_flush(self.opts(req).nsys_args, to_zero=True)
        ):
            return
        n = len(req.selected_variants())
        launches = (req.iters or self.default_iters) * n
        if launches > SAFE_LAUNCHES:
            print(
                f"gprof-orch: warning: at least {launches:,} kernel launches ({n} variants x "
                f"{req.iters or self.default_iters} iterations): nsys {found.version} with "
                f"--cuda-flush-interval=0 failed to process {ANALYSIS_FAILED_AT:,} on the H200 "
                f"({SAFE_LAUNCHES:,} worked); drop that flag or use fewer --iters",
                file=sys.stderr,
                flush=True,
            )

    def complete(self, rf: RunFolder, *, write: bool) -> None:
        """The export of the report nsys wrote, where the run stopped before it (nsys_export)."""
        step = pending_export(rf, write)
        if step is not None:
            export_pending(lambda: self._export(step, rf), rf)

    def _export(self, step: Step, rf: RunFolder) -> None:
        # why lazy: it imports numpy, pandas, which importing nsys must not
        from orchestrator.parsers import nsys as ns

        rf.add_command(step.name, step.argv)
        res = proc.run(step.argv, log_dir=rf.logs, name=step.name, timeout=600)
        proc.check(res, "nsys export")
        # the timeline in the Chrome-trace format torch.profiler writes: Perfetto opens both
        ns.write_chrome_trace(rf.path / SQLITE, rf.path / TRACE)

    def parse(self, rf: RunFolder) -> Parsed:
        """The unified frame of the run's SQLite export (a compressed one read through a temporary
        copy) and what nsys's log says about lost events; a parse error carries the latter too."""
        wman = rf.workload_manifest()
        nv = wman.get("nvtx") or {}

        try:
            # an archived folder holds report.sqlite.xz (or .gz): read through a temporary copy
            with compressed.plain_file(compressed.locate(rf.file(SQLITE))) as sqlite:
                frame = frame_from_export(
                    sqlite,
                    wman,
                    run=rf.path.name,
                    domain=nv.get("domain"),
                    prefix=nv.get("prefix", RANGE_PREFIX),
                )
        except ParseError as exc:
            said = self.lost_events(rf)
            if said:
                exc.hint = said + (f"; {exc.hint}" if exc.hint else "")
            raise
        return Parsed(frame, lost=self.lost_events(rf))

    @classmethod
    def self_test(cls, tmp: Path, timeout: float, explicit: str | None = None) -> dict:
        """`gprof-orch doctor --check`'s proof that nsys works here: a tiny real run that must
        record one NVTX range of ours; its check row (orchestrator.checks.check_row), with the
        fix when it fails. `tmp`: where the report and logs go; `explicit`: the --nsys path."""
        # why lazy: it imports numpy, pandas, which importing nsys must not
        from orchestrator.parsers import nsys as ns

        try:
            t = tools.find(cls.tool, explicit, timeout=timeout)
            rep = tmp / "nsys-check"
            # NVTX alone records nothing under nsys 2024.2.3 on a process with no CUDA: OS calls beside it
            res = proc.run(
                [
                    str(t.path),
                    "profile",
                    "--trace=nvtx,osrt",
                    "--sample=none",
                    "--cpuctxsw=none",
                    f"--output={rep}",
                    "--force-overwrite=true",
                    sys.executable,
                    "-c",
                    _SELF_TEST_PROGRAM,
                ],
                log_dir=tmp,
                name="nsys",
                timeout=timeout,
            )
            exp = proc.run(
                [
                    str(t.path),
                    "export",
                    "--type=sqlite",
                    f"--output={rep}.sqlite",
                    "--force-overwrite=true",
                    f"{rep}.nsys-rep",
                ],
                log_dir=tmp,
                name="nsys-export",
                timeout=timeout,
            )
            if res.returncode != 0 or exp.returncode != 0:
                return check_row(
                    "nsys",
                    False,
                    f"nsys {t.version} failed: {res.tail(3) or exp.tail(3)}",
                    "see the logs in " + str(tmp),
                )
            ex = ns.read_export(f"{rep}.sqlite")
            if (ns.variant_ranges(ex)["variant"] == "doctor-check").any():
                return check_row(
                    "nsys",
                    True,
                    f"nsys {t.version} recorded the NVTX range {NVTX_DOMAIN}@{RANGE_PREFIX}doctor-check",
                )
            return check_row(
                "nsys",
                False,
                f"nsys {t.version} ran but recorded no gprof range",
                ns.missing_ranges_hint(ex) or "pip install nvtx==0.2.10",
            )
        except GprofError as exc:  # not found, hangs on --version, or a run that failed to start
            return check_row("nsys", False, exc.message, exc.hint)

    @classmethod
    def doctor_items(cls, found: dict, packages: dict) -> dict[str, dict]:
        """`gprof-orch doctor`'s rows below nsys's own: whether this nsys records the ranges of
        the installed nvtx package (`exec nsys` on a program whose ranges it drops finds no
        variant; orchestrator/capture.py). `found`: nsys's doctor row; `packages`: name -> version.
        Without nsys it is not checked (ok None): the answer is this nsys's version's."""
        if not found.get("ok"):
            return {
                "nvtx_ranges": {
                    "ok": None,
                    "version": "not checked: nsys is missing (whether it records the nvtx package's "
                    "ranges depends on its version)",
                }
            }
        problem = nvtx_problem(packages.get("nvtx"), found.get("version"))
        return {
            "nvtx_ranges": {
                "ok": problem is None,
                "fix": problem,
                "version": "recorded by this nsys" if problem is None else "NOT recorded by this nsys",
            }
        }

    def lost_events(self, rf: RunFolder) -> str | None:
        """What nsys's own log says about lost events, and why they were lost (one line, or None)."""
        # nsys says so in its log when it lost events (seen on the H200 past its launch limit
        # without a CUDA flush interval: see SAFE_LAUNCHES)
        for name in ("nsys-profile.stdout.log", "nsys-profile.stderr.log"):
            tail = proc.log_tail(rf.logs / name, 80)
            if "Errors occurred while processing the raw events" in tail:
                why = (
                    "the run was interrupted"
                    if rf.manifest.get("status") == "interrupted"
                    # seen on the H200: nsys 2023.4.4 under a CUDA 13 PyTorch program drops the
                    # calling thread's API events, and with them every kernel it launched
                    else f"this nsys ({(rf.manifest.get('tools') or {}).get('nsys_version') or 'its version'}) "
                    "does not know a CUDA runtime call the program made (the CUDA runtime is newer "
                    "than nsys): kernels launched by that thread are missing; "
                    f"{NEWER_NSYS}"
                    if "Unknown runtime API function index" in tail
                    else "profile fewer --iters"
                )
                return (
                    f"nsys reported errors while processing the raw events (logs/{name}): events were "
                    f"lost; {why}"
                )
        return None


def profile_argv(exe: str, *, cuda: bool, trace_osrt: bool, nsys_args: list[str], run_dir: Path) -> list[str]:
    """`nsys profile` with the traces gprof-orch reads, up to the program it profiles (the runner,
    or a user's program under `exec nsys`): CUDA and NVTX, the OS runtime where asked or where
    there is no CUDA (NVTX alone records nothing on a CPU-only process), no sampling. A CUDA flush
    interval is added unless the user set one: past ~10,000 launches nsys 2023.4.4 otherwise fails
    to order the events (see SAFE_LAUNCHES)."""
    trace = ["cuda", "nvtx"] if cuda else ["nvtx"]
    if trace_osrt or not cuda:
        trace.append("osrt")
    flush = [f"--cuda-flush-interval={CUDA_FLUSH_MS}"] if cuda and not sets_flush(nsys_args) else []
    return [
        exe,
        "profile",
        f"--trace={','.join(trace)}",
        "--sample=none",
        "--cpuctxsw=none",
        *flush,
        f"--output={run_dir / 'report'}",
        "--force-overwrite=true",
        *nsys_args,
    ]


def sets_flush(nsys_args: list[str], to_zero: bool = False) -> bool:
    """Whether the user's --nsys-arg flags set --cuda-flush-interval (to 0, with to_zero)."""
    for i, a in enumerate(nsys_args):
        if a.startswith("--cuda-flush-interval"):
            value = a.partition("=")[2] or (nsys_args[i + 1] if i + 1 < len(nsys_args) else "")
            return value.strip() == "0" if to_zero else True
    return False


def _operators(export, ranges: pd.DataFrame, attributed: pd.DataFrame, wman: dict) -> pd.DataFrame | None:
    """The operator table of a run made with --ops whose runner could emit the operators' NVTX
    ranges (workload.json's `ops`); None otherwise."""
    if not (isinstance(wman.get("ops"), dict) and wman["ops"].get("nvtx")):
        return None
    # why lazy: it imports pandas, which importing nsys must not
    from orchestrator.parsers import nsys as ns

    return ns.operators(export, ranges, attributed)


def _operator_rows(rows: RowMaker, ops: pd.DataFrame | None, ran: list[str], on_gpu: bool) -> None:
    if ops is not None:
        # why lazy: it imports pandas, which importing nsys must not
        from reports import operators

        operators.add_rows(rows, ops, lambda v: v in ran, on_gpu=on_gpu)


def frame_from_export(sqlite: Path, wman: dict, *, run: str, domain: str | None, prefix: str) -> pd.DataFrame:
    """The unified rows of one nsys SQLite export, for the variants the workload ran."""
    # why lazy: it imports numpy, pandas, which importing nsys must not
    from orchestrator.parsers import nsys as ns

    # why lazy: it imports numpy, pandas, which importing nsys must not
    from reports.unify import RowMaker, activity_rows, idle_gap_rows, variant_facts

    export = ns.read_export(sqlite, lean=True)  # what the rows below use; a kernel's launch shape is not
    ranges = ns.variant_ranges(export, domain=domain, prefix=prefix)
    attributed = ns.attribute_kernels(export, ranges=ranges)
    ran = [v["name"] for v in wman.get("variants", []) if v.get("status") in schema.RAN]
    recorded = set(ranges["variant"])
    missing = [v for v in ran if v not in recorded]
    # the runner lists every variant from the start: a range of one it does not list means the two
    # files disagree (a damaged workload.json), and that variant's row would silently vanish
    unlisted = sorted(recorded - {v.get("name") for v in wman.get("variants", [])})
    if unlisted:
        raise ParseError(
            sqlite,
            f"the export has NVTX ranges of variant(s) {', '.join(unlisted)} that "
            f"workload.json does not list",
            hint="workload.json and the export disagree; is workload.json from this run?",
        )
    if ran and len(missing) == len(ran):
        hint = ns.missing_ranges_hint(export, domain=domain, prefix=prefix)
        raise ParseError(
            sqlite, f"the NVTX ranges of variant(s) {', '.join(missing)} are not in the export", hint=hint
        )
    summary = ns.range_times(
        attributed, ranges
    )  # summarize()'s wall and busy columns, no per-launch statistics
    by_variant = VariantRows(attributed, ranges)
    ops = _operators(export, ranges, attributed, wman)
    del export  # the export's frames are no longer needed: free them before the rows are built
    rows = RowMaker(run, "nsys", wman["workload"])
    variant_facts(rows, wman)
    iters = int(wman.get("iters") or 1)
    on_gpu = wman.get("device") == "cuda"
    _operator_rows(rows, ops, ran, on_gpu)
    for variant in missing:
        # the workload ran it, the report lost it (nsys lost events):
        # the table says so on its row and keeps the variants that are there
        rows.add(variant, NOT_IN_REPORT, NO_RANGE, "flag")
    for variant in ran:
        if variant in missing:
            continue
        act = by_variant.of(variant, by_launch=True)
        if on_gpu and act.empty:
            rows.add(variant, NOT_IN_REPORT, NO_ACTIVITY, "flag")
            continue
        srow = summary[summary["variant"] == variant]
        wall = float(srow["range_wall_ns"].iloc[0]) if len(srow) else float("nan")
        rows.add(variant, "range_wall_ns", wall, "ns")
        if len(srow) and "gpu_busy_fraction" in srow:
            rows.add(variant, "gpu_busy_fraction", float(srow["gpu_busy_fraction"].iloc[0]), "fraction")
        activity_rows(rows, variant, act, "label")
        if on_gpu:
            time_samples(rows, variant, act["duration_ns"].to_numpy(), iters)
            idle_gap_rows(rows, variant, act, "start", "end", instance="range_id")
        else:
            rows.samples(variant, "time_ns", [wall / iters], "ns")
        rows.samples(variant, "cpu_time_ns", [wall / iters], "ns")
    # variants stopped part-way (interrupted, failed): the GPU work their range caught
    stopped = [v["name"] for v in wman.get("variants", []) if v.get("status") in ("interrupted", "failed")]
    for variant in (v for v in stopped if v in recorded):
        activity_rows(rows, variant, by_variant.of(variant), "label")
    activity_rows(rows, OUTSIDE, by_variant.of(None).drop(columns="launch_cpu_ns"), "label")
    return rows.frame()


class VariantRows:
    """The rows of attribute_kernels()'s frame per variant (None: outside every range), found
    once from the ranges they point at, as slim frames of what the unified rows need: kind,
    label (kernel_label), duration_ns, start, end, range_id, launch_cpu_ns. Selecting by
    variant name compared every row's name once per variant; on a 3,000,000-kernel export that
    and the copies of every column took longer than reading it."""

    COLUMNS = ("kind", "duration_ns", "start", "end", "range_id", "launch_cpu_ns")

    def __init__(self, attributed: pd.DataFrame, ranges: pd.DataFrame):
        import numpy as np
        import pandas as pd

        rid = attributed["range_id"].to_numpy(dtype=np.int64)
        codes, names = pd.factorize(ranges["variant"])
        code = np.full(len(rid), -1, dtype=np.int64)
        inside = rid >= 0
        code[inside] = codes[rid[inside]]
        order = np.argsort(code, kind="stable")  # each variant's rows in frame order
        bounds = np.searchsorted(code[order], np.arange(-1, len(names) + 1))
        self._rows = {name: order[bounds[i] : bounds[i + 1]] for i, name in enumerate([None, *names])}
        self._cols = {
            c: attributed[c].to_numpy() if attributed[c].dtype == object else attributed[c].array
            for c in self.COLUMNS
        }
        label = kernel_label(attributed)
        self._cols["label"] = label.to_numpy() if label.dtype == object else label.array
        self._launch = attributed["launch_start"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)
        self._index = attributed.index

    def of(self, variant: str | None, by_launch: bool = False) -> pd.DataFrame:
        """The variant's rows in frame order; `by_launch`: in the order of their launch calls
        (stable; launches without a call last), as sort_values("launch_start", kind="stable")."""
        import numpy as np
        import pandas as pd

        idx = self._rows.get(variant, np.array([], dtype=np.int64))
        if by_launch:
            idx = idx[np.argsort(self._launch[idx], kind="stable")]
        index = self._index[idx]
        # text as object, not pandas 3's inferred str: that would copy every name into Arrow
        return pd.DataFrame(
            {
                c: pd.Series(
                    self._cols[c][idx],
                    index=index,
                    copy=False,
                    dtype=object if isinstance(self._cols[c], np.ndarray) else None,
                )
                for c in ("kind", "label", *self.COLUMNS[1:])
            },
            copy=False,
        )


def kernel_label(act: pd.DataFrame) -> pd.Series:
    """The full (demangled) kernel name; `[memcpy]` / `[memset]` for copies and fills. Categorical
    where the names are (a lean read's), so that millions of rows share a few names."""
    import numpy as np
    import pandas as pd

    dem, name = act["demangled_name"], act["name"]
    if isinstance(dem.dtype, pd.CategoricalDtype) and isinstance(name.dtype, pd.CategoricalDtype):
        kind = act["kind"].to_numpy(dtype=object)
        other = kind != "kernel"
        kind_codes, kinds = pd.factorize(kind[other])
        cats = pd.Index(
            list(dict.fromkeys([*dem.cat.categories, *name.cat.categories, *(f"[{k}]" for k in kinds)])),
            dtype=object,
        )
        d = cats.get_indexer(dem.cat.categories)[dem.cat.codes.to_numpy()]
        n = cats.get_indexer(name.cat.categories)[name.cat.codes.to_numpy()]
        codes = np.where(dem.cat.codes.to_numpy() >= 0, d, np.where(name.cat.codes.to_numpy() >= 0, n, -1))
        codes[other] = cats.get_indexer([f"[{k}]" for k in kinds])[kind_codes]
        return pd.Series(pd.Categorical.from_codes(codes, categories=cats), index=act.index)
    label = act["demangled_name"].to_numpy(dtype=object).copy()
    unnamed = pd.isna(label)
    label[unnamed] = act["name"].to_numpy(dtype=object)[unnamed]
    kind = act["kind"].to_numpy(dtype=object)
    other = kind != "kernel"
    if other.any():  # one "[kind]" string per kind, not one per row
        codes, kinds = pd.factorize(kind[other])
        label[other] = np.array([f"[{k}]" for k in kinds], dtype=object)[codes]
    return pd.Series(label, index=act.index, dtype=object)


def per_iteration(durations: np.ndarray, iters: int) -> np.ndarray | None:
    """GPU time of each iteration: launches in order, in `iters` equal groups. None when they do
    not split evenly: some launches are missing (or extra), so no iteration's time can be told,
    and total / iters would be a different number that looks right."""
    import numpy as np

    if len(durations) == 0:
        return np.array([])
    if len(durations) % iters == 0:
        return durations.reshape(iters, -1).sum(axis=1).astype("float64")
    return None


def time_samples(rows: RowMaker, variant: str, durations: np.ndarray, iters: int) -> None:
    """The variant's per-iteration `time_ns` samples; for launches that do not split into the
    iterations, no samples but an UNEVEN_LAUNCHES row (the table marks the variant incomplete)."""
    per_iter = per_iteration(durations, iters)
    if per_iter is None:
        rows.add(variant, UNEVEN_LAUNCHES, float(len(durations)), "count")
    else:
        rows.samples(variant, "time_ns", per_iter, "ns")
