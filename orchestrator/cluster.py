"""Scale-out on Dask distributed: each point of a sweep (each backend of `all`, each worker with
--each-gpu) is one task that needs the resource GPU=1, so two points never share a GPU.

    --cluster local:N           a LocalCluster of N worker processes here (1 thread, GPU=1 each)
    --cluster local-cuda        one worker per visible GPU, pinned with CUDA_VISIBLE_DEVICES
    --cluster tcp://HOST:PORT   a running scheduler (`dask scheduler`; `dask worker ADDR --resources GPU=1`)
    --scheduler-file FILE       the same, named by its scheduler file (dask-jobqueue: slurm_cluster())

A task (run_point_task) runs orchestrator.api.run_point, so the same child process as a serial
run, into a fresh folder on the worker, and sends that folder back packed (tar.gz) with where it
ran (worker, host, pid, GPU name and UUID). The client unpacks it where the serial run would have
written it. A point that fails on its own comes back as failed, never raised (Dask would retry
it); a point whose worker is lost is submitted again, up to --retries times.

Nothing here imports dask at module level: `gprof-orch --help` and serial runs never load it.
"""
from __future__ import annotations

import io
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from orchestrator import proc
from orchestrator.errors import (ClusterUnavailableError, GprofError, InterruptedRunError, PermissionDeniedError,
                                 RunFailedError, ToolNotFoundError, ToolTimeoutError, UsageError)

# the resource every point asks for, and every worker must offer (`dask worker --resources GPU=1`)
GPU = "GPU"
# after Ctrl-C, how long the points that run may take to stop and send what they took (a second
# Ctrl-C stops waiting); nsys and ncu write their report in that time
STOP_GRACE_S = 60.0
# a point lost before it ever started (it waited on a worker that died) is resubmitted without
# counting as an attempt; this many such losses at most, so a flapping cluster cannot loop forever
FREE_RESUBMITS = 3
WORKER_START_HINT = "start one worker per GPU with `dask worker {addr} --resources GPU=1 --nthreads 1`"


# -- the spec ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterSpec:
    """Where the points run: kind 'local' (n_workers), 'local-cuda', 'address' or 'scheduler-file'."""

    kind: str
    n_workers: int | None = None
    address: str | None = None
    scheduler_file: str | None = None

    def __str__(self) -> str:
        return {"local": f"local:{self.n_workers}", "local-cuda": "local-cuda",
                "address": str(self.address)}.get(self.kind, f"--scheduler-file {self.scheduler_file}")


def parse_spec(cluster: str | None, scheduler_file: str | None = None) -> ClusterSpec | None:
    """--cluster SPEC / --scheduler-file FILE as a ClusterSpec; None when neither is given (the
    points run here, one after another). Raises UsageError on a spec it does not know."""
    if cluster is not None and scheduler_file is not None:
        raise UsageError("give --cluster or --scheduler-file, not both")
    if scheduler_file is not None:
        return ClusterSpec("scheduler-file", scheduler_file=str(Path(scheduler_file).expanduser().resolve()))
    if cluster is None or cluster.strip().lower() in ("", "none"):
        return None
    text = cluster.strip()
    if m := re.fullmatch(r"local:(\d+)", text):
        n = int(m.group(1))
        if n < 1:
            raise UsageError(f"--cluster {text}: the number of workers must be at least 1")
        return ClusterSpec("local", n_workers=n)
    if text == "local-cuda":
        return ClusterSpec("local-cuda")
    if re.fullmatch(r"(tcp|tls|ucx|inproc)://\S+", text):
        return ClusterSpec("address", address=text)
    if re.fullmatch(r"[\w.-]+:\d+", text):  # HOST:PORT, as `dask scheduler` prints it without the scheme
        return ClusterSpec("address", address=f"tcp://{text}")
    raise UsageError(f"--cluster {text!r} unknown; valid: local:N, local-cuda, tcp://HOST:PORT (or "
                     f"--scheduler-file FILE)")


