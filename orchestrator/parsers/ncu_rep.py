"""Nsight Compute results -> per-kernel DataFrames: a `.ncu-rep` read with NVIDIA's `ncu_report`
module (pip install ncu-report; no GPU, no ncu needed), or the CSV of `ncu --csv --page raw`.

Pure: reads a file, returns frames; never imports torch, and imports `ncu_report` only inside
the functions that need it. Both readers give the same `NcuReport`, with every metric's value
normalised at parse time to base units (ns, bytes, bytes/s, Hz; percentages stay in percent,
unit "pct"; see `normalize_unit`). A kernel's variant is the innermost NVTX push/pop range of
`domain` whose name starts with `prefix` (`nvtx.annotate("variant:a*a", domain="gprof")` ->
variant "a*a").

Why a `.ncu-rep` is read in a child process by default (`isolate=True`), all seen with
ncu-report 2026.3.1 on reports of ncu 2025.3.1:
- an empty, truncated or non-ncu file does not raise: `load_report` returns a report with no
  (or, cut near the end, fewer) kernels, silently;
- one zeroed byte at the wrong place in an otherwise intact file makes the library abort the
  whole interpreter (protobuf `Check failed: count >= 0`, SIGABRT).
So the file's framing is checked first (`_inspect_container`), an empty result is an error, and
the library runs where an abort costs a ParseError instead of the caller's process.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import math
import os
import pickle
import re
import shlex
import struct
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.errors import ParseError, ToolFailedError, ToolNotFoundError
from orchestrator.parsers import compressed

DEFAULT_DOMAIN = "gprof"
DEFAULT_PREFIX = "variant:"

KERNEL_ID_COLUMNS = ["id", "variant", "kernel"]
METRIC_COLUMNS = KERNEL_ID_COLUMNS + ["metric", "value", "unit", "raw_value", "raw_unit"]
RULE_COLUMNS = KERNEL_ID_COLUMNS + ["section", "rule", "rule_name", "type", "title", "message",
                                    "message_raw", "speedup_type", "estimated_speedup_pct", "focus_metrics"]

PIP_HINT = ("pip install ncu-report (reads .ncu-rep files on any machine, no GPU needed), "
            "or install Nsight Compute and pass its ncu executable")

# --------------------------------------------------------------------------------------------
# Units. ncu writes a unit per metric: base units in a report and with `--print-units base`
# ("ns", "byte", "byte/s", "%", "hz", "cycle", ...), scaled ones in its CSV by default ("us",
# "Mbyte", "Gbyte/s", "Ghz", "Kbyte/block"); older versions spelled time "nsecond", "usecond".
# Its prefixes are SI: the fixture has launch__shared_mem_config_size = 32768 byte in the report
# and 32.768000 Kbyte in the CSV, profiler__replayer_bytes_mem_accessible.avg = 29579730 byte and
# 29.579730 Mbyte. A unit is normalised by these tables, in this order (see normalize_unit).

UNIT_EXACT: dict[str, tuple[str, float]] = {
    "": ("", 1.0),              # dimensionless: attributes, ids, counts ncu gives no unit
    "%": ("pct", 1.0),          # kept in percent (0..100), as the backends report them
}
TIME_NS: dict[str, float] = {
    "ns": 1.0, "nsecond": 1.0,
    "us": 1e3, "usecond": 1e3,
    "ms": 1e6, "msecond": 1e6,
    "s": 1e9, "second": 1e9,
}
SI_PREFIX: dict[str, float] = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BASE_RENAME: dict[str, str] = {"byte": "bytes", "hz": "Hz"}

_PREFIXED = re.compile(r"([KMGTP]?)([a-z][a-z_]*)")


def normalize_unit(raw_unit: str) -> tuple[str, float]:
    """(normalised unit, factor): value_in_normalised_unit = raw_value * factor.

    Example:
        >>> normalize_unit("Gbyte/second")
        ('bytes/s', 1000000000.0)
        >>> normalize_unit("us")
        ('ns', 1000.0)
    """
    u = (raw_unit or "").strip()
    if u in UNIT_EXACT:
        return UNIT_EXACT[u]
    if u in TIME_NS:
        return "ns", TIME_NS[u]
    if "/" in u:
        num, den = u.split("/", 1)
        n_unit, n_factor = normalize_unit(num)
        if den in TIME_NS:  # a rate: per second
            return f"{n_unit}/s", n_factor / (TIME_NS[den] * 1e-9)
        d_unit, d_factor = normalize_unit(den)
        return f"{n_unit}/{d_unit}", n_factor / d_factor
    m = _PREFIXED.fullmatch(u)
    if m:
        return BASE_RENAME.get(m.group(2), m.group(2)), SI_PREFIX[m.group(1)]
    return u, 1.0  # "SM", "register", ...: kept as ncu wrote it


# --------------------------------------------------------------------------------------------
# The per-kernel columns, declared once. A key metric takes the first alternative whose metrics
# are all present (their sum, for dram bytes read + write); NaN when the section that holds it
# was not collected.

@dataclass(frozen=True)
class KeyMetric:
    column: str
    unit: str                                  # the normalised unit its sources must have
    sources: tuple[tuple[str, ...], ...]       # alternatives, each summed


KEY_METRICS: tuple[KeyMetric, ...] = (
    KeyMetric("duration_ns", "ns", (("gpu__time_duration.sum",),)),
    KeyMetric("dram_bytes", "bytes", (("dram__bytes.sum",), ("dram__bytes_read.sum", "dram__bytes_write.sum"))),
    KeyMetric("dram_bytes_per_s", "bytes/s", (("dram__bytes.sum.per_second",),)),
    KeyMetric("dram_throughput_pct", "pct",
              (("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
               ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",))),
    KeyMetric("memory_throughput_pct", "pct",
              (("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),)),
    KeyMetric("sm_throughput_pct", "pct", (("sm__throughput.avg.pct_of_peak_sustained_elapsed",),)),
    KeyMetric("achieved_occupancy", "pct",
              (("sm__warps_active.avg.pct_of_peak_sustained_active",),)),
)

# integer launch attributes: column -> metric
LAUNCH_METRICS: dict[str, str] = {
    "device": "launch__device_id",
    "stream": "launch__stream_id",
    "grid_x": "launch__grid_dim_x", "grid_y": "launch__grid_dim_y", "grid_z": "launch__grid_dim_z",
    "block_x": "launch__block_dim_x", "block_y": "launch__block_dim_y", "block_z": "launch__block_dim_z",
    "registers_per_thread": "launch__registers_per_thread",
}


# --------------------------------------------------------------------------------------------
# The roofline's rates, as Nsight Compute's own roofline sections compute them
# (SpeedOfLight_RooflineChart.section of ncu 2025.3.1 for FP32 and FP64; the half-precision terms
# from SpeedOfLight_HierarchicalHalfRooflineChart.section): a weighted sum of per-cycle counts
# times a clock. Achieved work counts an FMA as 2 FLOPs (a packed half add or multiply as 2, a
# packed half FMA as 4) on the SMSPs' clock; the peaks take the SM clock and the DRAM clock. So
# gprof-orch's point is the one ncu's chart draws. NaN where a term is missing (the section was
# not collected).

@dataclass(frozen=True)
class RooflineRate:
    column: str
    terms: tuple[tuple[str, float], ...]       # (per-cycle metric, weight), summed
    clock: str                                 # the cycles per second they are multiplied by
    unit: str                                  # the normalised unit of the result


_SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
_SASS_PEAK = "sm__sass_thread_inst_executed_op_{}_pred_on.sum.peak_sustained"
SMSP_CLOCK, SM_CLOCK, DRAM_CLOCK = ("smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second",
                                    "dram__cycles_elapsed.avg.per_second")


def _flops(fadd: str, fmul: str, ffma: str, *, packed: int = 1) -> tuple[tuple[str, float], ...]:
    return ((_SASS.format(fadd), packed), (_SASS.format(fmul), packed), (_SASS.format(ffma), 2 * packed))


ROOFLINE_RATES: tuple[RooflineRate, ...] = (
    RooflineRate("fp32_flop_per_s", _flops("fadd", "fmul", "ffma"), SMSP_CLOCK, "flop/s"),
    RooflineRate("fp64_flop_per_s", _flops("dadd", "dmul", "dfma"), SMSP_CLOCK, "flop/s"),
    RooflineRate("fp16_flop_per_s", _flops("hadd", "hmul", "hfma", packed=2), SMSP_CLOCK, "flop/s"),
    RooflineRate("peak_fp32_flop_per_s", ((_SASS_PEAK.format("ffma"), 2),), SM_CLOCK, "flop/s"),
    RooflineRate("peak_fp64_flop_per_s", ((_SASS_PEAK.format("dfma"), 2),), SM_CLOCK, "flop/s"),
    RooflineRate("peak_fp16_flop_per_s", ((_SASS_PEAK.format("hfma"), 4),), SM_CLOCK, "flop/s"),
    RooflineRate("peak_dram_bytes_per_s", (("dram__bytes.sum.peak_sustained", 1),), DRAM_CLOCK, "bytes/s"),
)
# the section that holds the FP32/FP64 terms, the DRAM peak and the clocks
ROOFLINE_SECTION = "SpeedOfLight_RooflineChart"

KERNEL_COLUMNS = (KERNEL_ID_COLUMNS + ["kernel_demangled"] + list(LAUNCH_METRICS)
                  + [k.column for k in KEY_METRICS] + [r.column for r in ROOFLINE_RATES])


@dataclass
class NcuReport:
    """What one Nsight Compute result holds.

    kernels: one row per profiled kernel, columns KERNEL_COLUMNS (id = index in the report);
        the key metrics (KEY_METRICS) in ns, bytes, bytes/s, and percent of peak for the
        *_pct columns and achieved_occupancy (0..100); NaN where the report lacks them.
    metrics: long form, one row per kernel and metric the report holds, columns METRIC_COLUMNS;
        `value` normalised (NaN for text or missing values), `raw_value`/`raw_unit` as read.
    rules: ncu's rule results (empty from CSV), columns RULE_COLUMNS.
    ncu_version, clock_control, cache_control, command_line: as the report recorded them
        (None from CSV, or where the report does not say; None for clock/cache control means
        the option was not on ncu's command line, so ncu's default applied).
    """

    path: Path | None
    kernels: pd.DataFrame
    metrics: pd.DataFrame
    rules: pd.DataFrame
    source: str                                # "ncu_report" or "csv"
    ncu_version: str | None = None
    clock_control: str | None = None
    cache_control: str | None = None
    command_line: str | None = None
    session: dict[str, str] = field(default_factory=dict)
    # why `rules` is empty although the report may hold rule results: the CSV fallback could not
    # read them from `ncu --import --page details` (None when they were read, or with ncu_report)
    rules_note: str | None = None


# --------------------------------------------------------------------------------------------
# .ncu-rep framing, as seen in reports of ncu 2025.3.1 (not a documented format): b"NVR\0", a
# little-endian uint32 header length, a header (protobuf, field 1 = format version, 7 here),
# then records [uint32 length][protobuf message] up to the end of the file. A few small records
# carry the session: key/value pairs ("Nsight Compute Target" = the ncu version, "CUDA Version")
# and ncu's command line, which ncu_report does not expose. The record walk that detects a
# truncated file runs only for the format versions it was checked on.

MAGIC = b"NVR\x00"
KNOWN_FORMAT_VERSIONS = {7}
_SESSION_RECORD_MAX = 64 * 1024


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def _pb_fields(buf: bytes):
    """(field number, wire type, value) of one protobuf message; ValueError if malformed."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("field runs past its message")
            val, i = buf[i:i + n], i + n
        elif wire == 1:
            val, i = buf[i:i + 8], i + 8
        elif wire == 5:
            val, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield num, wire, val


