"""Anyone's program, anyone's capture: each NVTX range becomes a variant.

`import_capture(path)` builds a run folder around an existing Nsight Systems capture (a
`.nsys-rep`, or its SQLite export, `.xz`/`.gz` too); `profile_program(argv)` runs a program
under nsys and does the same with what it recorded. Either way the ranges picked by a
`RangeFilter` (`--ranges DOMAIN@PREFIX`; by default every top-level range) are the variants of
a synthetic workload.json, so `report`, `compare` and the HTML report work on the folder as on
any run. The run folder's backend is `program` (orchestrator/backends/program.py).

Ranges from the `nvtx` package (annotate as a context manager or a decorator, push/pop,
start/end) and from `torch.cuda.nvtx` (the default domain) are all NVTX ranges to nsys; which
ones nsys 2023.4.4 drops is said before the run (`nvtx_problem`).

Example:
    >>> from orchestrator import import_capture, profile_program
    >>> run = profile_program(["python", "train.py", "--steps", "50"], ranges="@step")
    >>> run.table[["variant", "samples", "time_median_us"]]
    >>> import_capture("report.nsys-rep").table        # every top-level range
"""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.errors import GprofError, InterruptedRunError, ParseError, UsageError

ANY_DOMAIN = "*"
SQLITE = "report.sqlite"
REPORT = "report.nsys-rep"
BACKEND = "program"
NSYS_SUFFIXES = (".nsys-rep", ".qdrep")
SQLITE_SUFFIXES = (".sqlite", ".sqlite.xz", ".sqlite.gz", ".db")
TRACE_SUFFIXES = (".json", ".json.gz", ".json.xz")  # torch.profiler's export_chrome_trace
TRACE = "trace.json"


# ------------------------------------------------------------------------------ which ranges

@dataclass(frozen=True)
class RangeFilter:
    """Which NVTX ranges are variants.

    `DOMAIN@PREFIX`: ranges in DOMAIN whose text starts with PREFIX, nested or not (where they
    nest, a kernel belongs to the innermost). An empty DOMAIN is the default domain (torch.cuda.nvtx,
    nvtx without `domain=`), `*` any domain; an empty PREFIX takes every range of the domain.
    `PREFIX` alone (no `@`) looks in every domain. No filter (`spec=None`): every top-level range,
    that is every range no other range on its thread encloses, in any domain.

    The variant is the text after PREFIX (the whole text where that leaves nothing); where
    ranges of several domains are taken it is `domain:text` for a named domain, as nsys's own
    reports name them.

    Example:
        >>> RangeFilter.parse("gprof@variant:")   # gprof-orch's own ranges
        >>> RangeFilter.parse("@step")            # torch.cuda.nvtx.range_push("step...")
    """

    domain: str | None = ANY_DOMAIN
    prefix: str = ""
    top_level: bool = True

    @classmethod
    def parse(cls, spec: str | None) -> "RangeFilter":
        if spec is None:
            return cls()
        if "/" in spec:
            raise UsageError(f"--ranges {spec!r}: a range name cannot hold '/' (NVTX nesting levels)")
        if "@" in spec:
            domain, prefix = spec.split("@", 1)
            return cls(domain if domain else None, prefix, False)
        return cls(ANY_DOMAIN, spec, False)

    @property
    def spec(self) -> str:
        if self.top_level and self.domain == ANY_DOMAIN and not self.prefix:
            return "top-level ranges"
        return f"{'' if self.domain is None else self.domain}@{self.prefix}"

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "prefix": self.prefix, "top_level": self.top_level, "ranges": self.spec}

    @classmethod
    def from_json(cls, nvtx: dict[str, Any]) -> "RangeFilter":
        return cls(nvtx.get("domain"), nvtx.get("prefix") or "", bool(nvtx.get("top_level", False)))

    def select(self, export) -> pd.DataFrame:
        """The export's ranges this filter takes, shaped as nsys_sqlite.variant_ranges() returns
        them (range_id 0.. in start order), for attribute_kernels(ranges=...) and summarize()."""
        from orchestrator.parsers import nsys_sqlite as ns

        every = all_ranges(export)
        sel = every["text"].str.startswith(self.prefix) if self.prefix else pd.Series(True, index=every.index)
        if self.domain is None:
            sel &= every["domain"].isna()
        elif self.domain != ANY_DOMAIN:
            sel &= (every["domain"] == self.domain).fillna(False)
        if self.top_level:
            sel &= every["top_level"]
        r = every[sel].reset_index(drop=True)
        rest = [t[len(self.prefix):] or t for t in r["text"]]  # `@step` names the range "step", not ""
        if self.domain == ANY_DOMAIN:
            rest = [f"{d}:{t}" if isinstance(d, str) else t for d, t in zip(r["domain"], rest)]
        out = r[["start", "end", "wall_ns", "global_tid", "event_type"]].copy()
        out["variant"] = pd.Series(rest, dtype=object)
        out["domain"] = r["domain"].astype(object)
        out.insert(0, "range_id", np.arange(len(out), dtype=np.int64))
        return out[ns.RANGE_COLUMNS]


