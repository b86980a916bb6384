"""`gprof-orch exec ncu -- CMD` and `gprof-orch import FILE.ncu-rep`: a user's program under
Nsight Compute (every kernel it launches measured with its NVTX stack), or a report made by anyone.
The steps, as every backend has them: commands() builds the one `ncu --nvtx ... CMD` (pure; the
ncu backend's sections and metrics, so the table has its columns), execute() runs it through
orchestrator.proc (an import copies the report in: orchestrator/capture_ncu.py), report() writes
the synthetic workload.json of the report's NVTX ranges (ncu_manifest) and builds the report.
The folder it fills is an `ncu` one, which the ncu backend reads.

A kernel belongs to the innermost range of its NVTX stack that `--ranges DOMAIN@PREFIX` names;
the variant is the range's text after PREFIX. ncu keeps no range instances: they are counted from
the kernels' order (range_instances), each `--iters` iterations (default 1), as `exec nsys`
counts them; a report that sits in a gprof-orch `ncu` run folder keeps that run's variants,
iterations, labels and bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import proc
from orchestrator.backends import ncu_tool
from orchestrator.backends.base import Parsed, Step, ToolBackend
from orchestrator.backends.ncu import REPORT, NcuBackend, read_report
from orchestrator.backends.program_options import ProgramNcuOptions
from orchestrator.capture_finish import capture_report
from orchestrator.capture_manifest import capture_baseline, capture_workload, sibling_workload
from orchestrator.capture_ranges import ANY_DOMAIN, RangeFilter
from orchestrator.capture_request import ProgramRequest
from orchestrator.errors import GprofError, ParseError, ToolFailedError
from orchestrator.parsers import compressed
from orchestrator.runfolder import RunFolder
from workloads.devices import FLOP_UNITS, peak_flops
from workloads.nvtx_ranges import NVTX_DOMAIN, RANGE_PREFIX

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.ending import Ending
    from orchestrator.results import Run


class ProgramNcuBackend(ToolBackend[ProgramRequest]):
    """`exec ncu -- CMD` and a .ncu-rep's `import`: not a command of its own and not one of
    `all`'s backends; its run folder is the ncu backend's, read as an `ncu` run."""

    name = "program-ncu"
    tool = "ncu"
    mode = "capture"
    merged = None  # a user's program is not one of `all`'s backends
    description = "any program (exec ncu) under Nsight Compute, one variant per NVTX range"
    Options = ProgramNcuOptions

    @classmethod
    def tool_spec(cls):
        return NcuBackend.tool_spec()

    def commands(self, req: ProgramRequest, run_dir: Path) -> list[Step]:
        """`ncu --nvtx` over the whole program, one report in run_dir (pure)."""
        o: ProgramNcuOptions = self.opts(req)  # type: ignore[assignment]
        return [Step("ncu", NcuBackend.program_argv(self.exe(req), req.argv, run_dir, list(o.ncu_args)))]

    def execute(self, req: ProgramRequest, rf: RunFolder) -> None:
        """Run ncu over the program; a non-zero exit of either fails the run, the report ncu
        wrote kept (`gprof-orch import` reads it)."""
        (step,) = self.commands(req, rf.path.resolve())
        rf.add_command(step.name, step.argv)
        res = proc.run(step.argv, log_dir=rf.logs, name=step.name, timeout=req.timeout)
        if res.returncode != 0:
            kept = (
                " (the report it wrote is kept: `gprof-orch import` reads it)"
                if (rf.path / REPORT).exists()
                else ""
            )
            raise ToolFailedError(
                f"ncu (or the program under it) exited with status {res.returncode}{kept}",
                argv=step.argv,
                returncode=res.returncode,
                log_tail=res.tail(),
                log=res.stderr,
            )

    def parse(self, rf: RunFolder) -> Parsed:
        """Its folder is an `ncu` one: the ncu backend's reading."""
        return NcuBackend().parse(rf)

    def report(
        self,
        req: ProgramRequest,
        rf: RunFolder,
        error: GprofError | None,
        build: Callable[[RunFolder, Parsed | None], Run],
    ) -> Ending:
        """A capture's report (orchestrator/capture_finish.py): the synthetic workload.json of the
        report's ranges (ncu_manifest), written first, and the report built from the ncu report
        it read, read once. `exec ncu`'s ranges: every innermost range of any domain by default;
        an import's: those of the run folder it sits in, else gprof-orch's own."""
        if req.capture is None:
            domain, prefix = ncu_filter(req.ranges, None) if req.ranges is not None else (None, "")
            source, borrowed, copy = " ".join(req.argv), None, None
            rep_path = rf.path / REPORT
        else:
            src = Path(req.given or req.capture)
            source, borrowed = str(src), sibling_workload(src)
            domain, prefix = ncu_filter(req.ranges, borrowed)
            rep_path = copy = rf.path / (REPORT + compressed.suffix_of(src))
        read: list = []  # the report manifest() read, which the report is built from

        def manifest() -> dict[str, Any]:
            rep = read_report(rep_path, domain, prefix)
            read.append(rep)
            held = None
            if copy is not None and rep.kernels["variant"].dropna().empty:
                # say which ranges there are: every range, any domain
                held = list(
                    dict.fromkeys(ncu_tool.load(rep_path, domain=None, prefix="").kernels["variant"].dropna())
                )
            return ncu_manifest(
                rep,
                domain,
                prefix,
                name=req.workload_name(),
                source=source,
                iters=req.iters,
                borrowed=borrowed,
                held=held,
                compare_ranges=req.compare_ranges,
            )

        def parsed() -> Parsed | None:
            return NcuBackend().parsed_from(rf, read.pop()) if read else None

        return capture_report(rf, error, build, manifest, source=source, copy=copy, parsed=parsed)


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
    # the datasheet's peaks, for the % of peak of the tensor-core FLOPs ncu counted
    peaks, why = peak_flops(str(env.get("device_name") or ""))
    env.setdefault("peak_flops", peaks)
    env.setdefault("peak_flops_source", why)
    env.setdefault("flop_units", dict(FLOP_UNITS))
    return capture_workload(
        name,
        description=f"NVTX ranges ({domain or '*'}@{prefix}*) of {source}",
        baseline=baseline,
        compare_ranges=compare_ranges,
        borrowed=borrowed,
        device="cuda",
        iters=n_iters,
        nvtx={"domain": domain, "prefix": prefix},
        env=env,
        variants=variants,
    )


def range_instances(variant: pd.Series) -> dict[str, int]:
    """Each range's instances, counted from its kernels in launch order (ncu profiles serially):
    a new instance starts where a kernel of the range follows one of another range or of none.
    ncu keeps no instance of a range, so two instances with no profiled kernel between them read
    as one (a range that repeats back to back: set --iters instead)."""
    prev = variant.shift()
    starts = variant.notna() & (variant != prev)
    return {str(v): int(n) for v, n in variant[starts].value_counts(sort=False).items()}


__all__ = ["ProgramNcuBackend", "ncu_filter", "ncu_manifest", "range_instances"]
