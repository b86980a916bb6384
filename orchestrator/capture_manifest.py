"""The synthetic workload.json of a capture: one variant per NVTX range name (an nsys export) or
per record_function range name (a torch.profiler trace), so that `report`, `compare` and the
HTML report read an imported or exec'd run as any other."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from orchestrator.capture_ranges import RangeFilter, held_ranges, nesting, unclosed
from orchestrator.capture_request import BACKEND, SQLITE, ProgramRequest
from orchestrator.errors import (
    GprofError,
    InterruptedRunError,
    ParseError,
    ToolTimeoutError,
    UsageError,
)
from orchestrator.parsers import compressed
from orchestrator.parsers import nsys as ns
from orchestrator.parsers import torch_trace as tt
from orchestrator.runfolder import WORKLOAD_MANIFEST, write_json
from workloads.manifest import SCHEMA_VERSION as WORKLOAD_SCHEMA
from workloads.nvtx_ranges import RANGE_PREFIX

TRACE = "trace.json"


def _first_value(sqlite: Path, export, table: str, column: str) -> Any:
    """`column` of the first row of one of the export's small tables, read-only; None where the
    export has no such table or it cannot be read."""
    if table not in export.tables:
        return None
    try:
        with closing(sqlite3.connect(f"{sqlite.resolve().as_uri()}?mode=ro", uri=True)) as con:
            row = con.execute(f"SELECT {column} FROM {table} LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def capture_device(sqlite: Path, export) -> tuple[str, str]:
    """("cuda", GPU name) when the capture traced GPU work, else ("cpu", "")."""
    gpu = bool(len(export.kernels) or len(export.memcpy) or len(export.memset))
    name = _first_value(sqlite, export, "TARGET_INFO_GPU", "name")
    return ("cuda" if gpu else "cpu"), str(name) if name else ""


def session_end(sqlite: Path, export) -> int | None:
    """The capture's end on its own clock (ANALYSIS_DETAILS.duration), where nsys ends the
    push/pop ranges still open when the program was stopped; None where the export has none."""
    end = _first_value(sqlite, export, "ANALYSIS_DETAILS", "duration")
    return end if isinstance(end, int) else None


def workload_manifest(
    export,
    sqlite: Path,
    filt: RangeFilter,
    *,
    name: str,
    source: str,
    iters_per_range: int = 1,
    borrowed: dict[str, Any] | None = None,
    compare_ranges: bool = False,
    attribute: str | None = None,
) -> dict[str, Any]:
    """The synthetic workload.json of a capture: one variant (status ok) per range name the
    filter takes, in order of first appearance, with its range count and iterations; one that
    holds other selected ranges names them (`holds`: see nesting()). The baseline is the first
    variant that holds none, where the ranges are alternatives (capture_baseline); else None.
    `attribute`: how a launch is given to a range (nsys.ATTRIBUTIONS; None: nsys.WINDOW),
    recorded so that the folder's report is rebuilt the same way.

    Raises ParseError (exit 4) when no range matches, naming the ranges the capture holds."""
    ranges = filt.select(export)
    if ranges.empty:
        held = held_ranges(export)
        raise ParseError(
            source,
            f"no NVTX range matches {filt.spec}",
            hint=held + ("; choose them with --ranges DOMAIN@PREFIX" if held.startswith("it holds") else ""),
        )
    counts = ranges.groupby("variant", sort=False).size()
    holds, cut = nesting(ranges), unclosed(export, ranges, session_end(sqlite, export))
    device, device_name = capture_device(sqlite, export)
    borrowed = borrowed or {}
    known = {v["name"]: v for v in borrowed.get("variants", []) if isinstance(v, dict) and "name" in v}
    variants = []
    for v, n in counts.items():
        b = known.get(v, {})
        variants.append(
            {
                "name": v,
                "label": b.get("label", v),
                "status": "ok",
                "bytes_moved": b.get("bytes_moved"),
                "ranges": int(n),
                "iters": int(n) * iters_per_range,
            }
        )
        if v in holds:  # reported with its nested ranges' activity included, never as the baseline
            variants[-1]["holds"] = holds[v]
        if v in cut:  # its time holds the rest of the capture: the finished run says why (capture.py)
            variants[-1].update(
                unclosed=int(cut[v]),
                reason=(f"{cut[v]} of its {n} instance(s) never closed: timed to the end of the capture"),
            )
    iters = {v["iters"] for v in variants}
    env = dict(borrowed.get("env") or {})
    env.setdefault("device", device)
    if device_name:
        env.setdefault("device_name", device_name)
    flat = [v["name"] for v in variants if v["name"] not in holds]
    baseline = capture_baseline(flat, variants[0]["name"], borrowed, compare_ranges)
    return capture_workload(
        name,
        description=f"NVTX ranges ({filt.spec}) of {source}",
        baseline=baseline,
        compare_ranges=compare_ranges,
        borrowed=borrowed,
        device=device,
        iters=iters.pop() if len(iters) == 1 else None,
        nvtx=filt.to_json(),
        env=env,
        variants=variants,
        iters_per_range=iters_per_range,
        attribute=attribute or ns.WINDOW,
    )


def capture_workload(
    name: str,
    *,
    description: str,
    baseline: str | None,
    compare_ranges: bool,
    borrowed: dict[str, Any],
    device: str,
    iters: int | None,
    nvtx: dict[str, Any],
    env: dict[str, Any],
    variants: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    """The synthetic workload.json of a capture (an nsys export's or a torch trace's, manifest();
    an ncu report's, backends/program_ncu.py): its ranges as variants, the shape, numel and dtype
    lent by the run folder it sits in (`borrowed`, else none), `extra` keys after `iters`."""
    return {
        "schema_version": WORKLOAD_SCHEMA,
        "workload": name,
        "workload_source": "capture",
        "description": description,
        "baseline": baseline,
        "compare_ranges": compare_ranges,
        "mode": "capture",
        "shape": borrowed.get("shape") or [],
        "numel": borrowed.get("numel"),
        "dtype": borrowed.get("dtype") or "",
        "device": device,
        "iters": iters,
        **extra,
        "nvtx": {**nvtx, "api": "capture"},
        "env": env,
        "status": "ok",
        "variants": variants,
    }


def capture_baseline(
    flat: list[str], first: str, borrowed: dict[str, Any], compare_ranges: bool
) -> str | None:
    """The baseline of a capture's variants, or None: a program's ranges are its parts (a step, its
    forward, its reduction), not alternatives, so no speedup is set between them unless the user
    says they are (`--compare-ranges`) or the capture is a gprof-orch run's own, whose variants are."""
    if not compare_ranges and not (
        borrowed.get("baseline")
        and (borrowed.get("nvtx") or {}).get("api") != "capture"
        and borrowed.get("workload_source") != "capture"
    ):
        return None
    return borrowed.get("baseline") if borrowed.get("baseline") in flat else (flat or [first])[0]


def sibling_workload(path: Path) -> dict[str, Any] | None:
    """The workload.json of the gprof-orch run folder a capture sits in, if it does."""
    folder = path.parent
    if not (folder / "manifest.json").is_file() or not (folder / "workload.json").is_file():
        return None
    try:
        data = json.loads((folder / "workload.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def trace_prefix(spec: str | None, borrowed: dict[str, Any] | None = None) -> str:
    """The record_function prefix `--ranges` names for a torch.profiler trace: PREFIX alone (a
    trace has no NVTX domains); by default the project's own `variant:`."""
    if spec is None:
        return ((borrowed or {}).get("ranges") or {}).get("prefix", RANGE_PREFIX)
    if "@" in spec:
        raise UsageError(
            f"--ranges {spec!r}: a torch.profiler trace has no NVTX domains; give the record_function "
            f"name's PREFIX alone (--ranges {spec.split('@', 1)[1] or 'PREFIX'!r})"
        )
    return spec


def trace_manifest(
    trace,
    prefix: str,
    *,
    name: str,
    source: str,
    borrowed: dict[str, Any] | None = None,
    compare_ranges: bool = False,
) -> dict[str, Any]:
    """The synthetic workload.json of a torch.profiler trace: one variant per record_function
    range name starting with `prefix` (the name after it), in order of first appearance; its
    iterations are the `iter` ranges inside it (gprof-orch's own traces), else its instances.
    Nested ranges are marked as for NVTX (`holds`). A trace from a gprof-orch run folder keeps
    that run's labels, bytes, shape and environment.

    Raises ParseError (exit 4) when no range matches, naming the ranges the trace holds."""
    ev = trace.events
    ann = ev[ev["cat"] == "user_annotation"]
    if not ann["name"].str.startswith(prefix).any():
        counts = ann.groupby("name", sort=False).size().sort_values(ascending=False, kind="stable")
        held = ", ".join(f"{n} x{c}" for n, c in counts.head(25).items()) + (
            f", and {len(counts) - 25} more" if len(counts) > 25 else ""
        )
        raise ParseError(
            source,
            f"no record_function range starts with {prefix!r}",
            hint=(
                f"it holds (name xcount): {held}; choose them with --ranges PREFIX"
                if held
                else "it holds no record_function range at all (torch.profiler.record_function)"
            ),
        )
    ranges, iters = tt.variant_ranges(trace, prefix)
    holds = nesting(ranges.rename(columns={"tid": "global_tid", "start_ns": "start", "end_ns": "end"}))
    per_iter = iters.groupby("variant").size()
    counts = ranges.groupby("variant", sort=False).size()
    borrowed = borrowed or {}
    known = {v["name"]: v for v in borrowed.get("variants", []) if isinstance(v, dict) and "name" in v}
    variants = []
    for v, n in counts.items():
        b = known.get(v, {})
        variants.append(
            {
                "name": v,
                "label": b.get("label", v),
                "status": "ok",
                "bytes_moved": b.get("bytes_moved"),
                "ranges": int(n),
                "iters": int(per_iter.get(v, n)),
            }
        )
        if v in holds:
            variants[-1]["holds"] = holds[v]
    device = "cuda" if ev["cat"].isin(tt.GPU_CATS).any() else "cpu"
    env = dict(borrowed.get("env") or {})
    env.setdefault("device", device)
    gpu_name = next(
        (d.get("name") for d in trace.device_properties if isinstance(d, dict) and d.get("name")), None
    )
    if gpu_name:
        env.setdefault("device_name", gpu_name)
    flat = [v["name"] for v in variants if v["name"] not in holds]
    baseline = capture_baseline(flat, variants[0]["name"], borrowed, compare_ranges)
    n_iters = {v["iters"] for v in variants}
    return {
        "schema_version": WORKLOAD_SCHEMA,
        "workload": name,
        "workload_source": "capture",
        "description": f"record_function ranges ({prefix}*) of {source}",
        "baseline": baseline,
        "compare_ranges": compare_ranges,
        "mode": "capture",
        "shape": borrowed.get("shape") or [],
        "numel": borrowed.get("numel"),
        "dtype": borrowed.get("dtype") or "",
        "device": device,
        "iters": n_iters.pop() if len(n_iters) == 1 else None,
        "ranges": {"prefix": prefix, "api": "record_function"},
        "trace": TRACE,
        "env": env,
        "status": "ok",
        "variants": variants,
    }


# nsys 2024.2.3 writes a range only once it ends (2023.4.4 ended an open push/pop range at the stop)
OPEN_AT_STOP = (
    "the program was stopped: a range still open then is in the capture only where this nsys ends it "
    "at the stop (2023.4.4 does, 2024.2.3 records a range only once it ends)"
)


def stopped_inside(wman: dict[str, Any], error: GprofError | None) -> bool:
    """A range the program was inside when the run was stopped (--timeout, Ctrl-C) is timed to
    the stop, not to its end: its variant is `timed out` or `interrupted`, as a built-in run's.
    True when the run was stopped and the capture holds no such range (it may have dropped it)."""
    stop = (
        "timed out"
        if isinstance(error, ToolTimeoutError)
        else "interrupted"
        if isinstance(error, InterruptedRunError)
        else None
    )
    for v in wman.get("variants", []):
        if stop and v.get("unclosed"):
            v["status"] = stop
    return stop is not None and not any(v.get("unclosed") for v in wman.get("variants", []))


def write_workload(rf) -> None:
    """The workload.json of a folder whose run stopped before it was written (during `nsys
    export`), once the export is made (`gprof-orch report`): the ranges the run's request picks,
    as capture_finish.capture_report() would have written them."""

    asked = rf.manifest.get("request") or {}
    req = ProgramRequest.from_record(asked)
    src = Path(req.capture) if req.capture else None
    borrowed = sibling_workload(src) if src is not None and src.is_file() else None
    with compressed.plain_file(compressed.locate(rf.path / SQLITE)) as plain:
        wman = workload_manifest(
            ns.read_export(plain, lean=True),
            plain,
            req.filter,
            name=req.workload_name(),
            source=req.capture or " ".join(req.argv),
            iters_per_range=req.iters or 1,
            borrowed=borrowed,
            compare_ranges=req.compare_ranges,
            attribute=(req.options or {}).get("attribute"),
        )
    if rf.manifest.get("status") == "interrupted":
        stopped_inside(wman, InterruptedRunError("interrupted"))
    write_json(rf.path / WORKLOAD_MANIFEST, wman, indent=1)


def record_attribute(rf, attribute: str) -> None:
    """`report --attribute`: the folder's workload.json records `attribute` (nsys.ATTRIBUTIONS)
    as how its launches go to ranges, so that this report and every later one are rebuilt by it.
    Raises UsageError for a folder that is not an nsys capture's (`exec nsys`, `import`), or one
    that cannot be written."""
    if attribute not in ns.ATTRIBUTIONS:
        raise UsageError(f"--attribute {attribute!r}: one of {', '.join(ns.ATTRIBUTIONS)}")
    wman = rf.workload_manifest()
    if rf.manifest.get("backend") != BACKEND or (wman.get("nvtx") or {}).get("api") != "capture":
        raise UsageError(
            f"--attribute: {rf.path} is not an nsys capture's folder (`exec nsys`, `import` of an "
            "nsys capture); the other runs attribute each launch to a range of its own thread"
        )
    if wman.get("attribute") == attribute:
        return
    if not rf.writable():
        raise UsageError(
            f"--attribute: {rf.path} is read-only, and the choice is recorded in its workload.json",
            hint=f"import its export into a new folder: gprof-orch import {rf.path / SQLITE} --attribute "
            f"{attribute}",
        )
    write_json(rf.path / WORKLOAD_MANIFEST, {**wman, "attribute": attribute}, indent=1)
