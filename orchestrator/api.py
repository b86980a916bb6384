"""The library API: everything the CLI does, returning DataFrames.

Example:
    >>> from orchestrator import profile, load_run
    >>> run = profile("square", backend="time", device="cpu", iters=20)
    >>> run.table[["variant", "time_median_us", "speedup_vs_baseline"]]
    >>> run.frame.query("metric == 'time_ns'").groupby("variant").value.median()
    >>> load_run(run.path).table  # the same, rebuilt from the folder, no GPU needed
"""
from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator import backends
from orchestrator.errors import (GprofError, InterruptedRunError, ParseError, RunFailedError, ToolTimeoutError,
                                 UsageError)
from orchestrator.request import Request
from orchestrator.runfolder import WORKLOAD_MANIFEST, RunFolder, disk_error


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
        return self.manifest.get("status", "")

    @property
    def backend(self) -> str:
        return self.manifest.get("backend", "")

    def title(self) -> str:
        w = self.workload
        env = w.get("env") or {}
        dev = env.get("device_name") or w.get("device", "")
        shape = "x".join(str(s) for s in w.get("shape", []))
        count = (f"{w['iters']} iters" if w.get("iters") else
                 f"sampled to +-{(w.get('stop_rule') or {}).get('max_noise_pct', '?')}%")
        return (f"{self.backend} {w.get('workload', '')} | {shape} {w.get('dtype', '')} on {dev} | "
                f"{count} | {self.path}")

    def footer(self) -> list[str]:
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
    json_meta = meta | ({"findings": json.loads(run.findings.to_json(orient="records"))}
                        if not run.findings.empty else {})
    try:
        render.write_all(run.table, run.frame, run.path, title=run.title(), footer=run.footer(), meta=json_meta)
        html.write_html(run.path / "report.html", run.title(), [(run.backend, run.table)], meta=meta,
                        notes=run.footer(), kernels=run.kernels, findings=run.findings)
    except OSError as exc:
        raise disk_error(run.path, exc) from exc
    run.saved = True


def plan(req: Request) -> list:
    """The exact commands a request would run, without running them (--dry-run)."""
    req.validate()
    backend = backends.get(req.backend)
    return backend.commands(req, Path(req.out).resolve() if req.out else Path("<run-folder>"))


def profile(workload: str, backend: str = "time", **options: Any) -> "Run | MultiRun":
    """Run `workload` under `backend` and return the Run (see Request for the options).

    backend="all" runs every backend available here into one folder; a comma-separated
    size or dtype ("1e6,1e7,1e8", "float32,bfloat16") runs a sweep. Both return a MultiRun.

    Raises a GprofError subclass on failure; the run folder is kept, marked failed or
    interrupted, with whatever was collected, and the exception carries `.run` when a
    partial report could be built."""
    from orchestrator import envinfo

    if backend == "all":
        return profile_all(workload, **options)
    sizes = [s for s in str(options.get("size") or "").split(",") if s]
    dtypes = [d for d in str(options.get("dtype") or "").split(",") if d]
    if len(sizes) > 1 or len(dtypes) > 1:
        rest = {k: v for k, v in options.items() if k not in ("size", "dtype")}
        return sweep(workload, backend, sizes, dtypes, **rest)
    argv = options.pop("argv", None)
    req = Request(workload=workload, backend=backend, **options).validate()
    if req.each_gpu:
        return each_gpu(req, argv)
    if req.cluster_spec() is not None:  # the tools are looked for on the worker, not here
        return _profile_on_cluster(req, argv)
    be = backends.get(backend)
    tools = be.require(req)  # a missing profiler fails here, before a run folder exists
    rf = RunFolder.create(backend, workload, out=req.out, root=req.root, request=req.to_json(), argv=argv)
    t0 = time.monotonic()
    error: GprofError | None = None
    try:
        rf.update(machine=envinfo.machine(), tools=tools)
        be.execute(req, rf)
    except GprofError as exc:
        error = exc
    except KeyboardInterrupt:
        error = InterruptedRunError("interrupted")
    if isinstance(error, ToolTimeoutError):
        on = rf.mark_timed_out()
        if on is not None:
            error.message += f"; the workload was {on[1]} variant {on[0]}, marked timed out"
    rf.manifest["wall_s"] = round(time.monotonic() - t0, 3)
    run = None
    try:
        if (rf.path / WORKLOAD_MANIFEST).exists():
            run = build_report(rf, write=False)
    except GprofError as exc:
        error = error or exc
    except Exception:
        rf.finish("failed", "gprof-orch failed to build the report (a bug: see the traceback)")
        raise
    status, error = _final_status(rf, run, error)
    return conclude(rf, run, status, error)


