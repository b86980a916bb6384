"""What every run is asked, a workload run's (request.Request) or a capture's (`exec`, `import`:
capture_request.ProgramRequest): the backend that runs it and reports it, the iterations, the time
limit, where its folder goes and the backend's own options. execution.run_request takes either."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from orchestrator.errors import UsageError, check_seconds


# kw_only: a subclass's own fields come first in its constructor (Request("square", device="cpu"))
@dataclass(kw_only=True)
class BaseRequest:
    """The fields every request has. Its record (to_json: manifest.json's "request") is its fields
    as plain values, the backend's options nested under "options"; each subclass reads its records
    back, older ones included (backends.request_from_record, ProgramRequest.from_record)."""

    backend: str  # the registry's name of the backend that runs and reports it (backends.get)
    iters: int | None = None  # measured iterations (a capture: iterations in one range instance)
    timeout: float | None = None
    out: Path | None = None
    root: Path | None = None
    # the backend's own options (its Options, a BackendOptions), or a dict of them
    options: Any = None

    def workload_name(self) -> str:
        """The workload its run folder and workload.json are named by."""
        raise NotImplementedError

    def validate(self) -> BaseRequest:
        """Check what every request has (the time limit, the iterations); raises UsageError.
        Subclasses check their own fields beside these."""
        check_seconds(self.timeout, "--timeout")
        if self.iters is not None and self.iters < 1:
            raise UsageError(f"--iters must be >= 1, not {self.iters}")
        return self

    def to_json(self) -> dict[str, Any]:
        """The request record (manifest.json's "request"): every field as a plain value, the
        backend's options under "options"."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for k, v in d.items():
            if isinstance(v, Path):
                d[k] = str(v)
        o = self.options
        d["options"] = dict(o) if isinstance(o, dict) else o.to_json() if o is not None else {}
        return d
