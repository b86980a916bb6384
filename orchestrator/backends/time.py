"""`gprof-orch time`: every call's GPU time, from CUPTI's kernel records (the kernel clock) or the
CUDA events around it (the CPU clock on a CPU run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.backends.base import Backend
from orchestrator.runfolder import RunFolder
from reports.schema import EVENT_CALL, SAMPLED, MergedTime
from workloads import timers
from workloads.stopping import StopRule

if TYPE_CHECKING:  # pandas and numpy at run time only where a report is built (parse)
    import pandas as pd


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

    @classmethod
    def cli_options(cls) -> list:
        """The timing options: L2 flush, the timer that holds the GPU while the host queues the call,
        the GPU sleep, CUDA graphs and the stop rule (--max-noise, --min-samples, --min-time, --max-time)."""
        import click

        stop = StopRule()
        return [
            click.option(
                "--flush-l2/--no-flush-l2",
                default=True,
                show_default=True,
                help="Write a buffer twice the L2 before every iteration.",
            ),
            click.option(
                "--timer",
                type=click.Choice(timers.TIMERS),
                default=timers.DEFAULT_TIMER,
                show_default=True,
                help="What holds the GPU while the host queues the call: blocking (a kernel spins until "
                "the call is queued; falls back to sleep, said in the note, when the host side outlasts "
                f"{timers.BLOCK_TIMEOUT_MS:g} ms or the call waits for the GPU), sleep (--gpu-sleep), none "
                "(the host's launch is timed too).",
            ),
            click.option(
                "--gpu-sleep",
                "gpu_sleep_us",
                type=float,
                default=timers.DEFAULT_GPU_SLEEP_US,
                show_default=True,
                metavar="US",
                help="The sleep timer's GPU sleep after each flush (0: none).",
            ),
            click.option(
                "--cuda-graph",
                is_flag=True,
                help="Capture each variant once in a CUDA graph and time its replays (no launch cost at "
                "all); a variant that cannot be captured is skipped with the reason.",
            ),
            click.option(
                "--kernel-clock/--no-kernel-clock",
                default=None,
                help="The median from each call's own kernels, memsets and copies, read from CUPTI's "
                "records as nsys reads them, the events kept as `events us` (default: on a GPU wherever "
                "cupti-python is installed, see doctor). CUPTI adds about 1 to 3 us of host time to each "
                "call, which `CPU us` holds; --no-kernel-clock: the events' median and the bare host time.",
            ),
            click.option(
                "--max-noise",
                type=float,
                default=stop.max_noise_pct,
                show_default=True,
                metavar="PCT",
                help="Sample until the median's 95% confidence half-width is at most PCT % of it (without "
                "--iters).",
            ),
            click.option("--min-samples", type=int, default=stop.min_samples, show_default=True),
            click.option(
                "--min-time",
                type=float,
                default=stop.min_time_s,
                show_default=True,
                metavar="S",
                help="Seconds of sampling per variant at least.",
            ),
            click.option(
                "--max-time",
                type=float,
                default=stop.max_time_s,
                show_default=True,
                metavar="S",
                help="Seconds of sampling per variant at most; a variant not at --max-noise by then is "
                "marked noisy.",
            ),
        ]

    def measures(self, workload: dict, frame: pd.DataFrame) -> dict[str, str]:
        """The events' stream time, or the kernels' where the variant's median is the kernel clock's
        (a run can hold both: a variant whose calls CUPTI missed falls back to its events)."""
        out = super().measures(workload, frame)
        for v in workload.get("variants", []):
            if v.get("time_clock") == "kernel" and out.get(v["name"]) != "host":
                out[v["name"]] = "kernels"
        return out

    def parse(self, rf: RunFolder) -> pd.DataFrame:
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
        return rows.frame()
