"""`--ops`, the one option of the operator view (reports/operators.py) that torch-trace and nsys
share: the tree printed under the table; under nsys also the runner's emit_nvtx, which gives
nsys an NVTX range per aten operator."""

from __future__ import annotations

from typing import Any

from orchestrator.backends.options import option

OPS_HELP = (
    "Also print each variant's aten operators as a tree with the kernels they launched: calls, Self CPU "
    "and Self CUDA per iteration, as key_averages() (report.json and report.html always hold it; "
    "nsys: the measured iterations run under torch.autograd.profiler.emit_nvtx)."
)


def ops_field() -> Any:
    """The options field `ops` (--ops, a flag): declared in the Options of torch-trace and nsys, so
    the request carries it (Request.options.ops) and the CLI prints the tree by it."""
    return option(False, "--ops", is_flag=True, help=OPS_HELP)
