"""The client side: a Session on the cluster a ClusterSpec names (started here for local:N and
local-cuda), which submits the points, resubmits those whose worker was lost, stops them in order
on Ctrl-C, and shows their progress."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator import proc
from orchestrator.cluster.builders import local_cuda_cluster
from orchestrator.cluster.gpus import visible_gpus
from orchestrator.cluster.spec import GPU, ClusterSpec
from orchestrator.cluster.task import Outcome, Point, run_point_task
from orchestrator.errors import ClusterUnavailableError, InterruptedRunError, UsageError

# after Ctrl-C, how long the points that run may take to stop and send what they took (a second
# Ctrl-C stops waiting); nsys and ncu write their report in that time
STOP_GRACE_S = 60.0
# a point lost before it ever started (it waited on a worker that died) is resubmitted without
# counting as an attempt; this many such losses at most, so a flapping cluster cannot loop forever
FREE_RESUBMITS = 3
WORKER_START_HINT = "start one worker per GPU with `dask worker {addr} --resources GPU=1 --nthreads 1`"


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

    def __enter__(self) -> Session:
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
            with dask.config.set(
                {
                    "distributed.scheduler.allowed-failures": 0,
                    "distributed.nanny.pre-spawn-environ": {},
                    "distributed.worker.profile.enabled": False,
                }
            ):
                self.cluster = self._local_cluster()
            self.client = Client(self.cluster, timeout=self.timeout)
            # why lazy: it imports distributed, which importing session must not
            from orchestrator.cluster_plugins import IgnoreSigint

            self.client.register_plugin(IgnoreSigint())
            return
        where = spec.address or spec.scheduler_file
        if spec.kind == "scheduler-file":
            self._check_scheduler_file()
        try:
            self.client = (
                Client(spec.address, timeout=self.timeout)
                if spec.kind == "address"
                else Client(scheduler_file=spec.scheduler_file, timeout=self.timeout)
            )
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailableError(
                f"no Dask scheduler answered at {where} within --connect-timeout {self.timeout:g} s "
                f"({type(exc).__name__})",
                hint="start one with `dask scheduler`, check the address and that its port is reachable, "
                "or raise --connect-timeout",
            ) from None
        self._check_workers()

    def _local_cluster(self):
        from distributed import LocalCluster

        quiet = logging.ERROR if os.environ.get("GPROF_DEBUG") != "1" else logging.INFO
        # no dashboard; the scheduler's HTTP server (health, metrics) on a free port, not on 8787,
        # which another cluster on the machine may hold
        common = {"silence_logs": quiet, "dashboard_address": ":0"}
        if self.spec.kind == "local":
            return LocalCluster(
                n_workers=self.spec.n_workers,
                threads_per_worker=1,
                processes=True,
                resources={GPU: 1},
                host="127.0.0.1",
                scheduler_kwargs={"dashboard": False},
                **common,
            )
        gpus = visible_gpus()
        devices = [g["uuid"] or str(g["index"]) for g in gpus]
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            return local_cuda_cluster(devices, **common)
        return LocalCUDACluster(
            CUDA_VISIBLE_DEVICES=devices,
            threads_per_worker=1,
            resources={GPU: 1},
            host="127.0.0.1",
            scheduler_kwargs={"dashboard": False},
            **common,
        )

    def _check_scheduler_file(self) -> None:
        import json

        path = Path(self.spec.scheduler_file or "")
        if not path.is_file():
            raise UsageError(
                f"--scheduler-file {path} does not exist",
                hint="`dask scheduler --scheduler-file FILE` writes it once the scheduler runs",
            )
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
            raise ClusterUnavailableError(
                f"the Dask scheduler at {addr} has no worker (waited {self.timeout:g} s)",
                hint=WORKER_START_HINT.format(addr=addr),
            )
        raise ClusterUnavailableError(
            f"none of the {len(workers)} worker(s) of the Dask scheduler at {addr} has the resource {GPU}: "
            f"every point asks for {GPU}=1, so it would wait forever",
            hint=WORKER_START_HINT.format(addr=addr),
        )

    # -- facts ------------------------------------------------------------------------------------
    def workers(self, all_: bool = False) -> dict[str, dict[str, Any]]:
        """address -> {name, host, resources} of the workers (with the resource GPU, unless all_)."""
        try:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # an older distributed: it has no n_workers and lists every worker
            info = self.client.scheduler_info()["workers"]
        out = {
            a: {"name": str(w.get("name", a)), "host": w.get("host"), "resources": w.get("resources") or {}}
            for a, w in info.items()
        }
        return out if all_ else {a: w for a, w in out.items() if w["resources"].get(GPU, 0) >= 1}

    def info(self) -> dict[str, Any]:
        """The cluster as the parent manifest records it."""
        return {
            "spec": str(self.spec),
            "scheduler": self.client.scheduler.address,
            "workers": {a: {"name": w["name"], "host": w["host"]} for a, w in self.workers().items()},
        }

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

    def close_in_background(self) -> threading.Thread:
        """close() in a thread of its own, started; join it. For the parent's report, written while
        the workers exit. Not a daemon: the interpreter waits for it, so no worker outlives us."""
        t = threading.Thread(target=self.close, name="gprof-orch cluster close")
        t.start()
        return t

    # -- running points ---------------------------------------------------------------------------
    def run(
        self, points: list[Point], *, retries: int, on_result: Callable[[Outcome], None]
    ) -> InterruptedRunError | None:
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
            fut = self.client.submit(
                run_point_task,
                p,
                topic,
                stop.name,
                resources={GPU: 1},
                pure=False,
                key=f"gprof-point-{p.name}-{token}-{submitted[p.name]}",
                **kw,
            )
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
        return Outcome(
            p.name,
            "failed",
            f"gprof-orch failed on the worker (a bug): {type(exc).__name__}: {exc}",
            1,
            placement={"attempts": attempts},
        )

    def _resubmit(
        self, p: Point, fut, topic: str, retries: int, submitted: dict[str, int], submit, ac
    ) -> Outcome | None:
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
                _say(
                    f"point {p.name} lost its worker ({why.splitlines()[0][:200]}); submitted again "
                    f"(started {len(keys)} time(s), --retries {retries})"
                )
                ac.add(new)
                return None
            why += f"; its worker {p.worker} is gone"
        return Outcome(
            p.name,
            "failed",
            f"lost its worker {len(keys)} time(s), the last: {why.splitlines()[0]}",
            1,
            placement={"attempts": len(keys)},
        )

    def _interrupt(
        self, pending: dict, stop, topic: str, on_result, names: dict[str, Point]
    ) -> InterruptedRunError:
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
                _say(
                    f"interrupted: stopping {len(running)} running point(s), keeping what they took "
                    f"(Ctrl-C again to stop now)"
                )
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
    """The points' bar on a terminal's stderr (points done of total, time left), then the points
    running on each worker: 'host:port 1, ...' (not with GPROF_NO_PROGRESS; data stays on stdout)."""

    def __init__(self, session: Session, topic: str, total: int):
        super().__init__("points", total=total)
        self.session, self.topic = session, topic
        self.done: set[str] = set()

    def finished(self, key: str) -> None:
        self.done.add(key)
        self.advance()

    def detail(self) -> str:
        running: dict[str, int] = {}
        for _, msg in self.session.client.get_events(self.topic):
            if isinstance(msg, dict) and msg.get("key") not in self.done:
                running[msg["worker"]] = running.get(msg["worker"], 0) + 1
        per = ", ".join(f"{w.removeprefix('tcp://')} {n}" for w, n in sorted(running.items()))
        return f"running: {per or '-'}"
