"""What a variant declares of its work beyond its bytes: the FLOPs one call does (the workload's
`flops`), the unit they run on (workloads/devices.py flop_unit), and, for the run's device, the
peak FLOP/s of those units and their measured compute roof (workloads/compute_roof.py).

workload.json carries them (each variant's `flops` and `flop_unit`; the env's `peak_flops`,
`flop_units`, `compute_roof`), so the report computes TFLOP/s and % of peak without importing
anything from here. A workload that declares no FLOPs adds nothing to workload.json.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from workloads.devices import FLOP_UNITS, flop_unit, peak_flops
from workloads.errors import WorkloadCodeError

if TYPE_CHECKING:
    from workloads.registry import Variant, Workload


def variant_work(workload: Workload, variant: Variant, shape: tuple[int, ...], dtype: str) -> dict[str, Any]:
    """{"flops": FLOPs of one call, "flop_unit": unit} of a variant; {} when the workload declares
    no FLOPs. A `flops` that raises or gives no count is the workload's failure (exit 1)."""
    if workload.flops is None:
        return {}
    try:
        flops = workload.flops(tuple(shape), dtype)
    except Exception as exc:
        raise WorkloadCodeError(
            f"workload {workload.name}: its flops raised {type(exc).__name__}: {exc}"
        ) from exc
    if (
        isinstance(flops, bool)
        or not isinstance(flops, (int, float))
        or not math.isfinite(flops)
        or flops < 0
    ):
        raise WorkloadCodeError(
            f"workload {workload.name}: its flops gave {flops!r} for shape {tuple(shape)}, not a count >= 0"
        )
    return {"flops": int(round(flops)), "flop_unit": flop_unit(dtype, variant.math)}


def device_compute(env: dict[str, Any], units: list[str], *, measure: bool) -> dict[str, Any]:
    """The env's compute side for the units the run's variants count FLOPs in: the device's peak
    FLOP/s per unit and its source, every unit's name, and (with `measure`, on CUDA) the measured
    compute roof. {} when no variant declares FLOPs."""
    if not units:
        return {}
    out: dict[str, Any] = {"flop_units": dict(FLOP_UNITS)}
    if env.get("device") != "cuda":
        out.update(peak_flops={}, peak_flops_source="no peak FLOP/s for a CPU run")
        return out
    peaks, source = peak_flops(str(env.get("device_name") or ""))
    out.update(peak_flops={u: peaks[u] for u in units if u in peaks}, peak_flops_source=source)
    if measure:
        import torch

        # why lazy: it imports torch, only a measured roof needs it
        from workloads import compute_roof

        out["compute_roof"], out["compute_roof_source"] = compute_roof.attainable(
            torch, torch.cuda.current_device(), units
        )
    return out
