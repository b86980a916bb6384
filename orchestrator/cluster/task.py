"""A point and its Dask task: what a point is, the task that runs it on a worker (the same child
process as a serial run, into a fresh folder), and what comes back: its Outcome, the run folder
packed, and where it ran."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import proc
from orchestrator.cluster.archive import pack
from orchestrator.cluster.gpus import this_gpu
from orchestrator.errors import (
    GprofError,
    InterruptedRunError,
    PermissionDeniedError,
    RunFailedError,
    ToolNotFoundError,
    ToolTimeoutError,
    UsageError,
)


@dataclass
class Point:
    """One child run of a parent folder: `name` is its folder; `options` go to api.profile. `check`
    (all): first ask, on the worker, whether the backend can run there. `worker` (--each-gpu): the
    name of the worker it must run on."""

    name: str
    workload: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)
    check: bool = False
    worker: str | None = None


@dataclass
class Outcome:
    """What a point's task sent back: status ok/failed/interrupted/skipped, the error's message and
    exit code, the run folder packed (None when there is none) and where it ran."""

    name: str
    status: str
    error: str | None = None
    exit_code: int = 0
    hint: str | None = None
    archive: bytes | None = None
    placement: dict[str, Any] = field(default_factory=dict)

    def as_error(self) -> GprofError:
        """The error a point that did not end ok stands for, of the class its exit code says."""
        kinds = {
            1: RunFailedError,
            2: UsageError,
            3: ToolNotFoundError,
            5: PermissionDeniedError,
            124: ToolTimeoutError,
            130: InterruptedRunError,
        }
        err = kinds.get(self.exit_code, GprofError)(self.error or self.status, hint=self.hint)
        err.exit_code = self.exit_code or 1
        return err


def placement(worker_address: str | None) -> dict[str, Any]:
    """Where this process is: the Dask worker's address, host name, pid and GPU (this_gpu())."""
    return {"worker": worker_address, "host": socket.gethostname(), "pid": os.getpid(), **this_gpu()}


def _watch_stop(stop_event, stop: threading.Event, done: threading.Event, worker, key) -> None:
    """Until the task is done: when the client asks every point to stop (Ctrl-C: stop_event set)
    or drops this task (the client went away: its key is cancelled or released on this worker),
    set `stop`, which proc.run takes as Ctrl-C. It asks once a second (is_set, not a wait held
    open on the scheduler: a cluster closed right after the last point would cancel that wait,
    and the scheduler logs each one as an error)."""
    while not done.wait(1.0):
        try:
            if stop_event is not None and stop_event.is_set():
                stop.set()
                return
        except Exception:  # the scheduler is gone: nobody wants the result any more
            stop.set()
            return
        ts = getattr(getattr(worker, "state", None), "tasks", {}).get(key)
        if ts is None or getattr(ts, "state", "") in ("cancelled", "released", "forgotten"):
            stop.set()
            return


def run_point_task(point: Point, topic: str, stop_name: str | None = None) -> dict[str, Any]:
    """The Dask task of one point: run it (execution.execute_point, the same child process as a
    serial run, no report) into a fresh folder on this worker and return that folder packed, with
    its status and where it ran. A GprofError (the point failed, exit 1, 2, 4 ...) is returned,
    not raised: raised, Dask would count it against the task and could run it again. Logs a start
    event on `topic`, which the client counts as attempts."""
    from distributed import Event, get_client, get_worker

    # why lazy: request imports cluster.spec, which runs this package's __init__ (and this module):
    # execution imports request, so at the top it would find request half made
    from orchestrator import execution

    worker = get_worker()
    key = worker.get_current_task()
    where = placement(worker.address)
    worker.log_event(topic, {"point": point.name, "key": key, "worker": worker.address, "pid": os.getpid()})
    tmp = Path(worker.local_directory) / f"gprof-point-{uuid.uuid4().hex[:12]}"
    out = tmp / point.name
    done = threading.Event()
    result: dict[str, Any] = {"name": point.name, "status": "ok", "placement": where}
    try:
        tmp.mkdir(parents=True)
        with proc.stoppable() as stop:
            event = Event(stop_name, client=get_client()) if stop_name else None
            threading.Thread(
                target=_watch_stop,
                args=(event, stop, done, worker, key),
                daemon=True,
                name=f"gprof-orch stop watch {point.name}",
            ).start()
            try:
                # the client builds the point's report where its folder lands (execution.land_point)
                run = execution.execute_point(point, out)
                if isinstance(run, str):
                    result.update(status="skipped", error=run)
                else:
                    result["status"] = run.manifest["status"]
            except GprofError as exc:
                result.update(
                    status="interrupted" if isinstance(exc, InterruptedRunError) else "failed",
                    error=exc.message,
                    exit_code=exc.exit_code,
                    hint=exc.hint,
                )
        if out.is_dir():
            result["archive"] = pack(out)
        return result
    finally:
        done.set()
        shutil.rmtree(tmp, ignore_errors=True)
