"""Where a variant's GPU work runs, seen on one probe call of each before `time` times anything
on CUDA, and how the timer then brackets all of it.

Why: CUDA events time one stream. A variant that launches its work on another stream (inside
`with torch.cuda.stream(s):`, nothing on the current stream waiting for it) leaves the events
around an empty stretch of the timed stream: a 270 us product read 2.6 us. A variant that
launches nothing (a result replayed from a cache) reads the events' own cost. Neither may read
as a speedup.

The probe: every variant called once under torch.profiler (CUDA activity only; CUPTI names
each kernel's, memset's and copy's stream), each call after a marker kernel on the timed stream
and followed by a device-wide synchronize, so the activities between two markers are one
variant's. While it runs, the streams torch is switched to (torch.cuda.set_stream, which
`torch.cuda.stream(s)` calls) are noted: those are streams the timer can join.

What the timer does with it (`verdict`):
  same stream     nothing: the events bracket every activity;
  joined          work on streams torch switched to: each timed call makes them wait for the
                  timed stream first and the timed stream wait for them after, so the events
                  hold all of it;
  kernel clock    work on streams the timer cannot name (an extension's own stream), with the
                  kernel clock on: CUPTI's records of the call, on every stream, are its time;
  OTHER_STREAM    the same without the kernel clock: not timed, a status and never a number;
  NO_GPU_WORK     the probe call launched nothing: timed (the events' floor), the status says so.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from workloads.statuses import NO_GPU_WORK, OTHER_STREAM

__all__ = ["NO_GPU_WORK", "OTHER_STREAM", "joined", "probe", "verdict"]
# torch.cuda._sleep's kernel (ATen's spin_kernel): the marker before each probe call
MARKER = "spin_kernel"
MARKER_CYCLES = 1000


def probe(variants, x) -> dict[str, dict[str, Any]]:
    """Each variant's probe call under torch.profiler: {name: {"gpu_activities", "timer_stream",
    "other_streams", "torch_streams", "probe_s"}}, or {name: {"error": why}} for every variant
    where the probe could not be read (the timing goes on as before, the note says so)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    t0 = time.perf_counter()
    switched: dict[str, list[tuple[int, int, int]]] = {}
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for v in variants:
                torch.cuda.synchronize()
                torch.cuda._sleep(MARKER_CYCLES)
                with _switches() as seen:
                    v.fn(x)
                switched[v.name] = seen
                torch.cuda.synchronize()
        acts = sorted(
            (e for e in prof.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA),
            key=lambda e: e.start_ns(),
        )
    except Exception as exc:  # CUPTI held by another tool, a variant that raises only here, ...
        return {v.name: {"error": f"{type(exc).__name__}: {exc}"} for v in variants}
    marks = [i for i, e in enumerate(acts) if MARKER in e.name()]
    if len(marks) != len(variants):
        why = f"{len(marks)} marker kernels in the probe's records for {len(variants)} variants"
        return {v.name: {"error": why} for v in variants}
    spent = round(time.perf_counter() - t0, 3)
    out = {}
    for k, v in enumerate(variants):
        timer = acts[marks[k]].device_resource_id()
        own = acts[marks[k] + 1 : marks[k + 1] if k + 1 < len(marks) else len(acts)]
        out[v.name] = {
            "gpu_activities": len(own),
            "timer_stream": timer,
            "other_streams": sorted({e.device_resource_id() for e in own} - {timer}),
            "torch_streams": [list(s) for s in dict.fromkeys(switched[v.name])],
            "probe_s": spent,
        }
    return out


@contextlib.contextmanager
def _switches():
    """The streams (stream_id, device_index, device_type) torch is switched to inside, other
    than the one current on entry: torch.cuda.set_stream goes through _set_stream_by_id."""
    import torch

    cur = torch.cuda.current_stream()
    here = (cur.stream_id, cur.device_index, cur.device_type)
    seen: list[tuple[int, int, int]] = []
    real = torch.cuda._set_stream_by_id

    def noting(stream_id, device_index, device_type):
        if (stream_id, device_index, device_type) != here:
            seen.append((stream_id, device_index, device_type))
        return real(stream_id, device_index, device_type)

    torch.cuda._set_stream_by_id = noting
    try:
        yield seen
    finally:
        torch.cuda._set_stream_by_id = real


def verdict(found: dict[str, Any], kernel_clock: bool) -> tuple[str, str]:
    """(how the timer brackets the variant, the note's words): "same", "joined", "kernel clock",
    OTHER_STREAM or NO_GPU_WORK (see the module's docstring); ("", why) where the probe failed."""
    if "error" in found:
        return "", f"the stream probe could not be read ({found['error']}): timed on its stream alone"
    if not found["gpu_activities"]:
        return NO_GPU_WORK, (
            "no GPU work: its probe call launched no kernel, memset or copy (a result kept from an earlier "
            "call, or work done on the host), so the events time an empty stream; no speedup"
        )
    others = found["other_streams"]
    if not others:
        return "same", ""
    n = f"{len(others)} stream(s) beside the timed one"
    if found["torch_streams"] and len(found["torch_streams"]) >= len(others):
        return "joined", (
            f"its GPU work ran on {n} (seen on a probe call): each call timed with the events joined to "
            f"every stream it used"
        )
    if kernel_clock:
        return "kernel clock", (
            f"its GPU work ran on {n} the timer cannot join (seen on a probe call): its time is CUPTI's "
            f"records of every stream, the kernel clock's"
        )
    return OTHER_STREAM, (
        f"its GPU work ran on {n} the timer cannot join (not set through torch.cuda.stream; seen on a "
        f"probe call): CUDA events on the timed stream would miss it, so it is not timed; install "
        f"cupti-python for the kernel clock, or use nsys, which sees every stream"
    )


def joined(call, streams: list[list[int]]):
    """`call` with the streams it uses joined to the current one: they wait for it before the
    call and it waits for them after, so events on the current stream hold their work."""
    import torch

    side = [torch.cuda.Stream(stream_id=s, device_index=d, device_type=t) for s, d, t in streams]

    def run():
        cur = torch.cuda.current_stream()
        for s in side:
            s.wait_stream(cur)
        call()
        for s in side:
            cur.wait_stream(s)

    return run
