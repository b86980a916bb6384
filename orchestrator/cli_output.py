"""What the CLI prints for a run: the table (terminal, CSV, JSON, Markdown) or one JSON
document, for a finished run, a partial one, or an error."""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import click

from orchestrator.errors import EXIT_RUN_FAILED, GprofError, InterruptedRunError


def error_doc(
    message: str,
    exit_code: int,
    *,
    kind: str = "error",
    hint: str | None = None,
    log: str | None = None,
    status: str = "error",
) -> dict:
    """The JSON document of a command that failed before it had a run to show."""
    return {
        "status": status,
        "exit_code": exit_code,
        "error": {"kind": kind, "message": message, "hint": hint, "log": log},
    }


def exit_with_error(ctx: click.Context, exc: GprofError, cause: BaseException | None = None) -> None:
    """An expected error (`cause`: what it stands for, an interrupt): its message on stderr, with
    --json its document on stdout (the partial run's, with the error in it), its exit code."""
    if _debug(ctx):
        traceback.print_exception(cause or exc)
    if ctx.meta.get("gprof.json", False):
        click.echo(
            json.dumps(_gprof_error_doc(exc, ctx.meta.get("gprof.per_kernel", False)), indent=1, default=str)
        )
    click.echo(f"gprof-orch: error: {exc.render()}", err=True)
    ctx.exit(exc.exit_code)


def exit_internal(ctx: click.Context, exc: BaseException) -> None:
    """A bug: said in one line (with --json, one document), the traceback only when asked; exit 1."""
    if _debug(ctx):
        traceback.print_exception(exc)
    message = f"internal error: {type(exc).__name__}: {exc} (a bug; run with --debug for the traceback)"
    if ctx.meta.get("gprof.json", False):
        click.echo(json.dumps(error_doc(message, EXIT_RUN_FAILED, kind="internal"), indent=1))
    click.echo(f"gprof-orch: {message}", err=True)
    ctx.exit(EXIT_RUN_FAILED)


def _debug(ctx: click.Context) -> bool:
    # read when needed: the group's --debug is stored by main(), inside the group's invoke
    return bool((ctx.find_root().obj or {}).get("debug") or os.environ.get("GPROF_DEBUG") == "1")


def _gprof_error_doc(exc: GprofError, per_kernel: bool = False) -> dict:
    partial = getattr(exc, "run", None)
    status = (
        partial.status
        if partial is not None
        else "interrupted"
        if isinstance(exc, InterruptedRunError)
        else "error"
    )
    err = error_doc(
        exc.message,
        exc.exit_code,
        kind=type(exc).__name__,
        hint=exc.hint,
        log=str(exc.log) if exc.log else None,
        status=status,
    )
    if partial is None:
        run_path = getattr(exc, "run_path", None)
        return {**err, "run": str(run_path)} if run_path else err
    return run_doc(
        partial, status=err["status"], error=err["error"], exit_code=exc.exit_code, per_kernel=per_kernel
    )


def run_doc(
    run,
    *,
    status: str | None = None,
    error: dict | None = None,
    exit_code: int | None = None,
    per_kernel: bool = False,
) -> dict:
    """A run as the one JSON document --json prints: report.json's (results.report_doc: status,
    exit code, error, meta, the per-variant table); with `per_kernel`, the per-kernel breakdown
    as "kernels" beside "variants". A run that has just failed overrides how it ended with the
    error as raised (its hint and log)."""
    # why lazy: it imports pandas, which importing cli_output must not
    from orchestrator.results import report_doc

    doc = report_doc(run, kernels=per_kernel)
    if status is not None:
        doc["status"] = status
    if exit_code is not None:
        doc["exit_code"] = exit_code
    if error is not None:
        doc["error"] = error
    return doc


def print_run(run, fmt: str, per_kernel: bool = False) -> None:
    # why lazy: it imports pandas, which importing cli_output must not
    from reports import render, term

    title, footer = run.title(), run.footer()
    meta = {"run": str(run.path), "status": run.status, "backend": run.backend}
    if fmt == "json":
        click.echo(json.dumps(run_doc(run, per_kernel=per_kernel), indent=1))
        return
    if run.workload.get("device") == "cpu" and fmt == "table":
        click.echo(
            "note: no CUDA GPU in use: running on the CPU (host wall-clock times, no GPU kernels).", err=True
        )
    if run.workload.get("replaces_builtin"):
        # why lazy: it imports pandas, which importing cli_output must not
        from orchestrator.results import replaced_builtin

        click.echo(f"warning: {replaced_builtin(run.workload)}", err=True)
    if fmt == "table" and term.use_color(sys.stdout):
        click.echo(term.to_text_colored(run.table, title, footer, color=True), color=True)
        if per_kernel:
            click.echo("\n" + render.render_kernels(run.kernels, fmt))
    else:
        click.echo(
            render.render(
                run.table,
                fmt,
                title=title,
                footer=footer,
                meta=meta,
                kernels=run.kernels if per_kernel else None,
            )
        )
    ops = getattr(run, "ops", None)
    if click.get_current_context().meta.get("gprof.ops") and ops is not None and fmt in ("table", "markdown"):
        # why lazy: it imports pandas, only an --ops table needs it
        from reports import operators

        said = run.workload.get("ops") if isinstance(run.workload.get("ops"), dict) else {}
        why = (
            f"the runner could not emit the operators' NVTX ranges ({said['reason']})"
            if said.get("reason")
            else ""
        )
        click.echo("\n" + operators.render_tree(ops, fmt, why))
    if fmt == "table" and run.saved:
        csv = (
            ", frame.csv" if (Path(run.path) / "frame.csv").exists() else ""
        )  # only small frames (reports/render.py)
        click.echo(
            f"saved: {run.path}/report.md, report.html, report.csv, report.json, frame.parquet{csv}", err=True
        )


def run_and_print(fn, fmt: str, as_json: bool, per_kernel: bool = False) -> None:
    fmt = "json" if as_json else fmt
    click.get_current_context().meta["gprof.per_kernel"] = per_kernel
    try:
        run = fn()
    except GprofError as exc:
        partial = getattr(exc, "run", None)
        # the data collected goes where data goes, stdout (`--format csv > out.csv` keeps it);
        # the error, to stderr (JSON: the Group prints the partial run with the error in it)
        if partial is not None and fmt != "json":
            print_run(partial, fmt, per_kernel=per_kernel)
        raise
    print_run(run, fmt, per_kernel=per_kernel)
