"""The one child process every backend launches: `python -m workloads run <name> ...`.

It makes the input and warms each variant up outside any measured range, checks each result
against a float64 reference, then runs the measured iterations of each variant inside one NVTX
range `variant:<name>` (domain `gprof`) and one torch.profiler `record_function` of the same
name. What ran, what was skipped and why, what failed and how, and the raw timing samples go to
`workload.json` in the output folder, rewritten after every variant so a crash keeps the rest.

Modes:
  time         CUDA events (or the CPU clock) around every iteration; samples kept.
  profile      plain iterations for an outside profiler (nsys, ncu) to observe.
  torch-trace  the same, under torch.profiler; the Chrome trace is written beside the manifest.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workloads import registry, timers
from workloads.devices import peak_bandwidth
from workloads.stopping import StopRule, measure, noise_pct

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CRASHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
MANIFEST = "workload.json"
TRACE = "trace.json"
NVTX_DOMAIN = "gprof"
RANGE_PREFIX = "variant:"
# set (to anything): the time backend wraps each timed call in an NVTX range "call:<variant>", so
# nsys can time the very calls the events time (scripts/bench_fidelity.py's same-loop check)
MARK_CALLS_ENV = "GPROF_MARK_CALLS"
ITER_LABEL = "iter"
MODES = ("time", "profile", "torch-trace")
# while a variant is timed, its samples reach workload.json at least this often (seconds): a
# SIGKILL loses at most that much; an interrupt (SIGINT, SIGTERM) loses nothing
FLUSH_S = 1.0


class RunnerUsageError(Exception):
    """Bad input found in the child (e.g. a size too large for the device): exit 2."""


@dataclass
class RunSpec:
    workload: str
    variants: list[str] = field(default_factory=list)
    shape: tuple[int, ...] | None = None
    dtype: str = "float32"
    device: str = "auto"
    iters: int | None = 100  # time mode: None measures until the stop rule is met
    warmup: int = 10
    seed: int = 0
    mode: str = "time"
    flush_l2: bool = True
    timer: str = timers.DEFAULT_TIMER
    gpu_sleep_us: float = timers.DEFAULT_GPU_SLEEP_US
    stop: StopRule | None = None  # time mode's stop rule; its count is always `iters`
    cuda_graph: bool = False  # time mode: capture each variant once, time graph replays
    out: Path = Path(".")
    workload_file: str | None = None
    triton_interpret: bool = False
    fail_variant: str | None = None  # testing aid: make this variant raise

    def __post_init__(self) -> None:
        if self.stop is None or self.stop.iters != self.iters:
            self.stop = replace(self.stop or StopRule(), iters=self.iters)


def parse_shape(text: str) -> tuple[int, ...]:
    """'10000x10000' -> (10000, 10000); '1e8' -> (100000000,); positive integers only."""
    from orchestrator.errors import UsageError
    from orchestrator.request import parse_size

    try:
        return tuple(int(d) for d in parse_size(text).split("x"))
    except UsageError as exc:
        raise ValueError(exc.message) from None


# -- environment -------------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe_device(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": _version("triton"),
        "nvtx": _version("nvtx"),
        "numba": _version("numba"),
        "python": platform.python_version(),
        "cuda_available": torch.cuda.is_available(),
        "device": device,
    }
    if device == "cuda":
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        peak, source = peak_bandwidth(props.name, props)
        info.update(
            device_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            total_memory_bytes=props.total_memory,
            peak_bandwidth_bytes_per_s=peak,
            peak_bandwidth_source=source,
        )
    else:
        info.update(device_name=platform.processor() or platform.machine(),
                    peak_bandwidth_bytes_per_s=None,
                    peak_bandwidth_source="no peak for a CPU run")
    return info


def probe_needs(needs: frozenset[str], device: str, triton_interpret: bool) -> str | None:
    """None if every need is met here, else the reason the variant is skipped."""
    import importlib.util
    import shutil

    import torch

    for need in sorted(needs):
        if need == "cuda" and device != "cuda":
            return "needs CUDA; this run is on the CPU" if not torch.cuda.is_available() \
                else "needs CUDA; this run is on the CPU (--device cpu)"
        if need == "triton":
            if importlib.util.find_spec("triton") is None:
                return "needs triton (pip install triton)"
            if device != "cuda" and not triton_interpret:
                return "Triton needs a GPU; on the CPU pass --triton-interpret (TRITON_INTERPRET=1)"
        if need == "compiler":
            if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
                return "needs nvcc (CUDA toolkit) for torch.utils.cpp_extension.load_inline"
            if shutil.which(os.environ.get("CXX", "c++")) is None:
                return "needs a host C++ compiler (c++) for load_inline"
        if need == "numba":
            if importlib.util.find_spec("numba") is None:
                return "needs numba with CUDA support (pip install numba-cuda)"
    return None


# -- NVTX and labels -------------------------------------------------------------------------

class Ranges:
    """NVTX push/pop in domain `gprof` (the nvtx package), or torch.cuda.nvtx (default domain)."""

    def __init__(self) -> None:
        try:
            import nvtx

            self._nvtx = nvtx
            self.api, self.domain = "nvtx", NVTX_DOMAIN
        except ImportError:
            self._nvtx = None
            self.api, self.domain = "torch.cuda.nvtx", None

    def push(self, text: str) -> None:
        if self._nvtx is not None:
            self._nvtx.push_range(text, domain=NVTX_DOMAIN)
        else:
            import torch

            if torch.cuda.is_available():
                torch.cuda.nvtx.range_push(text)

    def pop(self) -> None:
        if self._nvtx is not None:
            self._nvtx.pop_range(domain=NVTX_DOMAIN)
        else:
            import torch

            if torch.cuda.is_available():
                torch.cuda.nvtx.range_pop()


# -- the run -----------------------------------------------------------------------------------

class Manifest:
    """workload.json, rewritten atomically after every change so nothing collected is lost."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)


