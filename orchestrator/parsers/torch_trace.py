"""torch.profiler Chrome-trace JSON -> per-variant kernels, GPU time and CPU time.

Pure: reads a file, returns DataFrames; never imports torch. Kernels are attributed through
the CUDA runtime call that launched them (same `correlation`), and that call's host timestamp
decides the variant range (`record_function("variant:<name>")`) and the iteration
(`record_function("iter")`) it belongs to, on the same thread: never by GPU timestamps, since
the GPU runs behind the CPU.

A trace without `variant:` annotations (a user's own torch.profiler trace) is grouped by its
top-level operators instead (aten::mean, aten::square, ...), so any trace can be read.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers import compressed
from orchestrator.parsers.range_nesting import innermost_containing as _innermost_containing
from workloads.nvtx_ranges import RANGE_PREFIX

try:  # optional: a faster JSON parser; the standard library's gives the same result
    import orjson as _orjson
except ImportError:
    _orjson = None

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
# the categories whose events the report reads (GPU work, its launch calls, the ranges): an event
# of these without a duration, or with a name that is not text, is damage; other events are
# read as they are (a trace from elsewhere may hold anything there)
READ_CATS = frozenset(GPU_CATS + RUNTIME_CATS + ("user_annotation", "cpu_op"))
CLOCK_SKEW_NS = 1_000_000  # 1 ms: far above any host/GPU clock skew Kineto leaves
EVENT_COLUMNS = ["cat", "name", "pid", "tid", "start_ns", "end_ns", "correlation"]


@dataclass
class TorchTrace:
    """A read Chrome trace: its complete events as a frame (see read_trace), the devices'
    properties and the trace's other top-level fields (`meta`)."""

    path: Path
    events: pd.DataFrame  # complete ('X') events, ns, sorted by start
    device_properties: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)


def read_trace(path: str | Path) -> TorchTrace:
    """Read a Chrome trace written by torch.profiler's export_chrome_trace.

    `events` holds the complete ('X') events: cat, name, pid and tid (as strings), start_ns
    and end_ns (the microsecond timestamps rounded to integer ns), correlation (-1 if none).
    `trace.json.xz` and `.gz` are read the same. A 200 MiB trace (850,000 events) reads in
    about 5 s on 2 cores, peaking at 1.1 GiB (1.6 GiB
    where orjson parses it): see docs/torch-trace-parse-benchmark.md.

    Example:
        >>> trace = read_trace("tests/fixtures/runs/h200/torch-trace-square/trace.json")
        >>> trace.events.groupby("cat").size()
    """
    path = Path(path)
    if compressed.is_compressed(path):  # trace.json.xz / .gz: decompressed in memory
        raw = compressed.read_bytes(path)
    else:
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            raise ParseError(path, "no such file") from None
        except OSError as exc:
            raise ParseError(
                path,
                f"not a JSON Chrome trace ({exc})",
                hint="the profiler may have been stopped before it finished writing",
            ) from exc
    # The parse creates millions of Python objects, none of them in a cycle: the cyclic GC
    # would walk the growing heap again and again (half the time of a 200 MiB trace) and free
    # nothing.
    with gc_paused():
        data = _loads(path, raw)
        del raw
        if isinstance(data, list):  # the bare-array form of the Chrome trace format
            data = {"traceEvents": data}
        if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
            raise ParseError(path, "no 'traceEvents' list: not a torch.profiler Chrome trace")
        columns = _complete_events(path, data["traceEvents"])
        meta = {k: v for k, v in data.items() if k != "traceEvents"}
        device_properties = data.get("deviceProperties") or []
        del data  # the event dicts: the frame below holds all we keep of them
    # no events: the columns take the dtypes an empty list of rows gives them
    ev = pd.DataFrame(columns if len(columns["start_ns"]) else [], columns=EVENT_COLUMNS)
    # microseconds with a fractional part -> integer ns
    for col in ("start_ns", "end_ns"):
        ev[col] = np.rint(ev[col].to_numpy(dtype="float64") * 1000.0).astype("int64")
    ev["correlation"] = pd.to_numeric(ev["correlation"], errors="coerce").fillna(-1).astype("int64")
    ev = ev.sort_values("start_ns", kind="stable").reset_index(drop=True)
    return TorchTrace(path, ev, device_properties, meta)


