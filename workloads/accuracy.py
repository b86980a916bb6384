"""How far a variant's result is from the float64 reference: the figures the runner's checks
(the warm-up check and the recheck, workloads/recheck.py) judge by and keep in workload.json.

    rel_error      ||out - ref||_2 / ||ref||_2: the check's figure, against the tolerance
    max_abs_error  max |out - ref|: the worst element
    max_rel_error  max |out - ref| / max |ref|: the worst element against the reference's scale

Per-element relative error is left out on purpose: a reference element near zero makes it
unbounded for a correct float32 result, and no tolerance could be set on it.
"""

from __future__ import annotations

from typing import Any

# elements per slice: the float64 temporaries stay at 128 MiB whatever the size
CHUNK = 1 << 24


def errors(out: Any, ref: Any) -> dict[str, float]:
    """rel_error, max_abs_error and max_rel_error of `out` against `ref`, in float64, where the
    reference lies (the GPU: copying a 1e8 result and its float64 reference to the host and
    reducing them there cost the default `time square` seconds), a slice at a time. A NaN in
    `out` where `ref` has none is an infinite error. Raises ValueError on a different size.

    Example:
        >>> import torch
        >>> errors(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5], dtype=torch.float64))["max_abs_error"]
        0.5
    """
    import torch

    ref = torch.as_tensor(ref).detach().reshape(-1)
    out = torch.as_tensor(out).detach().reshape(-1).to(ref.device)
    if out.shape != ref.shape:
        raise ValueError(f"result has {out.numel()} elements, the reference {ref.numel()}")
    if torch.isnan(out).any() and not torch.isnan(ref).any():
        inf = float("inf")
        return {"rel_error": inf, "max_abs_error": inf, "max_rel_error": inf}
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    num, denom, worst, scale = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    for i in range(0, ref.numel(), CHUNK):
        r = ref[i : i + CHUNK].to(torch.float64)
        d = out[i : i + CHUNK].to(torch.float64) - r
        num += d.square().sum()
        denom += r.square().sum()
        if d.numel():
            worst = torch.maximum(worst, d.abs().max())
            scale = torch.maximum(scale, r.abs().max())
    num, denom, worst, scale = float(num.sqrt()), float(denom.sqrt()), float(worst), float(scale)
    return {
        "rel_error": num / denom if denom > 0 else num,
        "max_abs_error": worst,
        "max_rel_error": worst / scale if scale > 0 else worst,
    }
