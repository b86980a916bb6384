"""The `gprof-orch` command line: options -> a Request -> the library -> a rendered table.

Kept free of torch, triton and pandas imports at module level so `--help` is instant.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import click

from orchestrator import __version__, backends, failpoints
from orchestrator.cli_capture import exec_group, import_cmd
from orchestrator.cli_output import error_doc, exit_internal, exit_with_error, run_and_print
from orchestrator.cli_reports import compare, report
from orchestrator.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_RUN_FAILED,
    GprofError,
    InterruptedRunError,
    UsageError,
    check_seconds,
    interrupt_in,
    note_interrupt,
)
from reports.formats import FORMATS
from workloads import registry

EPILOG_RUN = """\b
Examples:
  gprof-orch {cmd} square
  gprof-orch {cmd} mean --size 1e7 --variants torch_mean,sum_div_numel
  gprof-orch {cmd} triton-mean --device cpu --triton-interpret --size 4096
"""


def _stop(signum, frame):
    # noted before it is raised: an import it stops half-way fails again later with an error that
    # does not carry it (orchestrator.errors.note_interrupt)
    note_interrupt()
    raise KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"signal {signum}")


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON (--json, --format json): then stdout gets one JSON
    document whatever happens, errors included, and human text goes to stderr."""
    args = args[: args.index("--")] if "--" in args else args
    return (
        "--json" in args
        or "--format=json" in args
        or any(a == "--format" and b == "json" for a, b in zip(args, args[1:]))
    )