def conclude(rf: RunFolder, run: "Run | None", status: str, error: GprofError | None) -> Run:
    """End a run folder: the reports carry the final status, so set it first, write them once,
    then save the manifest; raise `error` (with `.run`, what could be built) if there is one."""
    rf.set_status(status, error.message if error else None)
    if run is not None:
        try:
            write_report(run)
        except GprofError as exc:
            rf.remove_reports()  # half-written; they would mislead, and the manifest needs the room
            run.saved = False
            if error is None:
                error = exc
            else:  # the run had already gone wrong (the runner could not write either, say): both
                error.message += f"; {exc.message}"
            error.hint = f"free some space, then `gprof-orch report {rf.path}` writes the reports"
            rf.set_status("failed", error.message)
    if error is not None and (run is None or not run.saved) and status != "interrupted":
        error.hint = (error.hint + "; " if error.hint else "") + f"run folder kept: {rf.path}"
    rf.finish()
    if run is not None:
        run.manifest = rf.manifest
    if error is not None:
        error.run = run  # type: ignore[attr-defined]
        error.run_path = rf.path  # type: ignore[attr-defined]
        raise error
    assert run is not None
    return run


def _final_status(rf: RunFolder, run: Run | None, error: GprofError | None) -> tuple[str, GprofError | None]:
    """The run folder's status and the error to raise, from what went wrong and what the
    workload manifest says."""
    status = "interrupted" if isinstance(error, InterruptedRunError) else "failed" if error else "ok"
    if run is None or error is not None:
        return status, error
    variants = run.workload.get("variants", [])
    failed = [v for v in variants if v.get("status") == "failed"]
    wstatus = run.workload.get("status")
    if failed:
        first = failed[0]
        return "failed", RunFailedError(
            f"{len(failed)} variant(s) failed: " + "; ".join(f"{v['name']}: {v.get('error', '')}" for v in failed),
            log=rf.logs / "workload.stderr.log",
            hint=f"the other variants' results are in {rf.path}; the traceback of "
                 f"{first['name']} is in {rf.path / 'workload.json'}")
    if wstatus == "interrupted":
        return "interrupted", InterruptedRunError("the workload was interrupted")
    if wstatus != "ok" or any(v.get("status") in ("pending", "measuring") for v in variants):
        # the runner exited without finishing workload.json (it could not write it, say)
        return "failed", RunFailedError(f"the workload runner stopped before it finished (workload.json says "
                                        f"{wstatus!r})", log=rf.logs / "workload.stderr.log")
    return status, error


def load_run(path: str | Path, *, write: bool = True) -> "Run | MultiRun":
    """Rebuild a Run (or a MultiRun: `all` and sweep folders) from its folder; no GPU needed.
    With `write`, its reports are rewritten in the folder, unless the folder is read-only: then
    nothing is written and `.saved` is False. `write=False` only reads."""
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

    @property
    def status(self) -> str:
        return self.manifest.get("status", "")

    @property
    def backend(self) -> str:
        return self.kind

    @property
    def frame(self) -> pd.DataFrame:
        from reports.schema import concat

        return concat(r.frame for r in self.runs.values())

    @property
    def workload(self) -> dict[str, Any]:
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
        w = self.workload
        dev = (w.get("env") or {}).get("device_name") or w.get("device", "")
        what = {"all": "all backends", "each-gpu": "each GPU"}.get(self.kind, "sweep")
        return f"{self.manifest.get('workload', '')} | {what} on {dev} | {self.path}"

    def footer(self) -> list[str]:
        lines = []
        if self.status not in ("ok", None):
            err = self.manifest.get("error")
            lines.append(f"run {self.status}" + (f": {err}" if err else "") + "; the tables hold what was collected")
        lines += [f"{name}: skipped: {why}" for name, why in self.skipped.items()]
        for name, r in self.runs.items():
            weighted = _weighting_legend(r)
            if weighted:
                lines.append(f"{name}: {weighted}")
        if self.kind == "all":
            from reports import merge

            lines.append(merge.legend(backends.merged_sources(self.runs), on_gpu=self.workload.get("device") == "cuda"))
        if self.kind == "each-gpu" and not self.table.empty:
            from orchestrator.cluster.each_gpu import slow_lines

            lines += slow_lines(self.table)
        return lines