def _session_from_record(rec: bytes, session: dict[str, str]) -> None:
    try:
        for num, wire, val in _pb_fields(rec):
            if num != 3 or wire != 2:
                continue
            for num2, wire2, val2 in _pb_fields(val):
                if num2 == 8 and wire2 == 2:
                    kv = {n: v for n, w, v in _pb_fields(val2) if w == 2}
                    if 1 in kv and 2 in kv:
                        session[kv[1].decode("utf-8")] = kv[2].decode("utf-8")
                elif num2 == 11 and wire2 == 2:
                    session["command_line"] = val2.decode("utf-8").strip()
    except (ValueError, UnicodeDecodeError):
        pass  # not a session record


def _inspect_container(path: Path) -> dict[str, str]:
    """Check that `path` is a whole .ncu-rep; return the session key/values it carries."""
    if not path.exists():
        raise ParseError(path, "no such file")
    if not path.is_file():
        raise ParseError(path, "not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise ParseError(path, "empty file", hint="ncu may have been stopped before it wrote the report")
    session: dict[str, str] = {}
    with open(path, "rb") as fh:
        head = fh.read(8)
        if not head.startswith(MAGIC):
            if path.suffix == ".ncu-repz":
                return session  # compressed form: ncu_report checks it
            looks_text = all(32 <= b < 127 or b in (9, 10, 13) for b in head)
            raise ParseError(path, "not an Nsight Compute report (no NVR header)",
                             hint="for the CSV that ncu --csv prints use read_csv_raw" if looks_text else None)
        if len(head) < 8:
            raise ParseError(path, f"truncated: {size} bytes, shorter than the report header")
        header_len = struct.unpack_from("<I", head, 4)[0]
        header = fh.read(header_len)
        if len(header) < header_len:
            raise ParseError(path, "truncated inside the report header")
        try:
            fields = {n: v for n, w, v in _pb_fields(header) if w == 0}
        except ValueError:
            fields = {}
        if fields.get(1) not in KNOWN_FORMAT_VERSIONS:
            return session
        off = 8 + header_len
        while off < size:
            if off + 4 > size:
                raise ParseError(path, f"truncated: the file ends inside a record header at byte {off}",
                                 hint="the report was cut short (disk full, copy interrupted, ncu killed)")
            fh.seek(off)
            n = struct.unpack("<I", fh.read(4))[0]
            if off + 4 + n > size:
                raise ParseError(path, f"truncated: the record at byte {off} needs {n} bytes, "
                                       f"{size - off - 4} are left",
                                 hint="the report was cut short (disk full, copy interrupted, ncu killed)")
            if n <= _SESSION_RECORD_MAX:
                _session_from_record(fh.read(n), session)
            off += 4 + n
    return session


def _option(command_line: str | None, name: str) -> str | None:
    if not command_line:
        return None
    try:
        tokens = shlex.split(command_line)
    except ValueError:
        tokens = command_line.split()
    for i, tok in enumerate(tokens):
        if tok == name and i + 1 < len(tokens):
            return tokens[i + 1]
        if tok.startswith(name + "="):
            return tok.split("=", 1)[1]
    return None


# --------------------------------------------------------------------------------------------
# Reading with ncu_report. `_extract_raw` returns plain data (picklable), so it can run in a
# child process; `_build` turns it into frames in the caller.

_MSG_TYPES = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP_TYPES = {0: "unknown", 1: "local", 2: "global"}


def _have_ncu_report() -> bool:
    try:
        return importlib.util.find_spec("ncu_report") is not None
    except (ImportError, ValueError):
        return False


def _nvtx_stack(action: Any) -> list[tuple[str, str]]:
    """(domain, range name) of the action's push/pop ranges, each domain outermost first."""
    state = action.nvtx_state()
    out: list[tuple[str, str]] = []
    if state is None:
        return out
    for domain_id in state.domains():
        dom = state.domain_by_id(domain_id)
        # push_pop_range(i): "the index is identical to the range's order on the call stack"
        for i in range(len(dom.push_pop_ranges())):
            rng = dom.push_pop_range(i)
            out.append((dom.name(), rng.name() if rng is not None else ""))
    return out


def _extract_raw(path: str) -> dict:
    import ncu_report

    ctx = ncu_report.load_report(path)
    kernels, metrics, rules = [], [], []
    kid = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            act = rng.action_by_idx(ai)
            kernels.append({"id": kid, "kernel": act.name(act.NameBase_FUNCTION),
                            "kernel_demangled": act.name(act.NameBase_DEMANGLED),
                            "nvtx": _nvtx_stack(act), "launch": {}})
            for name in act.metric_names():
                m = act.metric_by_name(name)
                value = m.value()
                number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
                metrics.append((kid, name, value, m.unit(), number))
            for r in act.rule_results_as_dicts():
                msg = r.get("rule_message") or {}
                speedup = r.get("speedup_estimation") or {}
                rules.append({
                    "id": kid, "section": r.get("section_identifier"), "rule": r.get("rule_identifier"),
                    "rule_name": r.get("name"), "type": _MSG_TYPES.get(int(msg.get("type", 0)), str(msg.get("type"))),
                    "title": msg.get("title"), "message_raw": msg.get("message"),
                    "speedup_type": _SPEEDUP_TYPES.get(int(speedup["type"])) if speedup else None,
                    "estimated_speedup_pct": float(speedup["speedup"]) if speedup else math.nan,
                    "focus_metrics": "; ".join(f"{f['name']}={f['value']:g}" for f in r.get("focus_metrics", [])),
                })
            kid += 1
    return {"kernels": kernels, "metrics": metrics, "rules": rules}


_CHILD = ("import pickle, sys\n"
          "from orchestrator.parsers.ncu_rep import _extract_raw\n"
          "sys.stdout.buffer.write(pickle.dumps(_extract_raw(sys.argv[1]), protocol=pickle.HIGHEST_PROTOCOL))\n")


def _extract_isolated(path: Path, timeout: float | None) -> dict:
    from orchestrator import proc  # the project's one subprocess helper

    package_root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    with tempfile.TemporaryDirectory(prefix="gprof-ncu-read-") as tmp:
        res = proc.run([sys.executable, "-c", _CHILD, str(path)], log_dir=Path(tmp), name="ncu_report",
                       timeout=timeout, env=env)
        if res.returncode != 0:
            lines = [ln for ln in proc.log_tail(res.stderr, 40).splitlines() if ln.strip()]
            detail = next((ln for ln in reversed(lines) if "Check failed" in ln), lines[-1] if lines else "")
            how = (f"killed by signal {-res.returncode}" if res.returncode < 0
                   else f"exit status {res.returncode}")
            raise ParseError(path, f"ncu_report could not read it ({how}): {detail.strip()}",
                             hint="the file is corrupt or not written by a compatible ncu; profile again")
        with open(res.stdout, "rb") as fh:
            return pickle.load(fh)


def read_report(path: str | Path, *, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX,
                isolate: bool = True, timeout: float | None = 600.0) -> NcuReport:
    """Read a `.ncu-rep` with NVIDIA's ncu_report module.

    `domain`/`prefix` name the NVTX ranges that mark variants (domain None: any domain).
    `isolate` runs ncu_report in a child process (see the module docstring: it can abort the
    interpreter on a corrupt file); `isolate=False` reads in this process, about 0.7 s faster.

    Example:
        >>> rep = read_report("run/square.ncu-rep")
        >>> rep.kernels[["variant", "kernel", "duration_ns", "dram_throughput_pct"]]
    """
    path = Path(path)
    session = _inspect_container(path)
    if not _have_ncu_report():
        raise ToolNotFoundError(f"cannot read {path}: the ncu_report module is not installed", hint=PIP_HINT)
    if isolate:
        raw = _extract_isolated(path, timeout)
    else:
        try:
            raw = _extract_raw(str(path))
        except (RuntimeError, SystemError, TypeError, AttributeError, ValueError, IndexError, OSError) as exc:
            raise ParseError(path, f"ncu_report could not read it ({type(exc).__name__}: {exc})") from exc
    if not raw["kernels"]:
        raise ParseError(path, "holds no profiled kernels: empty, truncated or not an Nsight Compute report",
                         hint="ncu writes no report when it profiled nothing; check its log")
    command_line = session.get("command_line")
    target = session.get("Nsight Compute Target")
    version = re.match(r"\d+(\.\d+)+", target) if target else None
    rep = _build(path, raw, domain=domain, prefix=prefix, source="ncu_report")
    return replace(rep, ncu_version=version.group(0) if version else target,
                   clock_control=_option(command_line, "--clock-control"),
                   cache_control=_option(command_line, "--cache-control"),
                   command_line=command_line, session=session)


# --------------------------------------------------------------------------------------------
# Reading ncu's raw-page CSV: `ncu --import r.ncu-rep --csv --page raw`, or the stdout of
# `ncu --csv --page raw ...` where ncu's ==PROF== lines and the program's own output come first.
# Row 1 names the columns, row 2 gives units, then one row per kernel; numbers may carry
# thousands separators ("1,980,000"); a missing value reads "no data".

CSV_META_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                    "Block Size", "Grid Size", "Device", "CC"}
CSV_PUSHPOP_PREFIX = "thread Domain:Push/Pop_Range"
CSV_STARTEND_PREFIX = "Id:Domain:Start/Stop_Range"
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
# one push/pop range as the CSV writes it: Domain:Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg
# (a range name may itself hold ':', so the fixed-vocabulary fields after it anchor the split)
_CSV_RANGE = re.compile(r"(?P<domain>[^:]*):(?P<range>.*?):(?P<pl_type>none|[A-Z][A-Z0-9_]*):(?P<pl_value>[^:]*)"
                        r":(?P<clr_type>none|[A-Z][A-Z0-9_]*):(?P<color>[^:]*)"
                        r":(?P<msg_type>none|[A-Z][A-Z0-9_]*):(?P<msg>.*)", re.S)


