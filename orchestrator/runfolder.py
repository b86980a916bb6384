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

from orchestrator import workload_check
from orchestrator.errors import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_SUSPECT,
    EXIT_TIMEOUT,
    GprofError,
    ParseError,
    UsageError,
)
from orchestrator.proc import format_argv
from reports.schema import SCHEMA_VERSION
from workloads.manifest import MANIFEST as WORKLOAD_MANIFEST  # written by the runner (workloads/runner.py)

DEFAULT_ROOT = Path("gprof-runs")
MANIFEST = "manifest.json"
# incomplete: the run ended, but the profiler's report lacks part of what ran (execution.conclude)
# suspect: the run ended, but a variant's number cannot stand for its work (table_errors.suspect_error)
STATUSES = ("running", "ok", "failed", "interrupted", "incomplete", "suspect")
# the exit code of a run by its status, where its manifest records none (folders written before
# it was recorded); a folder still `running` was never concluded: gprof-orch itself was killed
STATUS_EXIT = {
    "ok": EXIT_OK,
    "failed": EXIT_RUN_FAILED,
    "interrupted": EXIT_INTERRUPTED,
    "running": EXIT_RUN_FAILED,
    "incomplete": EXIT_INCOMPLETE,
    "suspect": EXIT_SUSPECT,
}
# what a run writes beside its raw artifacts; rewritten by `report`
REPORT_FILES = ("frame.csv", "frame.parquet", "report.csv", "report.json", "report.md", "report.html")


