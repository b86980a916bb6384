"""One row of `gprof-orch doctor --check`: what doctor's own checks and each backend's
`self_test` hook return."""

from __future__ import annotations

from typing import Any


def check_row(name: str, ok: bool | None, detail: str, fix: str | None = None) -> dict[str, Any]:
    """One row of `doctor --check`: {"check", "ok", "detail", "fix"}. ok: True passed, False
    failed, None skipped (not applicable here); the fix is kept only for a failure. The backends'
    `self_test` hooks return these."""
    return {"check": name, "ok": ok, "detail": detail, "fix": fix if ok is False else None}