def _parse_number(cell: str) -> float | None:
    s = cell.strip()
    if _NUMBER.fullmatch(s):
        return float(s.replace(",", ""))
    return None


def _parse_triple(cell: str) -> tuple[int, int, int] | None:
    nums = re.findall(r"\d+", cell or "")
    return (int(nums[0]), int(nums[1]), int(nums[2])) if len(nums) == 3 else None


def _csv_nvtx(cell: str, where: str | Path) -> list[tuple[str, str]]:
    out = []
    for quoted in re.findall(r'"([^"]*)"', cell or ""):
        m = _CSV_RANGE.fullmatch(quoted)
        if not m:
            raise ParseError(where, f"cannot read the NVTX range {quoted!r} of column {CSV_PUSHPOP_PREFIX}...")
        out.append((m.group("domain"), m.group("range")))
    return out


def function_name(demangled: str) -> str:
    """The bare function name of a demangled kernel signature.

    Example:
        >>> function_name("void at::native::vectorized_elementwise_kernel<4, F>(int, T2)")
        'vectorized_elementwise_kernel'
    """
    s = demangled.strip()

    def strip_group(s: str, open_ch: str, close_ch: str) -> str:
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == close_ch:
                depth += 1
            elif s[i] == open_ch:
                depth -= 1
                if depth == 0:
                    return s[:i].rstrip()
        return s

    if s.endswith(")"):
        s = strip_group(s, "(", ")")
    while s.endswith(">"):
        stripped = strip_group(s, "<", ">")
        if stripped == s:
            break
        s = stripped
    s = s.split()[-1] if s.split() else s
    return s.rsplit("::", 1)[-1]