def _loads(path: Path, raw: bytes) -> object:
    """Parse JSON bytes: with orjson where it is installed (it parses Kineto's output about 1.8x
    as fast as json, which makes the whole read 5-20% faster for ~35% more peak memory), else,
    or where orjson refuses what json accepts (NaN, Infinity, integers over 64 bits, UTF-16,
    lone surrogates), with the standard library, whose error is the one reported."""
    if _orjson is not None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParseError(
            path,
            f"not a JSON Chrome trace ({exc})",
            hint="the profiler may have been stopped before it finished writing",
        ) from exc


def _is_number(v) -> bool:
    return type(v) in (int, float)  # bool is an int subclass, and not a duration


def _complete_events(path: Path, events: list) -> dict[str, object]:
    """The EVENT_COLUMNS of the complete ('X') events with a timestamp, in file order, one
    list comprehension a column (no tuple per event); start_ns and end_ns still in us."""
    x = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    no_args: dict = {}
    try:  # float() of each, as Python would: ints, floats and numeric strings
        ts = np.fromiter(map(float, [e["ts"] for e in x]), dtype=np.float64, count=len(x))
        dur = np.fromiter(map(float, [e.get("dur", 0.0) for e in x]), dtype=np.float64, count=len(x))
    except (TypeError, ValueError) as exc:
        raise ParseError(path, f"an event's ts or dur is not a number ({exc})") from exc
    # a complete event always has a duration in torch.profiler's traces (Chrome's format requires
    # one): one without is damage, not 0 ns (a kernel's moved a median; a launch call's, found by
    # the fuzz at event 472, moved the launch CPU time)
    read = [isinstance(e.get("cat"), str) and e["cat"] in READ_CATS for e in x]  # a list as cat is damage too
    lost = next((i for i, e in enumerate(x) if "dur" not in e and read[i]), None)
    if lost is not None:
        kind = "GPU event" if x[lost].get("cat") in GPU_CATS else "event"
        raise ParseError(path, f"{kind} {lost} ({x[lost].get('name', '')!r}) has no duration")
    # torch.profiler writes ts and dur as JSON numbers: text or a bool in an event that is read is
    # damage (the fuzz turned the dur of event 706 into the text "1.0": a number moved, exit 0),
    # not a number to convert
    bad = next(
        (i for i, e in enumerate(x) if read[i] and not (_is_number(e["ts"]) and _is_number(e.get("dur", 0)))),
        None,
    )
    if bad is not None:
        raise ParseError(
            path,
            f"the ts or dur of complete event {bad} ({x[bad].get('name', '')!r}) is not a "
            f"JSON number ({x[bad]['ts']!r}, {x[bad].get('dur')!r})",
        )
    # pid and tid place an event on its thread (ranges contain the launches and ops of their own
    # tid): torch.profiler writes both on every complete event, as ints or text. One missing, or of
    # another type (null, a bool, a float would read as another thread), is damage, not a thread of
    # its own (the fuzz deleted the tid of torch_mean's range: the variant lost every kernel, exit 0)
    bad = next(
        (
            i
            for i, e in enumerate(x)
            if read[i] and not (type(e.get("pid")) in (int, str) and type(e.get("tid")) in (int, str))
        ),
        None,
    )
    if bad is not None:
        raise ParseError(
            path,
            f"complete event {bad} ({x[bad].get('name', '')!r}) has no pid or tid of its own "
            f"(pid {x[bad].get('pid')!r}, tid {x[bad].get('tid')!r})",
        )
    # "args": null is a trace with no args for that event (read as before); a list or a string is damage
    bad = next((i for i, e in enumerate(x) if not isinstance(e.get("args") or no_args, dict)), None)
    if bad is not None:
        raise ParseError(path, f"the args of complete event {bad} are not a JSON object")
    # names are matched as text (variant:, iter, kernels): a number or null there is damage, and so
    # is none at all (torch.profiler names every event; the fuzz deleted a kernel's: a kernel named
    # "" joined the variant's kernels, exit 0)
    bad = next((i for i, e in enumerate(x) if read[i] and not isinstance(e.get("name"), str)), None)
    if bad is not None:
        what = (
            "has no name" if "name" not in x[bad] else f"has a name that is not a string ({x[bad]['name']!r})"
        )
        raise ParseError(path, f"complete event {bad} {what}")
    return {
        "cat": [e.get("cat", "") for e in x],
        "name": [e.get("name", "") for e in x],
        "pid": [str(e.get("pid", "")) for e in x],
        "tid": [str(e.get("tid", "")) for e in x],
        "start_ns": ts,
        "end_ns": ts + dur,
        "correlation": [(e.get("args") or no_args).get("correlation", -1) for e in x],
    }


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _containing(points: pd.DataFrame, ranges: pd.DataFrame, label: str) -> pd.Series:
    """For each point (tid, t), the `label` of the latest-starting range on the same tid that
    contains t (the innermost where ranges nest); None where none does."""
    out = np.full(len(points), None, dtype=object)
    if len(points) and len(ranges):
        hit = _innermost_containing(
            ranges["tid"].to_numpy(dtype=object),
            ranges["start_ns"].to_numpy(dtype=np.int64),
            ranges["end_ns"].to_numpy(dtype=np.int64),
            points["tid"].to_numpy(dtype=object),
            points["t"].to_numpy(dtype=np.int64),
        )
        out[hit >= 0] = ranges[label].to_numpy(dtype=object)[hit[hit >= 0]]
    return pd.Series(out, index=points.index, dtype="object")


