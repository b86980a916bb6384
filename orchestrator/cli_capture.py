"""`gprof-orch import` and `gprof-orch exec`: anyone's capture or program, one variant per
NVTX range (orchestrator/capture.py), printed as every run is (orchestrator/cli_output.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.backends.program_options import ProgramNcuOptions, ProgramOptions
from orchestrator.cli_output import run_and_print
from reports.formats import FORMATS
from workloads.nvtx_ranges import RANGE_PREFIX

COMPARE_RANGES = click.option(
    "--compare-ranges",
    is_flag=True,
    help="The ranges are alternatives (one operation done several ways): give each a speedup over the first and "
    "count kernels beyond the fewest. Default: a program's ranges are its parts (a step, its forward), set "
    "side by side with no speedup between them.",
)


def _capture_options(f):
    """Options `exec` and `import` share."""
    opts = [
        click.option(
            "--ranges",
            default=None,
            metavar="DOMAIN@PREFIX",
            help="The NVTX ranges that are variants: those in DOMAIN (empty: the default domain, as "
            "torch.cuda.nvtx; *: any) whose name starts with PREFIX. Default: every range of every domain, nested ones too (*@). "
            f"A torch.profiler trace has no domains: PREFIX alone (default {RANGE_PREFIX}).",
        ),
        click.option(
            "--iters",
            type=int,
            default=None,
            help="Iterations inside one range instance (default 1: each instance is one iteration).",
        ),
        click.option(
            "--name", default=None, help="The run's workload name (default: the script's or file's)."
        ),
        # --nsys: import reads a .nsys-rep with it; --attribute: how its kernels go to ranges
        *ProgramOptions.click_options(only=ProgramOptions.CAPTURE),
        click.option(
            "--out",
            "-o",
            type=click.Path(path_type=Path),
            default=None,
            help="Run folder (must be new or empty). Default: gprof-runs/<UTC time>-program-<name>/.",
        ),
        click.option(
            "--timeout", type=float, default=None, help="Seconds before the run's process group is ended."
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
        COMPARE_RANGES,
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _program_options(f):
    """`exec nsys`'s own options but those among _capture_options (--nsys, --attribute): the
    program backend's Options declaration (orchestrator/backends/program_options.py)."""
    for opt in reversed(ProgramOptions.click_options(skip=ProgramOptions.CAPTURE)):
        f = opt(f)
    return f


def _ncu_options(f):
    """`exec ncu`'s own options (--ncu, --ncu-arg): the program-ncu backend's Options declaration."""
    for opt in reversed(ProgramNcuOptions.click_options()):
        f = opt(f)
    return f


@click.command("import")
@click.argument("capture", type=click.Path(path_type=Path))
@_capture_options
def import_cmd(
    capture, ranges, iters, name, nsys, attribute, out, timeout, fmt, as_json, per_kernel, compare_ranges
) -> None:
    """Report an existing capture made by anyone (an nsys .nsys-rep, or its .sqlite export, .xz/.gz
    too) per NVTX range: each range is a variant, each instance one iteration. A torch.profiler
    trace (trace.json, .json.gz/.xz) is reported per record_function range (--ranges PREFIX, no
    domain), its `iter` ranges the iterations where it has them. A range holding other chosen
    ranges is marked nested, with inclusive numbers and no speedup. An Nsight Compute report
    (.ncu-rep, .xz/.gz too, profiled with `ncu --nvtx`) is reported per NVTX range, its kernels'
    duration and counters. Exit 4 when no range matches (the message lists those the capture
    holds), or the file cannot be read.

    \b
    Example:
      gprof-orch import profile.nsys-rep
      gprof-orch import kernels.ncu-rep
      gprof-orch import run.sqlite --ranges gprof@variant: --iters 20
      gprof-orch import trace.json --ranges step
    """
    # why lazy: it imports numpy, pandas, which importing cli_capture must not
    from orchestrator import capture as cap

    run_and_print(
        lambda: cap.import_capture(
            capture,
            ranges=ranges,
            iters=iters,
            name=name,
            nsys=nsys,
            attribute=attribute,
            out=out,
            timeout=timeout,
            compare_ranges=compare_ranges,
            cli_argv=sys.argv,
        ),
        fmt,
        as_json,
        per_kernel,
    )


@click.group("exec")
def exec_group() -> None:
    """Profile any program under a profiler and report it per NVTX range (nvtx.annotate, push/pop,
    start/end, torch.cuda.nvtx): the same run folder, timeout, Ctrl-C and exit codes as a workload.

    \b
    Example:
      gprof-orch exec nsys -- python train.py --steps 50
      gprof-orch exec nsys --ranges @step -- python train.py
    """