def _csv_source(source: str | Path) -> tuple[Path | None, str | Path, str]:
    """(path or None, what to name in errors, text) of a file (Path, or a str without a newline)
    or of the text itself."""
    if isinstance(source, Path) or "\n" not in source:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ParseError(path, "no such file") from None
        except OSError as exc:
            raise ParseError(path, f"cannot read it ({exc.strerror})") from exc
        where: str | Path = path
        if not text.strip():
            raise ParseError(where, "empty file")
        return path, where, text
    if not source.strip():
        raise ParseError("<ncu CSV text>", "empty file")
    return None, "<ncu CSV text>", source


def read_csv_raw(source: str | Path, *, domain: str | None = DEFAULT_DOMAIN,
                 prefix: str = DEFAULT_PREFIX) -> NcuReport:
    """Read ncu's `--csv --page raw` output: a file (Path, or a str without a newline) or the
    text itself. Lines before the header (ncu's ==PROF== lines, the program's own output) and
    ncu's ==X== lines anywhere are skipped. No rule results: the raw page has none.

    Example:
        >>> rep = read_csv_raw(Path("square_raw.csv"))
        >>> rep.metrics.query("metric == 'gpu__time_duration.sum'")[["id", "value", "unit"]]
    """
    path, where, text = _csv_source(source)
    lines = text.lstrip("\ufeff").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",') or ln.startswith("ID,")), None)
    if start is None:
        errors = ncu_errors(text)
        raise ParseError(where, "no ncu CSV header (a line starting with \"ID\",)" +
                         (": ncu said " + " | ".join(errors) if errors else ""),
                         hint="expected the output of ncu --csv --page raw")
    body = [ln for ln in lines[start:] if ln.strip() and not re.match(r"==[A-Z]+==", ln)]
    rows = list(csv.reader(body))
    header = rows[0]
    units = [""] * len(header)
    data = rows[1:]
    if data and data[0] and data[0][0] == "":
        units, data = data[0], data[1:]
    if not data:
        errors = ncu_errors(text)
        raise ParseError(where, "no kernel rows after the CSV header" +
                         (": ncu said " + " | ".join(errors) if errors else ""))
    col = {name: i for i, name in enumerate(header)}
    pushpop = next((i for i, name in enumerate(header) if name.startswith(CSV_PUSHPOP_PREFIX)), None)
    metric_cols = [i for i, name in enumerate(header)
                   if name not in CSV_META_COLUMNS and not name.startswith((CSV_PUSHPOP_PREFIX, CSV_STARTEND_PREFIX))]
    kernels, metrics = [], []
    for n, row in enumerate(data, start=1):
        if len(row) != len(header):
            raise ParseError(where, f"kernel row {n} has {len(row)} fields, the header {len(header)}")
        try:
            kid = int(_parse_number(row[col["ID"]]))  # type: ignore[arg-type]
        except (KeyError, TypeError):
            raise ParseError(where, f"kernel row {n} has no numeric ID") from None
        demangled = row[col["Kernel Name"]] if "Kernel Name" in col else ""
        grid = _parse_triple(row[col["Grid Size"]]) if "Grid Size" in col else None
        block = _parse_triple(row[col["Block Size"]]) if "Block Size" in col else None
        launch = {"device": _parse_number(row[col["Device"]]) if "Device" in col else None,
                  "stream": _parse_number(row[col["Stream"]]) if "Stream" in col else None}
        for axis, grid_v, block_v in zip("xyz", grid or (None,) * 3, block or (None,) * 3):
            launch[f"grid_{axis}"], launch[f"block_{axis}"] = grid_v, block_v
        kernels.append({"id": kid, "kernel": function_name(demangled), "kernel_demangled": demangled,
                        "nvtx": _csv_nvtx(row[pushpop], where) if pushpop is not None else [],
                        "launch": launch})
        for i in metric_cols:
            metrics.append((kid, header[i], row[i], units[i], _parse_number(row[i])))
    return _build(path, {"kernels": kernels, "metrics": metrics, "rules": []},
                  domain=domain, prefix=prefix, source="csv")


