"""The ncu backend's side of reading a report: what runs a program to do it, and what reads
ncu's log. The parsers (orchestrator.parsers.ncu_rep, ncu_csv) only read files.

- `read_report`: ncu_report in a child process. Seen with ncu-report 2026.3.1 on reports of
  ncu 2025.3.1: one zeroed byte at the wrong place in an otherwise intact file makes the
  library abort the whole interpreter (protobuf `Check failed: count >= 0`, SIGABRT); in a
  child that costs a ParseError instead of the caller's process.
- `load`: that, or without the ncu_report module, `ncu --import` exporting the report's raw and
  details pages as CSV for the parser.
- `ncu_errors`, `classify_ncu_failure`: what ncu's `--log-file` says went wrong.
- `on_this_gpu`: which of some metrics the attached GPU has (`ncu --query-metrics`), for the
  metrics whose names differ by chip: ncu fails a whole run on one it does not know.
"""

from __future__ import annotations

import functools
import os
import pickle
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from orchestrator import proc, tools
from orchestrator.errors import ParseError, ToolFailedError, ToolNotFoundError
from orchestrator.parsers import compressed, ncu_rep
from orchestrator.parsers.ncu_framing import inspect_container
from orchestrator.parsers.ncu_rep import DEFAULT_DOMAIN, DEFAULT_PREFIX, PIP_HINT, NcuReport

# --------------------------------------------------------------------------------------------
# ncu_report in a child process.

_CHILD = (
    "import pickle, sys\n"
    "from orchestrator.parsers.ncu_rep import extract_raw\n"
    "sys.stdout.buffer.write(pickle.dumps(extract_raw(sys.argv[1]), protocol=pickle.HIGHEST_PROTOCOL))\n"
)


def _extract_isolated(path: Path, timeout: float | None) -> dict:
    package_root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    with tempfile.TemporaryDirectory(prefix="gprof-ncu-read-") as tmp:
        res = proc.run(
            [sys.executable, "-c", _CHILD, str(path)],
            log_dir=Path(tmp),
            name="ncu_report",
            timeout=timeout,
            env=env,
        )
        if res.returncode != 0:
            lines = [ln for ln in proc.log_tail(res.stderr, 40).splitlines() if ln.strip()]
            detail = next((ln for ln in reversed(lines) if "Check failed" in ln), lines[-1] if lines else "")
            how = (
                f"killed by signal {-res.returncode}"
                if res.returncode < 0
                else f"exit status {res.returncode}"
            )
            raise ParseError(
                path,
                f"ncu_report could not read it ({how}): {detail.strip()}",
                hint="the file is corrupt or not written by a compatible ncu; profile again",
            )
        with open(res.stdout, "rb") as fh:
            return pickle.load(fh)


def read_report(
    path: str | Path,
    *,
    domain: str | None = DEFAULT_DOMAIN,
    prefix: str = DEFAULT_PREFIX,
    timeout: float | None = 600.0,
) -> NcuReport:
    """`ncu_rep.read_report` with ncu_report run in a child process: a file that makes it abort
    is a ParseError naming the file. About 0.7 s slower than reading in this process.

    Example:
        >>> rep = read_report("run/square.ncu-rep")
        >>> rep.kernels[["variant", "kernel", "duration_ns", "dram_throughput_pct"]]
    """
    return ncu_rep.read_report(
        path, domain=domain, prefix=prefix, extract=lambda p: _extract_isolated(p, timeout)
    )


# --------------------------------------------------------------------------------------------
# The metrics of the attached GPU.


def query_argv(ncu: str | Path) -> list[str]:
    """The command that lists the attached GPU's metrics, one base name first on each line."""
    return [str(ncu), "--query-metrics"]


def listed_metrics(text: str) -> frozenset[str]:
    """The base metric names of `ncu --query-metrics` output: each line's first word that looks
    like a metric (unit__name); headers and descriptions are not."""
    return frozenset(
        w for w in (line.split(maxsplit=1)[0] for line in text.splitlines() if line.strip()) if "__" in w
    )


