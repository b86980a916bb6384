"""A workload.json read back: the shape the reports rely on checked (problem), and one its
runner never ended closed (close_unsaved). The runner writes it (workloads/runner.py); a
malformed one is damage, read as a ParseError by RunFolder.workload_manifest."""

from __future__ import annotations

import math
from typing import Any

from reports.schema import NOT_SAVED
from workloads.manifest import SCHEMA_VERSION as WORKLOAD_SCHEMA


def close_unsaved(data: dict[str, Any]) -> None:
    """A workload.json its runner never ended (it could not write it again, or was killed): the
    variant it was measuring has no saved result, those it never reached did not run."""
    for v in data["variants"]:
        if v.get("status") == "measuring":
            v.update(
                status=NOT_SAVED,
                reason="its result was not saved: the runner stopped while measuring it, "
                "before workload.json was written again",
            )
        elif v.get("status") == "pending":
            v.update(status="skipped", reason="not run: the run stopped before it")


def _is_number(x: Any, none: bool = False) -> bool:
    return (x is None and none) or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _variant_problem(v: dict[str, Any]) -> str | None:
    """What is wrong with the fields of one variant that the reports read, or None."""
    for key in ("status", "label"):  # the runner writes both from the start (status "pending")
        if not isinstance(v.get(key), str):
            return f'"{key}" is missing or not a string'
    for key in ("status", "label", "reason", "error"):
        if v.get(key) is not None and not isinstance(v[key], str):
            return f'"{key}" is {type(v[key]).__name__}, not a string'
    if v.get("status") == "ok" and "bytes_moved" not in v:
        return '"bytes_moved" is missing'
    moved = v.get("bytes_moved")
    if moved is not None and (type(moved) is not int or moved < 0):
        return f'"bytes_moved" is {moved!r}, not a count of bytes'
    work = v.get("flops")  # a workload's declared FLOPs of one call (workloads/declared_work.py)
    if work is not None and (type(work) is not int or work < 0):
        return f'"flops" is {work!r}, not a count of FLOPs'
    if v.get("flop_unit") is not None and not isinstance(v["flop_unit"], str):
        return f'"flop_unit" is {type(v["flop_unit"]).__name__}, not a string'
    for key in ("time_samples_ns", "cpu_samples_ns"):
        samples = v.get(key)
        if key in v and (not isinstance(samples, list) or not all(map(_is_duration, samples))):
            return f'"{key}" is not a list of durations (finite numbers >= 0)'
    return None


def _is_duration(x: Any) -> bool:
    # a time is never negative nor NaN: such a sample is damage, never a median to print
    return _is_number(x) and math.isfinite(x) and x >= 0


def problem(data: Any) -> str | None:
    """What is wrong with the shape of a workload.json that the reports rely on, or None."""
    if not isinstance(data, dict):
        return f"not a JSON object but {type(data).__name__}"
    variants = data.get("variants")
    if not isinstance(variants, list) or not variants:
        return (
            f'"variants" is {type(variants).__name__ if variants != [] else "empty"}, not a list of variants'
        )
    # the speedups are over the baseline (a capture's ranges have none unless they are alternatives:
    # capture_manifest.capture_baseline); the device decides GPU time or host wall time
    for key in ("workload", "baseline", "device"):
        if not isinstance(data.get(key), str) and not (
            key == "baseline" and data.get("mode") == "capture" and data.get(key) is None
        ):
            return f'"{key}" is missing or not a string'
    if "iters" not in data:
        return '"iters" is missing'
    version = data.get("schema_version", WORKLOAD_SCHEMA)
    if type(version) is not int or version > WORKLOAD_SCHEMA:
        return (
            f'"schema_version" is {version!r}: written by a newer gprof-orch '
            f"(this one reads up to {WORKLOAD_SCHEMA})"
        )
    for i, v in enumerate(variants):
        if not isinstance(v, dict) or not isinstance(v.get("name"), str):
            return f'"variants"[{i}] is not an object with a "name" string'
        problem = _variant_problem(v)
        if problem:
            return f'"variants"[{i}] ({v["name"]}): {problem}'
    for key in ("baseline", "device", "dtype", "trace"):
        if data.get(key) is not None and not isinstance(data[key], str):
            return f'"{key}" is {type(data[key]).__name__}, not a string'
    if not _is_number(data.get("numel"), none=True):
        return f'"numel" is {data["numel"]!r}, not a number'
    env, nvtx = data.get("env") or {}, data.get("nvtx") or {}
    peak = env.get("peak_bandwidth_bytes_per_s") if isinstance(env, dict) else None
    if peak is not None and not (_is_number(peak) and 1e9 <= peak < 1e16):  # 1 GB/s to 10 PB/s
        return f'"env"/"peak_bandwidth_bytes_per_s" is {peak!r}, not a memory bandwidth in bytes/s'
    # domain None is NVTX's default domain; a prefix is always written, "" to take every range
    if isinstance(nvtx, dict) and (
        (nvtx.get("domain") is not None and not isinstance(nvtx["domain"], str))
        or ("prefix" in nvtx and not isinstance(nvtx["prefix"], str))
    ):
        return '"nvtx" has a domain or prefix that is not a string'
    for key, kind in (("shape", list), ("env", dict), ("nvtx", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            return f'"{key}" is {type(data[key]).__name__}, not {kind.__name__}'
    iters = data.get("iters")
    # null only where a stop rule set the counts, or each variant has its own (an imported capture)
    if iters is None and not data.get("stop_rule") and not all(type(v.get("iters")) is int for v in variants):
        return '"iters" is null and there is no stop rule'
    if iters is not None and (type(iters) is not int or iters < 0):
        return f'"iters" is {iters!r}, not a count'
    return None