# --------------------------------------------------------------------------------------------
# Reading ncu's rule results from its details page: `ncu --import r.ncu-rep --csv --page details`.
# Not yet checked against ncu 2025.3.1's own output (no capture of it exists here:
# scripts/capture_roofline_fixture.sh takes one on the H200). What it relies on, from ncu's CSV as
# its raw page prints it (our fixtures) and as public captures of the details page show it: one row
# per kernel and section item, columns named in the header ("ID", the NVTX columns, "Kernel Name",
# ..., "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name", "Rule Type",
# "Rule Description", "Estimated Speedup Type", "Estimated Speedup"); a rule result is a row whose
# "Rule Name" is set, its "Section Name" the section's identifier ("SpeedOfLight"), its type a
# short word, its speedup a bare percentage; a metric row may stop after "Metric Value". Rule
# titles ("Tail Effect") and focus metrics are not on this page.

DETAILS_RULE_COLUMNS = ("Section Name", "Rule Name", "Rule Type", "Rule Description")
# the CLI's rule types -> ncu_report's message types (_MSG_TYPES)
CSV_RULE_TYPES = {"OPT": "optimization", "WRN": "warning", "ERR": "error", "INF": "ok"}


def read_csv_details(source: str | Path, *, domain: str | None = DEFAULT_DOMAIN,
                     prefix: str = DEFAULT_PREFIX) -> pd.DataFrame:
    """ncu's rule results (RULE_COLUMNS) from its `--csv --page details` output: a file (Path, or
    a str without a newline) or the text. `title` is empty and `rule_name` None: the page names a
    rule by its identifier only. ParseError when the text has no details header or no rule columns.

    Example:
        >>> rules = read_csv_details(Path("details.csv"))
        >>> rules[["variant", "kernel", "section", "rule", "type", "estimated_speedup_pct"]]
    """
    _, where, text = _csv_source(source)
    body = "\n".join(ln for ln in text.lstrip("\ufeff").splitlines() if not re.match(r"==[A-Z]+==", ln))
    start = re.search(r'^"?ID"?,', body, re.M)
    if start is None:
        errors = ncu_errors(text)
        raise ParseError(where, "no ncu CSV header (a line starting with \"ID\",)" +
                         (": ncu said " + " | ".join(errors) if errors else ""),
                         hint="expected the output of ncu --import REPORT --csv --page details")
    rows = list(csv.reader(io.StringIO(body[start.start():])))  # a quoted message may span lines
    header, data = rows[0], [r for r in rows[1:] if any(c.strip() for c in r)]
    missing = [c for c in ("ID", "Kernel Name", *DETAILS_RULE_COLUMNS) if c not in header]
    if missing:
        raise ParseError(where, f"no {', '.join(missing)} column in the CSV header: not ncu's details page "
                                "with rule results",
                         hint="expected the output of ncu --import REPORT --csv --page details")
    col = {name: i for i, name in enumerate(header)}
    pushpop = next((i for i, name in enumerate(header) if name.startswith(CSV_PUSHPOP_PREFIX)), None)
    out = []
    for n, row in enumerate(data, start=1):
        if len(row) > len(header):
            raise ParseError(where, f"row {n} has {len(row)} fields, the header {len(header)}")
        row = row + [""] * (len(header) - len(row))
        rule = row[col["Rule Name"]].strip()
        if not rule:
            continue
        kid = _parse_number(row[col["ID"]])
        if kid is None:
            raise ParseError(where, f"row {n} has no numeric ID")
        speedup = _parse_number(row[col["Estimated Speedup"]]) if "Estimated Speedup" in col else None
        speedup_type = row[col["Estimated Speedup Type"]].strip() if "Estimated Speedup Type" in col else ""
        kind = row[col["Rule Type"]].strip()
        message = row[col["Rule Description"]].strip()
        out.append({
            "id": int(kid),
            "variant": _variant(_csv_nvtx(row[pushpop], where), domain, prefix) if pushpop is not None else None,
            "kernel": function_name(row[col["Kernel Name"]]), "section": row[col["Section Name"]].strip(),
            "rule": rule, "rule_name": None, "type": CSV_RULE_TYPES.get(kind.upper(), kind.lower() or "none"),
            "title": "", "message": message, "message_raw": message, "speedup_type": speedup_type or None,
            "estimated_speedup_pct": speedup if speedup is not None else math.nan, "focus_metrics": "",
        })
    rules = pd.DataFrame(out, columns=RULE_COLUMNS)
    rules["id"] = rules["id"].astype("int64")
    rules["variant"] = rules["variant"].astype("object")
    rules["estimated_speedup_pct"] = rules["estimated_speedup_pct"].astype("float64")
    return rules


