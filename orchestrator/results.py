"""Run folders read back: a Run (one backend's folder) or a MultiRun (an `all`, sweep or
each-gpu folder of child runs), built from what the folder holds, with their report files.
Reading never runs a profiler and needs no GPU; `load_run(..., write=False)` writes nothing."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator import backends
from orchestrator.errors import ParseError
from orchestrator.runfolder import WORKLOAD_MANIFEST, RunFolder, disk_error, run_exit_code


@dataclass
class Run:
    """One run folder, read back: the unified long-form `frame`, the per-variant `table` and
    the per-kernel breakdown `kernels` (reports.kernels.kernel_table: one row per kernel of
    each variant)."""

    path: Path
    manifest: dict[str, Any]
    workload: dict[str, Any]
    frame: pd.DataFrame
    table: pd.DataFrame
    outside: pd.DataFrame = field(default_factory=pd.DataFrame)
    warnings: list[str] = field(default_factory=list)
    # False when the folder could not take the reports (read-only): nothing was written into it
    saved: bool = True
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)
    # ncu's rule results per variant (reports.why.findings_table); empty for other backends
    findings: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def status(self) -> str:
        """The run's status from its manifest: ok, failed, interrupted, ... ("" if unrecorded)."""
        return self.manifest.get("status", "")

    @property
    def backend(self) -> str:
        """The name of the backend that made the run ("" if unrecorded)."""
        return self.manifest.get("backend", "")

    @property
    def exit_code(self) -> int:
        """The exit code the run ended with (0 ok, 1 failed, 124 timed out, 130 interrupted, ...)."""
        return run_exit_code(self.manifest, self.workload)

    def title(self) -> str:
        """The one-line heading of the run's tables: backend, workload, shape and dtype, device,
        iteration count (or the stop rule it sampled to) and the folder."""
        w = self.workload
        env = w.get("env") or {}
        dev = env.get("device_name") or w.get("device", "")
        shape = "x".join(str(s) for s in w.get("shape", []))
        noise = (w.get("stop_rule") or {}).get("max_noise_pct")
        # a capture's ranges can hold different counts: each variant's is in its row (n)
        count = (f"{w['iters']} iters" if w.get("iters") else f"sampled to +-{noise}%" if noise is not None
                 else "iterations per variant")
        return (f"{self.backend} {w.get('workload', '')} | {shape} {w.get('dtype', '')} on {dev} | "
                f"{count} | {self.path}")

    def footer(self) -> list[str]:
        """The lines printed under the table: how the run ended, what the columns are measured
        against, and the warnings a reader needs before trusting a number."""
        lines = []
        if self.status not in ("ok", None):
            err = self.manifest.get("error")
            lines.append(f"run {self.status}" + (f": {err}" if err else "") + "; the table holds what was collected")
        w = self.workload
        env = w.get("env") or {}
        if w.get("device") == "cpu":
            lines.append("CPU run (no CUDA GPU used): times are host wall-clock; GPU columns are empty.")
        if env.get("peak_bandwidth_bytes_per_s"):
            lines.append(f"% peak BW against {env['peak_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s "
                         f"({env.get('peak_bandwidth_source', '')}); GB/s counts the fewest bytes each "
                         f"variant must move.")
        elif w.get("device") != "cpu" and self.table.get("achieved_gb_s", pd.Series()).notna().any():
            lines.append("no peak bandwidth recorded for this device: % peak BW left empty")
        roof = env.get("memory_roof") or {}
        if roof.get("bytes_per_s") and self.table.get("pct_of_measured_roof", pd.Series()).notna().any():
            # the roof is timed by CUDA events around each call; ncu's kernel time leaves out the
            # few us a call the events hold (191 against 186 us for the 1e8 square on the H200),
            # so a kernel that reads only can sit a little above a roof set by a copy
            lines.append(f"% of measured roof against {roof['bytes_per_s'] / 1e9:.0f} GB/s, the {roof.get('kernel', '')} "
                         f"probe's on this GPU ({roof.get('method', '')}); the events hold a few us a call that "
                         f"ncu's kernel times leave out, so a kernel may show a few % over 100")
        unsized = [v["name"] for v in w.get("variants", []) if v.get("status") == "ok" and v.get("bytes_moved") is None]
        if unsized and w.get("device") != "cpu":
            lines.append(f"no bytes_moved recorded for {', '.join(unsized)}: GB/s and % peak BW left empty")
        if self.backend == "time" and w.get("timer"):
            hold = w.get("hold")
            held = {"blocking": ", the stream held by a blocking kernel until the call was queued (no host "
                                "time inside the events)",
                    "sleep": f", GPU slept {w.get('gpu_sleep_us', 0):g} us before each call (a host side "
                             f"longer than that is timed)",
                    "none": ", nothing held: the host's launch is timed too"}.get(hold, "")
            if hold is None and w.get("gpu_sleep_us"):  # runs before --timer
                held = f", GPU slept {w['gpu_sleep_us']:g} us before each call (its launch not timed)"
            lines.append(f"timer: {w['timer']}, L2 flushed before each iteration: {w.get('flush_l2')}{held}"
                         + (f" ({w['hold_note']})" if w.get("hold_note") else ""))
            if w.get("cuda_graph"):
                lines.append("each variant captured once in a CUDA graph; the replays are timed (no launch cost)")
            lines += _kernel_clock_lines(w)
            clk = w.get("clocks") or {}
            if clk.get("note"):
                lines.append(clk["note"])
        weighted = _weighting_legend(self)
        if weighted:
            lines.append(weighted)
        if not self.outside.empty:
            desc = ", ".join(f"{r.kernel} x{r.launches}" for r in self.outside.itertuples())
            lines.append(f"outside the variants' ranges (input, warm-up, checks; not counted): {desc}")
        lines += [f"warning: {w_}" for w_ in self.warnings]
        if "why" in self.table:  # reports/why.py: one line per variant, from measured facts
            lines += [f"why {r.variant}: {r.why}" for r in self.table.itertuples() if r.why]
        return lines


