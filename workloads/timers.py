"""What keeps the host's side of a call out of its CUDA-event timing (`time --timer`).

A CUDA event pair times whatever the GPU does between the two records. If the GPU is idle when
the start event is recorded, it waits for the host to launch the call, and the host's cost
(Python, a Triton launcher, an allocation) lands inside the timing. Each timer here holds the
stream before the start event, so the call's whole launch sequence is queued by the time the
GPU reaches it:

    blocking  NVBench's blocking kernel (nvbench/blocking_kernel.cuh): a one-thread kernel spins
              on a counter in pinned host memory; the host records start, makes the call, records
              stop, then releases the counter. No host cost can land inside, however slow. The
              spin gives up after `timeout_ms` (read from the GPU's global timer): a host side
              slower than that, or a call that waits for the GPU (a synchronize, .item()), would
              otherwise deadlock. Timeouts are counted; the runner then falls back to `sleep`.
    sleep     torch.cuda._sleep for a fixed time: enough only while the host side is shorter.
    none      nothing: the events time the host's launch too.

Each is an object with hold() before the start event, release() after the stop event, and
timeouts() after a synchronize. Built with Triton, which every GPU user here has already: no
compiler at run time beyond it, compiled once and cached by Triton.
"""

from __future__ import annotations

import os

TIMERS = ("blocking", "sleep", "none")
DEFAULT_TIMER = "blocking"
DEFAULT_GPU_SLEEP_US = 100.0
BLOCK_TIMEOUT_MS = 100.0


class NoHold:
    name = "none"

    def hold(self) -> None:
        pass

    def release(self) -> None:
        pass

    def timeouts(self) -> int:
        return 0

    def reset(self) -> None:
        pass


class SleepHold(NoHold):
    """A GPU busy-wait of `us` microseconds before each timed call (torch.cuda._sleep)."""

    name = "sleep"

    def __init__(self, us: float):
        import torch

        self.us = us
        self._cycles = max(1, int(sleep_cycles_per_us() * us))
        self._sleep = torch.cuda._sleep

    def hold(self) -> None:
        self._sleep(self._cycles)


# set (to anything): the time backend wraps each timed call in an NVTX range "call:<variant>", so
# nsys can time the very calls the events time (benchmarks/bench_fidelity.py's same-loop check); and
# every event is then read through the driver (event_reader)
MARK_CALLS_ENV = "GPROF_MARK_CALLS"


def event_reader(driver: bool | None = None):
    """elapsed_ms(start, end) of two completed torch.cuda.Events. driver=True reads them through
    the driver's cuEventElapsedTime (ctypes), as the same-loop check must: torch's
    Event.elapsed_time calls CUDA 13's cudaEventElapsedTime_v12080 (CUPTI cbid 486), which nsys
    2023.4.4 does not know, and after it nsys drops the thread's CUDA events
    (docs/nsight-facts.md). The driver's call is the one the runtime makes; both read the same
    float (tests/test_timers_gpu.py). Where libcuda cannot be read, torch's. driver=None: the
    driver under MARK_CALLS_ENV, torch's otherwise."""
    if driver is None:
        driver = bool(os.environ.get(MARK_CALLS_ENV))
    if driver:
        import ctypes

        try:
            fn = ctypes.CDLL("libcuda.so.1").cuEventElapsedTime
        except (OSError, AttributeError):
            fn = None
        if fn is not None:
            fn.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
            fn.restype = ctypes.c_int
            out = ctypes.c_float()

            def elapsed_ms(start, end) -> float:
                rc = fn(ctypes.byref(out), start.cuda_event, end.cuda_event)
                if rc:
                    raise RuntimeError(f"cuEventElapsedTime failed: CUDA error {rc}")
                return out.value

            return elapsed_ms
    return lambda start, end: start.elapsed_time(end)


def sleep_cycles_per_us() -> float:
    """How many cycles of torch.cuda._sleep make one microsecond on this GPU (measured)."""
    import torch

    cycles = 200_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # warm
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    us = event_reader()(start, end) * 1000.0
    return cycles / us if us > 0 else 2000.0


_SPIN = None


def _spin_kernel():
    """The Triton spin kernel, defined on first use (triton is imported only on a GPU run)."""
    global _SPIN
    if _SPIN is not None:
        return _SPIN
    import triton
    import triton.language as tl

    @triton.jit
    def _globaltimer():
        return tl.inline_asm_elementwise(
            "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
        )

    # seq and timeout_ns change every call: not specialised, so one compiled kernel serves all
    @triton.jit(do_not_specialize=["seq", "timeout_ns"])
    def spin(flag_ptr, timeouts_ptr, seq, timeout_ns):
        start = _globaltimer()
        now = start
        seen = tl.load(flag_ptr, volatile=True)
        while (seen < seq) & (now - start < timeout_ns):
            seen = tl.load(flag_ptr, volatile=True)
            now = _globaltimer()
        if seen < seq:
            tl.atomic_add(timeouts_ptr, 1)

    _SPIN = spin
    return spin


class BlockingHold(NoHold):
    """Hold the stream on a counter in pinned host memory until the host releases it.

    A counter, not a flag: the host runs ahead of the GPU by several samples, and a flag reset
    for sample i+1 could be read by the spin of sample i, which would then wait for nothing.
    Spin i waits until the counter reaches i; the host writes i after recording stop i."""

    name = "blocking"

    def __init__(self, timeout_ms: float = BLOCK_TIMEOUT_MS):
        import torch

        self.timeout_ms = timeout_ms
        self._timeout_ns = int(timeout_ms * 1e6)
        # pinned host memory is mapped into the GPU's address space (UVA): the kernel reads
        # the host's writes through it with volatile loads
        self._flag = torch.zeros(1, dtype=torch.int64, pin_memory=True)
        self._flag_np = self._flag.numpy()
        self._timeouts = torch.zeros(1, dtype=torch.int32, device="cuda")
        self._seq = 0
        self._kernel = _spin_kernel()
        # compile and load now, released at once, so neither lands in a measurement
        self.hold()
        self.release()
        torch.cuda.synchronize()
        self.reset()

    def hold(self) -> None:
        self._seq += 1
        self._kernel[(1,)](self._flag, self._timeouts, self._seq, self._timeout_ns, num_warps=1)

    def release(self) -> None:
        self._flag_np[0] = self._seq

    def timeouts(self) -> int:
        """How many holds gave up since the last reset (read after a synchronize)."""
        return int(self._timeouts.item())

    def reset(self) -> None:
        self._timeouts.zero_()


def make(
    timer: str, device: str, gpu_sleep_us: float = DEFAULT_GPU_SLEEP_US, timeout_ms: float = BLOCK_TIMEOUT_MS
) -> tuple[NoHold, str | None]:
    """The hold for `timer` on `device`, and why another was used (None if it is the one asked)."""
    if timer not in TIMERS:
        raise ValueError(f"unknown timer {timer!r}; valid: {', '.join(TIMERS)}")
    if device != "cuda" or timer == "none":
        return NoHold(), None
    if timer == "blocking":
        try:
            return BlockingHold(timeout_ms), None
        except Exception as exc:  # no triton, no pinned memory: say so and sleep instead
            why = f"blocking timer unavailable ({type(exc).__name__}: {exc}); used the GPU sleep"
            return (SleepHold(gpu_sleep_us) if gpu_sleep_us > 0 else NoHold()), why
    return (SleepHold(gpu_sleep_us) if gpu_sleep_us > 0 else NoHold()), None