def _weighting_legend(run: Any) -> str | None:
    """The footer line on variants whose ncu readings are time-weighted over several kernels."""
    from reports.kernels import weighting_legend

    frame, workload = getattr(run, "frame", None), getattr(run, "workload", None) or {}
    if not isinstance(frame, pd.DataFrame):
        return None
    return weighting_legend(frame, [v["name"] for v in workload.get("variants", [])])


def _run_children(rf: RunFolder, jobs: list[tuple[str, Any]], what: str) -> MultiRun:
    """Run each (name, job) into rf/<name> (a job returns a Run, or a string: the reason it is
    skipped), recording each child's status in the parent manifest as it ends. Stops at an
    interrupt; a failed child does not stop the rest. Raises what went wrong, with `.run`."""
    interrupted: InterruptedRunError | None = None
    for name, job in jobs:
        try:
            _record_child(rf, name, job(rf.path / name))
        except InterruptedRunError as exc:
            _record_child(rf, name, exc)
            interrupted = exc
        except KeyboardInterrupt:  # between two children's runs
            interrupted = InterruptedRunError("interrupted")
            if name not in rf.manifest.get("children", {}):
                _record_child(rf, name, interrupted)
        except GprofError as exc:
            _record_child(rf, name, exc)
        if interrupted:
            break
    return _finish_children(rf, what, interrupted)


def _record_child(rf: RunFolder, name: str, result: "Run | MultiRun | str | GprofError", **extra: Any) -> None:
    """Record how the child `name` ended in the parent manifest, and save it: a Run (its status),
    a string (why it was skipped), or the error it ended with (interrupted, or failed). `extra`
    (where it ran, on a cluster) is kept beside."""
    if isinstance(result, str):
        entry: dict[str, Any] = {"status": "skipped", "reason": result}
    elif isinstance(result, GprofError):
        entry = {"status": "interrupted" if isinstance(result, InterruptedRunError) else "failed", "folder": name,
                 "error": result.message}
    else:
        entry = {"status": result.status, "folder": name}
    rf.manifest.setdefault("children", {})[name] = {**entry, **extra}
    try:
        rf.save()
    except GprofError:
        pass  # finish() tries again, and says so if it cannot


def _finish_children(rf: RunFolder, what: str, interrupted: InterruptedRunError | None) -> MultiRun:
    """End a parent folder once its children have ended: its status from theirs, its reports,
    its manifest saved. Raises what went wrong, with `.run`."""
    children = rf.manifest.setdefault("children", {})
    bad = {n: c for n, c in children.items() if c["status"] in ("failed", "interrupted")}
    err: GprofError | None = interrupted or (RunFailedError(
        "; ".join(f"{n}: {c.get('error', '')}" for n, c in bad.items()), hint=f"the other {what} are in {rf.path}")
        if bad else None)
    # the parent's reports carry its final status: set it first, then write them once
    rf.set_status("interrupted" if interrupted else "failed" if bad else "ok", err.message if err else None)
    multi = _build_multi(rf, write=False, children_write=False)
    try:
        _write_multi(multi)
    except GprofError as exc:
        rf.remove_reports()
        err = err or exc
        rf.set_status("failed", err.message)
    rf.finish()
    multi.manifest = rf.manifest
    if err is not None:
        err.run = multi  # type: ignore[attr-defined]
        raise err
    return multi