def _rel_error(out, ref) -> float:
    import torch

    out = torch.as_tensor(out).detach().to("cpu", torch.float64).reshape(-1)
    ref = torch.as_tensor(ref).detach().to("cpu", torch.float64).reshape(-1)
    if out.shape != ref.shape:
        raise ValueError(f"result has {out.numel()} elements, the reference {ref.numel()}")
    if torch.isnan(out).any() and not torch.isnan(ref).any():
        return float("inf")
    denom = torch.linalg.vector_norm(ref)
    num = torch.linalg.vector_norm(out - ref)
    return float(num / denom) if denom > 0 else float(num)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _check_memory(spec: RunSpec, workload: registry.Workload, numel: int, itemsize: int) -> None:
    need = numel * workload.bytes_per_element(itemsize)
    if spec.device == "cuda":
        import torch

        free, total = torch.cuda.mem_get_info()
        where = f"the GPU has {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
    else:
        free = _mem_available_bytes()
        where = f"this machine has {free / 2**30:.1f} GiB available" if free else ""
    if free and need > 0.9 * free:
        raise RunnerUsageError(
            f"size {'x'.join(map(str, spec.shape or ()))} ({numel:,} elements of {spec.dtype}) needs about "
            f"{need / 2**30:.1f} GiB; {where}. Choose a smaller --size.")