def describe(spec: ClusterSpec) -> str:
    """Where a run would go, in words (--dry-run); contacts nothing. local-cuda lists the GPUs,
    so with none it raises UsageError as the run would."""
    if spec.kind == "local":
        return (f"a LocalCluster of {spec.n_workers} worker process(es) on this machine, 1 thread and "
                f"resource GPU=1 each")
    if spec.kind == "local-cuda":
        gpus = visible_gpus()
        return f"{len(gpus)} worker(s) on this machine, one per GPU: " + ", ".join(
            f"CUDA_VISIBLE_DEVICES={g['uuid'] or g['index']} ({g['name']})" for g in gpus)
    if spec.kind == "address":
        return f"the Dask scheduler at {spec.address}, on its workers with resource GPU"
    return f"the Dask scheduler named in {spec.scheduler_file}, on its workers with resource GPU"


# -- GPUs -------------------------------------------------------------------------------------------

def _all_gpus() -> list[dict[str, Any]]:
    """Every NVIDIA GPU of this machine, in NVML's (nvidia-smi's) order: index, uuid, name. NVML
    (nvidia-ml-py, the [gpu] extra) first, else `nvidia-smi -L`; [] where there is neither."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            out = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name, uid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
                out.append({"index": i, "uuid": uid.decode() if isinstance(uid, bytes) else uid,
                            "name": name.decode() if isinstance(name, bytes) else name})
            return out
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # not installed, no driver, no GPU: nvidia-smi may still know (or not)
        pass
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        res = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in res.stdout.splitlines() if res.returncode == 0 else []:
        if m := re.match(r"GPU (\d+): (.+?) \(UUID: (\S+)\)", line.strip()):
            gpus.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)})
    return gpus


def visible_gpus() -> list[dict[str, Any]]:
    """The GPUs this process may use: all of them, or those CUDA_VISIBLE_DEVICES names (by index
    or UUID). Raises UsageError where there is none (local-cuda has nothing to run on)."""
    gpus = _all_gpus()
    want = os.environ.get("CUDA_VISIBLE_DEVICES")
    if want is not None:
        picked = []
        for item in (s.strip() for s in want.split(",") if s.strip()):
            match = [g for g in gpus if str(g["index"]) == item or g["uuid"] == item
                     or (item.startswith("GPU-") and g["uuid"].startswith(item))]
            picked += [g for g in match[:1] if g not in picked]
        gpus = picked
    if not gpus:
        raise UsageError("--cluster local-cuda: no NVIDIA GPU visible here (nvidia-ml-py and nvidia-smi find none"
                         + (f", CUDA_VISIBLE_DEVICES={want!r}" if want is not None else "") + ")",
                         hint="use --cluster local:N to run the points on the CPU, or a scheduler that has "
                              "GPU workers (--cluster tcp://HOST:PORT)")
    return gpus


def this_gpu() -> dict[str, Any]:
    """The GPU this process uses, as far as it can be told without CUDA: the first of
    CUDA_VISIBLE_DEVICES (a UUID is unambiguous; an index is read in nvidia-smi's order), or the
    only GPU there is. gpu_name and gpu_uuid are None on a machine without one, or when several
    are visible and none is chosen."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    found: dict[str, Any] = {"gpu_name": None, "gpu_uuid": None, "cuda_visible_devices": visible}
    gpus = _all_gpus()
    first = (visible or "").split(",")[0].strip()
    pick = ([g for g in gpus if g["uuid"] == first or str(g["index"]) == first] if first
            else gpus if len(gpus) == 1 else [])
    if visible is not None and not first:
        pick = []  # CUDA_VISIBLE_DEVICES="" hides every GPU
    if pick:
        found.update(gpu_name=pick[0]["name"], gpu_uuid=pick[0]["uuid"])
    return found


# -- what a point is and what comes back ------------------------------------------------------------

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
        kinds = {1: RunFailedError, 2: UsageError, 3: ToolNotFoundError, 5: PermissionDeniedError,
                 124: ToolTimeoutError, 130: InterruptedRunError}
        err = kinds.get(self.exit_code, GprofError)(self.error or self.status, hint=self.hint)
        err.exit_code = self.exit_code or 1
        return err


def pack(folder: Path) -> bytes:
    """A run folder as tar.gz bytes (its paths relative to the folder). gzip, not xz: an nsys
    SQLite export of a big run is tens of MB, and xz takes seconds a MB."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def unpack(archive: bytes, dest: Path) -> None:
    """Unpack pack()'s bytes into `dest` (made if missing); nothing may land outside it. A failed
    write is a GprofError (disk full), a damaged archive a RunFailedError (the point failed)."""
    from orchestrator.runfolder import disk_error

    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:  # Python < 3.10.12: the same check by hand
                root = dest.resolve()
                for m in tar.getmembers():
                    target = (dest / m.name).resolve()
                    if (root != target and root not in target.parents) or m.issym() or m.islnk():
                        raise tarfile.TarError(f"member {m.name!r} points outside the folder")
                tar.extractall(dest)
    except OSError as exc:
        raise disk_error(dest, exc) from exc
    except tarfile.TarError as exc:
        raise RunFailedError(f"the run folder sent back for {dest.name} is damaged: {exc}") from exc


def placement(worker_address: str | None) -> dict[str, Any]:
    """Where this process is: the Dask worker's address, host name, pid and GPU (this_gpu())."""
    return {"worker": worker_address, "host": socket.gethostname(), "pid": os.getpid(), **this_gpu()}


# -- the task, on the worker ------------------------------------------------------------------------

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
    """The Dask task of one point: run it (api.run_point, the same child process as a serial run)
    into a fresh folder on this worker and return that folder packed, with its status and where
    it ran. A GprofError (the point failed, exit 1, 2, 4 ...) is returned, not raised: raised, Dask
    would count it against the task and could run it again. Logs a start event on `topic`, which
    the client counts as attempts."""
    from distributed import Event, get_client, get_worker

    from orchestrator import api

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
            threading.Thread(target=_watch_stop, args=(event, stop, done, worker, key), daemon=True,
                             name=f"gprof-orch stop watch {point.name}").start()
            try:
                run = api.run_point(point, out)
                if isinstance(run, str):
                    result.update(status="skipped", error=run)
                else:
                    result["status"] = run.status
            except GprofError as exc:
                result.update(status="interrupted" if isinstance(exc, InterruptedRunError) else "failed",
                              error=exc.message, exit_code=exc.exit_code, hint=exc.hint)
        if out.is_dir():
            result["archive"] = pack(out)
        return result
    finally:
        done.set()
        shutil.rmtree(tmp, ignore_errors=True)


# -- the client -------------------------------------------------------------------------------------

def _lost_worker(exc: BaseException | None) -> bool:
    """Whether a task's error means its worker went away (then the point is submitted again), not
    that the task itself failed."""
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    return isinstance(exc, (KilledWorker, CommClosedError, ConnectionError))


def _say(message: str) -> None:
    print(f"gprof-orch: {message}", file=sys.stderr, flush=True)


class Session:
    """A distributed.Client on the cluster a ClusterSpec names, and the cluster itself when
    gprof-orch starts it (local:N, local-cuda): closed, with every worker, on exit.

    Example:
        >>> with Session(parse_spec("local:2"), connect_timeout=10) as s:
        ...     s.run([Point("a", "square", "time", {"device": "cpu"})], retries=2, on_result=print)
    """

    def __init__(self, spec: ClusterSpec, connect_timeout: float = 10.0):
        self.spec, self.timeout = spec, connect_timeout
        self.cluster = None
        self.client = None
        try:
            self._open()
        except KeyboardInterrupt:
            self.close()
            raise InterruptedRunError("interrupted while starting the cluster") from None
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- opening ----------------------------------------------------------------------------------
    def _open(self) -> None:
        import dask
        from distributed import Client

        spec = self.spec
        if spec.kind in ("local", "local-cuda"):
            # - allowed-failures 0: a lost worker surfaces at once as KilledWorker, so the client
            #   resubmits and counts the point's attempts against --retries (Dask would otherwise
            #   rerun it up to 3 times by itself)
            # - pre-spawn-environ {}: Dask's nanny would set OMP_NUM_THREADS=1 (and MKL's,
            #   OpenBLAS's, glibc's malloc trim) in the worker, and so in the workload it runs; a
            #   point must run in the environment the serial run has
            # - worker.profile off: its sampler reads every thread's stack 100 times a second, in a
            #   worker whose one task waits on a child process
            with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                                  "distributed.nanny.pre-spawn-environ": {},
                                  "distributed.worker.profile.enabled": False}):
                self.cluster = self._local_cluster()
            self.client = Client(self.cluster, timeout=self.timeout)
            from orchestrator.cluster_plugins import IgnoreSigint

            self.client.register_plugin(IgnoreSigint())
            return
        where = spec.address or spec.scheduler_file
        if spec.kind == "scheduler-file":
            self._check_scheduler_file()
        try:
            self.client = (Client(spec.address, timeout=self.timeout) if spec.kind == "address"
                           else Client(scheduler_file=spec.scheduler_file, timeout=self.timeout))
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailableError(
                f"no Dask scheduler answered at {where} within --connect-timeout {self.timeout:g} s "
                f"({type(exc).__name__})",
                hint="start one with `dask scheduler`, check the address and that its port is reachable, "
                     "or raise --connect-timeout") from None
        self._check_workers()

    def _local_cluster(self):
        from distributed import LocalCluster

        quiet = logging.ERROR if os.environ.get("GPROF_DEBUG") != "1" else logging.INFO
        # no dashboard; the scheduler's HTTP server (health, metrics) on a free port, not on 8787,
        # which another cluster on the machine may hold
        common = {"silence_logs": quiet, "dashboard_address": ":0"}
        if self.spec.kind == "local":
            return LocalCluster(n_workers=self.spec.n_workers, threads_per_worker=1, processes=True,
                                resources={GPU: 1}, host="127.0.0.1", scheduler_kwargs={"dashboard": False},
                                **common)
        gpus = visible_gpus()
        devices = [g["uuid"] or str(g["index"]) for g in gpus]
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            return local_cuda_cluster(devices, **common)
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, threads_per_worker=1, resources={GPU: 1},
                                host="127.0.0.1", scheduler_kwargs={"dashboard": False}, **common)

    def _check_scheduler_file(self) -> None:
        import json

        path = Path(self.spec.scheduler_file or "")
        if not path.is_file():
            raise UsageError(f"--scheduler-file {path} does not exist",
                             hint="`dask scheduler --scheduler-file FILE` writes it once the scheduler runs")
        try:
            address = json.loads(path.read_text()).get("address")
        except (OSError, ValueError, AttributeError) as exc:
            raise UsageError(f"--scheduler-file {path} is not a Dask scheduler file: {exc}") from None
        if not isinstance(address, str):
            raise UsageError(f"--scheduler-file {path} names no scheduler address")

    def _check_workers(self) -> None:
        """An external scheduler must have a worker with the resource GPU, or the tasks would wait
        for one forever: wait --connect-timeout for one to join, then say how to start them."""
        addr = self.client.scheduler.address
        deadline = time.monotonic() + self.timeout
        while True:
            workers = self.workers(all_=True)
            if any(w["resources"].get(GPU, 0) >= 1 for w in workers.values()):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not workers:
            raise ClusterUnavailableError(f"the Dask scheduler at {addr} has no worker (waited {self.timeout:g} s)",
                                          hint=WORKER_START_HINT.format(addr=addr))
        raise ClusterUnavailableError(
            f"none of the {len(workers)} worker(s) of the Dask scheduler at {addr} has the resource {GPU}: "
            f"every point asks for {GPU}=1, so it would wait forever",
            hint=WORKER_START_HINT.format(addr=addr))

    # -- facts ------------------------------------------------------------------------------------
    def workers(self, all_: bool = False) -> dict[str, dict[str, Any]]:
        """address -> {name, host, resources} of the workers (with the resource GPU, unless all_)."""
        try:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # an older distributed: it has no n_workers and lists every worker
            info = self.client.scheduler_info()["workers"]
        out = {a: {"name": str(w.get("name", a)), "host": w.get("host"), "resources": w.get("resources") or {}}
               for a, w in info.items()}
        return out if all_ else {a: w for a, w in out.items() if w["resources"].get(GPU, 0) >= 1}

    def info(self) -> dict[str, Any]:
        """The cluster as the parent manifest records it."""
        return {"spec": str(self.spec), "scheduler": self.client.scheduler.address,
                "workers": {a: {"name": w["name"], "host": w["host"]} for a, w in self.workers().items()}}

    def close(self) -> None:
        """Close the client, and the cluster (every worker process) when gprof-orch started it."""
        for thing in (self.client, self.cluster):
            if thing is None:
                continue
            for _ in range(2):  # a Ctrl-C during close: close again, nothing may be left running
                try:
                    thing.close()
                    break
                except KeyboardInterrupt:
                    continue
                except Exception:
                    break
        self.client = self.cluster = None

    # -- running points ---------------------------------------------------------------------------
    def run(self, points: list[Point], *, retries: int,
            on_result: Callable[[Outcome], None]) -> InterruptedRunError | None:
        """Submit every point, call on_result(outcome) as each ends (in this thread, in the order they
        end), submit again a point whose worker was lost while it has been started at most
        `retries` times. On Ctrl-C: points not started are cancelled, those running are asked to
        stop and what they took is kept (on_result is called for them), then the interrupt is
        returned. The progress line (points done, running per worker) goes to a terminal's stderr."""
        from distributed import Event, as_completed

        token = uuid.uuid4().hex[:10]
        topic = f"gprof-orch-{token}"
        stop = Event(f"gprof-orch-stop-{token}", client=self.client)
        pending: dict[Any, Point] = {}
        submitted: dict[str, int] = {}
        names = {p.name: p for p in points}
        progress = _Progress(self, topic, len(points))

        def submit(p: Point):
            kw: dict[str, Any] = {}
            if p.worker is not None:
                addr = next((a for a, w in self.workers().items() if w["name"] == p.worker), None)
                if addr is None:
                    return None
                kw = {"workers": [addr], "allow_other_workers": False}
            submitted[p.name] = submitted.get(p.name, 0) + 1
            fut = self.client.submit(run_point_task, p, topic, stop.name, resources={GPU: 1}, pure=False,
                                     key=f"gprof-point-{p.name}-{token}-{submitted[p.name]}", **kw)
            pending[fut] = p
            return fut

        try:
            first = [submit(p) for p in points]
            for p, fut in zip(points, first):
                if fut is None:
                    on_result(Outcome(p.name, "failed", f"worker {p.worker} is gone", 1))
            ac = as_completed([f for f in first if f is not None])
            with progress:
                for fut in ac:
                    p = pending.pop(fut)
                    outcome = self._outcome(fut, p, topic)
                    if outcome is None:  # its worker was lost
                        outcome = self._resubmit(p, fut, topic, retries, submitted, submit, ac)
                        if outcome is None:
                            continue
                    progress.finished(fut.key)
                    on_result(outcome)
        except KeyboardInterrupt:
            return self._interrupt(pending, stop, topic, on_result, names)
        return None

    def _attempts(self, topic: str) -> dict[str, list[str]]:
        """point -> the keys of its tasks that started on a worker, from the tasks' start events."""
        started: dict[str, list[str]] = {}
        for _, msg in self.client.get_events(topic):
            if isinstance(msg, dict) and "point" in msg:
                started.setdefault(msg["point"], []).append(msg["key"])
        return started

    def _outcome(self, fut, p: Point, topic: str) -> Outcome | None:
        """The Outcome of a task that ended, or None when its worker was lost."""
        attempts = len(self._attempts(topic).get(p.name, [])) or 1
        if fut.status == "finished":
            try:
                data = fut.result()
            except Exception as exc:  # its result was lost with its worker before it came here
                if _lost_worker(exc):
                    return None
                raise
            out = Outcome(**data)
            out.placement["attempts"] = attempts
            return out
        if fut.status == "cancelled":  # not by us: the scheduler dropped it (lost with a worker)
            return None
        exc = fut.exception()
        if _lost_worker(exc):
            return None
        return Outcome(p.name, "failed", f"gprof-orch failed on the worker (a bug): {type(exc).__name__}: {exc}",
                       1, placement={"attempts": attempts})

    def _resubmit(self, p: Point, fut, topic: str, retries: int, submitted: dict[str, int], submit,
                  ac) -> Outcome | None:
        """A point whose worker was lost: submit it again (None) while it has started at most
        `retries` times, else the failed Outcome."""
        exc = fut.exception() if fut.status == "error" else None
        why = f"{type(exc).__name__}: {exc}" if exc is not None else "its task was dropped"
        keys = self._attempts(topic).get(p.name, [])
        started = fut.key in keys
        free = submitted[p.name] - len(keys)  # submissions lost before they started
        if len(keys) <= retries and (started or free <= FREE_RESUBMITS):
            new = submit(p)
            if new is not None:
                _say(f"point {p.name} lost its worker ({why.splitlines()[0][:200]}); submitted again "
                     f"(started {len(keys)} time(s), --retries {retries})")
                ac.add(new)
                return None
            why += f"; its worker {p.worker} is gone"
        return Outcome(p.name, "failed", f"lost its worker {len(keys)} time(s), the last: {why.splitlines()[0]}", 1,
                       placement={"attempts": len(keys)})

    def _interrupt(self, pending: dict, stop, topic: str, on_result, names: dict[str, Point]) -> InterruptedRunError:
        """Ctrl-C: cancel what has not started, ask what runs to stop (proc.run takes it as Ctrl-C:
        the runner keeps the samples it took), take what they send back, cancel the rest."""
        from distributed import wait

        err = InterruptedRunError("interrupted")
        try:
            stop.set()
            started = {k for keys in self._attempts(topic).values() for k in keys}
            waiting = [f for f in pending if f.key not in started]
            if waiting:
                self.client.cancel(waiting)
            running = [f for f in pending if f.key in started]
            if running:
                _say(f"interrupted: stopping {len(running)} running point(s), keeping what they took "
                     f"(Ctrl-C again to stop now)")
                try:
                    wait(running, timeout=STOP_GRACE_S)
                except TimeoutError:
                    pass
                for fut in running:
                    if fut.done():
                        outcome = self._outcome(fut, pending[fut], topic)
                        if outcome is not None:
                            on_result(outcome)
        except KeyboardInterrupt:
            pass
        finally:
            left = [f for f in pending if not f.done()]
            if left:
                try:
                    self.client.cancel(left)
                except Exception:
                    pass
        return err


