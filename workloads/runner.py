"""The one child process every backend launches: `python -m workloads run --spec RUN/spec.json
--out RUN`, the spec (workloads/spec.py) resolved by the parent.

It makes the input and warms each variant up outside any measured range, checks each result
against a float64 reference, measures the memory of one more call of each (workloads/call_memory.py),
then runs the measured iterations of each variant inside one NVTX
range `variant:<name>` (domain `gprof`) and one torch.profiler `record_function` of the same
name. Once every variant was measured, each answer is checked again on new input values
(workloads/recheck.py): a result replayed from a cache fails there. What ran, what was skipped and why, what failed and how, and the raw timing samples go to
`workload.json` in the output folder, rewritten after every variant so a crash keeps the rest.

Modes:
  time         CUDA events (or the CPU clock) around every iteration; samples kept.
  profile      plain iterations for an outside profiler (nsys, ncu) to observe.
  torch-trace  the same, under torch.profiler; the Chrome trace is written beside the manifest.
"""

from __future__ import annotations

import os
import time
from typing import Any

from workloads import accuracy, call_memory, declared_work, recheck, registry
from workloads.devices import flop_unit
from workloads.environment import check_memory, describe_device, probe_needs, sync
from workloads.errors import RunnerUsageError, WorkloadCodeError
from workloads.manifest import EXIT_NOT_SAVED, MANIFEST, SCHEMA_VERSION, Manifest, record_failure, started
from workloads.nvtx_ranges import RANGE_PREFIX, Ranges
from workloads.profiled import run_profiled, run_torch_trace
from workloads.spec import MODES, RunSpec, resolve
from workloads.statuses import STALE
from workloads.timed import run_timed

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CRASHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
__all__ = [
    "EXIT_CRASHED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_SAVED",
    "EXIT_OK",
    "EXIT_USAGE",
    "MODES",
    "RunSpec",
    "run",
]


def run(spec: RunSpec) -> int:
    """Run the workload as `spec` says into `spec.out`; returns the exit code. Writes
    workload.json. A spec the parent resolved is run as it is; one left unresolved (device
    auto, no shape: a direct call, the flag-by-flag command line) is settled here, torch
    deciding auto. Raises RunnerUsageError on bad input (exit 2).

    Example:
        >>> run(RunSpec("square", shape=(1000,), device="cpu", iters=5, out="/tmp/r"))
        0
    """
    if spec.out is None:
        raise RunnerUsageError("no output folder: give --out DIR (the folder for workload.json)")
    laps = Laps()
    workload, chosen = _load(spec)
    spec = _settle(spec, workload)
    numel, itemsize = _place(spec, workload)
    laps.lap("settle")  # torch imported, CUDA looked for
    ranges = Ranges()
    man = _start_manifest(spec, workload, chosen, numel, itemsize, ranges)
    man.data["phases_s"] = laps.data
    laps.lap("describe")
    entries = {e["name"]: e for e in man.data["variants"]}
    runnable = _runnable(spec, chosen, entries)
    man.save()
    ready, x = _warm_up(spec, workload, runnable, entries, man)
    laps.lap("warm_up")
    # one extra call each, before any timed or profiled one: what a call's memory is
    call_memory.measure_all(spec, ready, x, entries, man)
    _counted_units(spec, workload, entries, man)
    laps.lap("memory")
    man.data["current"] = None

    if spec.mode == "time":
        run_timed(spec, ready, x, entries, ranges, man)
    elif spec.mode == "profile":
        run_profiled(spec, ready, x, entries, ranges, man)
    else:
        run_torch_trace(spec, ready, x, entries, ranges, man)
    laps.lap("measure")
    # outside every range: does each measured answer still follow its input?
    recheck.recheck_all(spec, workload, ready, x, entries, man)
    laps.lap("recheck")

    failed = [n for n, e in entries.items() if e["status"] in ("failed", STALE)]
    man.data["status"] = "failed" if failed else "ok"
    man.data["current"] = None
    laps.end()
    man.save()
    return EXIT_FAILED if failed else EXIT_OK


