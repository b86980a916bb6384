"""The `time` mode of the runner: each call of each variant timed between two CUDA events (or
the host clock on a CPU run), after an L2 flush and while a hold keeps the host's side out of
the events (workloads/timers.py), until the stop rule is met (workloads/stopping.py). Every
sample is kept in workload.json."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workloads import clocks, streams, timers
from workloads.kernel_clock import open_clock
from workloads.manifest import Manifest, measuring, record_failure
from workloads.nvtx_ranges import RANGE_PREFIX, Ranges
from workloads.stopping import StopRule, measure, noise_pct

# while a variant is timed, its samples reach workload.json at least this often (seconds): a
# SIGKILL loses at most that much; an interrupt (SIGINT, SIGTERM) loses nothing
FLUSH_S = 1.0


def l2_flusher(spec):
    if not (spec.flush_l2 and spec.device == "cuda"):
        return None
    import torch

    l2 = (
        getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
        or 50 * 2**20
    )
    # twice the L2, written with a memset kernel, evicts the input (triton.testing.do_bench
    # does the same with a 256 MB buffer)
    buf = torch.empty(max(2 * l2, 64 * 2**20), dtype=torch.int8, device="cuda")
    return buf.zero_


class Samples:
    """The samples of the variant being timed, kept in its workload.json entry as they are
    taken: written every FLUSH_S seconds while it runs and whenever it stops, so an interrupt
    keeps every sample taken and a SIGKILL at most FLUSH_S seconds' worth. CUDA events are read
    once they have completed (no synchronize inside the timed loop), all of them at the end."""

    def __init__(self, entry: dict, man: Manifest, cuda: bool, clock=None):
        self.entry, self.man, self.cuda, self.clock = entry, man, cuda, clock
        self.cpu_ns: list[int] = []
        self.gpu_ns: list[float] = []
        self.kernel_ns: list[float | None] = []  # the kernel clock's, per sample (workloads/kernel_clock.py)
        if clock is not None:
            clock.reset()  # one window per sample of this variant, from here
        self._pending: deque = deque()  # (start, end) CUDA events recorded, not read yet
        self._elapsed_ms = timers.event_reader() if cuda else None
        self._saved = time.monotonic()

    def add(self, cpu_ns: int, events=None) -> None:
        self.cpu_ns.append(cpu_ns)
        if events is not None:
            self._pending.append(events)
        if time.monotonic() - self._saved >= FLUSH_S:
            self.keep(wait=False)
            self.man.save()
            self._saved = time.monotonic()

    @property
    def times(self) -> list:
        """The samples the median is taken from: the kernel clock's where it read every call so
        far, else the CUDA events (the host clock on a CPU run)."""
        if not self.cuda:
            return self.cpu_ns
        return self.kernel_ns if self.on_kernel_clock else self.gpu_ns

    @property
    def on_kernel_clock(self) -> bool:
        # a call with no record of its own (no GPU work, or work the clock could not attribute)
        # has no kernel time: then the variant's median is the events', said in its note
        return self.clock is not None and bool(self.kernel_ns) and None not in self.kernel_ns

    def restart(self) -> None:
        """Drop what was taken (a measurement to be made again another way)."""
        self.keep()
        self.cpu_ns, self.gpu_ns, self.kernel_ns = [], [], []

    def keep(self, status: str | None = None, *, wait: bool = True) -> None:
        """Put the samples so far into the entry (and `status`, when it stops); `wait`: wait
        for the GPU to finish what was recorded, so every event is read."""
        if self.cuda:
            import torch

            if wait and self._pending:
                torch.cuda.synchronize()
            while self._pending and self._pending[0][1].query():
                ns = self._elapsed_ms(*self._pending[0]) * 1e6
                # off the queue as it is read: an interrupt in this loop (SIGTERM) leaves the
                # ones not read yet to the next keep, none read twice
                self._pending.popleft()
                self.gpu_ns.append(ns)
            if wait and self.clock is not None:
                self.kernel_ns.extend(self.clock.take())  # the GPU is done: every record is in
            if self.clock is not None:
                self.entry.update(
                    kernel_samples_ns=self.kernel_ns,
                    event_samples_ns=self.gpu_ns,
                    time_clock="kernel" if self.on_kernel_clock else "events",
                )
        self.entry.update(time_samples_ns=self.times, cpu_samples_ns=self.cpu_ns)
        if status:
            self.entry["status"] = status


@dataclass
class _Timing:
    """What every variant of a time-mode run is timed with."""

    spec: Any
    ranges: Ranges
    flush: Callable[[], Any] | None
    hold: Any
    watch: Any = None  # the GPU's clocks (workloads/clocks.py), None on a CPU or without NVML
    fallback: Any = None  # the GPU sleep the blocking timer falls back to, made when first needed
    clock: Any = None  # the kernel clock (workloads/kernel_clock.py), None where it is off
    # each variant's probe call (workloads/streams.py): where its GPU work ran; empty on the CPU
    probes: dict | None = None


def run_timed(spec, variants, x, entries, ranges, man) -> None:
    """Time each variant in turn into its workload.json entry; an interrupt keeps what was taken
    and stops the run, a variant that raises is marked failed and the next one is timed."""
    cuda = spec.device == "cuda"
    flush = l2_flusher(spec)
    hold, why = timers.make(spec.timer, spec.device, spec.gpu_sleep_us)
    timing = _Timing(spec, ranges, flush, hold)
    if why:
        man.data["hold"], man.data["hold_note"] = hold.name, why
    if spec.kernel_clock and not cuda:
        man.data["kernel_clock"] = "a CPU run has no GPU kernels to clock"
    man.data["kernel_clock_asked"] = spec.kernel_clock  # None: wherever it can be
    if cuda:
        import torch

        # before the kernel clock takes CUPTI: the probe's torch.profiler needs it too
        timing.probes = streams.probe(variants, x)
        timing.watch, why = clocks.open_watch(torch.cuda.current_device())
        man.data["clocks"] = timing.watch.describe() if timing.watch else {"note": why}
        if spec.kernel_clock is not False:
            timing.clock, how = open_clock()
            man.data["kernel_clock"] = how
        else:
            man.data["kernel_clock"] = "off (--no-kernel-clock)"
    try:
        _time_all(timing, variants, x, entries, man)
    finally:
        if timing.clock is not None:
            timing.clock.close()


def _time_all(timing: _Timing, variants, x, entries, man) -> None:
    spec, watch, cuda = timing.spec, timing.watch, timing.spec.device == "cuda"
    for v in variants:
        e = entries[v.name]
        measuring(e, man)
        t0 = time.perf_counter()
        samples = Samples(e, man, cuda=cuda, clock=timing.clock)
        reads = [watch.read()] if watch else []
        try:
            _time_variant(timing, v, x, samples, reads)
        except KeyboardInterrupt:
            # Ctrl-C, SIGTERM, or --timeout's SIGTERM: what was taken is kept, then the run stops
            samples.keep("interrupted")
            _noise(e, spec.stop)
            raise
        except Exception as exc:
            record_failure(e, exc)
        finally:
            # saved here, an interrupted variant too: its clocks (a throttle it ran under) and time
            if watch is not None:
                reads.append(watch.read())
                # the first, the last and at most 40 between: enough to see a clock fall
                step = -(-(len(reads) - 2) // 40)
                e["clocks"] = reads if len(reads) <= 42 else reads[:1] + reads[1:-1:step] + reads[-1:]
                e["clock_note"] = clocks.verdict(reads)
            e["measure_s"] = round(time.perf_counter() - t0, 3)
            man.save()


def _time_variant(timing: _Timing, v, x, samples: Samples, reads: list) -> None:
    """Time variant `v` into its entry (samples.entry) inside its NVTX range, or mark it skipped
    (it cannot be captured in a CUDA graph; the entry says why)."""
    spec, e, hold = timing.spec, samples.entry, timing.hold
    call = lambda: v.fn(x)  # noqa: E731
    found = (timing.probes or {}).get(v.name)
    how, words = streams.verdict(found, timing.clock is not None) if found else ("", "")
    if found:
        e["streams"] = {**found, "timed": how}
    if words:
        e["stream_note"] = words
    if how == streams.OTHER_STREAM:
        e.update(status=streams.OTHER_STREAM, reason=words)
        return
    if how == "joined":
        call = streams.joined(call, found["torch_streams"])
    if spec.cuda_graph and samples.cuda:
        call, reason = capture_graph(v, x)
        if call is None:
            e.update(status="skipped", reason=f"cannot be captured in a CUDA graph: {reason}")
            return
    if os.environ.get(timers.MARK_CALLS_ENV):
        call = _marked(call, timing.ranges, "call:" + v.name)
    if timing.clock is not None:
        call = timing.clock.window(call)
    timing.ranges.push(RANGE_PREFIX + v.name)
    try:
        hold.reset()
        e["hold"] = hold.name
        _sample(spec, call, timing.flush, hold, samples, timing.watch, reads)
        if hold.timeouts():
            # the host side outlasted the spin, or the call waits for the GPU: the
            # events held the spin's timeout too; measure again with the GPU sleep
            timing.fallback = timing.fallback or timers.SleepHold(
                spec.gpu_sleep_us or timers.DEFAULT_GPU_SLEEP_US
            )
            e.update(
                hold=timing.fallback.name,
                hold_note=(
                    f"blocking timer timed out {hold.timeouts()} time(s) (a host side over "
                    f"{timers.BLOCK_TIMEOUT_MS:g} ms, or a call that waits for the GPU); measured "
                    f"with a {timing.fallback.us:g} us GPU sleep instead"
                ),
            )
            samples.restart()
            _sample(spec, call, timing.flush, timing.fallback, samples, timing.watch, reads)
    finally:
        timing.ranges.pop()
    samples.keep(streams.NO_GPU_WORK if how == streams.NO_GPU_WORK else "ok")
    _noise(e, spec.stop)


def capture_graph(v, x):
    """The variant captured once into a CUDA graph: (replay, None), or (None, why it cannot be).
    Replays run with no launch cost at all: what a captured or fused model would see."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm on a side stream first, as torch's docs ask
        v.fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            v.fn(x)
    except Exception as exc:  # a host sync, an allocation outside the caching allocator, ...
        torch.cuda.synchronize()
        return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    graph.replay()
    torch.cuda.synchronize()
    return graph.replay, None