def build_report(rf: RunFolder, frame: pd.DataFrame | None = None, *, write: bool = True) -> Run:
    """The Run of a folder; with `write`, its reports saved into it (with the manifest's status)."""
    from reports import kernels, summary, why

    wman = rf.workload_manifest()
    backend = backends.get(rf.manifest["backend"])
    if frame is None:
        frame = backend.parse(rf)
    table = summary.variant_table(frame, wman)
    findings = why.findings_table(backend.rules(rf), frame)
    table["why"] = why.explain(table, frame, wman, findings)
    run = Run(rf.path, rf.manifest, wman, frame, table, summary.outside_activity(frame),
              summary.warnings_for(table) + backend.warnings(rf), saved=False,
              kernels=kernels.kernel_table(frame, wman), findings=findings)
    if write:
        write_report(run)
    return run


def write_report(run: Run) -> None:
    """report.md/.json/.csv/.html and frame.csv, from the run's manifest as it is now: call it
    once the final status is set. A failed write raises GprofError (disk full)."""
    from reports import html, render

    meta = {"run": run.path.name, "backend": run.backend, "workload": run.workload.get("workload"),
            "status": run.status}
    try:
        render.write_all(run.table, run.frame, run.path, title=run.title(), footer=run.footer(), doc=report_doc(run))
        html.write_html(run.path / "report.html", run.title(), [(run.backend, run.table)], meta=meta,
                        notes=run.footer(), kernels=run.kernels, findings=run.findings)
    except OSError as exc:
        raise disk_error(run.path, exc) from exc
    run.saved = True


def report_doc(run: "Run | MultiRun", *, kernels: bool = False) -> dict[str, Any]:
    """The one JSON document of a run: report.json holds it, `--json` prints it (with `kernels`,
    the per-kernel list beside "variants"). How the run ended (status, exit_code as the run's
    command exited, error: null when it went well), meta (ncu's findings in "findings") and
    the per-variant table."""
    from reports import render

    code, m = run.exit_code, run.manifest
    meta = {"run": str(run.path), "backend": run.backend, "workload": run.workload.get("workload") or
            m.get("workload"), "status": run.status}
    if isinstance(run, MultiRun):
        meta["kind"] = run.kind
    elif not run.findings.empty:
        meta["findings"] = json.loads(run.findings.to_json(orient="records"))
    kind = m.get("error_kind") or {124: "ToolTimeoutError", 130: "InterruptedRunError"}.get(code, "RunFailedError")
    error = {"kind": kind, "message": m.get("error") or f"the run ended {run.status}"} if code else None
    return {"status": run.status, "exit_code": code, "error": error,
            **json.loads(render.to_json(run.table, meta, kernels=run.kernels if kernels else None))}