@functools.lru_cache(maxsize=8)
def _gpu_metrics(ncu: str, timeout: float) -> frozenset[str]:
    with tempfile.TemporaryDirectory(prefix="gprof-ncu-query-") as tmp:
        try:
            res = proc.run(query_argv(ncu), log_dir=Path(tmp), name="query", timeout=timeout)
        except (ToolFailedError, ToolNotFoundError):
            return frozenset()
        if res.returncode != 0:
            return frozenset()
        return listed_metrics(res.stdout.read_text(errors="replace"))


def on_this_gpu(ncu: str | Path, metrics: list[str], timeout: float = 120.0) -> list[str]:
    """Those of `metrics` (full names, `base.rollup`) whose base the attached GPU has, in their
    order; [] when ncu cannot list them (no GPU, an old ncu): the run goes on without them.
    One query per ncu per process (about a second).

    Example:
        >>> on_this_gpu("ncu", ["sm__ops_path_tensor_src_bf16_dst_fp32.sum"])
        ['sm__ops_path_tensor_src_bf16_dst_fp32.sum']
    """
    known = _gpu_metrics(str(ncu), timeout)
    return [m for m in metrics if m.split(".", 1)[0] in known]


# --------------------------------------------------------------------------------------------
# One entry point: ncu_report when installed, else ncu's own CSV export.


def import_argv(ncu: str | Path, path: str | Path) -> list[str]:
    """The command that exports a report's raw page as CSV."""
    return [str(ncu), "--import", str(path), "--csv", "--page", "raw"]


def details_argv(ncu: str | Path, path: str | Path) -> list[str]:
    """The command that exports a report's details page, with ncu's rule results, as CSV."""
    return [str(ncu), "--import", str(path), "--csv", "--page", "details"]


def load(
    path: str | Path,
    *,
    ncu: str | Path | None = None,
    domain: str | None = DEFAULT_DOMAIN,
    prefix: str = DEFAULT_PREFIX,
    reader: str = "auto",
    log_dir: str | Path | None = None,
    timeout: float | None = 600.0,
) -> NcuReport:
    """Read a `.ncu-rep`: with ncu_report (in a child process, `read_report`) when it is
    importable (reader "auto" or "ncu_report"), otherwise (or with reader "ncu") by running
    `ncu --import PATH --csv --page raw` with the given `ncu`, $GPROF_NCU, or one found on PATH /
    in NVIDIA's install locations. ToolNotFoundError when neither is available. A `.xz` or `.gz`
    report is read the same.

    Example:
        >>> rep = load("run/ncu/square.ncu-rep")
        >>> rep.kernels.groupby("variant")["duration_ns"].median()
    """
    if reader not in ("auto", "ncu_report", "ncu"):
        raise ValueError(f"reader must be auto, ncu_report or ncu, not {reader!r}")
    path = Path(path)
    if compressed.is_compressed(path):  # report.ncu-rep.xz / .gz: both readers need a real file
        with compressed.plain_file(path) as plain:
            rep = load(
                plain, ncu=ncu, domain=domain, prefix=prefix, reader=reader, log_dir=log_dir, timeout=timeout
            )
        return replace(rep, path=path)
    if reader == "ncu_report" or (reader == "auto" and ncu_rep.have_ncu_report()):
        return read_report(path, domain=domain, prefix=prefix, timeout=timeout)
    try:
        tool = tools.find("ncu", ncu, with_version=False)
    except ToolNotFoundError as exc:
        raise ToolNotFoundError(
            f"cannot read {path}: the ncu_report module is not installed and no ncu "
            f"executable was found ({exc.message})",
            hint=PIP_HINT,
        ) from exc
    inspect_container(path)
    return _read_with_ncu_import(
        path, tool.path, domain=domain, prefix=prefix, log_dir=log_dir, timeout=timeout
    )


