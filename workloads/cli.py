"""The runner's command line: `python -m workloads run --spec FILE --out DIR` (the one child
process every backend launches, the spec resolved by the parent), the same flag by flag
(`run WORKLOAD --size ... --out DIR`, settled here), and `python -m workloads list` (how the
orchestrator reads a --workload-file without importing it)."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from workloads import registry, runner, timers, umask
from workloads.errors import GprofError, RunnerUsageError, WorkloadCodeError
from workloads.manifest import mark
from workloads.runner import (
    EXIT_CRASHED,
    EXIT_INTERRUPTED,
    EXIT_NOT_SAVED,
    EXIT_OK,
    EXIT_USAGE,
    MODES,
    RunSpec,
)
from workloads.shapes import parse_shape
from workloads.stopping import StopRule

# the flags that make the stop rule (their dest is the StopRule field)
STOP_FLAGS = ("max_noise_pct", "min_samples", "min_time_s", "max_time_s")
# the flags whose dest is not their name
FLAG_NAMES = {
    "max_noise_pct": "--max-noise",
    "min_time_s": "--min-time",
    "max_time_s": "--max-time",
    "flush_l2": "--no-flush-l2",
    "workload": "WORKLOAD",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workloads",
        description=runner.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    # a flag left out is absent, and the RunSpec's own default applies (declared there only)
    r = sub.add_parser("run", help="run one workload's variants", argument_default=argparse.SUPPRESS)
    r.add_argument("workload", nargs="?", help="the workload (flag by flag; not with --spec)")
    r.add_argument("--spec", help="a spec.json (workloads/spec.py): every option of the run, resolved")
    r.add_argument("--out", help="folder for workload.json (and trace.json); required")
    r.add_argument("--variants", help="comma-separated variant names (default: all)")
    r.add_argument(
        "--size", help="elements (1e8) or a shape (10000x10000); default: the workload's for the device"
    )
    r.add_argument("--dtype", choices=registry.DTYPES)
    r.add_argument("--device", choices=("auto", "cuda", "cpu"))
    r.add_argument(
        "--iters",
        type=int,
        help="samples per variant; time mode without it: until --max-noise is met (profile modes: 100)",
    )
    r.add_argument("--warmup", type=int)
    r.add_argument("--seed", type=int)
    r.add_argument("--mode", choices=MODES)
    r.add_argument("--no-flush-l2", dest="flush_l2", action="store_false")
    r.add_argument(
        "--timer",
        choices=timers.TIMERS,
        help="time mode on a GPU: what holds the stream while the host queues the call",
    )
    r.add_argument("--cuda-graph", action="store_true", help="time mode on a GPU: time CUDA-graph replays")
    r.add_argument("--max-noise", dest="max_noise_pct", type=float, help="percent (time mode)")
    r.add_argument("--min-samples", type=int)
    r.add_argument("--min-time", dest="min_time_s", type=float, help="seconds per variant")
    r.add_argument("--max-time", dest="max_time_s", type=float, help="seconds per variant")
    r.add_argument(
        "--gpu-sleep-us",
        type=float,
        help="time mode on a GPU: sleep the GPU this long before each timed call (0: no sleep)",
    )
    r.add_argument("--workload-file")
    r.add_argument("--triton-interpret", action="store_true")
    r.add_argument("--fail-variant", help=argparse.SUPPRESS)
    ls = sub.add_parser("list", help="list workloads and variants")
    ls.add_argument("--workload-file", default=None)
    ls.add_argument("--json", action="store_true", help="one line of JSON (registry.describe), printed last")
    return p


def run_spec(given: dict[str, Any]) -> RunSpec:
    """The RunSpec of `run`'s flags (`given`: those on the command line, by dest): read from
    --spec, or built flag by flag, the RunSpec's defaults for the rest; --out sets where it
    writes. Raises RunnerUsageError (or ValueError) on a bad combination."""
    given = dict(given)
    out = given.pop("out", None)
    if not out:
        raise RunnerUsageError("--out DIR is required: the folder the runner writes workload.json into")
    if "spec" in given:
        path = Path(given.pop("spec"))
        if given:
            flags = ", ".join(FLAG_NAMES.get(k, "--" + k.replace("_", "-")) for k in sorted(given))
            raise RunnerUsageError(
                f"--spec holds every option of the run: give only --out with it, not {flags}"
            )
        try:
            return RunSpec.from_json(json.loads(path.read_text()), out=out)
        except OSError as exc:
            raise RunnerUsageError(f"cannot read --spec {path}: {exc.strerror}") from None
        except (ValueError, TypeError) as exc:
            raise RunnerUsageError(f"--spec {path} is not a run spec: {exc}") from None
    if "workload" not in given:
        raise RunnerUsageError("give a WORKLOAD (and its flags) or --spec FILE")
    stop = StopRule(**{k: given.pop(k) for k in STOP_FLAGS if k in given})
    if "variants" in given:
        given["variants"] = [s for s in given["variants"].split(",") if s]
    if "size" in given:
        given["shape"] = parse_shape(given.pop("size"))
    return RunSpec(**given, stop=stop, out=out)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    import signal

    # SIGTERM ends the run like Ctrl-C: what was measured is written, the status says so
    signal.signal(signal.SIGTERM, _terminate)
    # the parent stops this process with SIGINT; a shell starts a background job (`cmd &`) with
    # SIGINT ignored, and Python keeps an ignored SIGINT ignored: the run went on to its end
    signal.signal(signal.SIGINT, signal.default_int_handler)
    umask.restore()  # the orchestrator's (nsys starts its target with umask 0)
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
    given = {k: v for k, v in vars(args).items() if k != "command"}
    out = Path(given["out"]) if given.get("out") else None
    try:
        return runner.run(run_spec(given))
    except KeyboardInterrupt:
        if out is not None:
            mark(out, "interrupted")
        _say("gprof-orch runner: interrupted")
        return EXIT_INTERRUPTED
    except (RunnerUsageError, ValueError) as exc:
        _say(f"gprof-orch runner: {exc}")
        return EXIT_USAGE
    except OSError as exc:  # the output folder: full, read-only, gone
        _say(
            f"gprof-orch runner: could not save the samples: cannot write {exc.filename or out}: {exc.strerror}"
        )
        return EXIT_NOT_SAVED
    except Exception as exc:
        if isinstance(exc, GprofError):
            print(f"gprof-orch runner: {exc.message}", file=sys.stderr)
            return exc.exit_code
        if out is not None:
            mark(out, "failed", f"{type(exc).__name__}: {exc}")
        # the workload's own code raised: its traceback alone, ending in the user's file
        traceback.print_exception(
            exc.__cause__ if isinstance(exc, WorkloadCodeError) and exc.__cause__ else exc
        )
        print(f"gprof-orch runner: crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_CRASHED


def _say(message: str) -> None:
    """A last word on stderr, which may be a log file on the disk that just filled up."""
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:
        pass