def run_point(point: Any, out: Path) -> "Run | MultiRun | str":
    """One child of a parent folder (an orchestrator.cluster.Point: a sweep's size and dtype, a
    backend of `all`, a worker's GPU) run into `out`, here: the same on a Dask worker as in the
    serial loop. A string is why the backend cannot run here (`all` skips it). Raises GprofError
    as profile() does."""
    if point.check:
        reason = _unavailable(point.backend, Request(workload=point.workload, backend=point.backend,
                                                     **point.options))
        if reason:
            return reason
    return profile(point.workload, point.backend, out=out, **point.options)


def _unavailable(name: str, req: Request) -> str | None:
    """Why backend `name` cannot run on this machine, or None when it can."""
    from orchestrator import envinfo

    avail = backends.get(name).check(req)
    if not avail.ok:
        return avail.detail.splitlines()[0]
    if backends.get(name).needs_gpu and (req.device == "cpu" or envinfo.nvidia_smi() is None):
        return f"{name} needs an NVIDIA GPU (none here, or --device cpu)"
    return None


def _point_options(req: Request, *drop: str) -> dict[str, Any]:
    """A point's own profile() options: the parent request's, less where and how the parent runs."""
    from orchestrator.request import CLUSTER_FIELDS

    opts = {k: v for k, v in req.to_json().items()
            if k not in ("workload", "backend", "out", "root", *CLUSTER_FIELDS, *drop)}
    if opts.get("workload_file"):  # a worker's working folder is not ours
        opts["workload_file"] = str(Path(opts["workload_file"]).resolve())
    return opts


def _run_points(create: Any, points: list, what: str, req: Request) -> MultiRun:
    """Run every point into the parent folder `create()` makes: here, one after another, or on the
    cluster the request names (connected before the folder is made: an unreachable scheduler
    leaves no folder)."""
    spec = req.cluster_spec()
    if spec is None:
        rf = create()
        return _run_children(rf, [(p.name, functools.partial(run_point, p)) for p in points], what)
    from orchestrator import cluster

    with cluster.Session(spec, req.connect_timeout) as session:
        return _run_on_cluster(create(), session, points, what, req.retries)


def _run_on_cluster(rf: RunFolder, session: Any, points: list, what: str, retries: int) -> MultiRun:
    """The cluster's side of _run_children: each point a task; each result unpacked into rf/<name>
    as it ends, its placement in its manifest and the parent's, the parent manifest saved."""
    rf.update(cluster=session.info())

    def record(outcome: Any) -> None:
        try:
            result = _unpack_outcome(rf.path / outcome.name, outcome)
        except GprofError as exc:  # it could not be written here (disk full): that point failed
            result = exc
        _record_child(rf, outcome.name, result, placement={k: outcome.placement.get(k) for k in PLACEMENT_KEYS})

    interrupted = session.run(points, retries=retries, on_result=record)
    # the children in the points' order, as the serial run lists them, whatever order they ended in
    children = rf.manifest.setdefault("children", {})
    rf.manifest["children"] = {p.name: children[p.name] for p in points if p.name in children}
    return _finish_children(rf, what, interrupted)


# what the parent manifest's children entries keep of where a point ran (its own manifest: all of it)
PLACEMENT_KEYS = ("worker", "host", "gpu_name", "gpu_uuid", "attempts")


def _unpack_outcome(folder: Path, outcome: Any) -> "Run | MultiRun | str | GprofError":
    """A point's Outcome into `folder`: its run folder unpacked, where it ran written into its
    manifest, its reports rebuilt here (their titles name this folder). Returns what
    _record_child records."""
    if outcome.status == "skipped":
        return outcome.error or "skipped"
    run = None
    if outcome.archive is not None:
        from orchestrator import cluster

        cluster.unpack(outcome.archive, folder)
        child = RunFolder.open(folder)
        child.update(placement=outcome.placement)
        try:
            run = load_run(folder)
        except GprofError:
            run = None  # the runner never wrote workload.json: the folder keeps its logs
    return run if outcome.status == "ok" and run is not None else outcome.as_error()