def _mem_available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run(spec: RunSpec) -> int:
    """Run the workload as `spec` says; returns the exit code. Writes workload.json."""
    if spec.triton_interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
    spec.out.mkdir(parents=True, exist_ok=True)
    if spec.workload_file:
        registry.load_file(spec.workload_file)
    workload = registry.get(spec.workload)
    chosen = workload.select(spec.variants)
    if spec.mode not in MODES:
        raise RunnerUsageError(f"unknown mode {spec.mode!r}; valid: {', '.join(MODES)}")
    if spec.dtype not in workload.dtypes:
        raise RunnerUsageError(f"workload {workload.name} supports dtypes {', '.join(workload.dtypes)}, "
                               f"not {spec.dtype}")

    import torch

    if spec.device == "auto":
        spec.device = "cuda" if torch.cuda.is_available() else "cpu"
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise RunnerUsageError("no CUDA device is visible to torch; run with --device cpu")
    interpret = spec.triton_interpret or os.environ.get("TRITON_INTERPRET") == "1"
    shape = spec.shape or (workload.default_shape if spec.device == "cuda" else workload.cpu_default_shape)
    spec.shape = shape
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=getattr(torch, spec.dtype)).element_size()
    _check_memory(spec, workload, numel, itemsize)

    ranges = Ranges()
    env = describe_device(spec.device)
    env["triton_interpret"] = interpret
    man = Manifest(spec.out / MANIFEST, {
        "schema_version": 1,
        "workload": workload.name,
        "workload_source": workload.source,
        "description": workload.description,
        "baseline": workload.baseline,
        "mode": spec.mode,
        "shape": list(shape),
        "numel": numel,
        "dtype": spec.dtype,
        "itemsize": itemsize,
        "device": spec.device,
        "iters": spec.iters,
        "warmup": spec.warmup,
        "seed": spec.seed,
        "flush_l2": spec.flush_l2 and spec.device == "cuda" and spec.mode == "time",
        "gpu_sleep_us": spec.gpu_sleep_us if spec.device == "cuda" and spec.mode == "time" else 0,
        "timer": ("cuda-event" if spec.device == "cuda" else "perf_counter") if spec.mode == "time" else None,
        # what keeps the host's side out of the events (workloads/timers.py)
        "hold": (spec.timer if spec.device == "cuda" else None) if spec.mode == "time" else None,
        "stop_rule": spec.stop.to_json() if spec.mode == "time" else None,
        "cuda_graph": bool(spec.cuda_graph and spec.device == "cuda" and spec.mode == "time"),
        "nvtx": {"api": ranges.api, "domain": ranges.domain, "prefix": RANGE_PREFIX},
        "env": env,
        "status": "running",
        # the process to tell when the run is interrupted under a profiler (see orchestrator.proc)
        "pid": os.getpid(),
        "variants": [
            {"name": v.name, "label": v.label, "description": v.description, "needs": sorted(v.needs),
             "bytes_moved": workload.bytes_moved(numel, itemsize), "status": "pending"}
            for v in chosen
        ],
    })
    entries = {e["name"]: e for e in man.data["variants"]}

    # which variants can run here
    runnable = []
    for v in chosen:
        reason = probe_needs(v.needs, spec.device, interpret)
        if reason is None and v.dtypes is not None and spec.dtype not in v.dtypes:
            reason = f"supports {', '.join(v.dtypes)} only, not {spec.dtype}"
        if reason:
            entries[v.name].update(status="skipped", reason=reason)
        else:
            runnable.append(v)
    man.save()

    x = workload.make_input(shape, spec.dtype, spec.device, spec.seed)
    ref = workload.reference(x.to(torch.float64))
    _sync(spec.device)

    # set up, warm up and check every variant before anything is measured
    ready = []
    for v in runnable:
        e = entries[v.name]
        _started(man, v.name, "warming up")
        try:
            t0 = time.perf_counter()
            if v.setup is not None:
                v.setup()
            e["setup_s"] = round(time.perf_counter() - t0, 3)
            if spec.fail_variant == v.name:
                raise RuntimeError(f"injected failure in variant {v.name} (--fail-variant)")
            out = None
            for _ in range(max(spec.warmup, 1)):
                out = v.fn(x)
            _sync(spec.device)
            err = _rel_error(out, ref)
            tol = workload.tolerance(v, spec.dtype)
            e["check"] = {"rel_error": err, "tolerance": tol, "passed": err <= tol}
            if not err <= tol:
                raise AssertionError(f"result differs from the float64 reference: relative error "
                                     f"{err:.3g} > {tol:.3g}")
            ready.append(v)
        except Exception as exc:
            _record_failure(e, exc)
        man.save()
    del ref
    man.data["current"] = None

    if spec.mode == "time":
        _run_timed(spec, ready, x, entries, ranges, man)
    elif spec.mode == "profile":
        _run_profiled(spec, ready, x, entries, ranges, man)
    else:
        _run_torch_trace(spec, ready, x, entries, ranges, man)

    failed = [n for n, e in entries.items() if e["status"] == "failed"]
    man.data["status"] = "failed" if failed else "ok"
    man.data["current"] = None
    man.save()
    return EXIT_FAILED if failed else EXIT_OK


def _started(man: Manifest, name: str, step: str) -> None:
    """Say which variant the runner is on and doing what: a --timeout names it (the parent
    marks it `timed out`, see RunFolder.mark_timed_out)."""
    man.data["current"] = {"variant": name, "step": step}
    man.save()


def _measuring(entry: dict, man: Manifest) -> None:
    """Say which variant is being measured: an interrupt marks it interrupted (see _mark)."""
    entry["status"] = "measuring"
    _started(man, entry["name"], "measuring")


def _record_failure(entry: dict, exc: BaseException) -> None:
    entry.update(status="failed", error=f"{type(exc).__name__}: {exc}",
                 traceback="".join(traceback.format_exception(exc)))


def _l2_flusher(spec: RunSpec):
    if not (spec.flush_l2 and spec.device == "cuda"):
        return None
    import torch

    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 50 * 2**20
    # twice the L2, written with a memset kernel, evicts the input (triton.testing.do_bench
    # does the same with a 256 MB buffer)
    buf = torch.empty(max(2 * l2, 64 * 2**20), dtype=torch.int8, device="cuda")
    return buf.zero_


