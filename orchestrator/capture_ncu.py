"""`gprof-orch import FILE.ncu-rep`: an Nsight Compute report made by anyone, reported per NVTX
range as `gprof-orch ncu` reports its own.

A kernel belongs to the innermost range of its NVTX stack that `--ranges DOMAIN@PREFIX` names
(ncu records each kernel's stack when run with `--nvtx`); the variant is the range's text after
PREFIX. ncu keeps no range instances: they are counted from the kernels' order
(range_instances), each `--iters` iterations (default 1), as `exec nsys` counts them; a report
that sits in a gprof-orch `ncu` run folder keeps that run's variants, iterations, labels and bytes. The run folder is an `ncu` one:
the copy of the report, a synthetic workload.json, the ncu backend's parse and the same table.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import backends
from orchestrator.backends import ncu_tool
from orchestrator.backends.ncu import REPORT, read_report
from orchestrator.capture_finish import capture_report
from orchestrator.capture_manifest import capture_baseline
from orchestrator.capture_ranges import ANY_DOMAIN, RangeFilter
from orchestrator.capture_request import ProgramRequest
from orchestrator.errors import ParseError, UsageError
from orchestrator.execution import Launch, run_request
from workloads.manifest import SCHEMA_VERSION as WORKLOAD_SCHEMA
from workloads.nvtx_ranges import NVTX_DOMAIN, RANGE_PREFIX

if TYPE_CHECKING:
    import pandas as pd

PROGRAM_NCU = "program-ncu"  # the backend that runs `exec ncu` (orchestrator/backends/program_ncu.py)


def ncu_filter(spec: str | None, borrowed: dict[str, Any] | None) -> tuple[str | None, str]:
    """(domain, prefix) of the ranges that are variants: `--ranges`, else the borrowed run's, else
    gprof-orch's own (gprof@variant:). A PREFIX alone looks in every domain."""
    if spec is None:
        nv = (borrowed or {}).get("nvtx") or {}
        if nv.get("prefix") is not None:
            return nv.get("domain") or None, nv["prefix"]
        return NVTX_DOMAIN, RANGE_PREFIX
    filt = RangeFilter.parse(spec)
    return (None if filt.domain == ANY_DOMAIN else filt.domain), filt.prefix


def import_ncu(
    src: Path, ranges: str | None, borrowed: dict[str, Any] | None, cli_argv, options: dict[str, Any]
):
    """import_capture() of a `.ncu-rep` (also `.xz`/`.gz`): an `ncu` run folder whose variants
    are the report's NVTX ranges. Raises ParseError (exit 4) when no kernel is in a matching
    range, naming the ranges the report holds."""
    domain, prefix = ncu_filter(ranges, borrowed)
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]  # so that `compare` pairs it with the run it came from
    if options.pop("nsys", None) is not None:
        raise UsageError("--nsys applies to nsys captures, not to a .ncu-rep")
    req = ProgramRequest(ranges=ranges, capture=str(src.resolve()), tool="nsys", **options).validate()
    name = req.name or src.name.split(".ncu-rep")[0] or "capture"
    program = {"capture": str(src.resolve()), "tool": "ncu", "ranges": f"{domain or ''}@{prefix}"}
    suffix = next((s for s in (".xz", ".gz") if src.name.endswith(s)), "")

    def step(rf) -> None:
        dest = rf.path / (REPORT + suffix)
        shutil.copyfile(src, dest)
        rf.add_command("import", ["cp", str(src), str(dest)])

    def report(rf, error):
        dest = rf.path / (REPORT + suffix)

        read: list = []  # the report manifest() read, which the report is built from

        def manifest() -> dict[str, Any]:
            rep = read_report(dest, domain, prefix)
            read.append(rep)
            held = None
            if rep.kernels["variant"].dropna().empty:  # say which ranges there are: every range, any domain
                held = list(
                    dict.fromkeys(ncu_tool.load(dest, domain=None, prefix="").kernels["variant"].dropna())
                )
            return ncu_manifest(
                rep,
                domain,
                prefix,
                name=name,
                source=str(src),
                iters=req.iters,
                borrowed=borrowed,
                held=held,
                compare_ranges=req.compare_ranges,
            )

        return capture_report(
            rf, req, error, source=str(src), manifest=manifest, copy=dest, parsed=_parsed(rf, read)
        )

    facts = dict(kind="import", notes=[], program=program)
    return run_request(req, cli_argv, launch=Launch("ncu", name, {}, step, facts, report))