def load_run(path: str | Path, *, write: bool = False) -> "Run | MultiRun":
    """Rebuild a Run (or a MultiRun: `all` and sweep folders) from its folder; no GPU needed.
    It only reads. With `write` (what `gprof-orch report` does), its reports are rewritten in
    the folder, unless the folder is read-only: then nothing is written and `.saved` is False."""
    rf = RunFolder.open(path)
    write = write and rf.writable()
    if rf.manifest.get("kind") in MULTI_KINDS:
        return _build_multi(rf, write=write)
    backend = rf.manifest.get("backend")
    if not isinstance(backend, str) or backend not in backends.BACKENDS:
        raise ParseError(rf.path, f"unknown backend {rf.manifest.get('backend')!r} in the manifest")
    return build_report(rf, write=write)


# -- several runs in one folder: every backend (`all`) or every size/dtype (a sweep) ----------------

# the kinds of parent folder: every backend, every size/dtype, the one point on every worker's GPU
MULTI_KINDS = ("all", "sweep", "each-gpu")
# the kinds whose page opens with the merged table, before a section per child
MERGED_FIRST = ("all", "each-gpu")


@dataclass
class MultiRun:
    """A parent run folder holding child runs: kind 'all' (one a backend), 'sweep' (one a size and
    dtype) or 'each-gpu' (one a worker's GPU). `table` is the merged table (all), the time-vs-size
    table (sweep) or the per-GPU table with the slow GPUs flagged (each-gpu)."""

    path: Path
    manifest: dict[str, Any]
    runs: dict[str, Run]
    skipped: dict[str, str]
    table: pd.DataFrame
    kind: str
    saved: bool = True
    # children whose results are there but could not be read (a damaged report): name -> why;
    # the table holds the others
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """The status of the whole sweep or `all` run from its manifest ("" if unrecorded)."""
        return self.manifest.get("status", "")

    @property
    def backend(self) -> str:
        """The kind of the multi-run ("all", "sweep", "each-gpu"), where a Run names its backend."""
        return self.kind

    @property
    def exit_code(self) -> int:
        """The exit code the whole run ended with (0 ok, 1 a child failed, 130 interrupted, ...)."""
        return run_exit_code(self.manifest)

    @property
    def frame(self) -> pd.DataFrame:
        """Every child run's unified long-form frame, concatenated (built on each access)."""
        from reports.schema import concat

        return concat(r.frame for r in self.runs.values())

    @property
    def workload(self) -> dict[str, Any]:
        """The first child run's workload manifest ({} with no child): the children share the
        workload, so its name, device and env stand for all."""
        return next(iter(self.runs.values())).workload if self.runs else {}

    @property
    def kernels(self) -> pd.DataFrame:
        """Every child run's per-kernel breakdown, its child's name (backend, or size-dtype) in `run`."""
        from reports.kernels import KERNEL_COLUMNS

        parts = [r.kernels.assign(run=name) for name, r in self.runs.items()
                 if isinstance(getattr(r, "kernels", None), pd.DataFrame) and not r.kernels.empty]
        if not parts:
            return pd.DataFrame(columns=["run", *KERNEL_COLUMNS])
        return pd.concat(parts, ignore_index=True)[["run", *KERNEL_COLUMNS]]

    def title(self) -> str:
        """The one-line heading of the merged table: workload, what was run (all backends, a
        sweep, each GPU), device and the folder."""
        w = self.workload
        dev = (w.get("env") or {}).get("device_name") or w.get("device", "")
        what = {"all": "all backends", "each-gpu": "each GPU"}.get(self.kind, "sweep")
        return f"{self.manifest.get('workload', '')} | {what} on {dev} | {self.path}"

    def footer(self) -> list[str]:
        """The lines printed under the merged table: how the run ended, the children skipped or
        unreadable, each child's weighting note, and the legend of `all`'s columns."""
        lines = []
        if self.status not in ("ok", None):
            err = self.manifest.get("error")
            lines.append(f"run {self.status}" + (f": {err}" if err else "") + "; the tables hold what was collected")
        lines += [f"{name}: skipped: {why}" for name, why in self.skipped.items()]
        lines += [f"{name}: unreadable, left out of the table: {why}" for name, why in self.unreadable.items()]
        for name, r in self.runs.items():
            weighted = _weighting_legend(r)
            if weighted:
                lines.append(f"{name}: {weighted}")
        if self.kind == "all":
            from reports import merge

            lines.append(merge.legend(backends.merged_sources(self.runs), on_gpu=self.workload.get("device") == "cuda",
                                      table=self.table))
        if self.kind == "each-gpu" and not self.table.empty:
            from orchestrator.cluster.each_gpu import slow_lines

            lines += slow_lines(self.table)
        return lines



