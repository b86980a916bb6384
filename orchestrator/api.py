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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import backends, cluster, envinfo
from orchestrator.cluster import Point
from orchestrator.ending import reporting_error
from orchestrator.errors import GprofError, InterruptedRunError, RunFailedError, UsageError, interrupt_in
from orchestrator.execution import land_point, point_unavailable, run_request
from orchestrator.request import CLUSTER_FIELDS, Request
from orchestrator.runfolder import RunFolder
from workloads.shapes import parse_size

if TYPE_CHECKING:
    from orchestrator.multirun import MultiRun
    from orchestrator.results import Run

# The results and compare are the API's too (`from orchestrator.api import load_run, Run`), imported
# when first asked for: they bring pandas (0.35 s), and a --cluster run starts its workers first
_LATER = {
    "MultiRun": "orchestrator.multirun",
    "Run": "orchestrator.results",
    "build_report": "orchestrator.results",
    "load_run": "orchestrator.loading",
    "write_report": "orchestrator.results",
    "compare": "orchestrator.comparison",
}


def __getattr__(name: str) -> Any:
    if name in _LATER:
        import importlib

        return getattr(importlib.import_module(_LATER[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plan(req: Request, sub: str | None = None) -> Any:
    """What a request would run, without running it or writing anything (--dry-run): a
    backends.base.Plan, `.spec` the runner's resolved spec (what spec.json would hold, the shape
    included) and `.steps` the exact commands; `sub`: the child folder it would run in (a sweep's
    point, a backend of `all`)."""
    req.validate()
    folder = Path(req.out).resolve() if req.out else Path("<run-folder>")
    return backends.get(req.backend).plan(req, folder / sub if sub else folder)


def profile(workload: str, backend: str = "time", **options: Any) -> Run | MultiRun:
    """Run `workload` under `backend` once and return the Run (the options: Request's fields, and
    the backend's own, its Options' fields, e.g. ncu_set="full").
    Every backend into one folder is `profile_all`; every size or dtype, `sweep`. (With
    --each-gpu the one point runs on every worker's GPU: a MultiRun.)

    Raises a GprofError subclass on failure; the run folder is kept, marked failed or
    interrupted, with whatever was collected, and the exception carries `.run` when a
    partial report could be built."""
    if backends.is_all(backend):
        raise UsageError("profile() runs one backend: every backend is profile_all(workload, ...)")
    if "," in str(options.get("size") or "") + str(options.get("dtype") or ""):
        raise UsageError(
            "profile() runs one size and dtype: a list of them is sweep(workload, backend, "
            "sizes, dtypes, ...)"
        )
    argv = options.pop("argv", None)
    req = backends.request(workload, backend, **options).validate()
    if req.each_gpu:
        return each_gpu(req, argv)
    if req.cluster_spec() is not None:  # the tools are looked for on the worker, not here
        return _profile_on_cluster(req, argv)
    return run_request(req, argv)


def _run_children(rf: RunFolder, jobs: list[tuple[str, Any]], what: str) -> MultiRun:
    """Run each (name, job) into rf/<name> (a job returns a Run, or a string: the reason it is
    skipped), recording each child's status in the parent manifest as it ends. Stops at an
    interrupt; a failed child does not stop the rest. Raises what went wrong, with `.run`."""
    interrupted: InterruptedRunError | None = None
    built: dict[str, Run] = {}
    for name, job in jobs:
        try:
            result = job(rf.path / name)
            # why lazy: it imports pandas, which importing api must not; inside the guard (a
            # skipped first child's job imports none): an interrupt in it stops the children
            from orchestrator.results import Run

            _record_child(rf, name, result)
            if isinstance(result, Run):
                built[name] = result
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
    return _finish_children(rf, what, interrupted, built=built)


def _record_child(rf: RunFolder, name: str, result: Run | MultiRun | str | GprofError, **extra: Any) -> None:
    """Record how the child `name` ended in the parent manifest, and save it: a Run (its status),
    a string (why it was skipped), or the error it ended with (interrupted, or failed). `extra`
    (where it ran, on a cluster) is kept beside."""
    if isinstance(result, str):
        entry: dict[str, Any] = {"status": "skipped", "reason": result}
    elif isinstance(result, GprofError):
        entry = {
            "status": "interrupted" if isinstance(result, InterruptedRunError) else "failed",
            "folder": name,
            "error": result.message,
        }
    else:
        entry = {"status": result.status, "folder": name}
    rf.manifest.setdefault("children", {})[name] = {**entry, **extra}
    try:
        rf.save()
    except GprofError:
        pass  # finish() tries again, and says so if it cannot


def _finish_children(
    rf: RunFolder,
    what: str,
    interrupted: InterruptedRunError | None,
    *,
    built: dict[str, Run] | None = None,
    drawn: dict | None = None,
) -> MultiRun:
    """End a parent folder once its children have ended: its status from theirs, its reports
    (from `built`, the children's Runs as they ended, and `drawn`, its page's sections drawn
    ahead: html.draw_section), its manifest saved. Raises what went wrong, with `.run`."""
    children = rf.manifest.setdefault("children", {})
    bad = {n: c for n, c in children.items() if c["status"] in ("failed", "interrupted")}
    err: GprofError | None = interrupted or (
        RunFailedError(
            "; ".join(f"{n}: {c.get('error', '')}" for n, c in bad.items()),
            hint=f"the other {what} are in {rf.path}",
        )
        if bad
        else None
    )
    # the parent's reports carry its final status: set it first, then write them once
    rf.set_status("interrupted" if interrupted else "failed" if bad else "ok", err)
    multi = None
    try:
        # why lazy: it imports pandas, which importing api must not
        from orchestrator.multirun import build_multi, write_multi

        multi = build_multi(rf, write=False, children_write=False, built=built)
        write_multi(multi, drawn)
    except BaseException as exc:
        rf.remove_reports()
        err = reporting_error(rf, exc, err)
        rf.set_status("interrupted" if interrupt_in(exc) else "failed", err)
    rf.finish()
    if multi is not None:
        multi.manifest = rf.manifest
    if err is not None:
        err.run, err.run_path = multi, rf.path  # type: ignore[attr-defined]
        raise err
    return multi  # type: ignore[return-value]


def run_point(point: Any, out: Path) -> Run | MultiRun | str:
    """One child of a parent folder (an orchestrator.cluster.Point: a sweep's size and dtype, a
    backend of `all`, a worker's GPU) run into `out` by the serial loop, its reports written. A
    string is why the backend cannot run here (`all` skips it). Raises GprofError as profile()
    does. A Dask worker runs execute_point instead."""
    reason = point_unavailable(point)
    if reason:
        return reason
    return profile(point.workload, point.backend, out=out, **point.options)


def _point_options(req: Request, *drop: str, backend: str | None = None) -> dict[str, Any]:
    """A point's own profile() options: the parent request's (of `backend`'s own options, those it
    takes), less where and how the parent runs."""
    opts = {
        k: v
        for k, v in backends.point_options(req, backend or req.backend).items()
        if k not in ("workload", "backend", "out", "root", *CLUSTER_FIELDS, *drop)
    }
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

    with cluster.Session(spec, req.connect_timeout) as session:
        return _run_on_cluster(create(), session, points, what, req.retries)


def _run_on_cluster(rf: RunFolder, session: Any, points: list, what: str, retries: int) -> MultiRun:
    """The cluster's side of _run_children: each point a task; each result unpacked into rf/<name>
    as it ends, its placement in its manifest and the parent's, the parent manifest saved. Once
    every point is back the session closes, in the background while the parent's report is
    written (its workers' exits take 0.2 s and more)."""
    rf.update(cluster=session.info())
    # the parent page's section of each point, drawn as it lands, while the others still run:
    # the charts are most of the page's cost, and would otherwise all be drawn after the last one
    drawn: dict = {}
    built: dict[str, Run] = {}
    position = {p.name: i for i, p in enumerate(points)}

    def record(outcome: Any) -> None:
        # pandas and matplotlib (0.75 s) load here, once the points are submitted and running
        # why lazy: it imports pandas, which importing api must not
        from orchestrator.multirun import MERGED_FIRST

        # why lazy: it imports pandas, which importing api must not
        from orchestrator.results import Run

        # why lazy: it imports numpy, pandas, which importing api must not
        from reports import html

        try:
            result = _unpack_outcome(rf.path / outcome.name, outcome)
        except GprofError as exc:  # it could not be written here (disk full): that point failed
            result = exc
        _record_child(
            rf, outcome.name, result, placement={k: outcome.placement.get(k) for k in PLACEMENT_KEYS}
        )
        if isinstance(result, InterruptedRunError) and outcome.status != "interrupted":
            raise KeyboardInterrupt  # Ctrl-C here, as the point landed: the session stops the others
        if isinstance(result, Run):
            built[outcome.name] = result
            first = (
                2 if rf.manifest.get("kind") in MERGED_FIRST else 1
            )  # that page's section 1 is the merged table
            html.draw_section(drawn, first + position[outcome.name], outcome.name, result.table)

    interrupted = session.run(points, retries=retries, on_result=record)
    # the children in the points' order, as the serial run lists them, whatever order they ended in
    children = rf.manifest.setdefault("children", {})
    rf.manifest["children"] = {p.name: children[p.name] for p in points if p.name in children}
    closing = session.close_in_background()
    try:
        return _finish_children(rf, what, interrupted, built=built, drawn=drawn)
    finally:
        closing.join()


# what the parent manifest's children entries keep of where a point ran (its own manifest: all of it)
PLACEMENT_KEYS = ("worker", "host", "gpu_name", "gpu_uuid", "attempts")


def _unpack_outcome(folder: Path, outcome: Any) -> Run | str | GprofError:
    """A point's Outcome into `folder` (land_point), as _record_child records it: the Run, why it
    was skipped, or the error it ended with."""
    if outcome.status == "skipped":
        return outcome.error or "skipped"
    if outcome.archive is None:
        return outcome.as_error()
    try:
        return land_point(folder, outcome)
    except GprofError as exc:
        return exc


def profile_all(workload: str, backends_: list[str] | None = None, **options: Any) -> MultiRun:
    """Every backend available here, one after another, into one parent folder; a backend that
    cannot run here (tool missing, no GPU for ncu) is recorded as skipped with the reason. With a
    cluster (options cluster=, scheduler_file=), each backend is a task, checked on its worker."""
    argv = options.pop("argv", None)
    req = backends.request(workload, backends.ALL, **options).validate()
    if req.each_gpu:
        raise UsageError("--each-gpu runs one point on every GPU: not with `all` (run one backend)")

    def create() -> RunFolder:
        rf = RunFolder.create("all", workload, out=req.out, root=req.root, request=req.to_json(), argv=argv)
        rf.update(machine=envinfo.machine(), kind="all")
        return rf

    names = backends_ or backends.of_all()
    points = [Point(n, workload, n, _point_options(req, backend=n), check=True) for n in names]
    return _run_points(create, points, "backends' results", req)


def sweep(workload: str, backend: str, sizes: list[str], dtypes: list[str], **options: Any) -> MultiRun:
    """The workload at every (size, dtype) point, one child run (and process) each; with a cluster,
    one task each."""
    argv = options.pop("argv", None)
    sizes, dtypes = sweep_axes(sizes, dtypes)
    base = backends.request(workload, backend, size=sizes[0], dtype=dtypes[0], **options)
    for d in dtypes:
        replace(base, dtype=d).validate()
    if base.each_gpu:
        raise UsageError("--each-gpu runs one point on every GPU: give one --size and one --dtype")

    def create() -> RunFolder:
        rf = RunFolder.create(
            f"{backend}-sweep", workload, out=base.out, root=base.root, request=base.to_json(), argv=argv
        )
        rf.update(machine=envinfo.machine(), kind="sweep", sweep_backend=backend, sizes=sizes, dtypes=dtypes)
        return rf

    opts = _point_options(base, "size", "dtype")
    points = [
        Point(point_name(s, d), workload, backend, {**opts, "size": s, "dtype": d})
        for d in dtypes
        for s in sizes
    ]
    return _run_points(create, points, "points", base)


def sweep_axes(sizes: list[str], dtypes: list[str]) -> tuple[list[str | None], list[str]]:
    """A sweep's sizes (normalised; [None]: the workload's default shape) and dtypes; a point
    named twice is a UsageError (it ran once, then failed on its own folder, part-way)."""
    sizes_ = [parse_size(s) for s in sizes] or [None]
    dtypes = dtypes or ["float32"]
    for flag, given in (("--size", sizes_), ("--dtype", dtypes)):
        twice = list(dict.fromkeys(x for x in given if given.count(x) > 1))
        if twice:
            raise UsageError(
                f"{flag} names {', '.join(map(str, twice))} more than once: each point runs once"
            )
    return sizes_, dtypes


def point_name(size: str | None, dtype: str) -> str:
    """A sweep point's folder: `<size>-<dtype>`; without --size the workload's default shape
    (which depends on the device)."""
    return f"{size or 'default'}-{dtype}"


def each_gpu(req: Request, argv: list[str] | None = None) -> MultiRun:
    """The one point of `req` once on every worker that has a GPU (the cluster it names, else
    local-cuda), pinned to that worker: a parent folder of kind each-gpu with a child per worker,
    and a table that flags GPUs more than cluster.SLOW_PCT % slower than the median of the GPUs'
    medians."""
    spec = req.cluster_spec()
    opts = _point_options(req)
    with cluster.Session(spec, req.connect_timeout) as session:
        workers = session.workers()
        points = [
            cluster.Point(
                cluster.worker_label(a, w["name"]), req.workload, req.backend, opts, worker=w["name"]
            )
            for a, w in sorted(workers.items(), key=lambda aw: aw[1]["name"])
        ]
        rf = RunFolder.create(
            f"{req.backend}-each-gpu",
            req.workload,
            out=req.out,
            root=req.root,
            request=req.to_json(),
            argv=argv,
        )
        rf.update(machine=envinfo.machine(), kind="each-gpu", each_gpu_backend=req.backend)
        return _run_on_cluster(rf, session, points, "GPUs' results", req.retries)


def _profile_on_cluster(req: Request, argv: list[str] | None) -> Run:
    """One run (not a sweep) as one task on the cluster the request names, into the run folder the
    serial run would have made, with where it ran in its manifest."""
    with cluster.Session(req.cluster_spec(), req.connect_timeout) as session:
        where = session.info()
        rf = RunFolder.create(
            req.backend, req.workload, out=req.out, root=req.root, request=req.to_json(), argv=argv
        )
        point = cluster.Point(rf.path.name, req.workload, req.backend, _point_options(req))
        outcomes: list = []
        interrupted = session.run([point], retries=req.retries, on_result=outcomes.append)
    outcome = outcomes[0] if outcomes else None
    if outcome is None or outcome.archive is None:
        error = outcome.as_error() if outcome else interrupted or RunFailedError("the point never ran")
        rf.update(cluster=where, placement=outcome.placement if outcome else None)
        rf.finish("interrupted" if isinstance(error, InterruptedRunError) else "failed", error)
        error.run_path = rf.path  # type: ignore[attr-defined]
        raise error
    return land_point(rf.path, outcome, argv=argv or [], request=req.to_json(), cluster=where)
