"""The runner's command line: `python -m workloads run <name> ...` (the one child process every
backend launches) and `python -m workloads list` (how the orchestrator reads a --workload-file
without importing it)."""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from workloads import registry, runner, timers
from workloads.errors import GprofError, RunnerUsageError
from workloads.manifest import mark
from workloads.runner import EXIT_CRASHED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, MODES, RunSpec
from workloads.shapes import parse_shape
from workloads.stopping import StopRule


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads", description=runner.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one workload's variants")
    r.add_argument("workload")
    r.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    r.add_argument("--size", default=None, help="elements (1e8) or a shape (10000x10000)")
    r.add_argument("--dtype", default="float32", choices=registry.DTYPES)
    r.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    r.add_argument("--iters", type=int, default=None,
                   help="samples per variant; time mode without it: until --max-noise is met "
                        "(profile modes: 100)")
    r.add_argument("--warmup", type=int, default=10)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--mode", default="time", choices=MODES)
    r.add_argument("--no-flush-l2", dest="flush_l2", action="store_false")
    r.add_argument("--timer", default=timers.DEFAULT_TIMER, choices=timers.TIMERS,
                   help="time mode on a GPU: what holds the stream while the host queues the call")
    rule = StopRule()
    r.add_argument("--cuda-graph", action="store_true", help="time mode on a GPU: time CUDA-graph replays")
    r.add_argument("--max-noise", type=float, default=rule.max_noise_pct, help="percent (time mode)")
    r.add_argument("--min-samples", type=int, default=rule.min_samples)
    r.add_argument("--min-time", type=float, default=rule.min_time_s, help="seconds per variant")
    r.add_argument("--max-time", type=float, default=rule.max_time_s, help="seconds per variant")
    r.add_argument("--gpu-sleep-us", type=float, default=timers.DEFAULT_GPU_SLEEP_US,
                   help="time mode on a GPU: sleep the GPU this long before each timed call (0: no sleep)")
    r.add_argument("--out", default=".", help="folder for workload.json (and trace.json)")
    r.add_argument("--workload-file", default=None)
    r.add_argument("--triton-interpret", action="store_true")
    r.add_argument("--fail-variant", default=None, help=argparse.SUPPRESS)
    ls = sub.add_parser("list", help="list workloads and variants")
    ls.add_argument("--workload-file", default=None)
    ls.add_argument("--json", action="store_true", help="one line of JSON (registry.describe), printed last")
    return p


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    import signal

    # SIGTERM ends the run like Ctrl-C: what was measured is written, the status says so
    signal.signal(signal.SIGTERM, _terminate)
    args = build_parser().parse_args(argv)
    if args.command == "list":
        return _list(args)
    return _run(args)


def _list(args: argparse.Namespace) -> int:
    # the orchestrator imports a --workload-file only here, in a child it can time out
    try:
        if args.workload_file:
            registry.load_file(args.workload_file)
    except GprofError as exc:
        print(f"gprof-orch runner: {exc.message}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print("\n" + json.dumps(registry.describe()), flush=True)
        return EXIT_OK
    for w in registry.all_workloads().values():
        print(f"{w.name}: " + ", ".join(v.name for v in w.variants))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    try:
        if (args.iters is not None and args.iters < 1) or args.warmup < 0:
            raise RunnerUsageError("--iters must be >= 1 and --warmup >= 0")
        if args.iters is None and args.mode != "time":
            args.iters = 100
        stop = StopRule(max_noise_pct=args.max_noise, min_samples=args.min_samples, min_time_s=args.min_time,
                        max_time_s=args.max_time, iters=args.iters)
        spec = RunSpec(
            workload=args.workload,
            variants=[s for s in args.variants.split(",") if s],
            shape=parse_shape(args.size) if args.size else None,
            dtype=args.dtype, device=args.device, iters=args.iters, warmup=args.warmup,
            seed=args.seed, mode=args.mode, flush_l2=args.flush_l2, gpu_sleep_us=args.gpu_sleep_us,
            timer=args.timer, stop=stop, cuda_graph=args.cuda_graph,
            out=Path(args.out),
            workload_file=args.workload_file, triton_interpret=args.triton_interpret,
            fail_variant=args.fail_variant,
        )
        return runner.run(spec)
    except KeyboardInterrupt:
        mark(Path(args.out), "interrupted")
        _say("gprof-orch runner: interrupted")
        return EXIT_INTERRUPTED
    except (RunnerUsageError, ValueError) as exc:
        _say(f"gprof-orch runner: {exc}")
        return EXIT_USAGE
    except OSError as exc:  # the output folder: full, read-only, gone
        _say(f"gprof-orch runner: cannot write {exc.filename or args.out}: {exc.strerror}")
        return EXIT_CRASHED
    except Exception as exc:
        if isinstance(exc, GprofError):
            print(f"gprof-orch runner: {exc.message}", file=sys.stderr)
            return exc.exit_code
        mark(Path(args.out), "failed", f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
        print(f"gprof-orch runner: crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_CRASHED


def _say(message: str) -> None:
    """A last word on stderr, which may be a log file on the disk that just filled up."""
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:
        pass
