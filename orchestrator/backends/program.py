"""`gprof-orch exec nsys -- CMD` and `gprof-orch import FILE`: any program, any capture, one
variant per NVTX range (orchestrator/capture.py picks the ranges and writes workload.json).

The steps, as every backend has them: commands() builds `nsys profile ... CMD` and `nsys export`
(pure); execute() runs them through orchestrator.proc (timeout, process group, Ctrl-C: the
program is stopped first so nsys writes all it recorded); ingest() copies (and, for a
`.nsys-rep`, exports) an existing capture; parse() turns the export into the unified frame
(pure): kernels attributed to the range holding the call that launched them, as for `nsys`,
or, where the launching thread has none open, to one open on another thread then (--attribute,
orchestrator/backends/program_threads.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from orchestrator import envinfo, proc
from orchestrator.backends.base import Parsed, Step, ToolBackend
from orchestrator.backends.nsys import NsysBackend, VariantRows, kernel_label, no_report, profile_argv
from orchestrator.backends.nsys_export import export_pending, export_step, pending_export, unreadable_report
from orchestrator.backends.program_options import ProgramOptions
from orchestrator.backends.program_threads import (
    LaunchTimes,
    from_other_thread_rows,
    from_other_threads,
    from_other_threads_note,
)
from orchestrator.capture_finish import capture_report
from orchestrator.capture_manifest import (
    TRACE,
    sibling_workload,
    trace_manifest,
    workload_manifest,
    write_workload,
)
from orchestrator.capture_ranges import RangeFilter, inclusive_activity
from orchestrator.capture_request import REPORT, SQLITE, ProgramRequest, capture_kind
from orchestrator.errors import GprofError, InterruptedRunError, RunFailedError, ToolFailedError
from orchestrator.parsers import compressed
from orchestrator.parsers import nsys as ns
from orchestrator.parsers import torch_trace as tt
from orchestrator.runfolder import WORKLOAD_MANIFEST, RunFolder
from reports.schema import (
    FIRST_INSTANCE,
    NO_RANGE,
    NOT_IN_REPORT,
    OTHER_RANGE_LAUNCHES,
    OTHER_THREAD_LAUNCHES,
    OUTSIDE,
    SAMPLED,
    UNEVEN_LAUNCHES,
    WALL_TIME_ONLY,
)
from reports.unify import ACTIVITY_METRIC, RowMaker, activity_rows, idle_gap_rows, launch_cpu_rows

if TYPE_CHECKING:
    from orchestrator.ending import Ending
    from orchestrator.results import Run

# set in the program's environment: on Ctrl-C, the process to stop is the one that carries it
RUN_MARK = "GPROF_EXEC_RUN"


class ProgramBackend(ToolBackend[ProgramRequest]):
    """`exec nsys -- CMD` and `import FILE`: a user's program or capture under Nsight Systems, one
    variant per NVTX range; not a command of its own and not one of `all`'s backends."""

    name = "program"
    tool = "nsys"
    mode = "capture"
    Options = ProgramOptions
    merged = None  # a user's program is not one of `all`'s backends
    host_measure = "host-nsys"
    description = "any program (exec) or capture (import) under Nsight Systems, one variant per NVTX range"

    def measures(self, workload: dict, frame: pd.DataFrame) -> dict[str, str]:
        """A range with no GPU activity of its own (no kernel, memset or copy attributed to it) is
        timed by its wall time: the host's, under nsys."""
        out = super().measures(workload, frame)
        gpu = (
            set(frame.loc[frame["metric"].isin(list(ACTIVITY_METRIC.values())), "variant"])
            if not frame.empty
            else set()
        )
        return {v: m if v in gpu else self.host_measure for v, m in out.items()}

    def commands(self, req: ProgramRequest, run_dir: Path) -> list[Step]:
        """`nsys profile` of the program itself, marked by RUN_MARK in its environment so Ctrl-C
        finds it, then `nsys export` to SQLite (pure)."""
        exe = self.exe(req)
        o: ProgramOptions = self.opts(req)  # type: ignore[assignment]
        cuda = o.cuda if o.cuda is not None else True
        profile = profile_argv(
            exe, cuda=cuda, trace_osrt=o.trace_osrt, nsys_args=o.nsys_args, run_dir=run_dir
        )
        profile += req.argv
        return [Step("nsys-profile", profile, env={RUN_MARK: str(run_dir)}), self._export_step(req, run_dir)]

    def resolve_cuda(self, req: ProgramRequest) -> None:
        """--cuda/--no-cuda not given: CUDA is traced when nvidia-smi sees a GPU."""
        o: ProgramOptions = self.opts(req)  # type: ignore[assignment]
        if o.cuda is None:
            req.options = replace(o, cuda=envinfo.nvidia_smi() is not None)

    def _export_step(self, req: ProgramRequest, run_dir: Path, rep: Path | None = None) -> Step:
        return export_step(self.exe(req), run_dir, rep)

    def complete(self, rf: RunFolder, *, write: bool) -> None:
        """The export of the report nsys wrote, where the run stopped before it (nsys_export), and
        the workload.json of its ranges, which the run writes from the export."""
        step = pending_export(rf, write)
        if step is not None:
            export_pending(lambda: self._export(step, rf), rf)
            if not (rf.path / WORKLOAD_MANIFEST).is_file():
                write_workload(rf)

    def execute(self, req: ProgramRequest, rf: RunFolder) -> None:
        """Profile the program, export what nsys wrote (also after a timeout or Ctrl-C), and raise
        RunFailedError when the program itself failed: its ranges are still reported."""
        self.resolve_cuda(req)
        run_dir = rf.path.resolve()
        profile, export = self.commands(req, run_dir)
        rf.add_command(profile.name, profile.argv)
        interrupted: GprofError | None = None
        res = None
        try:
            res = proc.run(
                profile.argv,
                log_dir=rf.logs,
                name=profile.name,
                timeout=req.timeout,
                env=profile.env,
                on_interrupt=stop_program_first(run_dir, req.argv),
            )
        except InterruptedRunError as exc:
            interrupted = exc  # nsys had its time to write the report: export what it wrote
        except ToolFailedError:  # timeout: keep whatever report nsys managed to write
            if (rf.path / REPORT).exists():
                self._export(export, rf)
            raise
        if res is not None and not (rf.path / REPORT).exists():
            raise no_report(res, res.tail(30))
        if (rf.path / REPORT).exists():
            self._export(export, rf)
        if interrupted:
            raise interrupted
        if res is not None and res.returncode != 0:
            # nsys exits with the program's status: the program failed; its ranges are still reported.
            # Its stderr passes through nsys to the log: what it said last is why (a missing file)
            said = _last_lines(res.stderr)
            last = said.splitlines()[-1] if said else ""
            raise RunFailedError(
                f"the program exited with status {res.returncode}" + (f": {last}" if last else ""),
                log=res.stderr,
                log_tail=said if "\n" in said else "",
                tail_title="the program's last lines on stderr",
                hint=f"its output is in {rf.logs}/nsys-profile.*.log",
            )

    def ingest(self, req: ProgramRequest, rf: RunFolder, src: Path, kind: str) -> None:
        """Bring an existing capture into the run folder: a copy of the SQLite export, or of the
        .nsys-rep and its export."""
        if kind == "nsys-rep":
            dest = rf.path / REPORT
            shutil.copyfile(src, dest)
            try:
                self._export(self._export_step(req, rf.path.resolve(), dest.resolve()), rf)
            except ToolFailedError as exc:
                err = unreadable_report(
                    exc,
                    src,
                    "a damaged or cut-short .nsys-rep; its .sqlite export, where one was made, imports too",
                )
                if err is None:
                    raise
                raise err from exc
            return
        name = SQLITE + compressed.suffix_of(src)
        shutil.copyfile(src, rf.path / name)
        rf.add_command("import", ["cp", str(src), str(rf.path / name)])

    def report(
        self,
        req: ProgramRequest,
        rf: RunFolder,
        error: GprofError | None,
        build: Callable[[RunFolder, Parsed | None], Run],
    ) -> Ending:
        """A capture's report (orchestrator/capture_finish.py): its synthetic workload.json of the
        ranges the request picks, written first, from the folder's nsys export (`exec nsys`, an
        nsys capture's `import`) or its torch.profiler trace (a trace's `import`, a torch-trace
        folder). An imported capture in a gprof-orch run folder lends that run's workload.json."""
        if req.capture is None:
            return self._nsys_report(req, rf, error, build, " ".join(req.argv))
        src = Path(req.given or req.capture)
        kind = capture_kind(src)
        suffix = compressed.suffix_of(src)
        if kind == "torch-trace":
            return self._trace_report(req, rf, error, build, rf.path / (TRACE + suffix))
        # the copy ingest() made of an export (a .nsys-rep is read by nsys, which names it itself)
        copy = rf.path / (SQLITE + suffix) if kind == "sqlite" else None
        return self._nsys_report(req, rf, error, build, str(src), sibling_workload(src), copy)

    def _nsys_report(
        self, req: ProgramRequest, rf: RunFolder, error, build, source: str, borrowed=None, copy=None
    ) -> Ending:
        """The report of the ranges of the folder's nsys export (also of what nsys wrote before
        the program failed or was stopped); the export is read once, for both."""
        located = compressed.locate(rf.path / SQLITE)
        handed: list = []  # the export manifest() read, handed on to the report: the file is read once

        def manifest() -> dict[str, Any]:
            with compressed.plain_file(located) as plain:
                # lean: what the manifest and the report use (a million-kernel capture read twice in
                # full took longer than `nsys stats` on it)
                export = ns.read_export(plain, lean=True)
                wman = workload_manifest(
                    export,
                    plain,
                    req.filter,
                    name=req.workload_name(),
                    source=source,
                    iters_per_range=req.iters or 1,
                    borrowed=borrowed,
                    compare_ranges=req.compare_ranges,
                    attribute=self.opts(req).attribute,  # type: ignore[attr-defined]
                )
            handed.append(export)
            return wman

        def parsed() -> Parsed | None:
            if not handed:
                return None
            # the rows from the export already in memory, by workload.json as written
            wman, notes = rf.workload_manifest(), []
            frame = frame_from_capture(located, wman, run=rf.path.name, export=handed.pop(), notes=notes)
            return self.with_frame(rf, frame, notes)

        found = manifest if located.is_file() else None
        return capture_report(
            rf, error, build, found, source=source, copy=copy, parsed=parsed, despite_error=True
        )

    def _trace_report(self, req: ProgramRequest, rf: RunFolder, error, build, copy: Path) -> Ending:
        """The report of a torch.profiler trace's record_function ranges named `req.ranges`
        (the prefix import settled): a torch-trace folder, which its backend reads."""
        src = Path(req.given or req.capture or "")

        def manifest() -> dict[str, Any]:
            trace = tt.read_trace(compressed.locate(rf.path / TRACE))
            return trace_manifest(
                trace,
                req.ranges,
                name=req.workload_name(),
                source=str(src),
                borrowed=sibling_workload(src),
                compare_ranges=req.compare_ranges,
            )

        return capture_report(rf, error, build, manifest, source=str(src), copy=copy)

    def _export(self, step: Step, rf: RunFolder) -> None:
        rf.add_command(step.name, step.argv)
        res = proc.run(step.argv, log_dir=rf.logs, name=step.name, timeout=600)
        proc.check(res, "nsys export")

    def parse(self, rf: RunFolder) -> Parsed:
        """The unified frame of the capture's SQLite export (frame_from_capture), with_frame's."""
        wman, notes = rf.workload_manifest(), []
        with compressed.plain_file(compressed.locate(rf.file(SQLITE))) as sqlite:
            return self.with_frame(rf, frame_from_capture(sqlite, wman, run=rf.path.name, notes=notes), notes)

    def with_frame(self, rf: RunFolder, frame: pd.DataFrame, notes: Sequence[str] = ()) -> Parsed:
        """A capture's Parsed around its frame (read from the folder, or from the export a run
        already holds in memory): the capture's own notes (from the manifest) and those its
        reading made (`notes`: frame_from_capture's) as warnings, and what nsys's log said about
        lost events, as for a workload run (NsysBackend.lost_events)."""
        return Parsed(
            frame,
            warnings=[*(rf.manifest.get("notes") or []), *notes],
            lost=NsysBackend().lost_events(rf),
        )