class _Progress(proc.Progress):
    """'  points 3/8 done; running: host:port 1, ...' on a terminal's stderr, each second, while the
    points run (not with GPROF_NO_PROGRESS; data stays on stdout)."""

    def __init__(self, session: Session, topic: str, total: int):
        super().__init__(topic)
        self.session, self.topic, self.total = session, topic, total
        self.done: set[str] = set()

    def finished(self, key: str) -> None:
        self.done.add(key)

    def line(self) -> str:
        running: dict[str, int] = {}
        for _, msg in self.session.client.get_events(self.topic):
            if isinstance(msg, dict) and msg.get("key") not in self.done:
                running[msg["worker"]] = running.get(msg["worker"], 0) + 1
        per = ", ".join(f"{w.removeprefix('tcp://')} {n}" for w, n in sorted(running.items()))
        return f"  points {len(self.done)}/{self.total} done; running: {per or '-'}"


# -- clusters gprof-orch builds ---------------------------------------------------------------------

def local_cuda_cluster(devices: list[str], **cluster_kwargs: Any):
    """One worker process (a Nanny) per device, pinned with CUDA_VISIBLE_DEVICES=<device> (a UUID
    or an index), 1 thread and resource GPU=1 each: dask_cuda.LocalCUDACluster's layout without
    dask-cuda (whose wheel cannot be installed everywhere). Worker names: gpu0, gpu1, ...

    Example:
        >>> cluster = local_cuda_cluster(["GPU-5d1c...", "GPU-a2f0..."])
    """
    from distributed import Nanny, Scheduler, SpecCluster

    quiet = {"silence_logs": cluster_kwargs["silence_logs"]} if "silence_logs" in cluster_kwargs else {}
    workers = {f"gpu{i}": {"cls": Nanny, "options": {
        "nthreads": 1, "resources": {GPU: 1}, "env": {"CUDA_VISIBLE_DEVICES": dev}, "name": f"gpu{i}",
        "host": "127.0.0.1", "dashboard": False, "dashboard_address": None, **quiet}} for i, dev in enumerate(devices)}
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False,
                                               "dashboard_address": cluster_kwargs.pop("dashboard_address", ":0")}}
    return SpecCluster(workers=workers, scheduler=scheduler, **cluster_kwargs)