def attribute(trace: TorchTrace, prefix: str = RANGE_PREFIX, iter_label: str = "iter") -> pd.DataFrame:
    """One row per GPU activity (kernel, memcpy, memset) with its variant and iteration.

    Columns: kind, kernel, start_ns, end_ns, duration_ns, correlation, tid, launch_ns (the
    runtime call's duration), variant (None outside every range), iteration (0-based, or -1).
    """
    ev = trace.events
    gpu = ev[ev["cat"].isin(GPU_CATS)].copy()
    rt = ev[ev["cat"].isin(RUNTIME_CATS) & (ev["correlation"] >= 0)]
    rt = rt.drop_duplicates("correlation", keep="first").set_index("correlation")
    gpu["tid"] = gpu["correlation"].map(rt["tid"])
    gpu["t"] = gpu["correlation"].map(rt["start_ns"])
    gpu["launch_ns"] = gpu["correlation"].map(rt["end_ns"] - rt["start_ns"])
    # GPU work cannot start before the call that launched it; Kineto puts both on the host's
    # clock, so beyond a skew of CLOCK_SKEW_NS such a pair is a damaged timestamp
    early = gpu["t"].notna() & (gpu["start_ns"] < gpu["t"] - CLOCK_SKEW_NS)
    if early.any():
        bad = gpu[early].iloc[0]
        raise ParseError(
            trace.path,
            f"{int(early.sum())} GPU activities start before the CUDA call that launched "
            f"them (the first: {bad['name']!r}, correlation {int(bad['correlation'])}, "
            f"{(bad['t'] - bad['start_ns']) / 1e3:.0f} us early): a damaged timestamp",
        )
    ranges, iters = variant_ranges(trace, prefix, iter_label)
    has = gpu["t"].notna()
    gpu["variant"] = None
    gpu["iteration"] = -1
    if has.any():
        pts = gpu.loc[has, ["tid", "t"]].astype({"t": "int64"})
        gpu.loc[has, "variant"] = _containing(pts, ranges, "variant")
        it = _containing(pts, iters, "iteration")
        gpu.loc[has, "iteration"] = pd.to_numeric(it, errors="coerce").fillna(-1).astype("int64")
    gpu["kind"] = gpu["cat"].map({"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"})
    gpu["duration_ns"] = gpu["end_ns"] - gpu["start_ns"]
    gpu = gpu.rename(columns={"name": "kernel"})
    return gpu[
        [
            "kind",
            "kernel",
            "start_ns",
            "end_ns",
            "duration_ns",
            "correlation",
            "tid",
            "launch_ns",
            "variant",
            "iteration",
        ]
    ].reset_index(drop=True)