# --------------------------------------------------------------------------------------------
# Frames from either reader.

def _variant(stack: list[tuple[str, str]], domain: str | None, prefix: str) -> str | None:
    for dom, name in reversed(stack):
        if (domain is None or dom == domain) and name.startswith(prefix):
            return name[len(prefix):]
    return None


_LINK = re.compile(r"@(section|url|sass|source):([^@]*)@")


def _plain_message(text: str | None) -> str | None:
    """ncu's rule message with its @kind:...@ links replaced by their text."""
    if text is None:
        return None

    def repl(m: re.Match) -> str:
        kind, body = m.group(1), m.group(2)
        parts = body.split(":")
        if kind == "url":
            return parts[0]
        if kind == "source":
            return ":".join(parts[2:]) if len(parts) > 2 else body
        return ":".join(parts[1:]) if len(parts) > 1 else body

    return _LINK.sub(repl, text)


def _build(path: Path | None, raw: dict, *, domain: str | None, prefix: str, source: str) -> NcuReport:
    where = path if path is not None else "<ncu CSV text>"
    ids = [k["id"] for k in raw["kernels"]]
    if len(set(ids)) != len(ids):
        raise ParseError(where, "kernel IDs repeat")
    # A record that lost its name, its NVTX ranges and its metrics (one flipped byte in a
    # .ncu-rep does this) would fall outside every variant unnoticed, and its variant's time
    # per iteration would be a different number: the report is damaged, say so.
    measured = {r[0] for r in raw["metrics"]}
    for k in raw["kernels"]:
        if not k["kernel"] and not k["nvtx"] and k["id"] not in measured:
            raise ParseError(where, f"kernel record {k['id']} has no name, no NVTX range and no metrics: "
                                    "the report is damaged", hint="take the file again, or profile again")
    variant = {k["id"]: _variant(k["nvtx"], domain, prefix) for k in raw["kernels"]}
    kname = {k["id"]: k["kernel"] for k in raw["kernels"]}

    rows = []
    for kid, name, raw_value, raw_unit, number in raw["metrics"]:
        unit, factor = normalize_unit(raw_unit)
        value = number * factor if number is not None else math.nan
        rows.append((kid, variant[kid], kname[kid], name, value, unit, raw_value, raw_unit))
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    metrics["id"] = metrics["id"].astype("int64")
    metrics["value"] = metrics["value"].astype("float64")
    metrics["variant"] = metrics["variant"].astype("object")

    lookup = {(r[0], r[3]): (r[4], r[5]) for r in rows}
    krows = []
    for k in raw["kernels"]:
        kid = k["id"]
        rec: dict[str, Any] = {"id": kid, "variant": variant[kid], "kernel": k["kernel"],
                               "kernel_demangled": k["kernel_demangled"]}
        for column, metric in LAUNCH_METRICS.items():
            value = lookup.get((kid, metric), (math.nan, ""))[0]
            if math.isnan(value):
                fallback = k["launch"].get(column)
                value = math.nan if fallback is None else float(fallback)
            rec[column] = value
        for key in KEY_METRICS:
            rec[key.column] = _key_value(where, lookup, kid, key)
        for rate in ROOFLINE_RATES:
            rec[rate.column] = _rate_value(where, lookup, kid, rate)
        krows.append(rec)
    kernels = pd.DataFrame(krows, columns=KERNEL_COLUMNS)
    kernels["id"] = kernels["id"].astype("int64")
    kernels["variant"] = kernels["variant"].astype("object")
    for column in LAUNCH_METRICS:
        kernels[column] = kernels[column].round().astype("Int64")

    rule_rows = [{**r, "variant": variant[r["id"]], "kernel": kname[r["id"]],
                  "message": _plain_message(r.get("message_raw"))} for r in raw["rules"]]
    rules = pd.DataFrame(rule_rows, columns=RULE_COLUMNS)
    rules["id"] = rules["id"].astype("int64")
    rules["estimated_speedup_pct"] = rules["estimated_speedup_pct"].astype("float64")
    return NcuReport(path=path, kernels=kernels, metrics=metrics, rules=rules, source=source)


