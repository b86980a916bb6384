"""`gprof-orch time`: every call's GPU time, from CUPTI's kernel records (the kernel clock) or the
CUDA events around it (the CPU clock on a CPU run)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from orchestrator.backends.base import Backend, Parsed
from orchestrator.backends.options import BackendOptions, option
from orchestrator.errors import UsageError
from orchestrator.request import Request
from orchestrator.runfolder import RunFolder
from reports.schema import EVENT_CALL, SAMPLED, MergedTime
from workloads import timers
from workloads.spec import SPEC_FILE
from workloads.stopping import StopRule

if TYPE_CHECKING:  # pandas and numpy at run time only where a report is built (parse)
    import pandas as pd


_STOP = StopRule()

# --cuda-graph on a CPU run: the runner times the calls as they are (its workload.json says
# cuda_graph false), so the run says why, as the kernel clock's note does for the CPU
CPU_NO_GRAPH = (
    "--cuda-graph asked for, but off: a CPU run has no CUDA graphs to capture; each call was timed as it is"
)


@dataclass(frozen=True)
class TimeOptions(BackendOptions):
    """`time`'s options: the L2 flush, the timer that holds the GPU while the host queues the call,
    the GPU sleep, CUDA graphs, the kernel clock and the stop rule (--max-noise, --min-samples,
    --min-time, --max-time)."""

    flush_l2: bool = option(
        True,
        "--flush-l2/--no-flush-l2",
        show_default=True,
        help="Write a buffer twice the L2 before every iteration.",
    )
    # what holds the stream while the host queues the call (workloads/timers.py); the GPU sleep is
    # the `sleep` timer's, and the blocking timer's fallback
    timer: str = option(
        timers.DEFAULT_TIMER,
        "--timer",
        type=click.Choice(timers.TIMERS),
        show_default=True,
        help="What holds the GPU while the host queues the call: blocking (a kernel spins until "
        "the call is queued; falls back to sleep, said in the note, when the host side outlasts "
        f"{timers.BLOCK_TIMEOUT_MS:g} ms or the call waits for the GPU), sleep (--gpu-sleep), none "
        "(the host's launch is timed too).",
    )
    gpu_sleep_us: float = option(
        timers.DEFAULT_GPU_SLEEP_US,
        "--gpu-sleep",
        type=float,
        show_default=True,
        metavar="US",
        help="The sleep timer's GPU sleep after each flush (0: none).",
    )
    cuda_graph: bool = option(
        False,
        "--cuda-graph",
        is_flag=True,
        help="Capture each variant once in a CUDA graph and time its replays (no launch cost at "
        "all); a variant that cannot be captured is skipped with the reason.",
    )
    # the median from each call's own kernels (CUPTI, workloads/kernel_clock.py); None: wherever it
    # can be (cupti-python, no profiler holding CUPTI), True: asked for, False: off
    kernel_clock: bool | None = option(
        None,
        "--kernel-clock/--no-kernel-clock",
        help="The median from each call's own kernels, memsets and copies, read from CUPTI's "
        "records as nsys reads them, the events kept as `events us` (default: on a GPU wherever "
        "cupti-python is installed, see doctor). CUPTI adds about 1 to 3 us of host time to each "
        "call, which `CPU us` holds; --no-kernel-clock: the events' median and the bare host time.",
    )
    # without --iters: sample until the median's noise is this low (workloads/stopping.py)
    max_noise: float = option(
        _STOP.max_noise_pct,
        "--max-noise",
        type=float,
        show_default=True,
        metavar="PCT",
        help="Sample until the median's 95% confidence half-width is at most PCT % of it (without --iters).",
    )
    min_samples: int = option(_STOP.min_samples, "--min-samples", type=int, show_default=True)
    min_time: float = option(
        _STOP.min_time_s,
        "--min-time",
        type=float,
        show_default=True,
        metavar="S",
        help="Seconds of sampling per variant at least.",
    )
    max_time: float = option(
        _STOP.max_time_s,
        "--max-time",
        type=float,
        show_default=True,
        metavar="S",
        help="Seconds of sampling per variant at most; a variant not at --max-noise by then is marked noisy.",
    )

    def validate(self) -> None:
        """The timer by name, the stop rule's bounds, the GPU sleep's range."""
        if self.timer not in timers.TIMERS:
            raise UsageError(f"--timer {self.timer!r} unknown; valid: {', '.join(timers.TIMERS)}")
        if not (math.isfinite(self.max_noise) and 0 < self.max_noise <= 100):
            raise UsageError(
                f"--max-noise must be a percentage above 0 and at most 100, not {self.max_noise:g}"
            )
        if self.min_samples < 5:
            raise UsageError(
                f"--min-samples must be at least 5 (the noise needs 5 samples), not {self.min_samples}"
            )
        if not (
            math.isfinite(self.min_time)
            and math.isfinite(self.max_time)
            and 0 <= self.min_time <= self.max_time
            and self.max_time > 0
        ):
            raise UsageError(
                f"--min-time and --max-time must be seconds with 0 <= min <= max and max > 0, not "
                f"{self.min_time:g} and {self.max_time:g}"
            )
        if not 0 <= self.gpu_sleep_us <= 10_000:
            raise UsageError(f"--gpu-sleep must be between 0 and 10000 us, not {self.gpu_sleep_us:g}")


class TimeBackend(Backend):
    """`gprof-orch time`: each call's own kernels from CUPTI (the kernel clock) where it can, else
    the CUDA events around it (the host clock on a CPU run), sampled until the median is known to
    --max-noise unless --iters fixes the count."""

    name = "time"
    mode = "time"
    default_iters = None  # until the stop rule (--max-noise, --max-time) is met; --iters N: exactly N
    default_warmup = 10
    merged = MergedTime(
        "events_us",
        "events us",
        "events",
        on_gpu="CUDA events per call (time)",
        on_cpu="host clock (perf_counter) per call (time; a CPU run has no CUDA events)",
        reason="CUDA events time the whole call: launch latency and gaps between kernels are included",
        distinct=True,
        rank=0,
        # on the kernel clock the median is the kernels' (nsys's column has those):
        # the events, kept beside it, are what this column means
        medians=("events_median_us", "time_median_us"),
    ).declare()
    compares_medians = True  # `compare` of an `all` folder compares its time run
    measure = "stream"  # the events; a variant on the kernel clock times its kernels (measures())
    description = (
        "every call timed with the stream held until it is queued: its own kernels from CUPTI's "
        "records (the kernel clock, where cupti-python is installed) or the CUDA events around it; "
        "median, IQR, min, the median's noise (L2 flushed by default)"
    )

    help = (
        "Time each variant's calls, the stream held until each call is queued so no host cost is timed: "
        "its kernels from CUPTI (as nsys reads them) where cupti-python is installed, else CUDA events; "
        "sample until the median is known to --max-noise (median, IQR, min, samples, noise)."
    )

    Options = TimeOptions

    def spec_fields(self, req: Request) -> dict[str, Any]:
        """The timing options, as the runner's spec holds them (the stop rule from its four)."""
        o: TimeOptions = self.opts(req)  # type: ignore[assignment]
        stop = StopRule(
            max_noise_pct=o.max_noise, min_samples=o.min_samples, min_time_s=o.min_time, max_time_s=o.max_time
        )
        return {
            "flush_l2": o.flush_l2,
            "timer": o.timer,
            "gpu_sleep_us": o.gpu_sleep_us,
            "stop": stop,
            "cuda_graph": o.cuda_graph,
            "kernel_clock": o.kernel_clock,
        }

    def execute(self, req: Request, rf: RunFolder) -> None:
        """The runner's step, said first to be without CUDA graphs where --cuda-graph asks for
        them on a CPU run (a CSV or JSON on stdout has no footer to say it in)."""
        o: TimeOptions = self.opts(req)  # type: ignore[assignment]
        if o.cuda_graph and req.on_cpu():
            print(f"gprof-orch: warning: {CPU_NO_GRAPH}", file=sys.stderr, flush=True)
        super().execute(req, rf)

    def footer(self, workload: dict) -> list[str]:
        """How the calls were timed: the timer and what held the stream, the L2 flush, CUDA graphs,
        which clock the median is (kernels or events) and the GPU clocks' note."""
        w = workload
        if not w.get("timer"):
            return []
        hold = w.get("hold")
        held = {
            "blocking": ", the stream held by a blocking kernel until the call was queued (no host "
            "time inside the events)",
            "sleep": f", GPU slept {w.get('gpu_sleep_us', 0):g} us before each call (a host side "
            f"longer than that is timed)",
            "none": ", nothing held: the host's launch is timed too",
        }.get(hold, "")
        if hold is None and w.get("gpu_sleep_us"):  # runs before --timer
            held = f", GPU slept {w['gpu_sleep_us']:g} us before each call (its launch not timed)"
        lines = [
            f"timer: {w['timer']}, L2 flushed before each iteration: {w.get('flush_l2')}{held}"
            + (f" ({w['hold_note']})" if w.get("hold_note") else "")
        ]
        if w.get("cuda_graph"):
            lines.append("each variant captured once in a CUDA graph; the replays are timed (no launch cost)")
        lines += _kernel_clock_lines(w)
        clk = w.get("clocks") or {}
        if clk.get("note"):
            lines.append(clk["note"])
        return lines

    def measures(self, workload: dict, frame: pd.DataFrame) -> dict[str, str]:
        """The events' stream time, or the kernels' where the variant's median is the kernel clock's
        (a run can hold both: a variant whose calls CUPTI missed falls back to its events)."""
        out = super().measures(workload, frame)
        for v in workload.get("variants", []):
            if v.get("time_clock") == "kernel" and out.get(v["name"]) != "host":
                out[v["name"]] = "kernels"
        return out

    def parse(self, rf: RunFolder) -> Parsed:
        """The unified frame of the runner's own samples in workload.json: time and host time per
        call, also for a variant stopped part-way (its status says so)."""
        # why lazy: it imports numpy, pandas, which importing time must not
        from reports.unify import RowMaker, variant_facts

        wman = rf.workload_manifest()
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        for v in wman["variants"]:
            # a variant stopped part-way keeps the samples it took (its status says so)
            if v.get("status") not in SAMPLED:
                continue
            rows.samples(v["name"], "time_ns", v.get("time_samples_ns", []), "ns")
            rows.samples(v["name"], "cpu_time_ns", v.get("cpu_samples_ns", []), "ns")
            if v.get("time_clock") == "kernel":
                # the median is the kernel clock's (CUPTI, workloads/kernel_clock.py); the CUDA
                # events around the same calls, beside it
                rows.samples(v["name"], EVENT_CALL, v.get("event_samples_ns", []), "ns")
        return Parsed(rows.frame(), warnings=[CPU_NO_GRAPH] if _graph_on_cpu(rf, wman) else [])