class Laps:
    """Where the runner's wall time goes, for workload.json's `phases_s`: `start` is the seconds
    from the process's start (the interpreter, the imports) to run(), then each phase's seconds,
    and `total` from the process's start to the end. The default `time square`'s wall time is a
    goal of its own (16 s at most), and the GPU machine is the only place to see where it goes."""

    def __init__(self) -> None:
        self.t = time.perf_counter()
        self.data: dict[str, float | None] = {"start": _since_process_start()}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.data[name] = round(now - self.t, 3)
        self.t = now

    def end(self) -> None:
        start = self.data["start"]
        self.data["total"] = _since_process_start() if start is not None else None


def _since_process_start() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat's start time against the
    boot-time clock it counts from); None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, in clock ticks since boot
        return round(time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _interpreting(spec: RunSpec) -> bool:
    return spec.triton_interpret or os.environ.get("TRITON_INTERPRET") == "1"


def _load(spec: RunSpec) -> tuple[registry.Workload, list[registry.Variant]]:
    """The workload and the variants asked for; raises on a name or dtype it does not know."""
    if spec.triton_interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
    spec.out.mkdir(parents=True, exist_ok=True)
    if spec.workload_file:
        registry.load_file(spec.workload_file)
    workload = registry.get(spec.workload)
    chosen = workload.select(spec.variants)
    if spec.dtype not in workload.dtypes:
        raise RunnerUsageError(
            f"workload {workload.name} supports dtypes {', '.join(workload.dtypes)}, not {spec.dtype}"
        )
    return workload, chosen


def _settle(spec: RunSpec, workload: registry.Workload) -> RunSpec:
    """The spec with its device and shape settled (workloads.spec.resolve; auto: CUDA when torch
    sees it); refused when it says cuda and torch sees none."""
    import torch

    def auto() -> tuple[str, str]:
        return (
            ("cuda", "auto: torch sees a CUDA device")
            if torch.cuda.is_available()
            else ("cpu", "auto: torch sees no CUDA device")
        )

    spec = resolve(spec, registry.describe([workload])[0], auto)
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise RunnerUsageError(
            f"no CUDA device is visible to torch (device cuda: {spec.device_reason}); run with --device cpu"
        )
    return spec


def _place(spec: RunSpec, workload: registry.Workload) -> tuple[int, int]:
    """(elements, bytes per element) of the settled spec's input, refused when they do not fit
    in memory."""
    import torch

    numel = 1
    for s in spec.shape or ():
        numel *= s
    itemsize = torch.empty((), dtype=getattr(torch, spec.dtype)).element_size()
    check_memory(spec, workload, numel, itemsize)
    return numel, itemsize


def _start_manifest(
    spec: RunSpec,
    workload: registry.Workload,
    chosen: list[registry.Variant],
    numel: int,
    itemsize: int,
    ranges: Ranges,
) -> Manifest:
    """workload.json as the run starts: what it is asked, where it runs, every variant pending."""
    shape = spec.shape or ()
    env = describe_device(spec.device, measure_roof=spec.measure_roof)
    env["triton_interpret"] = _interpreting(spec)
    work = {v.name: declared_work.variant_work(workload, v, shape, spec.dtype) for v in chosen}
    units = [w["flop_unit"] for w in work.values() if w]
    # the compute roof where it is read against: `time`'s medians, and ncu's (as the memory roof)
    env.update(declared_work.device_compute(env, units, measure=spec.mode == "time" or spec.measure_roof))
    return Manifest(
        spec.out / MANIFEST,
        {
            "schema_version": SCHEMA_VERSION,
            "workload": workload.name,
            "workload_source": workload.source,
            "replaces_builtin": workload.replaces_builtin,
            "description": workload.description,
            "baseline": workload.baseline,
            "mode": spec.mode,
            "shape": list(shape),
            "numel": numel,
            "dtype": spec.dtype,
            "itemsize": itemsize,
            "device": spec.device,
            "device_reason": spec.device_reason,
            "iters": spec.iters,
            "warmup": spec.warmup,
            "seed": spec.seed,
            "flush_l2": spec.flush_l2 and spec.device == "cuda" and spec.mode == "time",
            "gpu_sleep_us": spec.gpu_sleep_us if spec.device == "cuda" and spec.mode == "time" else 0,
            "timer": ("cuda-event" if spec.device == "cuda" else "perf_counter")
            if spec.mode == "time"
            else None,
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
                {
                    "name": v.name,
                    "label": v.label,
                    "description": v.description,
                    "needs": sorted(v.needs),
                    "bytes_moved": workload.bytes_moved(numel, itemsize),
                    **work[v.name],
                    "status": "pending",
                }
                for v in chosen
            ],
        },
    )


