"""A --size value, as the orchestrator checks it and the runner reads it: a number of elements
('1e8', '100000000') or a shape ('10000x10000')."""

from __future__ import annotations

import math

from workloads.errors import UsageError


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
            raise UsageError(
                f"--size {text!r} is not a positive integer (1e8, 100000000) or a shape (10000x10000)"
            )
        dims.append(int(f))
    return "x".join(str(d) for d in dims)


def parse_shape(text: str) -> tuple[int, ...]:
    """'10000x10000' -> (10000, 10000); '1e8' -> (100000000,); positive integers only."""
    try:
        return tuple(int(d) for d in parse_size(text).split("x"))
    except UsageError as exc:
        raise ValueError(exc.message) from None