def disk_error(path: Path, exc: OSError) -> GprofError:
    """The error a failed write into the run folder stands for (a full disk, mostly)."""
    # pyarrow's OSError carries the errno but its own strerror ("Error writing bytes to file.
    # Detail: ..."): the system's words for the errno are the reason a user can act on
    reason = os.strerror(exc.errno) if exc.errno else (exc.strerror or exc)
    return GprofError(
        f"cannot write the run folder {path}: {reason}", hint="free some space or choose another --out"
    )


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def write_json(path: Path, data: Any, **dumps: Any) -> None:
    """Write `path` atomically: a crash or a full disk leaves the previous file whole."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, default=str, **dumps))
        os.replace(tmp, path)
    except OSError:
        _unlink(tmp)
        raise


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
    # whether its runner has ended (a folder still `running` may be read while it runs)
    ended: bool = False
    # whether this run made the folder (else: an empty --out that was there before, or a folder opened)
    made: bool = False

    @classmethod
    def create(
        cls,
        backend: str,
        workload: str,
        *,
        out: Path | None = None,
        root: Path | None = None,
        request: dict[str, Any] | None = None,
        argv: list[str] | None = None,
    ) -> RunFolder:
        """A new, empty run folder. `out` is used as is (must be empty or absent); otherwise a
        unique `<root>/<UTC time>-<backend>-<workload>` is made. mkdir is the lock: two runs
        started at once never share a folder."""
        if out is not None:
            out = Path(out)
            _writable_dir(out.parent if out.parent != Path("") else Path("."))
            made = False
            try:
                out.mkdir(parents=True, exist_ok=False)
                made = True
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
                    made = True
                    break
                except FileExistsError:
                    continue
            else:
                raise UsageError(f"cannot find a free run folder name under {root}")
        (path / "logs").mkdir(exist_ok=True)
        rf = cls(
            path,
            {
                "schema_version": SCHEMA_VERSION,
                "tool": "gprof-orch",
                "backend": backend,
                "workload": workload,
                "status": "running",
                "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "argv": argv or [],
                "request": request or {},
                "commands": [],
            },
            made=made,
        )
        rf.save()
        return rf

    @classmethod
    def open(cls, path: Path | str) -> RunFolder:
        """An existing run folder, its manifest checked."""
        path = Path(path)
        mpath = path / MANIFEST
        if path.is_file():
            raise ParseError(path, "a file, not a run folder", hint=_file_hint(path))
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
        if type(manifest["schema_version"]) is not int:
            raise ParseError(mpath, f"schema_version {manifest['schema_version']!r} is not an integer")
        if manifest["schema_version"] > SCHEMA_VERSION:
            raise ParseError(
                mpath,
                f"written by a newer gprof-orch (schema {manifest['schema_version']}, "
                f"this one reads up to {SCHEMA_VERSION})",
                hint="upgrade gprof-orch",
            )
        return cls(path, manifest, ended=manifest.get("status") != "running")

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
        try:
            write_json(self.path / MANIFEST, self.manifest, indent=1)
        except OSError as exc:
            raise disk_error(self.path, exc) from exc

    def add_command(self, step: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.manifest["commands"].append({"step": step, "argv": argv, "env": env or {}})
        try:
            with open(self.path / "commands.sh", "a") as fh:
                fh.write(f"# {step}\n{format_argv(argv, env)}\n")
        except OSError as exc:
            raise disk_error(self.path, exc) from exc
        self.save()

    def set_status(self, status: str, error: GprofError | str | None = None) -> None:
        """The final status, in memory: the reports are written with it, then finish() saves it.
        With it the exit code the command ends with (`error`'s own: 124 for a timeout, 5 for
        counters denied; else the status's), so `report` of the folder exits the same."""
        assert status in STATUSES
        self.manifest["status"] = status
        self.manifest["finished_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        code = STATUS_EXIT[status]
        if isinstance(error, GprofError):
            code = error.exit_code if status != "ok" else code
            self.manifest["error_kind"] = type(error).__name__
            error = error.message
        self.manifest["exit_code"] = code
        if error:
            self.manifest["error"] = error

    def finish(self, status: str | None = None, error: GprofError | str | None = None) -> None:
        """Save the final status (set here or by set_status). On a full disk, where the atomic
        write has no room, the manifest is rewritten in place, compact, within the space the
        old one holds: a folder must not say `running` once its run has ended. Raises only
        when even that fails."""
        if status is not None:
            self.set_status(status, error)
        _unlink(self.path / ".lock")
        try:
            self.save()
        except GprofError:
            if not self._save_in_place():
                raise

    def _save_in_place(self) -> bool:
        path = self.path / MANIFEST
        text = json.dumps(self.manifest, separators=(",", ":"), default=str).encode()
        try:
            if len(text) > path.stat().st_blocks * 512:
                return False
            with open(path, "r+b") as fh:  # overwrites blocks the file already has: no new space
                fh.write(text)
                fh.truncate()
        except OSError:
            return False
        return True

    def discard(self) -> None:
        """Remove what a run that collected nothing wrote (a usage error, an import whose file
        could not be read): the folder where this run made it; an --out that was there, empty,
        before the run is left as it was found, empty (its content is all this run's)."""
        import shutil

        if self.made:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for p in self.path.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                _unlink(p)

    def writable(self) -> bool:
        """Whether the reports can be (re)written here: not on a read-only mount or folder."""
        if not os.access(self.path, os.W_OK | os.X_OK):
            return False
        return all(os.access(p, os.W_OK) for p in (self.path / n for n in REPORT_FILES) if p.exists())

    def remove_reports(self) -> None:
        """Remove report files a failed write left half-written (they would mislead, and take room)."""
        for name in REPORT_FILES:
            _unlink(self.path / name)

    def update(self, **fields: Any) -> None:
        self.manifest.update(fields)
        self.save()

    def mark_timed_out(self) -> tuple[str, str] | None:
        """After --timeout ended the runner: the variant it was on is `timed out` (keeping the
        samples it took), those it never reached `skipped`. Returns that variant's name and
        what it was doing, or None when it was on none (or left no workload.json)."""
        path = self.path / WORKLOAD_MANIFEST
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        current = data.get("current") or {}
        found = None
        for v in data.get("variants", []):
            on_it = v.get("status") in ("measuring", "interrupted") or (
                v.get("name") == current.get("variant") and v.get("status") in ("pending", "skipped")
            )
            if on_it and found is None:
                found = (v["name"], current.get("step") or "measuring")
                v.update(status="timed out", reason=f"still {found[1]} when --timeout ended the run")
            elif v.get("status") == "pending" or v.get("reason") == "not run: the run stopped before it":
                v.update(status="skipped", reason="not run: the run timed out before it")
        data["status"] = "timed out"
        try:
            write_json(path, data, indent=1)
        except OSError:
            pass  # the report then shows what the runner left; the error message still names it
        return found

    def workload_manifest(self) -> dict[str, Any]:
        p = self.path / WORKLOAD_MANIFEST
        if not p.is_file():
            raise ParseError(self.path, "the workload never started (no workload.json); see logs/")
        try:
            data = json.loads(p.read_text())
        except ValueError as exc:
            raise ParseError(p, f"corrupt ({exc})") from exc
        problem = workload_check.problem(data)
        if problem:
            raise ParseError(p, f"malformed: {problem}")
        if self.ended and data.get("status") == "running":
            workload_check.close_unsaved(data)
        return data


def _file_hint(path: Path) -> str:
    """What to do with a file given where a run folder goes: report the run folder it is in, or
    import it where it is a capture (.nsys-rep, .sqlite, .ncu-rep, a torch.profiler trace)."""
    # why lazy: it imports numpy, pandas, which importing runfolder must not
    from orchestrator.capture_request import capture_kind

    if (path.parent / MANIFEST).is_file():
        return f"it is in the run folder {path.parent}: `gprof-orch report {path.parent}`"
    try:
        capture_kind(path)
    except (UsageError, OSError):
        return "report and compare read run folders, which every run writes (--out FOLDER)"
    return f"a capture: `gprof-orch import {path}` reads it into a run folder"


def run_exit_code(manifest: dict[str, Any], workload: dict[str, Any] | None = None) -> int:
    """The exit code a run folder's run ended with: as its manifest records it (set_status), else
    by its status; a folder from before it was recorded whose workload.json says `timed out`
    ended by --timeout (124)."""
    code = manifest.get("exit_code")
    if type(code) is int and 0 <= code <= 255:
        return code
    status = manifest.get("status")
    if status == "failed" and (workload or {}).get("status") == "timed out":
        return EXIT_TIMEOUT
    return STATUS_EXIT.get(status, EXIT_RUN_FAILED)