def _counted_units(
    spec: RunSpec, workload: registry.Workload, entries: dict[str, dict], man: Manifest
) -> None:
    """A variant whose workload declares no FLOPs but whose operators PyTorch counted (its
    `counted_flops`) takes its unit from the dtype, and the env the peaks of those units."""
    by_name = {v.name: v for v in workload.variants}
    units = {e["flop_unit"] for e in entries.values() if e.get("flop_unit")}
    for name, e in entries.items():
        if e.get("counted_flops") and not e.get("flop_unit"):
            e["flop_unit"] = flop_unit(spec.dtype, by_name[name].math)
            units.add(e["flop_unit"])
    env = man.data["env"]
    if units - set(env.get("peak_flops") or {}):
        env.update(
            declared_work.device_compute(env, sorted(units), measure=spec.mode == "time" or spec.measure_roof)
        )


def _runnable(
    spec: RunSpec, chosen: list[registry.Variant], entries: dict[str, dict]
) -> list[registry.Variant]:
    """The variants that can run here; the others are marked skipped, with the reason."""
    interpret = _interpreting(spec)
    runnable = []
    for v in chosen:
        reason = probe_needs(v.needs, spec.device, interpret)
        if reason is None and v.dtypes is not None and spec.dtype not in v.dtypes:
            reason = f"supports {', '.join(v.dtypes)} only, not {spec.dtype}"
        if reason:
            entries[v.name].update(status="skipped", reason=reason)
        else:
            runnable.append(v)
    return runnable


def _warm_up(
    spec: RunSpec,
    workload: registry.Workload,
    runnable: list[registry.Variant],
    entries: dict[str, dict],
    man: Manifest,
) -> tuple[list[registry.Variant], Any]:
    """Make the input, then set up, warm up and check every variant against the float64
    reference before anything is measured; (the variants ready, the input)."""
    import torch

    try:
        x = workload.make_input(spec.shape, spec.dtype, spec.device, spec.seed)
    except Exception as exc:
        raise WorkloadCodeError(
            f"workload {workload.name}: its make_input raised {type(exc).__name__}: {exc}"
        ) from exc
    try:
        ref = workload.reference(x.to(torch.float64))
    except Exception as exc:
        raise WorkloadCodeError(
            f"workload {workload.name}: its reference raised {type(exc).__name__}: {exc}"
        ) from exc
    sync(spec.device)
    ready = []
    for v in runnable:
        e = entries[v.name]
        started(man, v.name, "warming up")
        t0 = time.perf_counter()
        try:
            if v.setup is not None:
                v.setup()
            e["setup_s"] = round(time.perf_counter() - t0, 3)
            if spec.fail_variant == v.name:
                raise RuntimeError(f"injected failure in variant {v.name} (--fail-variant)")
            out = None
            for _ in range(max(spec.warmup, 1)):
                out = v.fn(x)
            sync(spec.device)
            found = accuracy.errors(out, ref)
            err, tol = found["rel_error"], workload.tolerance(v, spec.dtype)
            e["check"] = {**found, "tolerance": tol, "passed": err <= tol}
            if not err <= tol:
                raise AssertionError(
                    f"result differs from the float64 reference: relative error {err:.3g} > {tol:.3g}"
                )
            ready.append(v)
        except Exception as exc:
            record_failure(e, exc)
        # setup, warm-up (a first call compiles: Triton, Numba) and the check
        e["warm_up_s"] = round(time.perf_counter() - t0, 3)
        man.save()
    return ready, x