def profile_all(workload: str, backends_: list[str] | None = None, **options: Any) -> MultiRun:
    """Every backend available here, one after another, into one parent folder; a backend that
    cannot run here (tool missing, no GPU for ncu) is recorded as skipped with the reason. With a
    cluster (options cluster=, scheduler_file=), each backend is a task, checked on its worker."""
    from orchestrator import envinfo
    from orchestrator.cluster import Point

    argv = options.pop("argv", None)
    req = Request(workload=workload, backend="all", **options).validate()
    if req.each_gpu:
        raise UsageError("--each-gpu runs one point on every GPU: not with `all` (run one backend)")

    def create() -> RunFolder:
        rf = RunFolder.create("all", workload, out=req.out, root=req.root, request=req.to_json(), argv=argv)
        rf.update(machine=envinfo.machine(), kind="all")
        return rf

    names = backends_ or backends.of_all()
    opts = _point_options(req)
    return _run_points(create, [Point(n, workload, n, opts, check=True) for n in names], "backends' results", req)


def sweep(workload: str, backend: str, sizes: list[str], dtypes: list[str], **options: Any) -> MultiRun:
    """The workload at every (size, dtype) point, one child run (and process) each; with a cluster,
    one task each."""
    from orchestrator import envinfo
    from orchestrator.cluster import Point
    from workloads.shapes import parse_size

    argv = options.pop("argv", None)
    sizes = [parse_size(s) for s in sizes] or [None]
    dtypes = dtypes or ["float32"]
    base = Request(workload=workload, backend=backend, size=sizes[0], dtype=dtypes[0], **options)
    for d in dtypes:
        Request(**{**base.__dict__, "dtype": d}).validate()
    if base.each_gpu:
        raise UsageError("--each-gpu runs one point on every GPU: give one --size and one --dtype")

    def create() -> RunFolder:
        rf = RunFolder.create(f"{backend}-sweep", workload, out=base.out, root=base.root, request=base.to_json(),
                              argv=argv)
        rf.update(machine=envinfo.machine(), kind="sweep", sweep_backend=backend, sizes=sizes, dtypes=dtypes)
        return rf

    opts = _point_options(base, "size", "dtype")
    # a point without --size runs the workload's default shape (which depends on the device)
    points = [Point(f"{s or 'default'}-{d}", workload, backend, {**opts, "size": s, "dtype": d})
              for d in dtypes for s in sizes]
    return _run_points(create, points, "points", base)


def each_gpu(req: Request, argv: list[str] | None = None) -> MultiRun:
    """The one point of `req` once on every worker that has a GPU (the cluster it names, else
    local-cuda), pinned to that worker: a parent folder of kind each-gpu with a child per worker,
    and a table that flags GPUs more than cluster.SLOW_PCT % slower than the median of the GPUs'
    medians."""
    from orchestrator import cluster, envinfo

    spec = req.cluster_spec()
    opts = _point_options(req)
    with cluster.Session(spec, req.connect_timeout) as session:
        workers = session.workers()
        points = [cluster.Point(cluster.worker_label(a, w["name"]), req.workload, req.backend, opts,
                                worker=w["name"]) for a, w in sorted(workers.items(), key=lambda aw: aw[1]["name"])]
        rf = RunFolder.create(f"{req.backend}-each-gpu", req.workload, out=req.out, root=req.root,
                              request=req.to_json(), argv=argv)
        rf.update(machine=envinfo.machine(), kind="each-gpu", each_gpu_backend=req.backend)
        return _run_on_cluster(rf, session, points, "GPUs' results", req.retries)


