"""`gprof-orch time`: CUDA events around every iteration (the CPU clock on a CPU run)."""
from __future__ import annotations

import pandas as pd

from orchestrator.backends.base import Backend
from orchestrator.runfolder import RunFolder
from reports.unify import RowMaker, variant_facts


class TimeBackend(Backend):
    name = "time"
    mode = "time"
    default_iters = None  # until the stop rule (--max-noise, --max-time) is met; --iters N: exactly N
    default_warmup = 10
    description = ("CUDA-event timing of every call, the stream held until the call is queued: median, IQR, "
                   "min, the median's noise (L2 flushed by default)")

    def parse(self, rf: RunFolder) -> pd.DataFrame:
        wman = rf.workload_manifest()
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        for v in wman["variants"]:
            # a variant stopped part-way keeps the samples it took (its status says so)
            if v.get("status") not in ("ok", "interrupted", "timed out"):
                continue
            rows.samples(v["name"], "time_ns", v.get("time_samples_ns", []), "ns")
            rows.samples(v["name"], "cpu_time_ns", v.get("cpu_samples_ns", []), "ns")
        return rows.frame()
