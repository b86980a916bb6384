"""Run folders read back: a Run (one backend's folder; a parent folder of child runs is a
MultiRun, orchestrator.multirun), built from what the folder holds, with their report files.
Reading never profiles and needs no GPU; `load_run(..., write=False)` (orchestrator/loading.py) writes nothing. With
`write` (`gprof-orch report`), a step a stopped run left undone is made first (Backend.complete:
nsys's export of the report it wrote)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator import backends, failpoints
from orchestrator.backends.base import Backend, Parsed
from orchestrator.errors import EXIT_INCOMPLETE, EXIT_SUSPECT
from orchestrator.runfolder import RunFolder, disk_error, run_exit_code
from orchestrator.table_errors import report_error
from reports import flops, render

if TYPE_CHECKING:
    from orchestrator.multirun import MultiRun


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
    # why the profiler's report may lack part of what ran (Parsed.lost, read once), or None
    lost: str | None = None
    # each variant's operator tree (reports.operators.operator_table); empty where none was recorded
    ops: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __repr__(self) -> str:
        # the dataclass's own repr prints every frame whole: printing MultiRun.runs filled a screen
        return (
            f"Run({str(self.path)!r}, backend={self.backend!r}, workload={self.workload.get('workload')!r}, "
            f"status={self.status!r}, variants={len(self.workload.get('variants') or [])})"
        )

    @property
    def status(self) -> str:
        """The run's status from its manifest: ok, failed, interrupted, ... ("" if unrecorded)."""
        return self.manifest.get("status", "")

    @property
    def backend(self) -> str:
        """The name of the backend that made the run ("" if unrecorded)."""
        return self.manifest.get("backend", "")

    def _backend(self) -> Backend:
        """The backend that made the run: its hooks say what only it knows (its footer lines)."""
        return backends.get(self.backend) if self.backend in backends.BACKENDS else Backend()

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
        count = (
            f"{w['iters']} iters"
            if w.get("iters")
            else f"sampled to +-{noise}%"
            if noise is not None
            else "iterations per variant"
        )
        return heading(
            joined_words(self.backend, w.get("workload")),
            joined_words(shape, w.get("dtype"), dev and f"on {dev}"),
            count,
            self.path,
        )

    def footer(self) -> list[str]:
        """The lines printed under the table: how the run ended, what the columns are measured
        against, and the warnings a reader needs before trusting a number."""
        lines = []
        if self.status not in ("ok", None):
            err = self.manifest.get("error")
            lines.append(
                f"run {self.status}" + (f": {err}" if err else "") + "; the table holds what was collected"
            )
        w = self.workload
        env = w.get("env") or {}
        lines += _what_ran_lines(self)
        if w.get("device") == "cpu":
            lines.append("CPU run (no CUDA GPU used): times are host wall-clock; GPU columns are empty.")
        if env.get("peak_bandwidth_bytes_per_s"):
            lines.append(
                f"% peak BW against {env['peak_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s "
                f"({env.get('peak_bandwidth_source', '')}); GB/s counts the fewest bytes each "
                f"variant must move."
            )
        elif w.get("device") != "cpu" and self.table.get("achieved_gb_s", pd.Series()).notna().any():
            lines.append("no peak bandwidth recorded for this device: % peak BW left empty")
        roof = env.get("memory_roof") or {}
        if roof.get("bytes_per_s") and self.table.get("pct_of_measured_roof", pd.Series()).notna().any():
            # the roof is timed by CUDA events around each call; ncu's kernel time leaves out the
            # few us a call the events hold (191 against 186 us for the 1e8 square on the H200),
            # so a kernel that reads only can sit a little above a roof set by a copy
            lines.append(
                f"% of measured roof against {roof['bytes_per_s'] / 1e9:.0f} GB/s, the {roof.get('kernel', '')} "
                f"probe's on this GPU ({roof.get('method', '')}); the events hold a few us a call that "
                f"ncu's kernel times leave out, so a kernel may show a few % over 100"
            )
        lines += flops.footer_lines(self.table, w)
        unsized = [
            v["name"]
            for v in w.get("variants", [])
            if v.get("status") == "ok" and v.get("bytes_moved") is None
        ]
        if unsized and w.get("device") != "cpu":
            lines.append(f"no bytes_moved recorded for {', '.join(unsized)}: GB/s and % peak BW left empty")
        lines += self._backend().footer(w)
        weighted = weighting_footer(self)
        if weighted:
            lines.append(weighted)
        if not self.outside.empty:
            desc = ", ".join(f"{r.kernel} x{r.launches}" for r in self.outside.itertuples())
            lines.append(f"outside the variants' ranges (input, warm-up, checks; not counted): {desc}")
        lines += [f"warning: {w_}" for w_ in self.warnings]
        if "why" in self.table:  # reports/why.py: one line per variant, from measured facts
            lines += [f"why {r.variant}: {r.why}" for r in self.table.itertuples() if r.why]
        return lines


def heading(*fields: Any) -> str:
    """A table's one-line heading: its non-empty fields joined by " | " (a capture has no shape
    nor dtype: "program mine | on cpu", never "program mine |   on cpu")."""
    return " | ".join(str(f) for f in fields if f)


def joined_words(*words: Any) -> str:
    """The non-empty words, one space between them."""
    return " ".join(str(w) for w in words if w)


