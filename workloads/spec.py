"""What the runner child runs, declared once: the RunSpec.

The parent (orchestrator/request.py `resolve_spec`) settles every default into one, the shape
and the device included, and writes it as `spec.json` in the run folder; the child runs
`python -m workloads run --spec RUN/spec.json --out RUN`. `--dry-run` prints the same spec.
Where the run writes (`out`) is not part of the file: one spec runs into any folder.

A spec is frozen: `resolve()` returns a new one. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from workloads import timers
from workloads.stopping import StopRule

SPEC_FILE = "spec.json"
SPEC_VERSION = 1
MODES = ("time", "profile", "torch-trace")
DEVICES = ("cuda", "cpu")  # and "auto" until resolve()
PROFILE_ITERS = 100  # profile and torch-trace without --iters (time samples until its stop rule)


@dataclass(frozen=True)
class RunSpec:
    """Every input of one runner process. `shape` None and `device` "auto" are unresolved:
    resolve() settles them (the parent always does, so the child has nothing left to choose)."""

    workload: str
    variants: tuple[str, ...] = ()  # empty: all; the parent lists them, baseline included
    shape: tuple[int, ...] | None = None  # None: the workload's default for the device
    dtype: str = "float32"
    device: str = "auto"
    device_reason: str = ""  # how the device was chosen: asked for, or how "auto" was settled
    iters: int | None = None  # None: time mode samples until the stop rule; others PROFILE_ITERS
    warmup: int = 10
    seed: int = 0
    mode: str = "time"
    flush_l2: bool = True
    timer: str = timers.DEFAULT_TIMER
    gpu_sleep_us: float = timers.DEFAULT_GPU_SLEEP_US
    stop: StopRule | None = None  # time mode's stop rule; its count is always `iters`
    cuda_graph: bool = False  # time mode: capture each variant once, time graph replays
    kernel_clock: bool | None = (
        None  # time mode on a GPU: the median from CUPTI's kernel records (None: where it can)
    )
    workload_file: str | None = None
    triton_interpret: bool = False
    fail_variant: str | None = None  # testing aid: make this variant raise
    # measure the GPU's attainable DRAM bandwidth (workloads/memory_roof.py) for the roofline
    measure_roof: bool = False
    # profile mode: the measured iterations under emit_nvtx (an NVTX range per aten operator)
    ops: bool = False
    # where workload.json goes: the child's --out, never written into spec.json
    out: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.iters is not None and self.iters < 1) or self.warmup < 0:
            raise ValueError("--iters must be >= 1 and --warmup >= 0")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; valid: {', '.join(MODES)}")
        # construction only settles representations: lists as tuples, the stop rule's count
        object.__setattr__(self, "variants", tuple(self.variants))
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))
        if self.stop is None or self.stop.iters != self.iters:
            object.__setattr__(self, "stop", replace(self.stop or StopRule(), iters=self.iters))

    def to_json(self) -> dict[str, Any]:
        """spec.json's content: plain JSON, `out` left out; the stop rule only where it decides."""
        data: dict[str, Any] = {"version": SPEC_VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "out":
                continue
            if f.name == "stop":
                value = value.to_json() if self.iters is None else None
            elif isinstance(value, tuple):
                value = list(value)
            data[f.name] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], out: Path | str | None = None) -> RunSpec:
        """The spec to_json() wrote; ValueError naming what is wrong with it."""
        if not isinstance(data, Mapping) or "workload" not in data:
            raise ValueError("a spec is a JSON object with at least a workload")
        if data.get("version", SPEC_VERSION) != SPEC_VERSION:
            raise ValueError(
                f"spec version {data.get('version')!r}; this runner reads version {SPEC_VERSION}"
            )
        known = {f.name for f in fields(cls)} - {"out"}
        unknown = sorted(set(data) - known - {"version"})
        if unknown:
            raise ValueError(f"spec has unknown field(s) {', '.join(unknown)}")
        kw = {k: v for k, v in data.items() if k in known}
        if kw.get("stop") is not None:
            kw["stop"] = StopRule(**{**kw["stop"], "iters": kw.get("iters")})
        return cls(**kw, out=out)


def resolve(spec: RunSpec, workload: Mapping[str, Any], auto: Callable[[], tuple[str, str]]) -> RunSpec:
    """`spec` with nothing left to choose, as a new spec: device "auto" becomes `auto()`'s
    (device, how it was chosen), no shape the workload's default for that device (`workload`:
    its registry.describe() entry, with default_shape and cpu_default_shape), no iters outside
    time mode PROFILE_ITERS, and outside time mode on CUDA (a CPU run, a profiler's run) no L2
    flush, timer "none" and no GPU sleep: what the runner does there, as its workload.json says.
    --cuda-graph and --kernel-clock stay as asked: the runner says why they are off. A resolved
    spec comes back equal.

    Example:
        >>> resolve(RunSpec("square", device="cpu"), {"default_shape": [10000, 10000],
        ...         "cpu_default_shape": [1000, 1000]}, auto=lambda: ("cpu", "")).shape
        (1000, 1000)
    """
    if spec.device == "auto":
        device, why = auto()
    else:
        device, why = spec.device, spec.device_reason or f"asked for (--device {spec.device})"
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid: auto, {', '.join(DEVICES)}")
    shape = spec.shape or tuple(workload["default_shape" if device == "cuda" else "cpu_default_shape"])
    iters = spec.iters if spec.iters is not None or spec.mode == "time" else PROFILE_ITERS
    held: dict[str, Any] = {}
    if device != "cuda" or spec.mode != "time":
        # nothing flushes the L2 or holds a stream there: a spec saying flush_l2 true and the
        # blocking timer (the defaults) disagreed with the run it describes
        held = {"flush_l2": False, "timer": "none", "gpu_sleep_us": 0.0}
    return replace(spec, device=device, device_reason=why, shape=shape, iters=iters, **held)
