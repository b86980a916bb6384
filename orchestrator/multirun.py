"""A parent run folder read back: every backend (`all`), every size/dtype (a sweep) or the one
point on every worker's GPU (each-gpu), as a MultiRun of its children's Runs, with its merged
table and its reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator import backends
from orchestrator.cluster.each_gpu import each_gpu_table, slow_lines
from orchestrator.errors import ParseError, ToolFailedError, ToolNotFoundError
from orchestrator.results import Run, build_report, heading, joined_words, report_doc, weighting_footer
from orchestrator.runfolder import WORKLOAD_MANIFEST, RunFolder, disk_error, run_exit_code
from reports.schema import concat

# -- several runs in one folder: every backend (`all`) or every size/dtype (a sweep) ----------------

# the kinds of parent folder: every backend, every size/dtype, the one point on every worker's GPU
MULTI_KINDS = ("all", "sweep", "each-gpu")
# the kinds whose page opens with the merged table, before a section per child
MERGED_FIRST = ("all", "each-gpu")


@dataclass
class MultiRun:
    """A parent run folder holding child runs: kind 'all' (one a backend), 'sweep' (one a size and
    dtype) or 'each-gpu' (one a worker's GPU). `table` is the merged table (all), the time-vs-size
    table (sweep) or the per-GPU table with the slow GPUs flagged (each-gpu)."""

    path: Path
    manifest: dict[str, Any]
    runs: dict[str, Run]
    skipped: dict[str, str]
    table: pd.DataFrame
    kind: str
    saved: bool = True
    # children whose results are there but could not be read (a damaged report): name -> why;
    # the table holds the others
    unreadable: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # its children as their names: each child's repr is in `runs` (results.Run.__repr__)
        return (
            f"MultiRun({str(self.path)!r}, kind={self.kind!r}, workload={self.manifest.get('workload')!r}, "
            f"status={self.status!r}, variants={len(self.workload.get('variants') or [])}, runs={list(self.runs)})"
        )

    @property
    def status(self) -> str:
        """The status of the whole sweep or `all` run from its manifest ("" if unrecorded)."""
        return self.manifest.get("status", "")

    @property
    def backend(self) -> str:
        """The kind of the multi-run ("all", "sweep", "each-gpu"), where a Run names its backend."""
        return self.kind

    @property
    def exit_code(self) -> int:
        """The exit code the whole run ended with (0 ok, 1 a child failed, 130 interrupted, ...)."""
        return run_exit_code(self.manifest)

    @property
    def frame(self) -> pd.DataFrame:
        """Every child run's unified long-form frame, concatenated (built on each access)."""
        return concat(r.frame for r in self.runs.values())

    @property
    def workload(self) -> dict[str, Any]:
        """The first child run's workload manifest ({} with no child): the children share the
        workload, so its name, device and env stand for all."""
        return next(iter(self.runs.values())).workload if self.runs else {}

    @property
    def kernels(self) -> pd.DataFrame:
        """Every child run's per-kernel breakdown, its child's name (backend, or size-dtype) in `run`."""
        # why lazy: it imports numpy, which importing multirun must not
        from reports.kernels import KERNEL_COLUMNS

        parts = [
            r.kernels.assign(run=name)
            for name, r in self.runs.items()
            if isinstance(getattr(r, "kernels", None), pd.DataFrame) and not r.kernels.empty
        ]
        if not parts:
            return pd.DataFrame(columns=["run", *KERNEL_COLUMNS])
        return pd.concat(parts, ignore_index=True)[["run", *KERNEL_COLUMNS]]

    def title(self) -> str:
        """The one-line heading of the merged table: workload, what was run (all backends, a
        sweep, each GPU), device and the folder."""
        w = self.workload
        dev = (w.get("env") or {}).get("device_name") or w.get("device", "")
        what = {"all": "all backends", "each-gpu": "each GPU"}.get(self.kind, "sweep")
        return heading(self.manifest.get("workload"), joined_words(what, dev and f"on {dev}"), self.path)

    def footer(self) -> list[str]:
        """The lines printed under the merged table: how the run ended, the children skipped or
        unreadable, each child's weighting note, and the legend of `all`'s columns."""
        lines = []
        if self.status not in ("ok", None):
            err = self.manifest.get("error")
            lines.append(
                f"run {self.status}" + (f": {err}" if err else "") + "; the tables hold what was collected"
            )
        lines += [f"{name}: skipped: {why}" for name, why in self.skipped.items()]
        lines += [
            f"{name}: unreadable, left out of the table: {why}" for name, why in self.unreadable.items()
        ]
        for name, r in self.runs.items():
            weighted = weighting_footer(r)
            if weighted:
                lines.append(f"{name}: {weighted}")
        if self.kind == "all":
            # why lazy: it imports numpy, which importing multirun must not
            from reports import merge

            lines.append(
                merge.legend(
                    backends.merged_sources(self.runs),
                    on_gpu=self.workload.get("device") == "cuda",
                    table=self.table,
                )
            )
        if self.kind == "each-gpu" and not self.table.empty:
            lines += slow_lines(self.table)
        return lines


def build_multi(
    rf: RunFolder,
    *,
    write: bool = True,
    children_write: bool | None = None,
    built: dict[str, Run] | None = None,
) -> MultiRun:
    """The MultiRun of a parent folder; with `write`, its reports (and, unless children_write
    says otherwise, its children's) rewritten. `built`: children's Runs already built from their
    folders as they ended (the run that made them), not parsed again."""
    # why lazy: it imports numpy, which importing multirun must not
    from reports import merge

    children_write = write if children_write is None else children_write

    kind = rf.manifest.get("kind", "all")
    runs: dict[str, Run] = {}
    skipped: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for name, child in (rf.manifest.get("children") or {}).items():
        if child.get("status") == "skipped":
            skipped[name] = child.get("reason", "")
            continue
        folder = rf.file(child.get("folder", name))
        if built and name in built and not children_write:
            runs[name] = built[name]
        elif (folder / WORKLOAD_MANIFEST).exists():
            try:
                child = RunFolder.open(folder)
                runs[name] = build_report(child, write=children_write and child.writable())
            except (ParseError, ToolNotFoundError, ToolFailedError) as exc:
                # one damaged result (or one whose export cannot be made) does not take the others' table with it
                unreadable[name] = exc.render().splitlines()[0]
        elif child.get("status") == "ok":
            # the parent saw it end with results: its folder was moved or deleted since
            what = "is missing" if not folder.exists() else f"holds no {WORKLOAD_MANIFEST}"
            unreadable[name] = f"its folder {what}, though it ended ok"
        else:
            skipped[name] = child.get("error", "no results")
    if kind == "all":
        first = next(iter(runs.values())).workload if runs else {}
        table = merge.merged_table(
            {n: r.table for n, r in runs.items()},
            backends.merged_sources(runs),
            first.get("baseline"),
            on_gpu=first.get("device") == "cuda",
        )
    elif kind == "each-gpu":
        table = each_gpu_table(runs)
    else:
        points = [(r.workload.get("numel", 0), r.workload.get("dtype", ""), r.table) for r in runs.values()]
        table = merge.sweep_table(points)
    multi = MultiRun(rf.path, rf.manifest, runs, skipped, table, kind, saved=False, unreadable=unreadable)
    if write:
        write_multi(multi)
    return multi


def write_multi(multi: MultiRun, drawn: dict | None = None) -> None:
    """A parent folder's reports; `drawn`: its page's sections drawn ahead (html.draw_section)."""
    # why lazy: it imports numpy, which importing multirun must not
    from reports import html, render

    sections = [(f"{n}", r.table) for n, r in multi.runs.items()]
    if multi.kind in MERGED_FIRST:
        sections.insert(0, ("merged" if multi.kind == "all" else "each GPU", multi.table))
    try:
        render.write_all(
            multi.table,
            multi.frame,
            multi.path,
            title=multi.title(),
            footer=multi.footer(),
            doc=report_doc(multi),
        )
        html.write_html(
            multi.path / "report.html",
            multi.title(),
            sections,
            sweep=multi.table if multi.kind == "sweep" else None,
            meta={"run": str(multi.path), "status": multi.status},
            notes=multi.footer(),
            kernels=multi.kernels,
            drawn=drawn,
        )
    except OSError as exc:
        raise disk_error(multi.path, exc) from exc
    multi.saved = True
