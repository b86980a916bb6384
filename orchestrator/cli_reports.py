"""`gprof-orch compare` and `gprof-orch report`: saved run folders, read back (no GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from orchestrator.backends.ops_option import OPS_HELP
from orchestrator.backends.program_options import ATTRIBUTE_THREAD, ATTRIBUTE_WINDOW
from orchestrator.cli_output import print_run, run_doc
from orchestrator.errors import (
    EXIT_PARSE,
    EXIT_RUN_FAILED,
    GprofError,
    InterruptedRunError,
    ParseError,
    UsageError,
    interrupt_in,
)
from reports.formats import FORMATS


def _percent_limit(ctx, param, value):
    """--fail-if-slower: a finite number of percent, 0 or more (nan would never fail)."""
    import math

    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"{value!r} is not a finite number >= 0", ctx=ctx, param=param)
    return value


@click.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option(
    "--fail-if-slower",
    type=float,
    default=None,
    metavar="PCT",
    callback=_percent_limit,
    help="Exit 1 if a variant of B is slower than A by more than PCT percent (a finite number "
    ">= 0), beyond the runs' spread, or if one A measured failed, was skipped or is absent in B.",
)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="Compare anyway runs of another workload, size, shape, dtype or kernels, whose medians time other "
    "things, or timed another way (said in the footer; --fail-if-slower is then refused).",
)
@click.option("--format", "fmt", default="table", type=click.Choice(FORMATS))
@click.option("--json", "as_json", is_flag=True)
def compare(run_a, run_b, fail_if_slower, allow_mismatch, fmt, as_json) -> None:
    """Compare two runs of one workload variant by variant: B's median over A's, and whether
    the change is larger than the runs' own spread (IQR). Runs of another workload, size, shape,
    dtype or kernels, whose medians time other things (CUDA events against kernel durations, ncu's
    replay, the host's time bare or under a profiler), or timed another way (L2 flush, hold, CUDA graph) are refused (exit 2)
    unless --allow-mismatch; sweeps are compared point by point on size and dtype; a variant skipped or failed in either run is `missing`. On different
    GPUs, % of peak bandwidth is compared beside time. For CI gates, --fail-if-slower.

    \b
    Example:
      gprof-orch compare gprof-runs/before gprof-runs/after --fail-if-slower 5
    """
    # why lazy: off the start-up of every command and of --help
    from orchestrator import api

    # why lazy: it imports pandas, which importing cli_reports must not
    from reports import render

    table, a, b = api.compare(run_a, run_b, allow_mismatch=allow_mismatch)
    notes = list(table.attrs.get("notes", []))
    if fail_if_slower is not None and table.attrs.get("mismatches"):
        raise UsageError(
            "--fail-if-slower does not judge runs that differ: " + "; ".join(table.attrs["mismatches"])
        )
    title = f"compare {a.workload.get('workload')}: A = {run_a} ({a.backend}), B = {run_b} ({b.backend})"
    footer = notes
    slower = kind = None
    if fail_if_slower is not None:
        worse = table[(table["change_pct"] > fail_if_slower) & table["beyond_spread"]]
        why = (
            [
                f"slower than {fail_if_slower:g}%: "
                + ", ".join(f"{r.variant} {r.change_pct:+.1f}%" for r in worse.itertuples())
            ]
            if not worse.empty
            else []
        ) + (
            [f"measured in A, not in B: {'; '.join(table.attrs['lost'])}"] if table.attrs.get("lost") else []
        )
        # a variant that crashed or vanished in B is a regression a gate must not pass
        slower = "; ".join(why) or None
        kind = "SlowerError" if not worse.empty else "MissingInBError"
    fmt = "json" if as_json else fmt
    if fmt == "json":
        meta = {
            "a": str(run_a),
            "b": str(run_b),
            "a_backend": a.backend,
            "b_backend": b.backend,
            "notes": footer,
        }
        doc = {
            "status": "failed" if slower else "ok",
            "exit_code": EXIT_RUN_FAILED if slower else 0,
            "error": {"kind": kind, "message": slower} if slower else None,
            **json.loads(render.to_json(table, meta)),
        }
        click.echo(json.dumps(doc, indent=1))
    else:
        click.echo(render.render(table, fmt, title=title, footer=footer))
    if slower:
        click.echo(f"gprof-orch: {slower}", err=True)
        sys.exit(EXIT_RUN_FAILED)


def _load(path: Path, attribute: str | None = None):
    """api.load_run(path, write=True); an interrupt while it reads or writes is InterruptedRunError
    (its manifest is never written here; each report file is replaced whole)."""
    # why lazy: off the start-up of every command and of --help
    from orchestrator import api

    try:
        return api.load_run(path, write=True, attribute=attribute)
    except BaseException as exc:
        if interrupt_in(exc):
            stop = InterruptedRunError(
                f"interrupted while reporting {path}",
                hint=f"its status is as it was; `gprof-orch report {path}` writes its reports again",
            )
            stop.run_path = path  # type: ignore[attr-defined]
            raise stop from exc
        raise


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", default="table", type=click.Choice(FORMATS))
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--per-kernel",
    is_flag=True,
    help="Also print each variant's kernels: launches, time, share of "
    "the variant's time; ncu: DRAM/SM %, occupancy, registers (report.html always has them).",
)
@click.option("--ops", is_flag=True, help=OPS_HELP)
@click.option(
    "--attribute",
    type=click.Choice([ATTRIBUTE_WINDOW, ATTRIBUTE_THREAD]),
    default=None,
    help="An nsys capture's folder (exec nsys, import): which range a kernel counts in, as `exec nsys "
    "--attribute` takes it (window, thread), recorded in the folder. Default: the folder's choice.",
)
def report(runs, fmt, as_json, per_kernel, ops, attribute) -> None:
    """Rebuild the report of saved run folders (no GPU needed). Exits as the run did (1 failed,
    124 timed out, 130 interrupted; several folders: the first that did not end ok), its table
    printed all the same; 4 (or the folder's own code) when a folder could not be read.

    \b
    Example:
      gprof-orch report gprof-runs/20261202T120000Z-time-square
      gprof-orch report gprof-runs/20261202T120000Z-program-train --attribute thread
    """
    fmt = "json" if as_json else fmt
    click.get_current_context().meta["gprof.ops"] = ops
    docs, unreadable, codes, ended = [], [], [], []
    for path in runs:
        try:
            run = _load(path, attribute)
        except GprofError as exc:
            if len(runs) == 1:
                raise
            # one bad folder of several: named at the end; the others are still reported
            unreadable.append(f"{exc.path}: {exc.reason}" if isinstance(exc, ParseError) else exc.message)
            codes.append(exc.exit_code)
            continue
        unreadable += [f"{path}/{n}: {why}" for n, why in (getattr(run, "unreadable", None) or {}).items()]
        doc = run_doc(run, per_kernel=per_kernel)
        if fmt == "json":  # one document on stdout: printed once every folder is read
            docs.append(doc)
        else:
            print_run(run, fmt, per_kernel=per_kernel)
        if not run.saved:
            click.echo(f"gprof-orch: {path} is read-only: its saved reports were not rewritten", err=True)
        if doc["exit_code"]:
            ended.append((path, doc))
    # the tables are printed; the exit code says that a folder could not be read, else how the
    # (first) run that did not end ok ended
    message = "could not read " + "; ".join(unreadable) if unreadable else None
    code = (codes or [EXIT_PARSE])[0] if message else ended[0][1]["exit_code"] if ended else 0
    for path, doc in ended:
        click.echo(
            f"gprof-orch: {path}: the run ended {doc['status']} (exit {doc['exit_code']}): "
            f"{doc['error']['message']}",
            err=True,
        )
    if fmt == "json":
        click.echo(json.dumps(_report_json(docs, len(runs), ended, message, code), indent=1))
    if message:
        click.echo(f"gprof-orch: error: {message}", err=True)
    if code:
        sys.exit(code)


def _report_json(docs: list[dict], n: int, ended: list, message: str | None, code: int) -> dict:
    """`report --json`'s one document: the folder's own (report.json's), or {"runs": [...]} of
    several, with the exit code and error of the whole command."""
    doc = (
        docs[0]
        if n == 1
        else {
            "status": "failed" if ended else "ok",
            "exit_code": code,
            "error": {
                "kind": ended[0][1]["error"]["kind"],
                "message": "; ".join(f"{p}: {d['error']['message']}" for p, d in ended),
            }
            if ended
            else None,
            "runs": docs,
        }
    )
    if message:
        doc = {
            **doc,
            "status": "failed",
            "exit_code": code,
            "error": {"kind": "ParseError" if code == EXIT_PARSE else "GprofError", "message": message},
        }
    return doc
