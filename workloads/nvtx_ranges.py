"""The NVTX ranges the runner puts around each variant's measured calls: `variant:<name>` in the
domain `gprof`, through the nvtx package (or torch.cuda.nvtx, in the default domain).

NVTX_DOMAIN and RANGE_PREFIX are declared here once: the child writes them, and the parent (its
backends, doctor, and the readers in orchestrator/parsers, which look for them by default)
imports them from here. This module imports nothing at load time (nvtx and torch only in Ranges)."""

from __future__ import annotations

NVTX_DOMAIN = "gprof"
RANGE_PREFIX = "variant:"


class Ranges:
    """NVTX push/pop in domain `gprof` (the nvtx package), or torch.cuda.nvtx (default domain)."""

    def __init__(self) -> None:
        try:
            import nvtx

            self._nvtx = nvtx
            self.api, self.domain = "nvtx", NVTX_DOMAIN
        except ImportError:
            self._nvtx = None
            self.api, self.domain = "torch.cuda.nvtx", None

    def push(self, text: str) -> None:
        if self._nvtx is not None:
            self._nvtx.push_range(text, domain=NVTX_DOMAIN)
        else:
            import torch

            if torch.cuda.is_available():
                torch.cuda.nvtx.range_push(text)

    def pop(self) -> None:
        if self._nvtx is not None:
            self._nvtx.pop_range(domain=NVTX_DOMAIN)
        else:
            import torch

            if torch.cuda.is_available():
                torch.cuda.nvtx.range_pop()