def _marked(call, ranges: Ranges, text: str):
    """`call` inside its own NVTX range: the launches in it are the call's, not the flush's or the hold's."""

    def marked():
        ranges.push(text)
        try:
            call()
        finally:
            ranges.pop()

    return marked


def _sample(spec, call, flush, hold, samples: Samples, watch=None, reads: list | None = None) -> None:
    """Time `call` until the stop rule is met: each sample is the L2 flush, the hold, then the
    call between two CUDA events (or the host clock on a CPU run), then the release."""
    if samples.cuda:
        import torch

        event = torch.cuda.Event

    def take(n: int) -> list[float]:
        for _ in range(n):
            if flush is not None:
                flush()
            if samples.cuda:
                start, end = event(enable_timing=True), event(enable_timing=True)
                hold.hold()
                try:
                    start.record()
                    t0 = time.perf_counter_ns()
                    call()
                    cpu = time.perf_counter_ns() - t0
                    end.record()
                finally:
                    hold.release()
                samples.add(cpu, (start, end))
            else:
                t0 = time.perf_counter_ns()
                call()
                samples.add(time.perf_counter_ns() - t0)
        samples.keep()
        if watch is not None and reads is not None and watch.due():
            reads.append(watch.read())
        return list(samples.times)

    measure(spec.stop, take, time.monotonic)


def _noise(entry: dict, rule: StopRule) -> None:
    """What the samples reached: their count, the median's noise, and whether the rule's
    max noise was met (a variant that ran out of time is marked noisy in the report)."""
    xs = entry.get("time_samples_ns") or []
    noise = noise_pct(xs)
    entry.update(
        samples=len(xs),
        noise_pct=round(noise, 4) if noise != float("inf") else None,
        converged=rule.converged(xs),
    )