class Group(click.Group):
    """Turns every expected error into one message and its exit code, in one place; anything
    else is an internal error (exit 1, traceback only with --debug). With --json, stdout gets
    one JSON document (the error's, or the partial run's with the error in it)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["gprof.json"] = wants_json(list(args))
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*_backend_commands(), *super().list_commands(ctx)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        summary = _backend_commands().get(name)
        return BackendCommand(name, summary) if summary is not None else super().get_command(ctx, name)

    def invoke(self, ctx: click.Context):
        note_interrupt(False)
        # SIGTERM stops a run the way Ctrl-C does: the child is told, the folder is kept. SIGINT
        # is taken only where Python's own handler has it: a background job's ignored one stays so
        signal.signal(signal.SIGTERM, _stop)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _stop)
        failpoints.pause_in_import()  # a test's, in the first import of pandas this command makes
        as_json = ctx.meta.get("gprof.json", False)
        try:
            return super().invoke(ctx)
        except GprofError as exc:
            exit_with_error(ctx, exc)
        except click.UsageError as exc:
            if not as_json:
                raise
            click.echo(
                json.dumps(error_doc(exc.format_message(), exc.exit_code, kind="UsageError"), indent=1)
            )
            exc.show()
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except BrokenPipeError:
            # stdout's reader went away (`| head`): stop quietly, as a tool killed by SIGPIPE
            # does (the run folder is written before its table is printed); stdout is pointed
            # at /dev/null first, so the interpreter's own flush at exit does not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            click.echo("gprof-orch: stdout was closed early; the rest was not printed", err=True)
            ctx.exit(EXIT_BROKEN_PIPE)
        except (KeyboardInterrupt, Exception) as exc:
            # an interrupt the command did not turn into its own error (reading or printing a
            # table; an import it broke, which comes out as an ImportError) is one still: exit 130;
            # click would say "Aborted!" and exit 1
            if interrupt_in(exc):
                exit_with_error(ctx, InterruptedRunError("interrupted"), exc)
            exit_internal(ctx, exc)


class DtypeOption(click.Option):
    """--dtype, whose help lists the dtypes the built-in workloads take, looked up only when
    help is shown (the CLI's start imports no workload)."""

    def get_help_record(self, ctx: click.Context):
        dtypes = registry.builtin_dtypes()
        self.help = (
            f"{', '.join(dtypes[:-1])} or {dtypes[-1]} (what the built-in workloads take; `list` shows "
            "each workload's); comma-separated for a sweep."
        )
        return super().get_help_record(ctx)


def run_options(f):
    """Options every backend shares."""
    opts = [
        click.argument("workload"),
        click.option(
            "--variants",
            "-v",
            multiple=True,
            help="Variant names, comma-separated or repeated (default: all). The workload's baseline "
            "runs too, named or not: the speedup column is over it (`list` marks it).",
        ),
        click.option(
            "--size",
            "-s",
            default=None,
            help="Elements (1e8, 100000000) or a shape (10000x10000). "
            "Default: the workload's (built-ins: 10000x10000 on a GPU, 1000x1000 on the CPU; a workload file's "
            "default_shape, or its cpu_default_shape on the CPU).",
        ),
        click.option("--dtype", default="float32", show_default=True, cls=DtypeOption),
        click.option(
            "--device",
            default="auto",
            show_default=True,
            type=click.Choice(["auto", "cuda", "cpu"]),
            help="auto: the GPU if torch sees one, else the CPU (said in the report).",
        ),
        click.option(
            "--iters",
            type=int,
            default=None,
            help="Measured iterations per variant (time: exactly N samples instead of --max-noise; "
            "others: the backend's default).",
        ),
        click.option(
            "--warmup", type=int, default=None, help="Warm-up iterations, outside every measured range."
        ),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the input."),
        click.option(
            "--out",
            "-o",
            type=click.Path(path_type=Path),
            default=None,
            help="Run folder (must be new or empty). Default: gprof-runs/<UTC time>-<backend>-<workload>/.",
        ),
        click.option(
            "--format",
            "fmt",
            default="table",
            show_default=True,
            type=click.Choice(FORMATS),
            help="How the table is printed.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json)."),
        click.option(
            "--per-kernel",
            is_flag=True,
            help="Also print each variant's kernels: launches, time, share of "
            "the variant's time; ncu: DRAM/SM %, occupancy, registers (report.html always has them).",
        ),
        click.option(
            "--workload-file",
            type=click.Path(dir_okay=False),
            default=None,
            help="A Python file defining your own Workload(s) (see README).",
        ),
        click.option(
            "--triton-interpret", is_flag=True, help="Run Triton kernels through its interpreter (CPU)."
        ),
        click.option(
            "--timeout", type=float, default=None, help="Seconds before the run's process group is ended."
        ),
        click.option("--dry-run", is_flag=True, help="Print the exact commands and exit."),
        click.option("--fail-variant", default=None, hidden=True),
        *cluster_options(),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def cluster_options() -> list:
    """--cluster and its companions (orchestrator/cluster.py), on every backend command and `all`;
    their defaults are the Request's."""
    # why lazy: off the start-up of every command and of --help
    from orchestrator.request import Request

    return [
        click.option(
            "--cluster",
            default=None,
            metavar="SPEC",
            help="Run the points on Dask, each point (a sweep's size/dtype, a backend of `all`) one "
            "task needing the resource GPU=1: local:N (N worker processes here), local-cuda (one "
            "worker per visible GPU), tcp://HOST:PORT (a running scheduler).",
        ),
        click.option(
            "--scheduler-file",
            type=click.Path(dir_okay=False),
            default=None,
            help="A running Dask scheduler, by the file it wrote (dask scheduler --scheduler-file, "
            "dask-jobqueue).",
        ),
        click.option(
            "--retries",
            type=int,
            default=Request.retries,
            show_default=True,
            help="Times a point whose worker was lost (killed, out of memory) is submitted again.",
        ),
        click.option(
            "--each-gpu",
            is_flag=True,
            help="Run the one point on every worker's GPU (default cluster: "
            "local-cuda): a table per GPU, those more than 3% slower than the median flagged.",
        ),
        click.option(
            "--connect-timeout",
            type=float,
            default=Request.connect_timeout,
            show_default=True,
            metavar="S",
            help="Seconds a scheduler has to answer (then exit 3).",
        ),
    ]


def _request_kwargs(kw: dict) -> dict:
    # why lazy: off the start-up of every command and of --help
    from orchestrator.request import parse_list

    as_json, fmt = kw.pop("as_json"), kw.pop("fmt")
    fmt = "json" if as_json else fmt
    given = kw["variants"]
    kw["variants"] = parse_list(given)
    if given and not kw["variants"]:
        raise UsageError(f"--variants {','.join(given)!r} names no variant; leave it out to run them all")
    # a repeatable option's values as a list; the backend's own options reach its Options by name
    # (orchestrator.backends.request)
    kw = {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}
    return {"fmt": fmt, **kw}


def _entry(workload: str, backend: str, kw: dict):
    """The library call a command means: every backend (`all`), a sweep (a list of sizes or
    dtypes), or one run."""
    # why lazy: off the start-up of every command and of --help
    from orchestrator import api

    # why lazy: off the start-up of every command and of --help
    from orchestrator.request import parse_list

    sizes, dtypes = parse_list(kw.get("size")), parse_list(kw.get("dtype"))
    if backends.is_all(backend):
        return lambda: api.profile_all(workload, argv=sys.argv, **kw)
    if len(sizes) > 1 or len(dtypes) > 1:
        rest = {k: v for k, v in kw.items() if k not in ("size", "dtype")}
        return lambda: api.sweep(workload, backend, sizes, dtypes, argv=sys.argv, **rest)
    return lambda: api.profile(workload, backend, argv=sys.argv, **kw)


def _execute(ctx: click.Context, backend: str, **kw) -> None:
    per_kernel = ctx.meta["gprof.per_kernel"] = kw.pop("per_kernel", False)
    ctx.meta["gprof.ops"] = bool(kw.get("ops"))  # --ops (torch-trace, nsys): the tree under the table
    kw = _request_kwargs(kw)
    fmt = kw.pop("fmt")
    workload = kw.pop("workload")
    if kw.pop("dry_run"):
        _dry_run(workload, backend, kw)
        return
    run_and_print(_entry(workload, backend, kw), fmt, False, per_kernel)


def _dry_run(workload: str, backend: str, kw: dict) -> None:
    """--dry-run: the exact commands of every run the command would make (each backend of `all`,
    each point of a sweep, under a `# <folder>` line), and each runner's spec; nothing runs."""
    # why lazy: off the start-up of every command and of --help
    from orchestrator import api

    # why lazy: off the start-up of every command and of --help
    from orchestrator.proc import format_argv

    # why lazy: off the start-up of every command and of --help
    from orchestrator.request import parse_list

    every = backends.is_all(backend)
    names = backends.of_all() if every else [backend]
    sizes, dtypes = parse_list(kw.get("size")), parse_list(kw.get("dtype"))
    if len(sizes) > 1 or len(dtypes) > 1:  # a sweep: its points, as api.sweep names their folders
        sizes, dtypes = api.sweep_axes(sizes, dtypes)
    runs = [(n, s, d) for n in names for d in dtypes or [kw.get("dtype")] for s in sizes or [kw.get("size")]]
    parent = backends.request(workload, backend, **kw)
    for i, (name, size, dtype) in enumerate(runs):
        sub = name if every else api.point_name(size, dtype) if len(runs) > 1 else None
        own = backends.point_options(parent, name)
        req = backends.request(workload, name, **{**own, "size": size, "dtype": dtype})
        spec = req.cluster_spec()
        if i == 0 and spec is not None:
            # why lazy: off the start-up of every command and of --help
            from orchestrator import cluster

            what = "on every worker's GPU of " if req.each_gpu else "each point a task (resource GPU=1) on "
            click.echo(f"# would run {what}{cluster.describe(spec)}")
        if sub:
            click.echo(f"# {sub}")
        planned = api.plan(req, sub)
        for step in planned.steps:
            click.echo(format_argv(step.argv, step.env))
        # what the runner's --spec file holds: every default settled, the shape and device included
        click.echo(f"# spec: {json.dumps(planned.spec.to_json())}")


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gprof-orch")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Profile the variants of a GPU operation side by side: CUDA events, torch.profiler,
    Nsight Systems and Nsight Compute, in one pandas report.

    \b
    Examples:
      gprof-orch list
      gprof-orch doctor
      gprof-orch time square
      gprof-orch torch-trace mean
      gprof-orch nsys square
      gprof-orch ncu triton-mean
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@main.command("list")
@click.option(
    "--workload-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also list the Workload(s) of this Python file (imported in a child process).",
)
@click.option("--timeout", type=float, default=None, help="Seconds the import of --workload-file may take.")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(workload_file, timeout, as_json) -> None:
    """List workloads, their variants and what each needs.

    \b
    Example:
      gprof-orch list
      gprof-orch list --workload-file mine.py
    """
    # why lazy: off the start-up of every command and of --help
    from orchestrator.request import workload_catalog

    check_seconds(timeout, "--timeout")
    data = workload_catalog(workload_file, timeout)
    if as_json:
        click.echo(json.dumps(data, indent=1))
        return
    for w in data:
        replaces = (
            f" (from {w['source']}: replaces the built-in {w['workload']})"
            if w.get("replaces_builtin")
            else ""
        )
        click.echo(f"{w['workload']}: {w['description']}{replaces}")
        click.echo(f"  dtypes: {', '.join(w['dtypes'])}")
        for v in w["variants"]:
            base = " (baseline)" if v["name"] == w["baseline"] else ""
            needs = f"  needs: {', '.join(v['needs'])}" if v["needs"] else ""
            click.echo(f"  {v['name']:<16} {v['label']}{base}{needs}")


@main.command()
@click.option("--nsys", default=None, help="Path to nsys.")
@click.option("--ncu", default=None, help="Path to ncu.")
@click.option(
    "--check", is_flag=True, help="Also prove each tool works: a tiny real run of torch.profiler, nsys, ncu."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def doctor(ctx, nsys, ncu, check, as_json) -> None:
    """Show what this machine has: GPU, driver, CUDA, torch, triton, nvtx, nsys, ncu,
    and how to get what is missing. With --check, run each tool for real (exit 1 if one fails);
    their reports and logs are removed after, kept where a failed check points at them or with --debug.

    \b
    Example:
      gprof-orch doctor
      gprof-orch doctor --check
    """
    # why lazy: off the start-up of every command and of --help
    from orchestrator import doctor as doc

    report = doc.collect(nsys=nsys, ncu=ncu)
    if check:
        scratch = None
        if (ctx.obj or {}).get("debug") or os.environ.get("GPROF_DEBUG") == "1":
            import tempfile

            scratch = Path(tempfile.mkdtemp(prefix="gprof-doctor-"))
            click.echo(
                f"gprof-orch: doctor --check: the checks' reports and logs are kept in {scratch}", err=True
            )
        report["checks"] = doc.check_tools(nsys=nsys, ncu=ncu, scratch=scratch)
    failed = [c["check"] for c in report.get("checks", []) if c["ok"] is False]
    if as_json:
        report = {
            "status": "failed" if failed else "ok",
            "exit_code": EXIT_RUN_FAILED if failed else 0,
            "error": {"kind": "CheckFailed", "message": f"check failed: {', '.join(failed)}"}
            if failed
            else None,
            **report,
        }
        click.echo(json.dumps(report, indent=1))
    else:
        click.echo(doc.render(report))
        if check:
            click.echo("checks:\n" + doc.render_checks(report["checks"]))
    if failed:
        click.echo(
            f"gprof-orch: doctor --check: {', '.join(failed)} does not work here (see the fix above)",
            err=True,
        )
        sys.exit(EXIT_RUN_FAILED)


class BackendCommand(click.Command):
    """`gprof-orch NAME WORKLOAD` for a backend of the registry (orchestrator/backends). Until it
    is used it is only its registry summary, so listing the commands imports no backend; then
    its help and options are the backend class's (`help`, `cli_options()`), beside run_options.
    `all` takes every one of its backends' tool options (--nsys, --ncu)."""

    def __init__(self, name: str, summary: str) -> None:
        super().__init__(name, callback=self._run, short_help=summary, help=summary)
        self._loaded = False

    def _run(self, **kw) -> None:
        _execute(click.get_current_context(), self.name, **kw)

    def _load(self) -> None:
        if self._loaded:
            return

        epilog = EPILOG_RUN
        if backends.is_all(self.name):
            classes = [backends.backend_class(n) for n in backends.of_all()]
            extra = [o for c in classes for o in c.Options.click_options(tool_paths_only=True)]
            text = (
                f"Run every backend available here ({', '.join(backends.of_all())}) into one folder and write "
                "the merged table: each backend's median per variant, ncu's DRAM/SM %, and a flag where "
                "backends disagree by more than 10%."
            )
        else:
            cls = backends.backend_class(self.name)
            extra, text = cls.cli_options(), cls.help
            if cls.needs_gpu:  # no CPU example for a backend that measures only on a GPU
                epilog = "\n".join(ln for ln in epilog.splitlines() if "--device cpu" not in ln) + "\n"
        f = run_options(lambda: None)
        for opt in reversed(extra):
            f = opt(f)
        self.params = list(reversed(f.__click_params__))
        self.help = text + "\n\n" + epilog.format(cmd=self.name)
        self._loaded = True

    def get_params(self, ctx: click.Context) -> list:
        self._load()
        return super().get_params(ctx)


def _backend_commands() -> dict[str, str]:
    try:
        listed = backends.commands()
    except GprofError as exc:  # a bad GPROF_ORCH_BACKENDS line: before any command could catch it
        click.echo(f"gprof-orch: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    return {
        **listed,
        backends.ALL: "Every backend available here into one folder, and the merged table.",
    }


# saved runs (orchestrator/cli_reports.py); any program, any capture: one variant per NVTX range
# (orchestrator/cli_capture.py)
main.add_command(compare)
main.add_command(report)
main.add_command(import_cmd)
main.add_command(exec_group)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