@exec_group.command("nsys", context_settings={"allow_interspersed_args": False})
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@_capture_options
@_program_options
@click.option("--dry-run", is_flag=True, help="Print the exact commands and exit.")
def exec_nsys(
    cmd,
    ranges,
    iters,
    name,
    nsys,
    attribute,
    out,
    timeout,
    fmt,
    as_json,
    per_kernel,
    compare_ranges,
    nsys_args,
    trace_osrt,
    cuda,
    dry_run,
) -> None:
    """Run CMD under Nsight Systems; every kernel is attributed to the NVTX range holding the call
    that launched it (by --attribute window, the default, also where another thread holds it: a
    PyTorch backward's kernels, launched from autograd's own thread). The program's exit status,
    if not 0, makes the run failed (exit 1), its ranges still reported.

    \b
    Example:
      gprof-orch exec nsys -- python train.py --steps 50
      gprof-orch exec nsys --ranges train@ --nsys-arg=--cuda-graph-trace=node -- python train.py
    """
    # why lazy: it imports numpy, pandas, which importing cli_capture must not
    from orchestrator import capture as cap

    own = ProgramOptions(
        nsys=nsys, nsys_args=tuple(nsys_args), trace_osrt=trace_osrt, cuda=cuda, attribute=attribute
    )
    opts = dict(
        ranges=ranges,
        iters=iters,
        name=name,
        out=out,
        timeout=timeout,
        compare_ranges=compare_ranges,
        options=own,
    )
    if dry_run:
        # why lazy: off the start-up of every command and of --help
        from orchestrator import backends

        # why lazy: off the start-up of every command and of --help
        from orchestrator.proc import format_argv

        req = cap.ProgramRequest(argv=list(cmd), **opts).validate()
        be = backends.get(cap.BACKEND)
        be.resolve_cuda(req)
        for step in be.commands(req, Path(out).resolve() if out else Path("<run-folder>")):
            click.echo(format_argv(step.argv))
        return
    run_and_print(
        lambda: cap.profile_program(list(cmd), "nsys", cli_argv=sys.argv, **opts), fmt, as_json, per_kernel
    )


@exec_group.command("ncu", context_settings={"allow_interspersed_args": False})
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option(
    "--ranges",
    default=None,
    metavar="DOMAIN@PREFIX",
    help="The NVTX ranges that are variants (the innermost of a kernel's stack that matches). "
    "Default: every innermost range, any domain.",
)
@click.option(
    "--iters",
    type=int,
    default=None,
    help="Iterations inside one range instance (default 1; ncu keeps no instances: they are counted from "
    "the kernels' order, so back-to-back instances with no kernel between read as one).",
)
@click.option("--name", default=None, help="The run's workload name (default: the script's).")
@_ncu_options
@click.option(
    "--out", "-o", type=click.Path(path_type=Path), default=None, help="Run folder (must be new or empty)."
)
@click.option("--timeout", type=float, default=None, help="Seconds before the run's process group is ended.")
@click.option("--format", "fmt", default="table", show_default=True, type=click.Choice(FORMATS))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json).")
@click.option("--per-kernel", is_flag=True, help="Also print each variant's kernels.")
@COMPARE_RANGES
@click.option("--dry-run", is_flag=True, help="Print the exact command and exit.")
def exec_ncu(
    cmd, ranges, iters, name, ncu, ncu_args, out, timeout, fmt, as_json, per_kernel, compare_ranges, dry_run
) -> None:
    """Run CMD under Nsight Compute: every kernel it launches is measured (ncu replays each one:
    limit them with --ncu-arg=--launch-count=N or --ncu-arg=-k --ncu-arg=REGEX), and reported per
    NVTX range as `import` reports a .ncu-rep.

    \b
    Example:
      gprof-orch exec ncu --ranges @step --ncu-arg=--launch-count=50 -- python train.py --steps 5
    """
    # why lazy: it imports numpy, pandas, which importing cli_capture must not
    from orchestrator import capture_ncu

    if dry_run:
        # why lazy: off the start-up of every command and of --help
        from orchestrator import backends, tools

        # why lazy: off the start-up of every command and of --help
        from orchestrator.proc import format_argv

        be = backends.get(capture_ncu.PROGRAM_NCU)
        req = capture_ncu.ProgramRequest.of(be, argv=list(cmd), tool="ncu", ncu=ncu, ncu_args=ncu_args)
        tools.find(be.tool_spec(), ncu, with_version=False)  # no ncu: exit 3, as a run's
        for step in be.commands(req.validate(), Path(out).resolve() if out else Path("<run-folder>")):
            click.echo(format_argv(step.argv))
        return
    run_and_print(
        lambda: capture_ncu.profile_program_ncu(
            list(cmd),
            ranges=ranges,
            iters=iters,
            name=name,
            ncu=ncu,
            ncu_args=ncu_args,
            out=out,
            timeout=timeout,
            compare_ranges=compare_ranges,
            cli_argv=sys.argv,
        ),
        fmt,
        as_json,
        per_kernel,
    )