def _key_value(where: str | Path, lookup: dict, kid: int, key: KeyMetric) -> float:
    for alternative in key.sources:
        found = [lookup.get((kid, m)) for m in alternative]
        if any(f is None or math.isnan(f[0]) for f in found):
            continue
        for metric, (_, unit) in zip(alternative, found):
            if unit != key.unit:
                raise ParseError(where, f"{metric} is in {unit!r} after normalisation, expected {key.unit!r} "
                                        f"for {key.column}")
        return float(sum(f[0] for f in found))
    return math.nan


# what a clock may be in after normalisation: ncu_report says "hz", ncu's CSV "Ghz" or "cycle/nsecond"
_CLOCK_UNITS = ("Hz", "cycle/s")


def _rate_value(where: str | Path, lookup: dict, kid: int, rate: RooflineRate) -> float:
    """sum(weight x per-cycle count) x clock for one kernel; NaN when any of them is missing."""
    found = [lookup.get((kid, m)) for m, _ in rate.terms] + [lookup.get((kid, rate.clock))]
    if any(f is None or math.isnan(f[0]) for f in found):
        return math.nan
    *terms, (clock, clock_unit) = found
    for (metric, _), (_, unit) in zip(rate.terms, terms):
        if not unit.endswith("/cycle"):
            raise ParseError(where, f"{metric} is in {unit!r} after normalisation, expected a count per cycle "
                                    f"for {rate.column}")
    if clock_unit not in _CLOCK_UNITS:
        raise ParseError(where, f"{rate.clock} is in {clock_unit!r} after normalisation, expected Hz for {rate.column}")
    return float(sum(value * weight for (value, _), (_, weight) in zip(terms, rate.terms)) * clock)


# --------------------------------------------------------------------------------------------
# One entry point: ncu_report when installed, else ncu's own CSV export.

def import_argv(ncu: str | Path, path: str | Path) -> list[str]:
    """The command that exports a report's raw page as CSV."""
    return [str(ncu), "--import", str(path), "--csv", "--page", "raw"]


def details_argv(ncu: str | Path, path: str | Path) -> list[str]:
    """The command that exports a report's details page, with ncu's rule results, as CSV."""
    return [str(ncu), "--import", str(path), "--csv", "--page", "details"]


