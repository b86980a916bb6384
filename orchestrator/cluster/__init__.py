"""Scale-out on Dask distributed: each point of a sweep (each backend of `all`, each worker with
--each-gpu) is one task that needs the resource GPU=1, so two points never share a GPU.

    --cluster local:N           a LocalCluster of N worker processes here (1 thread, GPU=1 each)
    --cluster local-cuda        one worker per visible GPU, pinned with CUDA_VISIBLE_DEVICES
    --cluster tcp://HOST:PORT   a running scheduler (`dask scheduler`; `dask worker ADDR --resources GPU=1`)
    --scheduler-file FILE       the same, named by its scheduler file (dask-jobqueue: slurm_cluster())

A task (run_point_task) runs orchestrator.execution.execute_point, so the same child process as a
serial run, into a fresh folder on the worker, and sends that folder back packed (tar.gz) with
where it ran (worker, host, pid, GPU name and UUID). The client unpacks it where the serial run
would have written it and builds its report there, once (execution.land_point). A point that
fails on its own comes back as failed, never raised (Dask would retry it); a point whose worker
is lost is submitted again, up to --retries times.

The modules: spec (where the points run), gpus (this machine's GPUs, without CUDA), task (a
point, its task on the worker and what comes back), archive (a point's folder packed and
unpacked), session (the client), builders (the clusters gprof-orch starts: local-cuda, Slurm),
each_gpu (--each-gpu's table).

Nothing here imports dask at module level: `gprof-orch --help` and serial runs never load it.
"""

from __future__ import annotations

from orchestrator.cluster.archive import unpack
from orchestrator.cluster.each_gpu import worker_label
from orchestrator.cluster.session import Session
from orchestrator.cluster.spec import ClusterSpec, describe, parse_spec
from orchestrator.cluster.task import Point

# what the orchestrator uses as cluster.X (api, cli, request); the rest is imported from its module
__all__ = ["ClusterSpec", "Point", "Session", "describe", "parse_spec", "unpack", "worker_label"]