def slurm_cluster(*, cores: int, memory: str, gres: str | None = "gpu:1", queue: str | None = None,
                  account: str | None = None, walltime: str = "01:00:00", scheduler_file: str | None = None,
                  python: str | None = None, **kwargs: Any):
    """A dask-jobqueue SLURMCluster whose every job is one worker on one GPU: `--resources GPU=1`
    on the worker's line, the job's GPU asked with `#SBATCH --gres=<gres>`. One GPU a job because
    Slurm pins a job's GPUs with CUDA_VISIBLE_DEVICES for all of its processes; scale with
    `cluster.scale(jobs=N)` for N GPUs. With `scheduler_file`, the scheduler writes its address
    there for `gprof-orch ... --scheduler-file FILE`. `python`: the workers' interpreter (with
    gprof-orch installed); the rest goes to SLURMCluster.

    Example (scripts/slurm_cluster.py):
        >>> cluster = slurm_cluster(cores=8, memory="64GB", gres="gpu:1", queue="gpu",
        ...                         scheduler_file="~/gprof-scheduler.json")
        >>> cluster.scale(jobs=4)
    """
    from dask_jobqueue import SLURMCluster

    scheduler_options = dict(kwargs.pop("scheduler_options", {}))
    if scheduler_file:
        scheduler_options["scheduler_file"] = str(Path(scheduler_file).expanduser())
    return SLURMCluster(
        cores=cores, processes=1, memory=memory, queue=queue, account=account, walltime=walltime,
        job_extra_directives=[f"--gres={gres}"] if gres else [],
        worker_extra_args=["--resources", f"{GPU}=1"], scheduler_options=scheduler_options,
        python=python or sys.executable, **kwargs)