def ncu_manifest(
    rep,
    domain: str | None,
    prefix: str,
    *,
    name: str,
    source: str,
    iters: int | None,
    borrowed: dict[str, Any] | None = None,
    held: list[str] | None = None,
    compare_ranges: bool = False,
) -> dict[str, Any]:
    """The synthetic workload.json of a read `.ncu-rep` (ncu_rep.NcuReport): one variant per
    range name, in order of first kernel; a borrowed run's (its folder's workload.json) variants,
    labels, bytes, iterations and environment where it has them. `held`: the innermost range
    names the report holds, for the error when none matches."""
    k = rep.kernels
    found = list(dict.fromkeys(k["variant"].dropna())) if "variant" in k else []
    if not found:
        raise ParseError(
            source,
            f"no kernel is inside an NVTX range {domain or '*'}@{prefix}*",
            hint=(
                f"it holds: {', '.join(held[:25])}; choose with --ranges DOMAIN@PREFIX"
                if held
                else "were the kernels profiled with `ncu --nvtx`? choose the ranges with --ranges"
            ),
        )
    borrowed = borrowed or {}
    known = {v["name"]: v for v in borrowed.get("variants", []) if isinstance(v, dict) and "name" in v}
    own = borrowed.get("iters") if isinstance(borrowed.get("iters"), int) else None
    # a gprof-orch run's own report: its variants' iterations; anyone's: each range instance is
    # `iters` iterations (1), as `exec nsys` counts them
    per = (
        {v: own for v in found}
        if own
        else {v: n * (iters or 1) for v, n in range_instances(k["variant"]).items()}
    )
    variants = [
        {
            "name": v,
            "label": known.get(v, {}).get("label", v),
            "status": "ok",
            "bytes_moved": known.get(v, {}).get("bytes_moved"),
            "iters": per[v],
        }
        for v in found
    ]
    n_iters = set(per.values()).pop() if len(set(per.values())) == 1 else None
    baseline = capture_baseline(found, found[0], borrowed, compare_ranges)
    env = dict(borrowed.get("env") or {})
    env.setdefault("device", "cuda")
    named = (
        rep.metrics.loc[rep.metrics["metric"] == "device__attribute_display_name", "raw_value"]
        if "metric" in rep.metrics
        else ()
    )
    if len(named) and str(named.iloc[0]).strip():  # the GPU ncu profiled on: the title names it
        env.setdefault("device_name", str(named.iloc[0]).strip())
    return {
        "schema_version": WORKLOAD_SCHEMA,
        "workload": name,
        "workload_source": "capture",
        "description": f"NVTX ranges ({domain or '*'}@{prefix}*) of {source}",
        "baseline": baseline,
        "compare_ranges": compare_ranges,
        "mode": "capture",
        "shape": borrowed.get("shape") or [],
        "numel": borrowed.get("numel"),
        "dtype": borrowed.get("dtype") or "",
        "device": "cuda",
        "iters": n_iters,
        "nvtx": {"domain": domain, "prefix": prefix, "api": "capture"},
        "env": env,
        "status": "ok",
        "variants": variants,
    }


def range_instances(variant: pd.Series) -> dict[str, int]:
    """Each range's instances, counted from its kernels in launch order (ncu profiles serially):
    a new instance starts where a kernel of the range follows one of another range or of none.
    ncu keeps no instance of a range, so two instances with no profiled kernel between them read
    as one (a range that repeats back to back: set --iters instead)."""
    prev = variant.shift()
    starts = variant.notna() & (variant != prev)
    return {str(v): int(n) for v, n in variant[starts].value_counts(sort=False).items()}


def profile_program_ncu(argv: list[str], *, ranges: str | None = None, cli_argv=None, **options: Any):
    """`gprof-orch exec ncu -- CMD`: run CMD under Nsight Compute (every kernel it launches is
    replayed and measured: limit them with `--ncu-arg=--launch-count=N` or `-k REGEX`) and report
    it per NVTX range as `import` reports a `.ncu-rep`. Default ranges: every innermost range of
    any domain. `ncu=`, `ncu_args=`: the program-ncu backend's options. A non-zero exit of ncu or
    the program fails the run (ToolFailedError, exit 1); the folder keeps whatever report ncu
    wrote (`gprof-orch import` reads it)."""
    be = backends.get(PROGRAM_NCU)  # its commands() and execute() run ncu, as `exec nsys`'s backend does
    req = ProgramRequest.of(be, argv=list(argv), tool="ncu", ranges=ranges, **options).validate()
    domain, prefix = ncu_filter(ranges, None) if ranges is not None else (None, "")
    found = be.require(req)  # missing: fails before a folder exists
    name = req.workload_name()
    program = {"argv": req.argv, "tool": "ncu", "ranges": f"{domain or '*'}@{prefix}"}

    def report(rf, error):
        read: list = []  # the report manifest() read, which the report is built from

        def manifest() -> dict[str, Any]:
            rep = read_report(rf.path / REPORT, domain, prefix)
            read.append(rep)
            return ncu_manifest(
                rep,
                domain,
                prefix,
                name=name,
                source=" ".join(req.argv),
                iters=req.iters,
                compare_ranges=req.compare_ranges,
            )

        return capture_report(
            rf,
            req,
            error,
            source=" ".join(req.argv),
            manifest=manifest,
            parsed=_parsed(rf, read),
        )

    facts = dict(kind="exec", notes=[], program=program)
    return run_request(
        req, cli_argv, launch=Launch("ncu", name, found, partial(be.execute, req), facts, report)
    )


def _parsed(rf, read: list):
    """The ncu backend's Parsed of the report manifest() read (into `read`): the file read once."""

    def parsed():
        return backends.get("ncu").parsed_from(rf, read.pop()) if read else None

    return parsed
