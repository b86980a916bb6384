"""Start Dask workers on Slurm for gprof-orch: one job per GPU, each job one worker offering the
resource GPU=1, and a scheduler file that `gprof-orch ... --scheduler-file` reads. Runs until
Ctrl-C, then cancels the jobs.

    python scripts/slurm_cluster.py --gpus 4 --cores 8 --memory 64GB --queue gpu \
        --scheduler-file ~/gprof-scheduler.json
    # in another shell, on the same login node:
    gprof-orch ncu square --size 1e6,1e7,1e8 --scheduler-file ~/gprof-scheduler.json

The workers run this interpreter (sys.executable): gprof-orch and its tools must be installed
where the compute nodes see them. See orchestrator.cluster.builders.slurm_cluster for the job script.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.cluster.builders import slurm_cluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, default=1, help="jobs to start, one GPU each")
    p.add_argument("--cores", type=int, required=True, help="CPU cores a job asks for")
    p.add_argument("--memory", required=True, help="memory a job asks for (64GB)")
    p.add_argument("--gres", default="gpu:1", help="the job's --gres (default gpu:1)")
    p.add_argument("--queue", default=None, help="Slurm partition")
    p.add_argument("--account", default=None)
    p.add_argument("--walltime", default="01:00:00")
    p.add_argument("--scheduler-file", required=True, help="where the scheduler writes its address")
    p.add_argument("--print-job-script", action="store_true", help="print the job script and exit")
    args = p.parse_args(argv)
    cluster = slurm_cluster(
        cores=args.cores,
        memory=args.memory,
        gres=args.gres,
        queue=args.queue,
        account=args.account,
        walltime=args.walltime,
        scheduler_file=args.scheduler_file,
    )
    try:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=args.gpus)
        print(
            f"scheduler {cluster.scheduler_address}, file {args.scheduler_file}; {args.gpus} job(s) asked. "
            f"Ctrl-C ends them.",
            flush=True,
        )
        while True:
            time.sleep(60)
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