# -- --each-gpu ---------------------------------------------------------------------------------------

# a GPU slower than the median of the GPUs' medians by more than this is flagged
SLOW_PCT = 3.0


def worker_label(address: str, name: str) -> str:
    """A child folder's name for a worker: its name where it has one of its own (gpu0, w0; Dask
    keeps names unique in a cluster), else its address; letters, digits and . _ - only."""
    own = name if name and name != address else address.split("://", 1)[-1]
    if own.isdigit():  # LocalCluster numbers its workers
        own = f"worker{own}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", own).strip("-") or "worker"


def each_gpu_table(runs: dict[str, Any]):
    """One block of rows per worker's GPU: `run` (the worker's child folder), gpu, gpu_uuid, variant,
    status, median, IQR, GB/s, % peak BW; `change_pct`, each variant's median against the median of
    every GPU's median for that variant, and `verdict` "slow" (`slow` True) where a GPU is more than
    SLOW_PCT % slower. Rows of variants not measured get no ratio. (The columns are those the
    renderers already show: `run` as for a child's rows, `change %`, `verdict`.)"""
    import numpy as np
    import pandas as pd

    rows = []
    for name, run in runs.items():
        place = run.manifest.get("placement") or {}
        gpu = place.get("gpu_name") or ("cpu" if run.workload.get("device") == "cpu" else None)
        for r in run.table.to_dict("records"):
            rows.append({"run": name, "gpu": gpu, "gpu_uuid": place.get("gpu_uuid"), "variant": r["variant"],
                         "status": r.get("status"), "time_median_us": r.get("time_median_us"),
                         "time_iqr_us": r.get("time_iqr_us"), "achieved_gb_s": r.get("achieved_gb_s"),
                         "pct_of_peak_bw": r.get("pct_of_peak_bw")})
    table = pd.DataFrame(rows, columns=["run", "gpu", "gpu_uuid", "variant", "status", "time_median_us",
                                        "time_iqr_us", "achieved_gb_s", "pct_of_peak_bw"])
    measured = table["status"].isin(("ok", "noisy")) & table["time_median_us"].notna()
    medians = table[measured].groupby("variant")["time_median_us"].median()
    ref = table["variant"].map(medians).astype(float)
    table["change_pct"] = np.where(measured, (table["time_median_us"].astype(float) / ref - 1) * 100, np.nan)
    table["slow"] = table["change_pct"] > SLOW_PCT
    table["verdict"] = np.where(table["slow"], "slow", "")
    return table


def slow_lines(table) -> list[str]:
    """The footer lines of an each-gpu table: each worker's GPU, then which are slow, or that none is."""
    gpus = table.drop_duplicates("run")
    lines = ["GPUs: " + ", ".join(f"{r.run} = {r.gpu or '?'}" + (f" ({r.gpu_uuid})" if r.gpu_uuid else "")
                                  for r in gpus.itertuples())]
    slow = table[table["slow"]]
    if slow.empty:
        whose = "the one GPU's" if len(gpus) == 1 else f"the {len(gpus)} GPUs'"
        return lines + [f"no GPU more than {SLOW_PCT:g}% slower than the median of {whose} medians "
                        f"(change %, per variant)"]
    return lines + [f"slow: {r.run} ({r.gpu or '?'}) {r.variant} {r.change_pct:+.1f}% against the median of the "
                    f"GPUs' medians (more than {SLOW_PCT:g}%)" for r in slow.itertuples()]