class Samples:
    """The samples of the variant being timed, kept in its workload.json entry as they are
    taken: written every FLUSH_S seconds while it runs and whenever it stops, so an interrupt
    keeps every sample taken and a SIGKILL at most FLUSH_S seconds' worth. CUDA events are read
    once they have completed (no synchronize inside the timed loop), all of them at the end."""

    def __init__(self, entry: dict, man: Manifest, cuda: bool):
        self.entry, self.man, self.cuda = entry, man, cuda
        self.cpu_ns: list[int] = []
        self.gpu_ns: list[float] = []
        self._pending: list = []  # (start, end) CUDA events recorded, not read yet
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
        return self.gpu_ns if self.cuda else self.cpu_ns

    def restart(self) -> None:
        """Drop what was taken (a measurement to be made again another way)."""
        self.keep()
        self.cpu_ns, self.gpu_ns = [], []

    def keep(self, status: str | None = None, *, wait: bool = True) -> None:
        """Put the samples so far into the entry (and `status`, when it stops); `wait`: wait
        for the GPU to finish what was recorded, so every event is read."""
        if self.cuda:
            import torch

            if wait and self._pending:
                torch.cuda.synchronize()
            done = 0
            for start, end in self._pending:
                if not end.query():
                    break
                self.gpu_ns.append(start.elapsed_time(end) * 1e6)
                done += 1
            del self._pending[:done]
        self.entry.update(time_samples_ns=self.gpu_ns if self.cuda else self.cpu_ns, cpu_samples_ns=self.cpu_ns)
        if status:
            self.entry["status"] = status


def _run_timed(spec, variants, x, entries, ranges, man) -> None:
    from workloads import clocks

    cuda = spec.device == "cuda"
    flush = _l2_flusher(spec)
    hold, why = timers.make(spec.timer, spec.device, spec.gpu_sleep_us)
    if why:
        man.data["hold"], man.data["hold_note"] = hold.name, why
    watch = None
    if cuda:
        import torch

        watch, why = clocks.open_watch(torch.cuda.current_device())
        man.data["clocks"] = watch.describe() if watch else {"note": why}
    fallback = None
    for v in variants:
        e = entries[v.name]
        _measuring(e, man)
        samples = Samples(e, man, cuda=cuda)
        reads = [watch.read()] if watch else []
        try:
            call = lambda: v.fn(x)  # noqa: E731
            if spec.cuda_graph and cuda:
                call, reason = _capture(v, x)
                if call is None:
                    e.update(status="skipped", reason=f"cannot be captured in a CUDA graph: {reason}")
                    man.save()
                    continue
            if os.environ.get(MARK_CALLS_ENV):
                call = _marked(call, ranges, "call:" + v.name)
            ranges.push(RANGE_PREFIX + v.name)
            try:
                hold.reset()
                e["hold"] = hold.name
                _sample(spec, call, flush, hold, samples, watch, reads)
                if hold.timeouts():
                    # the host side outlasted the spin, or the call waits for the GPU: the
                    # events held the spin's timeout too; measure again with the GPU sleep
                    fallback = fallback or timers.SleepHold(spec.gpu_sleep_us or timers.DEFAULT_GPU_SLEEP_US)
                    e.update(hold=fallback.name, hold_note=(
                        f"blocking timer timed out {hold.timeouts()} time(s) (a host side over "
                        f"{timers.BLOCK_TIMEOUT_MS:g} ms, or a call that waits for the GPU); measured "
                        f"with a {fallback.us:g} us GPU sleep instead"))
                    samples.restart()
                    _sample(spec, call, flush, fallback, samples, watch, reads)
            finally:
                ranges.pop()
            samples.keep("ok")
            _noise(e, spec.stop)
        except KeyboardInterrupt:
            # Ctrl-C, SIGTERM, or --timeout's SIGTERM: what was taken is kept, then the run stops
            samples.keep("interrupted")
            _noise(e, spec.stop)
            man.save()
            raise
        except Exception as exc:
            _record_failure(e, exc)
        finally:
            if watch is not None:
                reads.append(watch.read())
                # the first, the last and at most 40 between: enough to see a clock fall
                e["clocks"] = reads if len(reads) <= 42 else reads[:1] + reads[1:-1:max(1, len(reads) // 40)] + reads[-1:]
                e["clock_note"] = clocks.verdict(reads)
        man.save()


def _capture(v, x):
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


def _marked(call, ranges: "Ranges", text: str):
    """`call` inside its own NVTX range: the launches in it are the call's, not the flush's or the hold's."""
    def marked():
        ranges.push(text)
        try:
            call()
        finally:
            ranges.pop()
    return marked


def _sample(spec, call, flush, hold, samples: "Samples", watch=None, reads: list | None = None) -> None:
    """Time `call` until the stop rule is met: each sample is the L2 flush, the hold, then the
    call between two CUDA events (or the host clock on a CPU run), then the release."""
    if samples.cuda:
        import torch

        event = torch.cuda.Event

    def take(n: int) -> list[float]:
        first = len(samples.times)
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
        return samples.times[first:]

    measure(spec.stop, take, time.monotonic)


def _noise(entry: dict, rule: StopRule) -> None:
    """What the samples reached: their count, the median's noise, and whether the rule's
    max noise was met (a variant that ran out of time is marked noisy in the report)."""
    xs = entry.get("time_samples_ns") or []
    noise = noise_pct(xs)
    entry.update(samples=len(xs), noise_pct=round(noise, 4) if noise != float("inf") else None,
                 converged=rule.converged(xs))


def _run_variant_block(spec, v, x, ranges) -> None:
    """The measured block: one NVTX range and one record_function around `iters` calls."""
    import torch

    label = RANGE_PREFIX + v.name
    ranges.push(label)
    try:
        with torch.profiler.record_function(label):
            for _ in range(spec.iters):
                with torch.profiler.record_function(ITER_LABEL):
                    v.fn(x)
            _sync(spec.device)
    finally:
        ranges.pop()


def _run_profiled(spec, variants, x, entries, ranges, man) -> None:
    for v in variants:
        e = entries[v.name]
        _measuring(e, man)
        try:
            t0 = time.perf_counter_ns()
            _run_variant_block(spec, v, x, ranges)
            e.update(status="ok", wall_ns=time.perf_counter_ns() - t0)
        except Exception as exc:
            _record_failure(e, exc)
        man.save()


def _run_torch_trace(spec, variants, x, entries, ranges, man) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if spec.device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    trace_path = spec.out / TRACE
    man.data["trace"] = TRACE

    def on_ready(prof) -> None:
        prof.export_chrome_trace(str(trace_path))

    # step 0 is the profiler's own warm-up (CUPTI set-up costs land there, unrecorded);
    # step 1 records the measured blocks
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                 on_trace_ready=on_ready) as prof:
        for v in variants:
            v.fn(x)
        _sync(spec.device)
        prof.step()
        _run_profiled(spec, variants, x, entries, ranges, man)
        prof.step()
    if not trace_path.exists():
        import errno
        import shutil

        # torch.profiler fails silently where the disk is full: name that, not a missing trace
        if shutil.disk_usage(spec.out).free < 2**20:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(trace_path))
        raise RuntimeError("torch.profiler wrote no trace")


