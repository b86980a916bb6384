"""workload.json: what the runner ran, skipped and failed, and the samples it took, rewritten
after every change so that a crash keeps the rest; and the marks a stopped run leaves in it."""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

MANIFEST = "workload.json"
# the shape of workload.json, which the runner and the capture importers write and the reports read
SCHEMA_VERSION = 1
# the runner's exit code when the run folder would not take workload.json (a full disk): what it
# measured since the last save is lost (the parent says so: orchestrator/backends/base.py)
EXIT_NOT_SAVED = 4


class Manifest:
    """workload.json, rewritten atomically after every change so nothing collected is lost."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data
        self.save()

    def save(self) -> None:
        """Write workload.json: a temporary file renamed over it, so a failed write (a full disk)
        leaves the last complete one, and no half-written temporary beside it. Raises OSError
        naming workload.json."""
        # the parent's orchestrator.runfolder.write_json does the same; the child imports nothing above it
        tmp = self.path.with_suffix(".json.tmp")
        try:
            tmp.write_text(json.dumps(self.data, indent=1, default=str))
            os.replace(tmp, self.path)
        except OSError as exc:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc


def started(man: Manifest, name: str, step: str) -> None:
    """Say which variant the runner is on and doing what: a --timeout names it (the parent
    marks it `timed out`, see RunFolder.mark_timed_out)."""
    man.data["current"] = {"variant": name, "step": step}
    man.save()


def measuring(entry: dict, man: Manifest) -> None:
    """Say which variant is being measured: an interrupt marks it interrupted (see mark)."""
    entry["status"] = "measuring"
    started(man, entry["name"], "measuring")


def record_failure(entry: dict, exc: BaseException) -> None:
    entry.update(
        status="failed",
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(exc)),
    )


def mark(out: Path, status: str, error: str | None = None) -> None:
    """The run stopped (`status`: interrupted, failed): say so in out/workload.json, the variant
    being measured too, and skip those not started."""
    path = out / MANIFEST
    try:
        data = json.loads(path.read_text())
        data["status"] = status
        if error:
            data["error"] = error
        for v in data.get("variants", []):
            if v.get("status") == "measuring":
                v["status"] = status  # what it recorded so far may be in the profiler's output
            elif v.get("status") == "pending":
                v.update(status="skipped", reason="not run: the run stopped before it")
        Manifest(path, data)
    except (OSError, ValueError):
        pass  # nothing written yet, or the folder cannot take it: the exit code still tells
