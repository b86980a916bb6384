"""The run folder: every run leaves one, with its raw artifacts, logs, exact commands, a
manifest, and the report.

    gprof-runs/<UTC time>-<backend>-<workload>/
        manifest.json     schema version, status, arguments, environment, tools, commands
        commands.sh       the exact commands, one a line, as a shell would take them
        logs/             stdout and stderr of every command
        workload.json     what the runner ran, skipped and failed (and raw samples)
        trace.json | report.nsys-rep + report.sqlite | report.ncu-rep   raw profiler output
        frame.csv         the unified long-form frame
        report.csv/.json/.md   the rendered per-variant table
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.errors import GprofError, ParseError, UsageError
from reports.schema import SCHEMA_VERSION

DEFAULT_ROOT = Path("gprof-runs")
MANIFEST = "manifest.json"
WORKLOAD_MANIFEST = "workload.json"  # written by the runner (workloads/runner.py)
STATUSES = ("running", "ok", "failed", "interrupted")


def _utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _writable_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output folder {path}: {exc.strerror}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"output folder {path} is not writable")


@dataclass
class RunFolder:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, backend: str, workload: str, *, out: Path | None = None, root: Path | None = None,
               request: dict[str, Any] | None = None, argv: list[str] | None = None) -> "RunFolder":
        """A new, empty run folder. `out` is used as is (must be empty or absent); otherwise a
        unique `<root>/<UTC time>-<backend>-<workload>` is made. mkdir is the lock: two runs
        started at once never share a folder."""
        if out is not None:
            out = Path(out)
            _writable_dir(out.parent if out.parent != Path("") else Path("."))
            try:
                out.mkdir(parents=True, exist_ok=False)
            except FileExistsError:
                if any(out.iterdir()):
                    raise UsageError(f"--out {out} exists and is not empty; choose a new folder") from None
            except OSError as exc:
                raise UsageError(f"cannot create --out {out}: {exc.strerror}") from exc
            if not os.access(out, os.W_OK | os.X_OK):
                raise UsageError(f"--out {out} is not writable")
            # claim it: a second run on the same --out sees our marker and refuses
            try:
                fd = os.open(out / ".lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.close(fd)
            except FileExistsError:
                raise UsageError(f"--out {out} is in use by another run") from None
            path = out
        else:
            root = Path(root or DEFAULT_ROOT)
            _writable_dir(root)
            base = f"{_utc_stamp()}-{backend}-{workload}"
            for i in range(1000):
                path = root / (base if i == 0 else f"{base}-{i + 1}")
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    continue
            else:
                raise UsageError(f"cannot find a free run folder name under {root}")
        (path / "logs").mkdir(exist_ok=True)
        rf = cls(path, {
            "schema_version": SCHEMA_VERSION,
            "tool": "gprof-orch",
            "backend": backend,
            "workload": workload,
            "status": "running",
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "argv": argv or [],
            "request": request or {},
            "commands": [],
        })
        rf.save()
        return rf

    @classmethod
    def open(cls, path: Path | str) -> "RunFolder":
        """An existing run folder, its manifest checked."""
        path = Path(path)
        mpath = path / MANIFEST
        if not path.is_dir():
            raise ParseError(path, "no such run folder")
        if not mpath.is_file():
            raise ParseError(path, f"not a gprof-orch run folder (no {MANIFEST})")
        try:
            manifest = json.loads(mpath.read_text())
        except (OSError, ValueError) as exc:
            raise ParseError(mpath, f"corrupt manifest ({exc})") from exc
        if not isinstance(manifest, dict) or "schema_version" not in manifest:
            raise ParseError(mpath, "manifest has no schema_version")
        if int(manifest["schema_version"]) > SCHEMA_VERSION:
            raise ParseError(mpath, f"written by a newer gprof-orch (schema {manifest['schema_version']}, "
                                    f"this one reads up to {SCHEMA_VERSION})", hint="upgrade gprof-orch")
        return cls(path, manifest)

    # -- paths, always inside the folder --------------------------------------------------------
    def file(self, name: str) -> Path:
        """A file of this run by its name in the manifest; never a path outside the folder."""
        p = (self.path / name).resolve()
        if self.path.resolve() not in p.parents and p != self.path.resolve():
            raise ParseError(self.path, f"manifest names {name!r}, which is outside the run folder")
        return p

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    # -- updates -------------------------------------------------------------------------------
    def save(self) -> None:
        """Write the manifest atomically (a crash leaves the previous one whole)."""
        tmp = self.path / (MANIFEST + ".tmp")
        try:
            tmp.write_text(json.dumps(self.manifest, indent=1, default=str))
            os.replace(tmp, self.path / MANIFEST)
        except OSError as exc:
            raise GprofError(f"cannot write the run folder {self.path}: {exc.strerror}",
                             hint="free some space or choose another --out") from exc

    def add_command(self, step: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        from orchestrator.proc import format_argv

        self.manifest["commands"].append({"step": step, "argv": argv, "env": env or {}})
        with open(self.path / "commands.sh", "a") as fh:
            fh.write(f"# {step}\n{format_argv(argv, env)}\n")
        self.save()

    def finish(self, status: str, error: str | None = None) -> None:
        assert status in STATUSES
        self.manifest["status"] = status
        self.manifest["finished_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if error:
            self.manifest["error"] = error
        self.save()
        try:
            (self.path / ".lock").unlink()
        except FileNotFoundError:
            pass

    def update(self, **fields: Any) -> None:
        self.manifest.update(fields)
        self.save()

    def workload_manifest(self) -> dict[str, Any]:
        p = self.path / WORKLOAD_MANIFEST
        if not p.is_file():
            raise ParseError(self.path, "the workload never started (no workload.json); see logs/")
        try:
            return json.loads(p.read_text())
        except ValueError as exc:
            raise ParseError(p, f"corrupt ({exc})") from exc