def variant_ranges(
    trace: TorchTrace, prefix: str = RANGE_PREFIX, iter_label: str = "iter"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(variant ranges, iteration ranges) from record_function annotations.

    Without any `prefix` annotation, top-level CPU operators stand in as ranges, named by the
    operator (the grouping a trace of plain user code can give)."""
    ev = trace.events
    ann = ev[ev["cat"] == "user_annotation"]
    var = ann[ann["name"].str.startswith(prefix)].copy()
    if var.empty:
        var = _top_level_ops(ev)
        var["variant"] = var["name"]
    else:
        var["variant"] = var["name"].str.slice(len(prefix))
    var = var[["tid", "start_ns", "end_ns", "variant"]].reset_index(drop=True)
    it = ann[ann["name"] == iter_label].copy()
    if not it.empty and not var.empty:
        pts = it[["tid"]].assign(t=it["start_ns"])
        it["variant"] = _containing(pts, var, "variant")
        it = it.dropna(subset=["variant"]).sort_values("start_ns", kind="stable")
        it["iteration"] = it.groupby("variant").cumcount()
    else:
        it = it.assign(variant=pd.Series(dtype="object"), iteration=pd.Series(dtype="int64"))
    return var, it[["tid", "start_ns", "end_ns", "variant", "iteration"]].reset_index(drop=True)


def _top_level_ops(ev: pd.DataFrame) -> pd.DataFrame:
    ops = ev[ev["cat"] == "cpu_op"].sort_values(["tid", "start_ns", "end_ns"], ascending=[True, True, False])
    prev_end = ops.groupby("tid")["end_ns"].transform(lambda s: s.cummax().shift(1, fill_value=-1))
    return ops[ops["start_ns"] >= prev_end].copy()


def cpu_time(trace: TorchTrace, ranges: pd.DataFrame, iters: pd.DataFrame) -> pd.DataFrame:
    """Per variant: host wall time of each iteration, and the self CPU time of its operators.

    Self CPU time of an operator = its duration minus its direct children's, the quantity
    torch's key_averages() calls 'Self CPU'."""
    ev = trace.events
    ops = ev[ev["cat"].isin(("cpu_op",) + RUNTIME_CATS)].copy()
    ops = ops.sort_values(["tid", "start_ns", "end_ns"], ascending=[True, True, False]).reset_index(drop=True)
    ops["self_ns"] = ops["end_ns"] - ops["start_ns"]
    # subtract each event's duration from its parent's (the nearest enclosing one on the tid)
    stack: list[int] = []
    tids = ops["tid"].to_numpy()
    starts, ends = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    self_ns = ops["self_ns"].to_numpy().copy()
    prev_tid = None
    for i in range(len(ops)):
        if tids[i] != prev_tid:
            stack.clear()
            prev_tid = tids[i]
        while stack and ends[stack[-1]] <= starts[i]:
            stack.pop()
        if stack:
            self_ns[stack[-1]] -= ends[i] - starts[i]
        stack.append(i)
    ops["self_ns"] = self_ns
    ops["variant"] = _containing(ops.assign(t=ops["start_ns"]), ranges, "variant")
    self_cpu = ops.dropna(subset=["variant"]).groupby("variant")["self_ns"].sum()
    per_iter = iters.assign(wall_ns=iters["end_ns"] - iters["start_ns"])
    return per_iter, self_cpu


def summarize(
    trace: TorchTrace, prefix: str = RANGE_PREFIX, iter_label: str = "iter"
) -> dict[str, pd.DataFrame]:
    """Everything the report needs from one trace: attributed GPU activity, per-iteration
    GPU and host time, self CPU time per variant, the ranges themselves."""
    ranges, iters = variant_ranges(trace, prefix, iter_label)
    gpu = attribute(trace, prefix, iter_label)
    per_iter, self_cpu = cpu_time(trace, ranges, iters)
    inside = gpu.dropna(subset=["variant"])
    gpu_iter = (
        inside[inside["iteration"] >= 0]
        .groupby(["variant", "iteration"])["duration_ns"]
        .sum()
        .rename("gpu_ns")
        .reset_index()
    )
    return {
        "ranges": ranges,
        "iterations": per_iter,
        "gpu": gpu,
        "gpu_per_iteration": gpu_iter,
        "self_cpu_ns": self_cpu.rename("self_cpu_ns").reset_index(),
    }
