#!/usr/bin/env python3
"""The Python steps of scripts/capture_proton_fixture.sh (run on the H200, in the repo root).

versions                    triton, torch, nvtx, and what the proton backend's check() says
profile OUT WORKLOAD [--opt value ...]
                            `gprof-orch proton` through the Python API (before the CLI has the
                            command): api.profile(WORKLOAD, "proton", out=OUT, opt=value, ...)
has-torch-kernels RUN       exit 0 when torch_mean's kernels are in RUN/proton.hatchet
torch-cupti                 the folder of torch's own libcupti (nvidia/*/lib), or nothing
summary RUN                 what orchestrator.parsers.proton reads from RUN/proton.hatchet
"""

from __future__ import annotations

import glob
import os
import site
import sys


def versions() -> None:
    from importlib import metadata

    for dist in ("triton", "torch", "nvtx"):
        try:
            print(dist, metadata.version(dist))
        except metadata.PackageNotFoundError:
            print(dist, "not installed")
    from orchestrator.backends import get

    print("proton check:", get("proton").check())


def profile(out: str, workload: str, *rest: str) -> int:
    from orchestrator import api
    from orchestrator.errors import GprofError

    opts = dict(zip((k.lstrip("-").replace("-", "_") for k in rest[::2]), rest[1::2]))
    try:
        run = api.profile(workload, "proton", out=out, **opts)
    except GprofError as exc:
        print(exc.render())
        print(f"proton {os.path.basename(out)}: exit {exc.exit_code}")
        return exc.exit_code
    print(run.title())
    print(run.table.to_string())
    print("\n".join(run.footer()))
    print(f"proton {os.path.basename(out)}: exit 0")
    return 0


def has_torch_kernels(run: str) -> int:
    from orchestrator.parsers.proton import read_profile

    try:
        k = read_profile(os.path.join(run, "proton.hatchet")).kernels
    except Exception as exc:
        print("no readable profile:", exc)
        return 1
    mine = k[k["variant"] == "torch_mean"]
    print("torch_mean launches in the profile:", int(mine["launches"].sum()))
    return 0 if len(mine) else 1


def torch_cupti() -> None:
    hits = sorted(
        p
        for sp in site.getsitepackages()
        for p in glob.glob(os.path.join(sp, "nvidia", "**", "libcupti.so*"), recursive=True)
    )
    print(os.path.dirname(hits[0]) if hits else "")


def summary(run: str) -> None:
    import pandas as pd

    from orchestrator.parsers.proton import read_profile

    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 70)
    p = read_profile(os.path.join(run, "proton.hatchet"))
    print(
        "variants:", p.variants, "| devices:", p.devices, "| metadata launches:", p.metadata_launches, p.notes
    )
    k = p.kernels
    print(k.groupby(["variant", "kernel"], dropna=False)[["launches", "time_ns", "flops32", "bytes"]].sum())
    print(
        k[k["iteration"] >= 0]
        .groupby(["variant", "iteration"])["launches"]
        .sum()
        .groupby(level=0)
        .agg(["size", "min", "max"])
    )
    print(p.iterations.groupby("variant")["cpu_time_ns"].describe())


def main(argv: list[str]) -> int:
    cmd, *args = argv
    if cmd == "versions":
        versions()
    elif cmd == "profile":
        return profile(*args)
    elif cmd == "has-torch-kernels":
        return has_torch_kernels(*args)
    elif cmd == "torch-cupti":
        torch_cupti()
    elif cmd == "summary":
        summary(*args)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