def _profile_on_cluster(req: Request, argv: list[str] | None) -> Run:
    """One run (not a sweep) as one task on the cluster the request names, into the run folder the
    serial run would have made, with where it ran in its manifest."""
    from orchestrator import cluster

    with cluster.Session(req.cluster_spec(), req.connect_timeout) as session:
        where = session.info()
        rf = RunFolder.create(req.backend, req.workload, out=req.out, root=req.root, request=req.to_json(),
                              argv=argv)
        point = cluster.Point(rf.path.name, req.workload, req.backend, _point_options(req))
        outcomes: list = []
        interrupted = session.run([point], retries=req.retries, on_result=outcomes.append)
    outcome = outcomes[0] if outcomes else None
    if outcome is None or outcome.archive is None:
        error = outcome.as_error() if outcome else interrupted or RunFailedError("the point never ran")
        rf.update(cluster=where, placement=outcome.placement if outcome else None)
        rf.finish("interrupted" if isinstance(error, InterruptedRunError) else "failed", error.message)
        error.run_path = rf.path  # type: ignore[attr-defined]
        raise error
    cluster.unpack(outcome.archive, rf.path)  # over the placeholder manifest: the worker's is the run's
    rf = RunFolder.open(rf.path)
    rf.manifest.update(argv=argv or [], request=req.to_json(), placement=outcome.placement, cluster=where)
    run = None
    error: GprofError | None = None if outcome.status == "ok" else outcome.as_error()
    try:
        run = build_report(rf, write=False)
    except GprofError as exc:
        error = error or exc
    status = "ok" if error is None else "interrupted" if isinstance(error, InterruptedRunError) else "failed"
    return conclude(rf, run, status, error)


def _build_multi(rf: RunFolder, *, write: bool = True, children_write: bool | None = None) -> MultiRun:
    """The MultiRun of a parent folder; with `write`, its reports (and, unless children_write
    says otherwise, its children's) rewritten."""
    from reports import merge

    children_write = write if children_write is None else children_write

    kind = rf.manifest.get("kind", "all")
    runs: dict[str, Run] = {}
    skipped: dict[str, str] = {}
    for name, child in (rf.manifest.get("children") or {}).items():
        if child.get("status") == "skipped":
            skipped[name] = child.get("reason", "")
            continue
        folder = rf.file(child.get("folder", name))
        if (folder / WORKLOAD_MANIFEST).exists():
            child = RunFolder.open(folder)
            runs[name] = build_report(child, write=children_write and child.writable())
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
    multi = MultiRun(rf.path, rf.manifest, runs, skipped, table, kind, saved=False)
    if write:
        _write_multi(multi)
    return multi


def _write_multi(multi: MultiRun) -> None:
    from reports import html, render

    sections = [(f"{n}", r.table) for n, r in multi.runs.items()]
    if multi.kind in ("all", "each-gpu"):
        sections.insert(0, ("merged" if multi.kind == "all" else "each GPU", multi.table))
    meta = {"run": multi.path.name, "kind": multi.kind, "status": multi.status}
    try:
        render.write_all(multi.table, multi.frame, multi.path, title=multi.title(), footer=multi.footer(), meta=meta)
        html.write_html(multi.path / "report.html", multi.title(), sections,
                        sweep=multi.table if multi.kind == "sweep" else None,
                        meta={"run": str(multi.path), "status": multi.status}, notes=multi.footer(),
                        kernels=multi.kernels)
    except OSError as exc:
        raise disk_error(multi.path, exc) from exc
    multi.saved = True