# -- command line ------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads", description=__doc__,
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
        # the orchestrator imports a --workload-file only here, in a child it can time out
        from orchestrator.errors import GprofError

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
        return run(spec)
    except KeyboardInterrupt:
        _mark(Path(args.out), "interrupted")
        _say("gprof-orch runner: interrupted")
        return EXIT_INTERRUPTED
    except (RunnerUsageError, ValueError) as exc:
        _say(f"gprof-orch runner: {exc}")
        return EXIT_USAGE
    except OSError as exc:  # the output folder: full, read-only, gone
        _say(f"gprof-orch runner: cannot write {exc.filename or args.out}: {exc.strerror}")
        return EXIT_CRASHED
    except Exception as exc:
        from orchestrator.errors import GprofError

        if isinstance(exc, GprofError):
            print(f"gprof-orch runner: {exc.message}", file=sys.stderr)
            return exc.exit_code
        _mark(Path(args.out), "failed", f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
        print(f"gprof-orch runner: crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_CRASHED


def _say(message: str) -> None:
    """A last word on stderr, which may be a log file on the disk that just filled up."""
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:
        pass


def _mark(out: Path, status: str, error: str | None = None) -> None:
    path = out / MANIFEST
    try:
        data = json.loads(path.read_text())
        data["status"] = status
        if error:
            data["error"] = error
        for v in data.get("variants", []):
            if v.get("status") == "measuring":
                v["status"] = status  # what it recorded so far may be in the profiler's output
            elif v.get("status") == "pending":
                v.update(status="skipped", reason="not run: the run stopped before it")
        Manifest(path, data)
    except (OSError, ValueError):
        pass  # nothing written yet, or the folder cannot take it: the exit code still tells
