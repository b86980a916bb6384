"""The recheck: each measured variant's answer checked again once every variant was measured,
first on new values written into the very input buffer it was measured on, then on a second
buffer of new values.

Why: the warm-up check sees a variant's first call, which a cache fills. A variant that keeps
its result (a dict keyed by the input's address, shape or identity) and hands it back replays a
result in the measured calls: no GPU work, a time of a microsecond, a bandwidth above the
memory's. Its answer for the same buffer with new values is the old input's, so its error
against the new reference gives it away; the second buffer catches one keyed by shape or by a
value it reads once. Such a variant is STALE, with what was seen, and the run fails (exit 1):
its time is not the operation's.

The recheck runs outside every variant's range (the profilers count its work as outside), on
the CPU too. Where it cannot run (an input that is not one tensor, the device out of memory) it
says why in the entry's `recheck` and judges nothing.
"""

from __future__ import annotations

from typing import Any

from workloads import accuracy
from workloads.environment import sync
from workloads.manifest import Manifest
from workloads.statuses import NO_GPU_WORK, STALE

# the measured statuses a recheck judges (the others have no result to stand for)
RECHECKED = ("ok", NO_GPU_WORK)


def recheck_all(spec, workload, variants, x, entries: dict[str, dict], man: Manifest) -> None:
    """Recheck every measured variant (RECHECKED) on the same buffer with new values, then on a
    second buffer; a variant whose answer misses either reference is marked STALE."""
    import torch

    todo = [v for v in variants if entries[v.name].get("status") in RECHECKED]
    if not todo:
        return
    try:
        for place, make in (("same buffer", _rewritten), ("new buffer", _fresh)):
            inp = make(spec, workload, x)
            if isinstance(inp, str):
                for v in todo:
                    entries[v.name].setdefault("recheck", {})[place] = {"skipped": inp}
                continue
            ref = workload.reference(inp.to(torch.float64))
            for v in todo:
                entries[v.name].setdefault("recheck", {})[place] = _one(spec, workload, v, inp, ref)
            del inp, ref
    except torch.OutOfMemoryError as exc:
        for v in todo:
            entries[v.name].setdefault("recheck", {})["skipped"] = (
                f"out of memory: {str(exc).splitlines()[0]}"
            )
    for v in todo:
        _judge(entries[v.name])
    man.save()


def _rewritten(spec, workload, x) -> Any:
    """The input buffer itself, its values replaced by those of another seed (its address,
    shape and identity unchanged); a string saying why not where it is not one tensor."""
    import torch

    new = workload.make_input(spec.shape, spec.dtype, spec.device, spec.seed + 1)
    if not isinstance(x, torch.Tensor) or not isinstance(new, torch.Tensor) or new.shape != x.shape:
        return "the input is not one tensor of a fixed shape: its values cannot be rewritten in place"
    x.copy_(new)
    sync(spec.device)
    return x


def _fresh(spec, workload, x) -> Any:
    """A second input of new values, in its own buffer while the first stays allocated (so its
    address differs)."""
    return workload.make_input(spec.shape, spec.dtype, spec.device, spec.seed + 2)


def _one(spec, workload, v, inp, ref) -> dict[str, Any]:
    """One call of `v` on `inp`, its errors against `ref` and whether they pass its tolerance."""
    try:
        out = v.fn(inp)
        sync(spec.device)
        found = accuracy.errors(out, ref)
    except Exception as exc:  # a variant that cannot take a second buffer: said, not judged
        return {"skipped": f"the call raised {type(exc).__name__}: {exc}"}
    tol = workload.tolerance(v, spec.dtype)
    return {**found, "tolerance": tol, "passed": found["rel_error"] <= tol}


def _judge(e: dict[str, Any]) -> None:
    """Mark the entry STALE where a recheck it took missed its reference, saying what was seen."""
    seen = {k: r for k, r in e.get("recheck", {}).items() if isinstance(r, dict) and "passed" in r}
    missed = {k: r for k, r in seen.items() if not r["passed"]}
    if not missed:
        return
    what = "; ".join(
        f"{place}: relative error {r['rel_error']:.3g} > {r['tolerance']:.3g}" for place, r in missed.items()
    )
    e["status"] = STALE
    e["reason"] = (
        f"its result did not follow its input: after it was measured, its answer for new input values "
        f"missed their reference ({what}); it hands back a result kept from an earlier call (keyed by the "
        f"input's address, shape or identity), so its time is not the operation's"
    )
