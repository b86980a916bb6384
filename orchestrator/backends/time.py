"""`gprof-orch time`: CUDA events around every iteration (the CPU clock on a CPU run)."""
from __future__ import annotations

import pandas as pd

from orchestrator.backends.base import Backend
from reports.merge import MergedTime
from orchestrator.runfolder import RunFolder
from reports.schema import KERNEL_CALL
from reports.unify import RowMaker, variant_facts


class TimeBackend(Backend):
    """`gprof-orch time`: CUDA events around every call (the host clock on a CPU run), sampled
    until the median is known to --max-noise unless --iters fixes the count."""
    name = "time"
    mode = "time"
    default_iters = None  # until the stop rule (--max-noise, --max-time) is met; --iters N: exactly N
    default_warmup = 10
    merged = MergedTime("events_us", "events us", "events", on_gpu="CUDA events per call (time)",
                        on_cpu="host clock (perf_counter) per call (time; a CPU run has no CUDA events)",
                        reason="CUDA events time the whole call: launch latency and gaps between kernels "
                               "are included", distinct=True, rank=0).declare()
    description = ("CUDA-event timing of every call, the stream held until the call is queued: median, IQR, "
                   "min, the median's noise (L2 flushed by default)")

    help = ("Time each variant with CUDA events, the stream held until the call is queued so no host cost is "
            "timed; sample until the median is known to --max-noise (median, IQR, min, samples, noise).")

    @classmethod
    def cli_options(cls) -> list:
        """The timing options: L2 flush, the timer that holds the GPU while the host queues the call,
        the GPU sleep, CUDA graphs and the stop rule (--max-noise, --min-samples, --min-time, --max-time)."""
        import click

        from workloads import timers
        from workloads.stopping import StopRule

        stop = StopRule()
        return [
            click.option("--flush-l2/--no-flush-l2", default=True, show_default=True,
                         help="Write a buffer twice the L2 before every iteration."),
            click.option("--timer", type=click.Choice(timers.TIMERS), default=timers.DEFAULT_TIMER,
                         show_default=True,
                         help="What holds the GPU while the host queues the call: blocking (a kernel spins until "
                         "the call is queued; falls back to sleep, said in the note, when the host side outlasts "
                         f"{timers.BLOCK_TIMEOUT_MS:g} ms or the call waits for the GPU), sleep (--gpu-sleep), none "
                         "(the host's launch is timed too)."),
            click.option("--gpu-sleep", "gpu_sleep_us", type=float, default=timers.DEFAULT_GPU_SLEEP_US,
                         show_default=True, metavar="US", help="The sleep timer's GPU sleep after each flush (0: none)."),
            click.option("--cuda-graph", is_flag=True,
                         help="Capture each variant once in a CUDA graph and time its replays (no launch cost at "
                         "all); a variant that cannot be captured is skipped with the reason."),
            click.option("--kernel-clock", is_flag=True,
                         help="Also read each call's own kernel time from CUPTI's records, as nsys does (`kernel "
                         "us`; needs cupti-python, see doctor). Off by default: CUPTI's API records add host time "
                         "to every call, which the `CPU us` column would then hold."),
            click.option("--max-noise", type=float, default=stop.max_noise_pct, show_default=True, metavar="PCT",
                         help="Sample until the median's 95% confidence half-width is at most PCT % of it (without "
                         "--iters)."),
            click.option("--min-samples", type=int, default=stop.min_samples, show_default=True),
            click.option("--min-time", type=float, default=stop.min_time_s, show_default=True, metavar="S",
                         help="Seconds of sampling per variant at least."),
            click.option("--max-time", type=float, default=stop.max_time_s, show_default=True, metavar="S",
                         help="Seconds of sampling per variant at most; a variant not at --max-noise by then is "
                         "marked noisy."),
        ]

    def parse(self, rf: RunFolder) -> pd.DataFrame:
        """The unified frame of the runner's own samples in workload.json: time and host time per
        call, also for a variant stopped part-way (its status says so)."""
        wman = rf.workload_manifest()
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        for v in wman["variants"]:
            # a variant stopped part-way keeps the samples it took (its status says so)
            if v.get("status") not in ("ok", "interrupted", "timed out"):
                continue
            rows.samples(v["name"], "time_ns", v.get("time_samples_ns", []), "ns")
            rows.samples(v["name"], "cpu_time_ns", v.get("cpu_samples_ns", []), "ns")
            # the kernel clock's (CUPTI, workloads/kernel_clock.py): the call's own GPU work
            kernel = [k for k in v.get("kernel_samples_ns") or [] if k is not None]
            if kernel:
                rows.samples(v["name"], KERNEL_CALL, kernel, "ns")
        return rows.frame()