def build_report(rf: RunFolder, parsed: Parsed | None = None, *, write: bool = True) -> Run:
    """The Run of a folder, from what its backend read of it, once (Backend.parse; `parsed`: a
    reading already made, an import's); with `write`, its reports saved into it (with the
    manifest's status)."""
    # why lazy: it imports numpy, which importing results must not
    from reports import kernels, operators, summary, why

    failpoints.pause("build")
    backend = backends.get(rf.manifest["backend"])
    if parsed is None:
        backend.complete(rf, write=write)
    wman = rf.workload_manifest()
    if parsed is None:
        parsed = backend.parse(rf)
    frame, lost = parsed.frame, parsed.lost
    if lost:
        frame = summary.mark_lost_events(frame, wman)
    table = summary.variant_table(frame, wman)
    findings = why.findings_table(parsed.findings, frame)
    table["why"] = why.explain(table, frame, wman, findings)
    run = Run(
        rf.path,
        rf.manifest,
        wman,
        frame,
        table,
        summary.outside_activity(frame),
        summary.warnings_for(table, frame) + parsed.warnings + ([lost] if lost else []),
        saved=False,
        kernels=kernels.kernel_table(frame, wman),
        findings=findings,
        lost=lost,
        ops=operators.operator_table(frame),
    )
    if write:
        write_report(run)
    return run


def write_report(run: Run) -> None:
    """report.md/.json/.csv/.html and frame.csv, from the run's manifest as it is now: call it
    once the final status is set. A failed write raises GprofError (disk full)."""
    # why lazy: it imports numpy, which importing results must not
    from reports import html, render

    meta = {
        "run": run.path.name,
        "backend": run.backend,
        "workload": run.workload.get("workload"),
        "status": run.status,
    }
    try:
        render.write_all(
            run.table, run.frame, run.path, title=run.title(), footer=run.footer(), doc=report_doc(run)
        )
        failpoints.pause("write")
        html.write_html(
            run.path / "report.html",
            run.title(),
            [(run.backend, run.table)],
            meta=meta,
            notes=run.footer(),
            kernels=run.kernels,
            findings=run.findings,
            ops=run.ops,
        )
    except OSError as exc:
        raise disk_error(run.path, exc) from exc
    run.saved = True


def report_doc(run: Run | MultiRun, *, kernels: bool = False) -> dict[str, Any]:
    """The one JSON document of a run: report.json holds it, `--json` prints it (with `kernels`,
    the per-kernel list beside "variants"). How the run ended (status, exit_code as the run's
    command exited, error: null when it went well), meta (ncu's findings in "findings") and
    the per-variant table."""
    code, m = run.exit_code, run.manifest
    meta = {
        "run": str(run.path),
        "backend": run.backend,
        "workload": run.workload.get("workload") or m.get("workload"),
        "status": run.status,
    }
    if not isinstance(run, Run):  # a parent folder (orchestrator.multirun)
        meta["kind"] = run.kind
    elif not run.findings.empty:
        meta["findings"] = json.loads(run.findings.to_json(orient="records"))
    kind = m.get("error_kind") or {124: "ToolTimeoutError", 130: "InterruptedRunError"}.get(
        code, "RunFailedError"
    )
    error = {"kind": kind, "message": m.get("error") or f"the run ended {run.status}"} if code else None
    status = run.status
    if not code:  # a folder that ended ok whose table is not whole (read by an older gprof-orch)
        carried = report_error(run)
        if carried is not None:
            code, status = (
                carried.exit_code,
                {EXIT_INCOMPLETE: "incomplete", EXIT_SUSPECT: "suspect"}.get(carried.exit_code, "failed"),
            )
            error = {"kind": type(carried).__name__, "message": carried.message, "hint": carried.hint}
    doc = {
        "status": status,
        "exit_code": code,
        "error": error,
        **json.loads(render.to_json(run.table, meta, kernels=run.kernels if kernels else None)),
    }
    if isinstance(run, Run) and not run.ops.empty:
        # why lazy: it imports numpy, which importing results must not
        from reports import operators

        doc.update(operators.to_doc(run.ops, run.frame))
    return doc


def _what_ran_lines(run: Run) -> list[str]:
    """The footer's lines on what ran besides what was asked, and what the speedup column leaves
    out: the baseline that --variants left out (the speedup column is over it), a
    --workload-file workload that replaced a built-in, variants timed once (no speedup)."""
    w, lines = run.workload, []
    asked = (run.manifest.get("request") or {}).get("variants") or []
    base = w.get("baseline")
    if asked and base not in asked and any(v.get("name") == base for v in w.get("variants", [])):
        lines.append(f"baseline {base} run too, for the speedup column (--variants named {', '.join(asked)})")
    if w.get("replaces_builtin"):
        lines.append(replaced_builtin(w))
    once = run.table.loc[run.table.get("samples", pd.Series(dtype=float)) == 1, "variant"].tolist()
    if once:
        how = run._backend().once_note(w)
        lines.append(
            f"no speedup for a variant timed once, nor over a baseline timed once: {', '.join(once)} "
            f"had one sample{how}; one reading has no spread to tell a difference from noise"
        )
    return lines


def replaced_builtin(w: dict) -> str:
    """What a run of a --workload-file workload named like a built-in says (workload.json's
    `replaces_builtin`): the user's workload ran, not the built-in."""
    return (
        f"workload {w.get('workload')} is the one in {w.get('workload_source')}, which replaces the "
        f"built-in {w.get('workload')}"
    )


def weighting_footer(run: Any) -> str | None:
    """The footer line on variants whose ncu readings are time-weighted over several kernels."""
    # why lazy: it imports numpy, which importing results must not
    from reports.kernels import weighting_legend

    frame, workload = getattr(run, "frame", None), getattr(run, "workload", None) or {}
    if not isinstance(frame, pd.DataFrame):
        return None
    return weighting_legend(frame, [v["name"] for v in workload.get("variants", [])])