def _last_lines(log: Path, lines: int = 10) -> str:
    """The last non-empty lines of a log as a terminal shows them (a progress bar redrawn with
    carriage returns: its last state)."""
    text = [ln.rsplit("\r", 1)[-1].rstrip() for ln in proc.log_tail(log, 4 * lines).splitlines()]
    return "\n".join([ln for ln in text if ln.strip()][-lines:])


def stop_program_first(run_dir: Path, argv: list[str]):
    """The Ctrl-C policy (proc.OnInterrupt): SIGINT the program itself, found by the mark in its
    environment and its command line, so nsys sees it exit and writes everything; once it has
    ended (or before it started), None: nsys is told."""

    def policy() -> proc.OnInterrupt | None:
        pid = _find_program(run_dir, argv)
        if pid is None:
            return None
        return proc.OnInterrupt("interrupted: stopping the program; nsys keeps what it recorded", pid)

    return policy


def _find_program(run_dir: Path, argv: list[str]) -> int | None:
    mark = f"{RUN_MARK}={run_dir}".encode()
    want = [a.encode() for a in argv]
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(entry.path, "cmdline").read_bytes().split(b"\0")[:-1]
            if cmd[1:] != want[1:] or os.path.basename(cmd[0]) != os.path.basename(want[0]):
                continue
            if mark in Path(entry.path, "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except (OSError, IndexError):
            continue
    return None


def frame_from_capture(
    sqlite: Path, wman: dict, *, run: str, export=None, notes: list[str] | None = None
) -> pd.DataFrame:
    """The unified rows of a capture: per variant (a range name), its GPU activity, and one
    `time_ns` sample per iteration: the GPU time of the activity its range launched where it
    launched any, else the range's wall time; `cpu_time_ns`: the range's wall time per iteration.
    A range instance holds wman["iters_per_range"] iterations (1 unless known). A variant whose
    ranges hold other variants' (wman `holds`) counts their activity too; every other variant
    keeps only what no selected range inside it launched (innermost wins). `export`: the
    read_export(sqlite, lean=True) already read, if the caller has it (its frames are freed
    here once attributed: pass it without keeping a reference).

    wman["attribute"] says which range a launch counts in (ns.attribute_kernels' `by`; a folder
    that records none: ns.WINDOW); by window, a range's activity from other threads is also its
    FROM_OTHER_THREADS(_NS) rows, and `notes` (a list, if given) gets the line on how many came so."""
    if export is None:
        export = ns.read_export(sqlite, lean=True)  # what the rows below use; a kernel's launch shape is not
    filt = RangeFilter.from_json(wman.get("nvtx") or {})
    ranges = filt.select(export)
    by = wman.get("attribute") or ns.WINDOW
    attributed = ns.attribute_kernels(export, ranges=ranges, by=by)
    moved = from_other_threads(attributed)
    if len(moved) and notes is not None:
        notes.append(from_other_threads_note(moved))
    summary = ns.range_times(
        attributed, ranges
    )  # summarize()'s wall and busy columns, no per-launch statistics
    busy = ns.instance_busy(attributed, ranges)
    busy_of = ranges["variant"].to_numpy(dtype=object)[busy["range_id"].to_numpy()]
    by_variant = VariantRows(attributed, ranges)
    any_kernels = len(export.kernels) > 0
    launches = LaunchTimes(attributed) if any_kernels else None
    del export  # the export's frames are no longer needed: free them before the rows are built
    k = int(wman.get("iters_per_range") or 1)
    rows = RowMaker(run, "program", wman["workload"])
    for v in wman.get("variants", []):
        if v.get("status") not in SAMPLED:  # one stopped inside (capture_manifest.py) keeps its rows
            continue
        name = v["name"]
        r = ranges[ranges["variant"] == name]
        if r.empty:
            rows.add(name, NOT_IN_REPORT, NO_RANGE, "flag")
            continue
        rows.add(name, "iterations", float(len(r) * k), "count")
        if v.get("bytes_moved") is not None:
            rows.add(name, "bytes_moved", v["bytes_moved"], "bytes")
        act, srow = _variant_activity(name, attributed, ranges, summary, by_variant, bool(v.get("holds")))
        rows.add(name, "range_wall_ns", float(srow["range_wall_ns"].iloc[0]), "ns")
        # one fraction per instance, so that the column's median is the median instance's
        mine = ns.instance_busy(act, ranges) if v.get("holds") else busy[busy_of == name]
        span = mine["gpu_span_ns"].to_numpy(dtype=np.float64)
        fractions = mine["gpu_busy_ns"].to_numpy(dtype=np.float64)[span > 0] / span[span > 0]
        if len(fractions):
            rows.samples(name, "gpu_busy_fraction", fractions, "fraction")
        else:
            rows.add(name, "gpu_busy_fraction", float(srow["gpu_busy_fraction"].iloc[0]), "fraction")
        activity_rows(rows, name, act, "label")
        came = from_other_thread_rows(rows, name, moved, ranges, r, bool(v.get("holds")))
        _time_rows(rows, name, act, r, k, launches, came if by == ns.WINDOW else None)
    activity_rows(rows, OUTSIDE, by_variant.of(None).drop(columns="launch_cpu_ns"), "label")
    return rows.frame()


def _variant_activity(
    name: str,
    attributed: pd.DataFrame,
    ranges: pd.DataFrame,
    summary: pd.DataFrame,
    by_variant: VariantRows,
    holds: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A variant's GPU activity (in launch order, labelled) and its range_times() row: inclusive
    of the ranges nested in it when it holds others (as nvtx_kern_sum counts it), else innermost wins."""
    if holds:
        act = inclusive_activity(attributed, ranges, name)
        srow = ns.range_times(act, ranges)
        srow = srow[srow["variant"] == name]
        act = act.sort_values("launch_start", kind="stable")
        return act.assign(label=kernel_label(act)), srow
    return by_variant.of(name, by_launch=True), summary[summary["variant"] == name]


def _time_rows(
    rows: RowMaker,
    name: str,
    act: pd.DataFrame,
    r: pd.DataFrame,
    k: int,
    launches: LaunchTimes | None,
    moved: int | None = None,
) -> None:
    """A variant's time_ns samples (the GPU time of each iteration, else its ranges' wall time),
    idle gaps and cpu_time_ns; per range instance, its idle time and launch CPU time per iteration
    (reports/schema.py), and the first instance's wall time, which start-up can stretch far past
    the others'. `launches`: every attributed launch where the capture has any kernel (None:
    none), to count those other threads launched inside the variant's ranges. `moved`: by window,
    how many of `act` other threads launched (those are counted); None: by thread."""
    others = launches.by_other_threads(r) if launches is not None else 0
    if moved is not None:  # by window: what other threads launched inside it went to other ranges
        if others - moved:
            rows.add(name, OTHER_RANGE_LAUNCHES, float(others - moved), "count")
        others = 0
    wall = r["wall_ns"].to_numpy(dtype=np.float64) / k
    if len(act):
        samples = per_range_iterations(
            act["range_id"].to_numpy(), act["duration_ns"].to_numpy(), r["range_id"].to_numpy(), k
        )
        if samples is None:
            rows.add(name, UNEVEN_LAUNCHES, float(len(act)), "count")
        else:
            rows.samples(name, "time_ns", samples, "ns")
        idle_gap_rows(rows, name, act, "start", "end", instance="range_id", iters_per_instance=k)
        launch_cpu_rows(rows, name, act, "range_id", k)
        if others:  # its GPU time leaves them out: said, or backward looks cheaper than it is
            rows.add(name, OTHER_THREAD_LAUNCHES, float(others), "count")
    else:
        rows.samples(name, "time_ns", wall, "ns")
        if launches is not None:
            rows.add(name, WALL_TIME_ONLY, float(others), "count")
    rows.samples(name, "cpu_time_ns", wall, "ns")
    if len(wall) > 1:  # r is in start order
        rows.add(name, FIRST_INSTANCE, float(wall[0]), "ns")


def per_range_iterations(
    rid: np.ndarray, durations: np.ndarray, range_ids: np.ndarray, k: int
) -> np.ndarray | None:
    """The GPU time of each iteration, range instance by range instance (`range_ids`' order),
    `k` iterations an instance: per_iteration() of each instance's launches (`rid`, `durations`:
    in launch order), zeros for an instance without any. None when an instance's launches do not
    split into its `k` iterations. One pass over all launches: a variant may have tens of
    thousands of instances."""
    pos = pd.Index(range_ids).get_indexer(rid)
    if (pos < 0).any():  # rows of a range not in range_ids: never part of a sample
        keep = pos >= 0
        pos, durations = pos[keep], durations[keep]
    counts = np.bincount(pos, minlength=len(range_ids))
    if (counts % k).any():
        return None
    order = np.argsort(pos, kind="stable")  # by instance, each in launch order
    per = np.repeat(counts // k, k)  # launches in each (instance, iteration)
    out = np.zeros(len(per), dtype=np.float64)
    filled = per > 0
    starts = np.concatenate([[0], np.cumsum(per[filled])[:-1]])
    if len(starts):
        out[filled] = np.add.reduceat(durations[order], starts).astype("float64")
    return out


__all__ = ["ProgramBackend", "ProgramOptions", "frame_from_capture", "stop_program_first"]
