"""Nsight Compute results -> per-kernel DataFrames: a `.ncu-rep` read with NVIDIA's `ncu_report`
module (pip install ncu-report; no GPU, no ncu needed), or the CSV of `ncu --csv --page raw`.

Pure: reads a file, returns frames; never imports torch, and imports `ncu_report` only inside
the functions that need it. Both readers give the same `NcuReport`, with every metric's value
normalised at parse time to base units (ns, bytes, bytes/s, Hz; percentages stay in percent,
unit "pct"; see `normalize_unit`). A kernel's variant is the innermost NVTX push/pop range of
`domain` whose name starts with `prefix` (`nvtx.annotate("variant:a*a", domain="gprof")` ->
variant "a*a").

This module is the public entry and the `ncu_report` reader; the stages live beside it:
ncu_metrics (columns, units, key metrics, roofline rates), ncu_framing (the file's framing and
session records), ncu_frames (records -> frames), ncu_csv (ncu's CSV pages). `read_report`
reads in this process; a corrupt file can abort the interpreter inside ncu_report, so the
backend reads through orchestrator.backends.ncu_tool, which runs `extract_raw` in a child.
"""

from __future__ import annotations

import importlib.util
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.errors import ParseError, ToolNotFoundError
from orchestrator.parsers.ncu_csv import read_csv_details, read_csv_raw
from orchestrator.parsers.ncu_frames import build_report
from orchestrator.parsers.ncu_framing import inspect_container
from orchestrator.parsers.ncu_metrics import (
    DEFAULT_DOMAIN,
    DEFAULT_PREFIX,
    KERNEL_COLUMNS,
    LAUNCH_METRICS,
    METRIC_COLUMNS,
    ROOFLINE_RATES,
    ROOFLINE_SECTION,
    RULE_COLUMNS,
    TENSOR_FLOPS,
    NcuReport,
    normalize_unit,
    tensor_counters,
)

__all__ = [
    "DEFAULT_DOMAIN",
    "DEFAULT_PREFIX",
    "KERNEL_COLUMNS",
    "LAUNCH_METRICS",
    "METRIC_COLUMNS",
    "PIP_HINT",
    "ROOFLINE_RATES",
    "ROOFLINE_SECTION",
    "RULE_COLUMNS",
    "TENSOR_FLOPS",
    "NcuReport",
    "extract_raw",
    "have_ncu_report",
    "normalize_unit",
    "read_csv_details",
    "read_csv_raw",
    "read_report",
    "tensor_counters",
]

PIP_HINT = (
    "pip install ncu-report (reads .ncu-rep files on any machine, no GPU needed), "
    "or install Nsight Compute and pass its ncu executable"
)

# `extract_raw` returns plain data (picklable), so it can run in a child process;
# `build_report` turns it into frames in the caller.
_MSG_TYPES = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP_TYPES = {0: "unknown", 1: "local", 2: "global"}


def have_ncu_report() -> bool:
    """Whether NVIDIA's ncu_report module can be imported here (without importing it)."""
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


def _rule_record(kid: int, r: dict) -> dict:
    msg = r.get("rule_message") or {}
    speedup = r.get("speedup_estimation") or {}
    return {
        "id": kid,
        "section": r.get("section_identifier"),
        "rule": r.get("rule_identifier"),
        "rule_name": r.get("name"),
        "type": _MSG_TYPES.get(int(msg.get("type", 0)), str(msg.get("type"))),
        "title": msg.get("title"),
        "message_raw": msg.get("message"),
        "speedup_type": _SPEEDUP_TYPES.get(int(speedup["type"])) if speedup else None,
        "estimated_speedup_pct": float(speedup["speedup"]) if speedup else math.nan,
        "focus_metrics": "; ".join(f"{f['name']}={f['value']:g}" for f in r.get("focus_metrics", [])),
    }


def extract_raw(path: str) -> dict:
    """The report's kernels, metrics and rule results as plain, picklable records (what
    `build_report` takes), read with ncu_report in this process.

    Example:
        >>> raw = extract_raw("run/report.ncu-rep")
        >>> len(raw["kernels"]), raw["metrics"][0]
    """
    import ncu_report

    ctx = ncu_report.load_report(path)
    kernels, metrics, rules = [], [], []
    kid = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            act = rng.action_by_idx(ai)
            kernels.append(
                {
                    "id": kid,
                    "kernel": act.name(act.NameBase_FUNCTION),
                    "kernel_demangled": act.name(act.NameBase_DEMANGLED),
                    "nvtx": _nvtx_stack(act),
                    "launch": {},
                }
            )
            for name in act.metric_names():
                m = act.metric_by_name(name)
                value = m.value()
                number = (
                    float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
                )
                metrics.append((kid, name, value, m.unit(), number))
            rules.extend(_rule_record(kid, r) for r in act.rule_results_as_dicts())
            kid += 1
    return {"kernels": kernels, "metrics": metrics, "rules": rules}


def _extract_here(path: Path) -> dict:
    try:
        return extract_raw(str(path))
    except (RuntimeError, SystemError, TypeError, AttributeError, ValueError, IndexError, OSError) as exc:
        raise ParseError(path, f"ncu_report could not read it ({type(exc).__name__}: {exc})") from exc


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


def read_report(
    path: str | Path,
    *,
    domain: str | None = DEFAULT_DOMAIN,
    prefix: str = DEFAULT_PREFIX,
    extract: Callable[[Path], dict] | None = None,
) -> NcuReport:
    """Read a `.ncu-rep` with NVIDIA's ncu_report module.

    `domain`/`prefix` name the NVTX ranges that mark variants (domain None: any domain).
    The file's framing is checked first, and a report without kernels is a ParseError (ncu_report
    says nothing about either). `extract` reads the raw records (default: `extract_raw` in this
    process); orchestrator.backends.ncu_tool.read_report passes one that runs it in a child
    process, since ncu_report can abort the interpreter on a corrupt file.

    Example:
        >>> rep = read_report("run/square.ncu-rep")
        >>> rep.kernels[["variant", "kernel", "duration_ns", "dram_throughput_pct"]]
    """
    path = Path(path)
    session = inspect_container(path)
    if not have_ncu_report():
        raise ToolNotFoundError(f"cannot read {path}: the ncu_report module is not installed", hint=PIP_HINT)
    raw = (extract or _extract_here)(path)
    if not raw["kernels"]:
        raise ParseError(
            path,
            "holds no profiled kernels: empty, truncated or not an Nsight Compute report",
            hint="ncu writes no report when it profiled nothing; check its log",
        )
    command_line = session.get("command_line")
    target = session.get("Nsight Compute Target")
    version = re.match(r"\d+(\.\d+)+", target) if target else None
    rep = build_report(path, raw, domain=domain, prefix=prefix, source="ncu_report")
    return replace(
        rep,
        ncu_version=version.group(0) if version else target,
        clock_control=_option(command_line, "--clock-control"),
        cache_control=_option(command_line, "--cache-control"),
        command_line=command_line,
        session=session,
    )