def load(path: str | Path, *, ncu: str | Path | None = None, domain: str | None = DEFAULT_DOMAIN,
         prefix: str = DEFAULT_PREFIX, reader: str = "auto", log_dir: str | Path | None = None,
         timeout: float | None = 600.0) -> NcuReport:
    """Read a `.ncu-rep`: with ncu_report when it is importable (reader "auto" or "ncu_report"),
    otherwise (or with reader "ncu") by running `ncu --import PATH --csv --page raw` with the
    given `ncu`, $GPROF_NCU, or one found on PATH / in NVIDIA's install locations.
    ToolNotFoundError when neither is available. A `.xz` or `.gz` report is read the same.

    Example:
        >>> rep = load("run/ncu/square.ncu-rep")
        >>> rep.kernels.groupby("variant")["duration_ns"].median()
    """
    if reader not in ("auto", "ncu_report", "ncu"):
        raise ValueError(f"reader must be auto, ncu_report or ncu, not {reader!r}")
    path = Path(path)
    if compressed.is_compressed(path):  # report.ncu-rep.xz / .gz: both readers need a real file
        with compressed.plain_file(path) as plain:
            rep = load(plain, ncu=ncu, domain=domain, prefix=prefix, reader=reader, log_dir=log_dir,
                       timeout=timeout)
        return replace(rep, path=path)
    if reader == "ncu_report" or (reader == "auto" and _have_ncu_report()):
        return read_report(path, domain=domain, prefix=prefix, timeout=timeout)
    from orchestrator import proc, tools

    try:
        tool = tools.find("ncu", ncu, with_version=False)
    except ToolNotFoundError as exc:
        raise ToolNotFoundError(f"cannot read {path}: the ncu_report module is not installed and no ncu "
                                f"executable was found ({exc.message})", hint=PIP_HINT) from exc
    _inspect_container(path)

    def export(argv: list[str], name: str) -> str:
        with tempfile.TemporaryDirectory(prefix="gprof-ncu-import-") as tmp:
            res = proc.run(argv, log_dir=Path(log_dir) if log_dir else Path(tmp), name=name, timeout=timeout)
            if res.returncode != 0:
                raise ToolFailedError(f"ncu --import {path} exited with status {res.returncode}", argv=argv,
                                      returncode=res.returncode, log_tail=res.tail(), log=res.stderr)
            text = res.stdout.read_text(encoding="utf-8", errors="replace")
        return text if "\n" in text else text + "\n"  # a str without a newline would be taken for a file name

    try:
        rep = read_csv_raw(export(import_argv(tool.path, path), "ncu-import"), domain=domain, prefix=prefix)
    except ParseError as exc:
        raise ParseError(path, f"ncu --import gave no usable CSV: {exc.reason}", hint=exc.hint) from exc
    # the findings are read apart: a details page this reader cannot read costs the findings (the
    # report says why, NcuBackend.warnings), not the measurements of the raw page
    try:
        rules = read_csv_details(export(details_argv(tool.path, path), "ncu-import-details"), domain=domain,
                                 prefix=prefix)
        # the same report's kernel IDs: where the details page carries no NVTX column, the raw page's
        rules["variant"] = rules["variant"].where(rules["variant"].notna(),
                                                  rules["id"].map(dict(zip(rep.kernels["id"], rep.kernels["variant"]))))
        rep = replace(rep, rules=rules)
    except (ParseError, ToolFailedError) as exc:
        rep = replace(rep, rules_note=f"ncu's findings were not read from `ncu --import --csv --page details` "
                                      f"({exc.reason if isinstance(exc, ParseError) else exc.message})")
    return replace(rep, path=path)


# --------------------------------------------------------------------------------------------
# ncu's log (--log-file): what went wrong.

FAILURE_KINDS = ("permission", "no_kernels", "unknown_metric", "no_gpu", "other")

# Checked in this order: a permission error is followed by "No kernels were profiled", so the
# cause must win over the consequence. Wordings from ncu's output as users quote it (ncu 2022
# to 2025); the section ones could not be confirmed and are matched loosely.
_FAILURE_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("permission", re.compile(r"ERR_NVGPUCTRPERM|does not have permission to access NVIDIA GPU Performance Counters",
                              re.I)),
    ("unknown_metric", re.compile(r"Failed to find metric|(could not|failed to) find section|"
                                  r"(unknown|invalid) section|section\b.*\b(not found|does not exist)", re.I)),
    ("no_gpu", re.compile(r"Profiling is not supported on (this )?device|failed to connect to the CUDA driver|"
                          r"no CUDA-capable device|cudaErrorNoDevice|No supported GPUs?\b|"
                          r"Failed to initialize the profiler: LibraryNotLoaded", re.I)),
    ("no_kernels", re.compile(r"No kernels were profiled", re.I)),
)


def ncu_errors(log_text: str) -> list[str]:
    """The ==ERROR== and ==WARNING== lines of ncu's output, in order, stripped.

    Example:
        >>> ncu_errors("==PROF== Connected\\n==WARNING== No kernels were profiled.\\n")
        ['==WARNING== No kernels were profiled.']
    """
    return [ln.strip() for ln in (log_text or "").splitlines()
            if ln.lstrip().startswith(("==ERROR==", "==WARNING=="))]


def classify_ncu_failure(log_text: str) -> str:
    """One of FAILURE_KINDS for ncu's log text.

    Example:
        >>> classify_ncu_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission ...")
        'permission'
    """
    text = log_text or ""
    for kind, pattern in _FAILURE_PATTERNS:
        if pattern.search(text):
            return kind
    return "other"
