"""The library API: everything the CLI does, returning DataFrames.

Example:
    >>> from orchestrator import profile, load_run
    >>> run = profile("square", backend="time", device="cpu", iters=20)
    >>> run.table[["variant", "time_median_us", "speedup_vs_baseline"]]
    >>> run.frame.query("metric == 'time_ns'").groupby("variant").value.median()
    >>> load_run(run.path).table  # the same, rebuilt from the folder, no GPU needed
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator import backends
from orchestrator.errors import GprofError, InterruptedRunError, ParseError, RunFailedError
from orchestrator.request import Request
from orchestrator.runfolder import RunFolder


@dataclass
class Run:
    """One run folder, read back: the unified long-form `frame` and the per-variant `table`."""

    path: Path
    manifest: dict[str, Any]
    workload: dict[str, Any]
    frame: pd.DataFrame
    table: pd.DataFrame
    outside: pd.DataFrame = field(default_factory=pd.DataFrame)
    warnings: list[str] = field(default_factory=list)

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
        return (f"{self.backend} {w.get('workload', '')} | {shape} {w.get('dtype', '')} on {dev} | "
                f"{w.get('iters', '')} iters | {self.path}")

    def footer(self) -> list[str]:
        lines = []
        w = self.workload
        env = w.get("env") or {}
        if w.get("device") == "cpu":
            lines.append("CPU run (no CUDA GPU used): times are host wall-clock; GPU columns are empty.")
        if env.get("peak_bandwidth_bytes_per_s"):
            lines.append(f"% peak BW against {env['peak_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s "
                         f"({env.get('peak_bandwidth_source', '')}); GB/s counts the fewest bytes each "
                         f"variant must move.")
        if self.backend == "time" and w.get("timer"):
            lines.append(f"timer: {w['timer']}, L2 flushed before each iteration: {w.get('flush_l2')}")
        if not self.outside.empty:
            desc = ", ".join(f"{r.kernel} x{r.launches}" for r in self.outside.itertuples())
            lines.append(f"outside the variants' ranges (input, warm-up, checks; not counted): {desc}")
        lines += [f"warning: {w_}" for w_ in self.warnings]
        return lines


def build_report(rf: RunFolder, frame: pd.DataFrame | None = None) -> Run:
    from reports import render, summary

    wman = rf.workload_manifest()
    if frame is None:
        frame = backends.get(rf.manifest["backend"]).parse(rf)
    table = summary.variant_table(frame, wman)
    run = Run(rf.path, rf.manifest, wman, frame, table, summary.outside_activity(frame),
              summary.warnings_for(table))
    render.write_all(table, frame, rf.path, title=run.title(), footer=run.footer(),
                     meta={"run": rf.path.name, "backend": run.backend, "workload": wman.get("workload"),
                           "status": rf.manifest.get("status")})
    return run


def plan(req: Request) -> list:
    """The exact commands a request would run, without running them (--dry-run)."""
    req.validate()
    backend = backends.get(req.backend)
    return backend.commands(req, Path(req.out or "<run-folder>").resolve() if req.out else Path("<run-folder>"))


def profile(workload: str, backend: str = "time", **options: Any) -> Run:
    """Run `workload` under `backend` and return the Run (see Request for the options).

    Raises a GprofError subclass on failure; the run folder is kept, marked failed or
    interrupted, with whatever was collected, and the exception carries `.run` when a
    partial report could be built."""
    from orchestrator import envinfo

    argv = options.pop("argv", None)
    req = Request(workload=workload, backend=backend, **options).validate()
    be = backends.get(backend)
    tools = be.require(req)  # a missing profiler fails here, before a run folder exists
    rf = RunFolder.create(backend, workload, out=req.out, root=req.root, request=req.to_json(), argv=argv)
    rf.update(machine=envinfo.machine(), tools=tools)
    t0 = time.monotonic()
    error: GprofError | None = None
    try:
        be.execute(req, rf)
    except GprofError as exc:
        error = exc
    except KeyboardInterrupt:
        error = InterruptedRunError("interrupted")
    rf.update(wall_s=round(time.monotonic() - t0, 3))
    run = None
    try:
        if (rf.path / "workload.json").exists():
            run = build_report(rf)
    except GprofError as exc:
        error = error or exc
    except Exception:
        rf.finish("failed", "gprof-orch failed to build the report (a bug: see the traceback)")
        raise
    status = "interrupted" if isinstance(error, InterruptedRunError) else "failed" if error else "ok"
    failed = []
    if run is not None:
        failed = [v for v in run.workload.get("variants", []) if v.get("status") == "failed"]
        if failed and not error:
            status = "failed"
            first = failed[0]
            error = RunFailedError(
                f"{len(failed)} variant(s) failed: " + "; ".join(f"{v['name']}: {v.get('error', '')}" for v in failed),
                log=rf.logs / "workload.stderr.log",
                hint=f"the other variants' results are in {rf.path}; the traceback of "
                     f"{first['name']} is in {rf.path / 'workload.json'}")
        if run.workload.get("status") == "interrupted" and not error:
            status, error = "interrupted", InterruptedRunError("the workload was interrupted")
    if error is not None and run is None and status != "interrupted":
        error.hint = (error.hint + "; " if error.hint else "") + f"run folder kept: {rf.path}"
    rf.finish(status, error.message if error else None)
    if run is not None:
        run.manifest = rf.manifest
    if error is not None:
        error.run = run  # type: ignore[attr-defined]
        error.run_path = rf.path  # type: ignore[attr-defined]
        raise error
    assert run is not None
    return run


def load_run(path: str | Path) -> Run:
    """Rebuild a Run from its folder (no GPU, no profiler needed)."""
    rf = RunFolder.open(path)
    if rf.manifest.get("backend") not in backends.BACKENDS:
        raise ParseError(rf.path, f"unknown backend {rf.manifest.get('backend')!r} in the manifest")
    return build_report(rf)