def _export_page(
    path: Path, argv: list[str], name: str, log_dir: str | Path | None, timeout: float | None
) -> str:
    with tempfile.TemporaryDirectory(prefix="gprof-ncu-import-") as tmp:
        res = proc.run(argv, log_dir=Path(log_dir) if log_dir else Path(tmp), name=name, timeout=timeout)
        if res.returncode != 0:
            raise ToolFailedError(
                f"ncu --import {path} exited with status {res.returncode}",
                argv=argv,
                returncode=res.returncode,
                log_tail=res.tail(),
                log=res.stderr,
            )
        text = res.stdout.read_text(encoding="utf-8", errors="replace")
    return text if "\n" in text else text + "\n"  # a str without a newline would be taken for a file name


def _read_with_ncu_import(
    path: Path,
    ncu: Path,
    *,
    domain: str | None,
    prefix: str,
    log_dir: str | Path | None,
    timeout: float | None,
) -> NcuReport:
    try:
        rep = ncu_rep.read_csv_raw(
            _export_page(path, import_argv(ncu, path), "ncu-import", log_dir, timeout),
            domain=domain,
            prefix=prefix,
        )
    except ParseError as exc:
        raise ParseError(path, f"ncu --import gave no usable CSV: {exc.reason}", hint=exc.hint) from exc
    # the findings are read apart: a details page this reader cannot read costs the findings (the
    # report says why, its warnings in NcuBackend.parse), not the measurements of the raw page
    try:
        text = _export_page(path, details_argv(ncu, path), "ncu-import-details", log_dir, timeout)
        rules = ncu_rep.read_csv_details(text, domain=domain, prefix=prefix)
        # the same report's kernel IDs: where the details page carries no NVTX column, the raw page's
        rules["variant"] = rules["variant"].where(
            rules["variant"].notna(), rules["id"].map(dict(zip(rep.kernels["id"], rep.kernels["variant"])))
        )
        rep = replace(rep, rules=rules)
    except (ParseError, ToolFailedError) as exc:
        rep = replace(
            rep,
            rules_note=f"ncu's findings were not read from `ncu --import --csv --page details` "
            f"({exc.reason if isinstance(exc, ParseError) else exc.message})",
        )
    return replace(rep, path=path)


# --------------------------------------------------------------------------------------------
# ncu's log (--log-file): what went wrong.

FAILURE_KINDS = ("permission", "no_kernels", "unknown_metric", "no_gpu", "other")

# Checked in this order: a permission error is followed by "No kernels were profiled", so the
# cause must win over the consequence. Wordings from ncu's output as users quote it (ncu 2022
# to 2025); the section ones could not be confirmed and are matched loosely.
_FAILURE_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "permission",
        re.compile(
            r"ERR_NVGPUCTRPERM|does not have permission to access NVIDIA GPU Performance Counters", re.I
        ),
    ),
    (
        "unknown_metric",
        re.compile(
            r"Failed to find metric|(could not|failed to) find section|"
            r"(unknown|invalid) section|section\b.*\b(not found|does not exist)",
            re.I,
        ),
    ),
    (
        "no_gpu",
        re.compile(
            r"Profiling is not supported on (this )?device|failed to connect to the CUDA driver|"
            r"no CUDA-capable device|cudaErrorNoDevice|No supported GPUs?\b|"
            r"Failed to initialize the profiler: LibraryNotLoaded",
            re.I,
        ),
    ),
    ("no_kernels", re.compile(r"No kernels were profiled", re.I)),
)


def ncu_errors(log_text: str) -> list[str]:
    """The ==ERROR== and ==WARNING== lines of ncu's output, in order, stripped.

    Example:
        >>> ncu_errors("==PROF== Connected\\n==WARNING== No kernels were profiled.\\n")
        ['==WARNING== No kernels were profiled.']
    """
    return [
        ln.strip()
        for ln in (log_text or "").splitlines()
        if ln.lstrip().startswith(("==ERROR==", "==WARNING=="))
    ]


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