def _kernel_clock_lines(w: dict) -> list[str]:
    """What `time`'s median is: the kernel clock's, or the events' and why the clock was off."""
    kc = w.get("kernel_clock")
    # run folders from before the kernel clock was the default: set only when asked for
    asked = w.get("kernel_clock_asked", True if kc else None)
    if kc == "cupti":
        return [
            "median: each call's own kernels, memsets and copies, from CUPTI's records as nsys reads them (the "
            "kernel clock); events us: the CUDA events around the same calls, which also hold the GPU's "
            "processing of each launch; CPU us holds CUPTI's cost per CUDA call too (--no-kernel-clock: the "
            "events' median and the bare host time)"
        ]
    if kc and asked:
        return [f"--kernel-clock asked for, but off: {kc}"]
    if kc and w.get("device") == "cuda":
        return [
            f"median from the CUDA events, which also hold the GPU's processing of each launch (about 2.5 us); "
            f"the kernel clock is {kc if kc.startswith('off') else 'off: ' + kc}"
        ]
    return []


def _graph_on_cpu(rf: RunFolder, wman: dict) -> bool:
    """Whether the runner was asked for CUDA graphs (its spec.json) on a CPU run, which has none."""
    if wman.get("device") != "cpu":
        return False
    try:
        return bool(json.loads((rf.path / SPEC_FILE).read_text()).get("cuda_graph"))
    except (OSError, ValueError, AttributeError):  # a folder from before spec.json, or not one
        return False
