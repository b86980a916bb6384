"""The clusters gprof-orch builds: one worker per local GPU (without dask-cuda), and a Slurm
cluster whose every job is one worker on one GPU (dask-jobqueue)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from orchestrator.cluster.spec import GPU


def local_cuda_cluster(devices: list[str], **cluster_kwargs: Any):
    """One worker process (a Nanny) per device, pinned with CUDA_VISIBLE_DEVICES=<device> (a UUID
    or an index), 1 thread and resource GPU=1 each: dask_cuda.LocalCUDACluster's layout without
    dask-cuda (whose wheel cannot be installed everywhere). Worker names: gpu0, gpu1, ...

    Example:
        >>> cluster = local_cuda_cluster(["GPU-5d1c...", "GPU-a2f0..."])
    """
    from distributed import Nanny, Scheduler, SpecCluster

    quiet = {"silence_logs": cluster_kwargs["silence_logs"]} if "silence_logs" in cluster_kwargs else {}
    workers = {
        f"gpu{i}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "resources": {GPU: 1},
                "env": {"CUDA_VISIBLE_DEVICES": dev},
                "name": f"gpu{i}",
                "host": "127.0.0.1",
                "dashboard": False,
                "dashboard_address": None,
                **quiet,
            },
        }
        for i, dev in enumerate(devices)
    }
    scheduler = {
        "cls": Scheduler,
        "options": {
            "host": "127.0.0.1",
            "dashboard": False,
            "dashboard_address": cluster_kwargs.pop("dashboard_address", ":0"),
        },
    }
    return SpecCluster(workers=workers, scheduler=scheduler, **cluster_kwargs)


def slurm_cluster(
    *,
    cores: int,
    memory: str,
    gres: str | None = "gpu:1",
    queue: str | None = None,
    account: str | None = None,
    walltime: str = "01:00:00",
    scheduler_file: str | None = None,
    python: str | None = None,
    **kwargs: Any,
):
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
        cores=cores,
        processes=1,
        memory=memory,
        queue=queue,
        account=account,
        walltime=walltime,
        job_extra_directives=[f"--gres={gres}"] if gres else [],
        worker_extra_args=["--resources", f"{GPU}=1"],
        scheduler_options=scheduler_options,
        python=python or sys.executable,
        **kwargs,
    )