def all_ranges(export) -> pd.DataFrame:
    """Every push/pop and start/end range of the export, any domain, in start order: text,
    domain (None: default), start, end (a range never closed ends at the last timestamp),
    wall_ns, global_tid, event_type, and top_level (no other range on its thread encloses it)."""
    from orchestrator.parsers import nsys_sqlite as ns

    n = export.nvtx
    domains = n.loc[n["event_type"].isin(ns.RANGE_EVENT_TYPES), "domain"]
    parts = []
    for d in [None] + sorted({x for x in domains.dropna()}):
        r = ns.variant_ranges(export, d, "")
        if len(r):
            parts.append(r.rename(columns={"variant": "text"}).drop(columns="range_id"))
    if not parts:
        cols = {"text": object, "domain": object, "start": "int64", "end": "int64", "wall_ns": "int64",
                "global_tid": "int64", "event_type": "int64", "top_level": bool}
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})
    r = pd.concat(parts, ignore_index=True)
    r = r.sort_values(["start", "end"], ascending=[True, False], kind="stable").reset_index(drop=True)
    r["top_level"] = _top_level(r["global_tid"].to_numpy(), r["start"].to_numpy(), r["end"].to_numpy())
    return r


def _top_level(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range (sorted by start, outer first on ties): whether no earlier range on its thread
    is still open over it."""
    top = np.ones(len(tid), dtype=bool)
    open_until: dict[int, int] = {}  # per thread, the end of the enclosing top-level range
    for i, (t, s, e) in enumerate(zip(tid.tolist(), start.tolist(), end.tolist())):
        until = open_until.get(t)
        if until is not None and s <= until and e <= until:
            top[i] = False
        else:
            open_until[t] = e
    return top


def nesting(ranges: pd.DataFrame) -> dict[str, list[str]]:
    """Which selected ranges hold others: per variant whose instances enclose other selected
    ranges on their thread, the variants of the ranges directly inside (in order of first
    appearance; its own name where a range nests in one of the same name). Variants that hold
    none are absent. `ranges` is RangeFilter.select()'s frame.

    Example:
        >>> nesting(RangeFilter.parse("*@").select(export))
        {'step': ['forward', 'backward', 'train:loss']}
    """
    tid = pd.factorize(ranges["global_tid"])[0]  # torch traces name threads by strings
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    variant = ranges["variant"].to_numpy(dtype=object)
    holds: dict[str, dict[str, None]] = {}
    stack: list[int] = []
    prev_tid = None
    for i in np.lexsort((-end, start, tid)).tolist():  # per thread, by start, outer first
        if tid[i] != prev_tid:
            stack, prev_tid = [], tid[i]
        while stack and end[stack[-1]] < start[i]:
            stack.pop()
        # the innermost still-open range that wholly encloses it (start/end ranges may overlap)
        parent = next((j for j in reversed(stack) if end[j] >= end[i]), None)
        if parent is not None:
            holds.setdefault(variant[parent], {})[variant[i]] = None
        stack.append(i)
    order = {v: k for k, v in enumerate(dict.fromkeys(variant))}
    return {v: list(c) for v, c in sorted(holds.items(), key=lambda kv: order[kv[0]])}


def inclusive_activity(attributed: pd.DataFrame, ranges: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The activity launched inside `variant`'s ranges, its nested ranges' included, as
    `nsys stats -r nvtx_kern_sum` counts a range's kernels: rows of attribute_kernels(..., ranges=)
    whose launch call starts inside an instance of `variant` on the same thread, with variant and
    range_id set to that instance (the innermost where instances of one name nest)."""
    from orchestrator.parsers import nsys_sqlite as ns

    mine = ranges[ranges["variant"] == variant]
    act = attributed[attributed["range_id"] >= 0]  # activity outside every selected range is outside these too
    if mine.empty or act.empty:
        return attributed.iloc[:0]
    hit = ns._innermost_containing(mine["global_tid"].to_numpy(), mine["start"].to_numpy(), mine["end"].to_numpy(),
                                   act["global_tid"].to_numpy(), act["launch_start"].to_numpy(dtype=np.int64))
    out = act[hit >= 0].copy()
    out["range_id"] = mine["range_id"].to_numpy()[hit[hit >= 0]]
    out["variant"] = pd.Series(variant, index=out.index, dtype=attributed["variant"].dtype)
    return out


def held_ranges(export, limit: int = 25) -> str:
    """What ranges a capture holds, for the message when none matched: domain, name, count."""
    every = all_ranges(export)
    if every.empty:
        created = export.nvtx[export.nvtx["event_type"] == 75]
        if len(created):
            return ("no NVTX range at all, though NVTX domains were created "
                    f"({', '.join(sorted(set(created['text'].dropna())))}): nsys 2023.4.4 drops the ranges of "
                    "the nvtx package 0.2.13 and newer (pip install nvtx==0.2.10, or a newer nsys)")
        return "no NVTX range at all (was NVTX traced? `nsys profile -t nvtx,...`)"
    g = (every.assign(domain=every["domain"].fillna("(default)"))
         .groupby(["domain", "text"], sort=False).size().sort_values(ascending=False, kind="stable"))
    lines = [f"{d}@{t} x{n}" for (d, t), n in g.head(limit).items()]
    more = f", and {len(g) - limit} more" if len(g) > limit else ""
    return "it holds (domain@name xcount): " + ", ".join(lines) + more


# --------------------------------------------------------------------------- nvtx vs nsys

def _version_tuple(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text or "")[:3])


