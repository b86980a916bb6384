"""A profiling request: every option a backend takes, as plain values, checked before anything
starts (so a bad name or size never costs a profiler launch)."""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import UsageError

DEVICES = ("auto", "cuda", "cpu")


def parse_size(text: str) -> str:
    """Check a --size value ('1e8', '100000000', '10000x10000'); returns it normalised."""
    raw = str(text).strip().lower()
    parts = [p.strip().replace("_", "") for p in raw.replace("*", "x").split("x")]
    dims = []
    for p in parts:
        try:
            f = float(p)
        except ValueError:
            f = math.nan
        if not math.isfinite(f) or f != int(f) or f < 1:
            raise UsageError(f"--size {text!r} is not a positive integer (1e8, 100000000) or a shape (10000x10000)")
        dims.append(int(f))
    return "x".join(str(d) for d in dims)


def parse_list(text: str | tuple | list | None) -> list[str]:
    if not text:
        return []
    items = text if isinstance(text, (list, tuple)) else [text]
    out: list[str] = []
    for item in items:
        out += [s.strip() for s in str(item).split(",") if s.strip()]
    return out


@dataclass
class Request:
    workload: str
    backend: str = "time"
    variants: list[str] = field(default_factory=list)
    size: str | None = None
    dtype: str = "float32"
    device: str = "auto"
    iters: int | None = None
    warmup: int | None = None
    seed: int = 0
    flush_l2: bool = True
    # `time` on a GPU: GPU sleep after each L2 flush, so the host's launch cost is not timed
    gpu_sleep_us: float = 100.0
    workload_file: str | None = None
    triton_interpret: bool = False
    timeout: float | None = None
    out: Path | None = None
    root: Path | None = None
    dry_run: bool = False
    # backend options
    nsys: str | None = None
    nsys_args: list[str] = field(default_factory=list)
    trace_osrt: bool = False
    ncu: str | None = None
    ncu_set: str | None = None
    ncu_sections: list[str] = field(default_factory=list)
    ncu_metrics: list[str] = field(default_factory=list)
    clock_control: str = "none"
    cache_control: str = "all"
    ncu_args: list[str] = field(default_factory=list)
    fail_variant: str | None = None  # testing aid: the runner makes this variant raise

    def validate(self) -> "Request":
        """Check every value against the registries; raises UsageError / UnknownNameError."""
        from workloads import registry

        if self.workload_file:
            registry.load_file(self.workload_file)
        w = registry.get(self.workload)
        for v in self.variants:
            w.variant(v)
        if self.size is not None:
            self.size = parse_size(self.size)
        if self.dtype not in registry.DTYPES:
            raise UsageError(f"--dtype {self.dtype!r} unknown; valid: {', '.join(registry.DTYPES)}")
        if self.dtype not in w.dtypes:
            raise UsageError(f"workload {w.name} supports --dtype {', '.join(w.dtypes)}, not {self.dtype}")
        if self.device not in DEVICES:
            raise UsageError(f"--device {self.device!r} unknown; valid: {', '.join(DEVICES)}")
        for name in ("iters", "warmup"):
            v = getattr(self, name)
            if v is not None and (v < (1 if name == "iters" else 0)):
                raise UsageError(f"--{name} must be {'>= 1' if name == 'iters' else '>= 0'}, not {v}")
        if not 0 <= self.gpu_sleep_us <= 10_000:
            raise UsageError(f"--gpu-sleep must be between 0 and 10000 us, not {self.gpu_sleep_us:g}")
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError(f"--timeout must be positive, not {self.timeout}")
        for m in self.ncu_metrics:
            if not re.fullmatch(r"[A-Za-z0-9_.:@]+", m):
                raise UsageError(f"--metrics {m!r} is not a metric name (letters, digits, _ . : only); "
                                 "list them with `ncu --query-metrics`")
        for s in self.ncu_sections + ([self.ncu_set] if self.ncu_set else []):
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", s):
                raise UsageError(f"section/set {s!r} is not a name; list them with `ncu --list-sections` / `--list-sets`")
        return self

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("out", "root"):
            d[k] = str(d[k]) if d[k] is not None else None
        return d