def _kernel_clock_lines(w: dict) -> list[str]:
    """What `time`'s median is: the kernel clock's, or the events' and why the clock was off."""
    kc = w.get("kernel_clock")
    # run folders from before the kernel clock was the default: set only when asked for
    asked = w.get("kernel_clock_asked", True if kc else None)
    if kc == "cupti":
        return ["median: each call's own kernels, memsets and copies, from CUPTI's records as nsys reads them (the "
                "kernel clock); events us: the CUDA events around the same calls, which also hold the GPU's "
                "processing of each launch; CPU us holds CUPTI's cost per CUDA call too (--no-kernel-clock: the "
                "events' median and the bare host time)"]
    if kc and asked:
        return [f"--kernel-clock asked for, but off: {kc}"]
    if kc and w.get("device") == "cuda":
        return [f"median from the CUDA events, which also hold the GPU's processing of each launch (about 2.5 us); "
                f"the kernel clock is {kc if kc.startswith('off') else 'off: ' + kc}"]
    return []


def _weighting_legend(run: Any) -> str | None:
    """The footer line on variants whose ncu readings are time-weighted over several kernels."""
    from reports.kernels import weighting_legend

    frame, workload = getattr(run, "frame", None), getattr(run, "workload", None) or {}
    if not isinstance(frame, pd.DataFrame):
        return None
    return weighting_legend(frame, [v["name"] for v in workload.get("variants", [])])


def _build_multi(rf: RunFolder, *, write: bool = True, children_write: bool | None = None,
                 built: dict[str, Run] | None = None) -> MultiRun:
    """The MultiRun of a parent folder; with `write`, its reports (and, unless children_write
    says otherwise, its children's) rewritten. `built`: children's Runs already built from their
    folders as they ended (the run that made them), not parsed again."""
    from reports import merge

    children_write = write if children_write is None else children_write

    kind = rf.manifest.get("kind", "all")
    runs: dict[str, Run] = {}
    skipped: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for name, child in (rf.manifest.get("children") or {}).items():
        if child.get("status") == "skipped":
            skipped[name] = child.get("reason", "")
            continue
        folder = rf.file(child.get("folder", name))
        if built and name in built and not children_write:
            runs[name] = built[name]
        elif (folder / WORKLOAD_MANIFEST).exists():
            try:
                child = RunFolder.open(folder)
                runs[name] = build_report(child, write=children_write and child.writable())
            except ParseError as exc:  # one damaged result does not take the others' table with it
                unreadable[name] = exc.render().splitlines()[0]
        elif child.get("status") == "ok":
            # the parent saw it end with results: its folder was moved or deleted since
            what = "is missing" if not folder.exists() else f"holds no {WORKLOAD_MANIFEST}"
            unreadable[name] = f"its folder {what}, though it ended ok"
        else:
            skipped[name] = child.get("error", "no results")
    if kind == "all":
        first = next(iter(runs.values())).workload if runs else {}
        table = merge.merged_table({n: r.table for n, r in runs.items()}, backends.merged_sources(runs),
                                   first.get("baseline"),
                                   on_gpu=first.get("device") == "cuda")
    elif kind == "each-gpu":
        from orchestrator.cluster.each_gpu import each_gpu_table

        table = each_gpu_table(runs)
    else:
        points = [(r.workload.get("numel", 0), r.workload.get("dtype", ""), r.table) for r in runs.values()]
        table = merge.sweep_table(points)
    multi = MultiRun(rf.path, rf.manifest, runs, skipped, table, kind, saved=False, unreadable=unreadable)
    if write:
        _write_multi(multi)
    return multi


def _write_multi(multi: MultiRun, drawn: dict | None = None) -> None:
    """A parent folder's reports; `drawn`: its page's sections drawn ahead (html.draw_section)."""
    from reports import html, render

    sections = [(f"{n}", r.table) for n, r in multi.runs.items()]
    if multi.kind in MERGED_FIRST:
        sections.insert(0, ("merged" if multi.kind == "all" else "each GPU", multi.table))
    try:
        render.write_all(multi.table, multi.frame, multi.path, title=multi.title(), footer=multi.footer(),
                         doc=report_doc(multi))
        html.write_html(multi.path / "report.html", multi.title(), sections,
                        sweep=multi.table if multi.kind == "sweep" else None,
                        meta={"run": str(multi.path), "status": multi.status}, notes=multi.footer(),
                        kernels=multi.kernels, drawn=drawn)
    except OSError as exc:
        raise disk_error(multi.path, exc) from exc
    multi.saved = True