def nvtx_problem(nvtx_version: str | None, nsys_version: str | None) -> str | None:
    """Why nsys would record none of the program's `nvtx` ranges, or None.

    Measured (docs/nsight-facts.md): nsys 2023.4.4 drops the ranges of nvtx 0.2.13 and newer
    (0.2.10 is recorded; torch.cuda.nvtx always is).

    Example:
        >>> nvtx_problem("0.2.17", "2023.4.4.54")
        'the nvtx package 0.2.17 ...'
    """
    if not nvtx_version or not nsys_version:
        return None
    if _version_tuple(nsys_version)[:1] == (2023,) and _version_tuple(nvtx_version) >= (0, 2, 13):
        return (f"the nvtx package {nvtx_version} emits ranges that nsys {nsys_version} does not record (only "
                "their domains' create/destroy events reach the report): its nvtx ranges will be missing; "
                "pip install nvtx==0.2.10 or use a newer nsys (torch.cuda.nvtx ranges are recorded either way)")
    return None


def program_nvtx_version(argv: list[str], timeout: float = 30) -> str | None:
    """The nvtx package version the program's Python would import (None: not Python, or no nvtx)."""
    import subprocess

    exe = argv[0]
    if not re.fullmatch(r"python[0-9.]*", Path(exe).name) and exe != sys.executable:
        return None
    try:
        out = subprocess.run([exe, "-c", "import importlib.metadata as m; print(m.version('nvtx'))"],
                             capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


# --------------------------------------------------------------------------- the workload manifest

def capture_device(sqlite: Path, export) -> tuple[str, str]:
    """("cuda", GPU name) when the capture traced GPU work, else ("cpu", "")."""
    gpu = bool(len(export.kernels) or len(export.memcpy) or len(export.memset))
    name = ""
    if "TARGET_INFO_GPU" in export.tables:
        try:
            with sqlite3.connect(f"{sqlite.resolve().as_uri()}?mode=ro", uri=True) as con:
                row = con.execute("SELECT name FROM TARGET_INFO_GPU LIMIT 1").fetchone()
            name = str(row[0]) if row and row[0] else ""
        except sqlite3.Error:
            pass
    return ("cuda" if gpu else "cpu"), name


def workload_manifest(export, sqlite: Path, filt: RangeFilter, *, name: str, source: str,
                      iters_per_range: int = 1, borrowed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The synthetic workload.json of a capture: one variant (status ok) per range name the
    filter takes, in order of first appearance, with its range count and iterations; one that
    holds other selected ranges names them (`holds`: see nesting()). The baseline is the first
    variant that holds none.

    Raises ParseError (exit 4) when no range matches, naming the ranges the capture holds."""
    ranges = filt.select(export)
    if ranges.empty:
        held = held_ranges(export)
        raise ParseError(source, f"no NVTX range matches {filt.spec}",
                         hint=held + ("; choose them with --ranges DOMAIN@PREFIX" if held.startswith("it holds") else ""))
    counts = ranges.groupby("variant", sort=False).size()
    holds = nesting(ranges)
    device, device_name = capture_device(sqlite, export)
    borrowed = borrowed or {}
    known = {v["name"]: v for v in borrowed.get("variants", []) if isinstance(v, dict) and "name" in v}
    variants = []
    for v, n in counts.items():
        b = known.get(v, {})
        variants.append({"name": v, "label": b.get("label", v), "status": "ok",
                         "bytes_moved": b.get("bytes_moved"), "ranges": int(n), "iters": int(n) * iters_per_range})
        if v in holds:  # reported with its nested ranges' activity included, never as the baseline
            variants[-1]["holds"] = holds[v]
    iters = {v["iters"] for v in variants}
    env = dict(borrowed.get("env") or {})
    env.setdefault("device", device)
    if device_name:
        env.setdefault("device_name", device_name)
    flat = [v["name"] for v in variants if v["name"] not in holds]
    baseline = borrowed.get("baseline") if borrowed.get("baseline") in flat else (flat or [variants[0]["name"]])[0]
    return {
        "schema_version": 1, "workload": name, "workload_source": "capture",
        "description": f"NVTX ranges ({filt.spec}) of {source}",
        "baseline": baseline, "mode": "capture",
        "shape": borrowed.get("shape") or [], "numel": borrowed.get("numel"), "dtype": borrowed.get("dtype") or "",
        "device": device, "iters": iters.pop() if len(iters) == 1 else None, "iters_per_range": iters_per_range,
        "nvtx": {**filt.to_json(), "api": "capture"}, "env": env, "status": "ok", "variants": variants,
    }


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


# --------------------------------------------------------------------------- requests

@dataclass
class ProgramRequest:
    """What `exec` and `import` were asked: the program (or the capture), the range filter,
    where the tool is and what it is given, limits and the folder."""

    argv: list[str] = field(default_factory=list)
    tool: str = "nsys"
    ranges: str | None = None
    name: str | None = None
    iters: int | None = None          # iterations in one range instance (None: 1)
    nsys: str | None = None
    nsys_args: list[str] = field(default_factory=list)
    trace_osrt: bool = False
    cuda: bool | None = None          # trace CUDA (None: when nvidia-smi sees a GPU)
    timeout: float | None = None
    out: Path | None = None
    root: Path | None = None
    capture: str | None = None        # import: the source file

    def validate(self) -> "ProgramRequest":
        RangeFilter.parse(self.ranges)
        if self.capture is None and not self.argv:
            raise UsageError("no program given: gprof-orch exec nsys -- CMD [ARGS...]")
        if self.tool not in ("nsys",):
            raise UsageError(f"exec {self.tool}: only nsys is supported so far (ncu: use `gprof-orch ncu` with a "
                             "workload file)")
        if self.iters is not None and self.iters < 1:
            raise UsageError(f"--iters must be at least 1, not {self.iters}")
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError(f"--timeout must be positive, not {self.timeout}")
        return self

    @property
    def filter(self) -> RangeFilter:
        return RangeFilter.parse(self.ranges)

    def workload_name(self) -> str:
        if self.name:
            return self.name
        if self.capture:
            base = Path(self.capture).name
            for suffix in (*NSYS_SUFFIXES, *SQLITE_SUFFIXES, *TRACE_SUFFIXES, ".pt.trace"):
                base = base.removesuffix(suffix)
            return base or "capture"
        script = next((a for a in self.argv[1:] if a.endswith(".py")), None) if _is_python(self.argv) else None
        return Path(script or self.argv[0]).stem or "program"

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}


def _is_python(argv: list[str]) -> bool:
    return bool(argv) and (bool(re.fullmatch(r"python[0-9.]*", Path(argv[0]).name)) or argv[0] == sys.executable)


# --------------------------------------------------------------------------- the library calls

def profile_program(argv: list[str], tool: str = "nsys", *, ranges: str | None = None,
                    **options: Any):
    """Run `argv` under `tool` (nsys) and report it per NVTX range: each range named by
    `ranges` ("DOMAIN@PREFIX"; default: every top-level range) is a variant, each of its
    instances one iteration (or `iters` of them). Returns the same Run a built-in run does;
    raises as a built-in run does (a non-zero exit of the program: RunFailedError, after the
    report is written; --timeout: ToolTimeoutError; Ctrl-C: InterruptedRunError).

    Example:
        >>> run = profile_program(["python", "train.py", "--steps", "50"], ranges="@step")
        >>> run.table[["variant", "samples", "time_median_us", "kernels"]]
    """
    from orchestrator import backends, envinfo

    cli_argv = options.pop("cli_argv", None)
    req = ProgramRequest(argv=list(argv), tool=tool, ranges=ranges, **options).validate()
    be = backends.get(BACKEND)
    tools = be.require(req)  # a missing nsys fails here, before a run folder exists
    notes = []
    problem = nvtx_problem(program_nvtx_version(req.argv), tools.get("nsys_version"))
    if problem:
        print(f"gprof-orch: warning: {problem}", file=sys.stderr, flush=True)
        notes.append(problem)
    from orchestrator.runfolder import RunFolder

    rf = RunFolder.create(BACKEND, req.workload_name(), out=req.out, root=req.root, request=req.to_json(),
                          argv=cli_argv)
    rf.update(machine=envinfo.machine(), tools=tools, kind="exec", notes=notes,
              program={"argv": req.argv, "tool": req.tool, "ranges": req.filter.spec})
    return _finish_run(rf, req, lambda: be.execute(req, rf), source=" ".join(req.argv))


def import_capture(path: str | Path, *, ranges: str | None = None, **options: Any):
    """Build a run folder around an existing capture (`.nsys-rep`, or its `.sqlite` export,
    also `.xz`/`.gz`) and report it per NVTX range as profile_program() does. A capture that
    sits in a gprof-orch run folder keeps that run's ranges, iterations, labels and bytes.

    Raises ParseError (exit 4) when the capture holds no matching range, naming those it holds.

    Example:
        >>> import_capture("report.nsys-rep", ranges="gprof@variant:").table
    """
    from orchestrator import backends, envinfo
    from orchestrator.runfolder import RunFolder

    cli_argv = options.pop("cli_argv", None)
    src = Path(path)
    if not src.is_file():
        raise ParseError(src, "no such file")
    kind = capture_kind(src)
    borrowed = sibling_workload(src)
    if kind == "torch-trace":
        return _import_trace(src, ranges, borrowed, cli_argv, options)
    nv = (borrowed or {}).get("nvtx") or {}
    if ranges is None and borrowed and nv.get("prefix") is not None and nv.get("api") != "capture":
        ranges = f"{nv.get('domain') or ''}@{nv['prefix']}"
    if options.get("iters") is None and borrowed and isinstance(borrowed.get("iters"), int):
        options["iters"] = borrowed["iters"] if nv.get("api") != "capture" else borrowed.get("iters_per_range")
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]  # so that `compare` pairs it with the run it came from
    req = ProgramRequest(ranges=ranges, capture=str(src.resolve()), **options).validate()
    be = backends.get(BACKEND)
    tools = be.require(req) if kind == "nsys-rep" else {}
    rf = RunFolder.create(BACKEND, req.workload_name(), out=req.out, root=req.root, request=req.to_json(),
                          argv=cli_argv)
    rf.update(machine=envinfo.machine(), tools=tools, kind="import", notes=[],
              program={"capture": str(src.resolve()), "tool": "nsys", "ranges": req.filter.spec})
    return _finish_run(rf, req, lambda: be.ingest(req, rf, src, kind), source=str(src), borrowed=borrowed)


def trace_prefix(spec: str | None, borrowed: dict[str, Any] | None = None) -> str:
    """The record_function prefix `--ranges` names for a torch.profiler trace: PREFIX alone (a
    trace has no NVTX domains); by default the project's own `variant:`."""
    if spec is None:
        return ((borrowed or {}).get("ranges") or {}).get("prefix", "variant:")
    if "@" in spec:
        raise UsageError(f"--ranges {spec!r}: a torch.profiler trace has no NVTX domains; give the record_function "
                         f"name's PREFIX alone (--ranges {spec.split('@', 1)[1] or 'PREFIX'!r})")
    return spec


def trace_manifest(trace, prefix: str, *, name: str, source: str,
                   borrowed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The synthetic workload.json of a torch.profiler trace: one variant per record_function
    range name starting with `prefix` (the name after it), in order of first appearance; its
    iterations are the `iter` ranges inside it (gprof-orch's own traces), else its instances.
    Nested ranges are marked as for NVTX (`holds`). A trace from a gprof-orch run folder keeps
    that run's labels, bytes, shape and environment.

    Raises ParseError (exit 4) when no range matches, naming the ranges the trace holds."""
    from orchestrator.parsers import torch_trace as tt

    ev = trace.events
    ann = ev[ev["cat"] == "user_annotation"]
    if not ann["name"].str.startswith(prefix).any():
        counts = ann.groupby("name", sort=False).size().sort_values(ascending=False, kind="stable")
        held = ", ".join(f"{n} x{c}" for n, c in counts.head(25).items()) + (
            f", and {len(counts) - 25} more" if len(counts) > 25 else "")
        raise ParseError(source, f"no record_function range starts with {prefix!r}",
                         hint=(f"it holds (name xcount): {held}; choose them with --ranges PREFIX" if held else
                               "it holds no record_function range at all (torch.profiler.record_function)"))
    ranges, iters = tt.variant_ranges(trace, prefix)
    holds = nesting(ranges.rename(columns={"tid": "global_tid", "start_ns": "start", "end_ns": "end"}))
    per_iter = iters.groupby("variant").size()
    counts = ranges.groupby("variant", sort=False).size()
    borrowed = borrowed or {}
    known = {v["name"]: v for v in borrowed.get("variants", []) if isinstance(v, dict) and "name" in v}
    variants = []
    for v, n in counts.items():
        b = known.get(v, {})
        variants.append({"name": v, "label": b.get("label", v), "status": "ok", "bytes_moved": b.get("bytes_moved"),
                         "ranges": int(n), "iters": int(per_iter.get(v, n))})
        if v in holds:
            variants[-1]["holds"] = holds[v]
    device = "cuda" if ev["cat"].isin(tt.GPU_CATS).any() else "cpu"
    env = dict(borrowed.get("env") or {})
    env.setdefault("device", device)
    gpu_name = next((d.get("name") for d in trace.device_properties if isinstance(d, dict) and d.get("name")), None)
    if gpu_name:
        env.setdefault("device_name", gpu_name)
    flat = [v["name"] for v in variants if v["name"] not in holds]
    baseline = borrowed.get("baseline") if borrowed.get("baseline") in flat else (flat or [variants[0]["name"]])[0]
    n_iters = {v["iters"] for v in variants}
    return {
        "schema_version": 1, "workload": name, "workload_source": "capture",
        "description": f"record_function ranges ({prefix}*) of {source}",
        "baseline": baseline, "mode": "capture",
        "shape": borrowed.get("shape") or [], "numel": borrowed.get("numel"), "dtype": borrowed.get("dtype") or "",
        "device": device, "iters": n_iters.pop() if len(n_iters) == 1 else None,
        "ranges": {"prefix": prefix, "api": "record_function"}, "trace": TRACE,
        "env": env, "status": "ok", "variants": variants,
    }


def _import_trace(src: Path, ranges: str | None, borrowed: dict[str, Any] | None, cli_argv, options: dict[str, Any]):
    """import_capture() of a torch.profiler Chrome trace: a `torch-trace` run folder whose
    variants are the record_function ranges named PREFIX..."""
    from orchestrator import envinfo
    from orchestrator.parsers import compressed
    from orchestrator.parsers import torch_trace as tt
    from orchestrator.runfolder import RunFolder

    if options.get("iters") is not None:
        raise UsageError("--iters applies to NVTX captures; a torch.profiler trace's iterations are its `iter` "
                         "record_function ranges, or else each range")
    prefix = trace_prefix(ranges, borrowed)
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]
    req = ProgramRequest(ranges=prefix, capture=str(src.resolve()), **options)
    rf = RunFolder.create("torch-trace", req.workload_name(), out=req.out, root=req.root, request=req.to_json(),
                          argv=cli_argv)
    rf.update(machine=envinfo.machine(), tools={}, kind="import", notes=[],
              program={"capture": str(src.resolve()), "tool": "torch.profiler", "ranges": prefix})
    dest = rf.path / (TRACE + next((s for s in (".xz", ".gz") if src.name.endswith(s)), ""))

    def step() -> None:
        shutil.copyfile(src, dest)
        rf.add_command("import", ["cp", str(src), str(dest)])

    def manifest() -> dict[str, Any]:
        trace = tt.read_trace(compressed.locate(rf.path / TRACE))
        return trace_manifest(trace, prefix, name=req.workload_name(), source=str(src), borrowed=borrowed)

    return _finish_run(rf, req, step, source=str(src), manifest=manifest)


def _located(sqlite: Path) -> Path | None:
    """The run's export, or its .xz/.gz, if there is one."""
    for p in (sqlite, sqlite.with_name(sqlite.name + ".xz"), sqlite.with_name(sqlite.name + ".gz")):
        if p.is_file():
            return p
    return None


def capture_kind(src: Path) -> str:
    name = src.name.lower()
    if name.endswith(NSYS_SUFFIXES):
        return "nsys-rep"
    if name.endswith(SQLITE_SUFFIXES):
        return "sqlite"
    if name.endswith(".ncu-rep"):
        raise UsageError(f"{src}: importing .ncu-rep captures is not supported yet (nsys only so far)")
    if name.endswith(TRACE_SUFFIXES):
        return "torch-trace"
    with open(src, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3"):
        return "sqlite"
    raise UsageError(f"{src}: not a capture gprof-orch can import (.nsys-rep, or .sqlite from `nsys export`)")


def _finish_run(rf, req: ProgramRequest, step, *, source: str, borrowed: dict[str, Any] | None = None,
                manifest=None):
    """Run `step` (the profiler, or the copy of a capture), write the synthetic workload.json
    (`manifest()`'s; by default the NVTX ranges of the folder's nsys export), the report and the
    final status, as api.profile does for a built-in run."""
    from orchestrator import api
    from orchestrator.parsers import compressed
    from orchestrator.parsers import nsys_sqlite as ns
    from orchestrator.runfolder import WORKLOAD_MANIFEST, write_json

    t0 = time.monotonic()
    error: GprofError | None = None
    try:
        step()
    except GprofError as exc:
        error = exc
    except KeyboardInterrupt:
        error = InterruptedRunError("interrupted")
    rf.manifest["wall_s"] = round(time.monotonic() - t0, 3)
    run = None
    located = _located(rf.path / SQLITE)
    handed: list = []  # the export nsys_manifest() read, handed on to the report: the file is read once

    def nsys_manifest() -> dict[str, Any]:
        with compressed.plain_file(located) as plain:
            # lean: what the manifest and the report use (a million-kernel capture read twice in
            # full took longer than `nsys stats` on it)
            export = ns.read_export(plain, lean=True)
            wman = workload_manifest(export, plain, req.filter, name=req.workload_name(), source=source,
                                   iters_per_range=req.iters or 1, borrowed=borrowed)
        handed.append(export)
        return wman

    if manifest is None and located is not None:
        manifest = nsys_manifest
    if manifest is not None and (error is None or located is not None):
        try:
            wman = manifest()
            write_json(rf.path / WORKLOAD_MANIFEST, wman, indent=1)
            frame = None
            if handed:  # the rows from the export already in memory, by workload.json as written
                from orchestrator.backends.program import frame_from_capture

                frame = frame_from_capture(located, rf.workload_manifest(), run=rf.path.name, export=handed.pop())
            run = api.build_report(rf, frame, write=False)
        except GprofError as exc:
            if error is None:
                error = exc
            else:  # the program failed (or was stopped) and its capture cannot be reported either
                error.message += f"; {exc.message}"
                error.hint = error.hint or exc.hint
    elif error is None:
        error = ParseError(rf.path, "the profiler left no report")
    status = "interrupted" if isinstance(error, InterruptedRunError) else "failed" if error else "ok"
    return api.conclude(rf, run, status, error)