def compare(path_a: str | Path, path_b: str | Path, *,
            allow_mismatch: bool = False) -> tuple[pd.DataFrame, "Run | MultiRun", "Run | MultiRun"]:
    """Variant by variant: B's median over A's, and whether the change exceeds the runs' spread.

    Runs of another workload, size, shape or dtype, or whose variants ran other kernels, are
    refused (UsageError naming what differs) unless `allow_mismatch`. Sweeps are compared point
    by point on (size, dtype); a single run against a sweep, with the sweep's point of its size
    and dtype. On different GPUs each run's % of its GPU's peak bandwidth is compared too. The
    table's `attrs["notes"]` says so, and what was allowed to differ.

    Example:
        >>> table, a, b = compare("gprof-runs/before", "gprof-runs/after")
        >>> table[["variant", "ratio_b_over_a", "verdict"]]
    """
    from orchestrator.errors import UsageError
    from reports import merge

    loaded = [load_run(p) for p in (path_a, path_b)]
    pa, pb = (_points(r) for r in loaded)
    pairs, allowed = _pair_points(pa, pb, str(path_a), str(path_b), allow_mismatch)
    notes = []
    for name, mine, other in ((path_a, pa, pb), (path_b, pb, pa)):
        if len(mine) == 1 and len(other) > 1:
            notes.append(f"{name} is one run: compared with the sweep's point of its size and dtype "
                         f"(size {pairs[0][0][0]} {pairs[0][0][1]})")
    sweep = len(pa) > 1 or len(pb) > 1 or any(getattr(r, "kind", "") == "sweep" for r in loaded)
    parts = []
    for (numel, dtype), ra, rb in pairs:
        at = f" at size {numel} {dtype}" if sweep else ""
        differ = merge.mismatches(ra.workload, rb.workload, ra.frame, rb.frame)
        if differ and not allow_mismatch:
            raise UsageError(f"cannot compare {path_a} and {path_b}{at}: " + "; ".join(differ),
                             hint="--allow-mismatch compares them anyway")
        allowed += [f"{d}{at}" for d in differ]
        gpu = merge.gpu_note(ra.workload, rb.workload)
        if gpu and gpu not in notes:
            notes.append(gpu)
        t = merge.compare_runs(ra.frame, rb.frame, ra.table, rb.table, peak_bw=gpu is not None)
        if sweep and not t.empty:
            t.insert(0, "dtype", rb.workload.get("dtype"))
            t.insert(0, "numel", rb.workload.get("numel"))
        parts.append(t)
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if table.empty or not (table["verdict"] != "missing").any():
        raise UsageError(f"the runs share no variant that ran: {path_a} and {path_b}")
    table.attrs["notes"] = [f"warning: compared despite a mismatch: {d}" for d in allowed] + notes
    table.attrs["mismatches"] = allowed
    a, b = (r if getattr(r, "kind", "") == "sweep" else _single(r) for r in loaded)
    return table, a, b


def _points(run: "Run | MultiRun") -> dict[tuple[Any, Any], Run]:
    """(numel, dtype) -> the run measured there: each point of a sweep, else the one run."""
    if isinstance(run, MultiRun) and run.kind == "sweep":
        if not run.runs:
            raise ParseError(run.path, "holds no completed run")
        return {(r.workload.get("numel"), r.workload.get("dtype")): r for r in run.runs.values()}
    one = _single(run)
    return {(one.workload.get("numel"), one.workload.get("dtype")): one}


def _pair_points(pa: dict, pb: dict, name_a: str, name_b: str,
                 allow_mismatch: bool) -> tuple[list[tuple[Any, Run, Run]], list[str]]:
    """The (point, A's run, B's run) pairs to compare, matched on size and dtype, and the
    points only one sweep has (allowed by `allow_mismatch`, else refused)."""
    from orchestrator.errors import UsageError

    if len(pa) == 1 and len(pb) == 1:  # two single runs: mismatches() judges their sizes
        (ka, ra), (_, rb) = next(iter(pa.items())), next(iter(pb.items()))
        return [(ka, ra, rb)], []

    def points(p: dict) -> str:
        return ", ".join(f"size {n} {d}" for n, d in p)

    common = [k for k in pa if k in pb]
    if not common:
        raise UsageError(f"no point of the same size and dtype: {name_a} has {points(pa)}; "
                         f"{name_b} has {points(pb)}")
    only = [(name, [k for k in p if k not in common]) for name, p in ((name_a, pa), (name_b, pb))]
    differ = "; ".join(f"only {name} has {points(dict.fromkeys(ks))}" for name, ks in only
                       if ks and len(pa) > 1 and len(pb) > 1)
    if differ and not allow_mismatch:
        raise UsageError(f"the sweeps differ in their points: {differ}",
                         hint="--allow-mismatch compares the points they share")
    return [(k, pa[k], pb[k]) for k in common], [differ] if differ else []


def _single(run: "Run | MultiRun") -> Run:
    """A run's own measurement: for an `all` folder its time run (else the first one)."""
    if isinstance(run, MultiRun):
        if not run.runs:
            raise ParseError(run.path, "holds no completed run")
        return run.runs.get("time") or next(iter(run.runs.values()))
    return run
