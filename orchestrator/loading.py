"""A run folder read back: a Run (one backend's folder) or a MultiRun (a parent folder: `all`,
a sweep, --each-gpu), rebuilt from what the folder holds; no GPU needed."""

from __future__ import annotations

from pathlib import Path

from orchestrator import backends
from orchestrator.capture_manifest import record_attribute
from orchestrator.errors import ParseError, UsageError
from orchestrator.multirun import MULTI_KINDS, MultiRun, build_multi
from orchestrator.results import Run, build_report
from orchestrator.runfolder import RunFolder


def load_run(path: str | Path, *, write: bool = False, attribute: str | None = None) -> Run | MultiRun:
    """Rebuild a Run (or a MultiRun: `all` and sweep folders) from its folder; no GPU needed.
    It only reads. With `write` (what `gprof-orch report` does), its reports are rewritten in
    the folder, unless the folder is read-only: then nothing is written and `.saved` is False.
    `attribute` (with `write`; an nsys capture's folder): how its launches go to ranges ("window",
    "thread": `exec nsys --attribute`), recorded in the folder before it is rebuilt by it."""
    rf = RunFolder.open(path)
    if attribute is not None:
        if not write:
            raise UsageError("load_run(attribute=...) records the choice in the folder: pass write=True")
        record_attribute(rf, attribute)
    write = write and rf.writable()
    if rf.manifest.get("kind") in MULTI_KINDS:
        return build_multi(rf, write=write)
    backend = rf.manifest.get("backend")
    if not isinstance(backend, str) or backend not in backends.BACKENDS:
        raise ParseError(rf.path, f"unknown backend {rf.manifest.get('backend')!r} in the manifest")
    return build_report(rf, write=write)
