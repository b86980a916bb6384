#!/usr/bin/env python3
"""Name CUPTI runtime-API callback ids with this machine's own CUPTI (cuptiGetCallbackName).

    python3 benchmarks/probes/probe_cupti_cbid.py 468 486

nsys 2023.4.4 stops on CUDA 13 programs with "Unknown runtime API function index: N"
(docs/nsight-facts.md); the index is a CUPTI runtime callback id, which this names. Looks for
libcupti in torch's and the nvidia-* wheels' folders, CUDA_HOME and /usr/local/cuda.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

RUNTIME_API = 2  # CUpti_CallbackDomain: CUPTI_CB_DOMAIN_RUNTIME_API


def libcupti() -> str | None:
    roots = []
    try:
        import torch

        roots.append(os.path.dirname(torch.__file__))
        roots.append(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia"))
    except ImportError:
        pass
    roots += [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", "/usr/local/cuda/extras/CUPTI"]
    for root in filter(None, roots):
        hits = sorted(glob.glob(os.path.join(root, "**", "libcupti.so*"), recursive=True))
        if hits:
            return hits[-1]
    return None


def main() -> int:
    path = libcupti()
    if path is None:
        print("no libcupti found", file=sys.stderr)
        return 1
    lib = ctypes.CDLL(path)
    lib.cuptiGetCallbackName.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
    print(f"libcupti: {path}")
    for arg in sys.argv[1:] or ["468", "486"]:
        name = ctypes.c_char_p()
        rc = lib.cuptiGetCallbackName(RUNTIME_API, int(arg), ctypes.byref(name))
        print(
            f"runtime cbid {arg}: {name.value.decode() if rc == 0 and name.value else f'(CUPTI error {rc})'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
