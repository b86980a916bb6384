"""The NVTX ranges that name variants, and why an export has none."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers.nsys.schema import (
    DEFAULT_DOMAIN,
    DEFAULT_PREFIX,
    NVTX_DOMAIN_CREATE,
    RANGE_COLUMNS,
    RANGE_EVENT_TYPES,
    NsysExport,
    set_text,
)

_NVTX_TOO_NEW_HINT = (
    "the `nvtx` Python package 0.2.13 and newer emits ranges that Nsight Systems 2023.4.4 does "
    "not record (only the domain's create/destroy events reach the report); install "
    "nvtx==0.2.10 (`pip install nvtx==0.2.10`) or use a newer nsys"
)


def variant_ranges(
    export: NsysExport, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX
) -> pd.DataFrame:
    """The NVTX ranges that name variants: push/pop (59) and start/end (60) ranges in `domain`
    whose text starts with `prefix`; `variant` is the text after the prefix.

    `domain=None` selects the default (unnamed) domain, as torch.cuda.nvtx and nvtx without a
    domain use; `prefix=""` keeps every range, named by its whole text. A range never closed
    ends at the export's last timestamp, as nsys's own reports do.

    Columns: range_id (0.. in start order), variant, start, end, wall_ns, global_tid, event_type,
    domain.

    Example:
        >>> variant_ranges(ex, domain=None, prefix="")   # every default-domain range
    """
    n = export.nvtx
    sel = n["event_type"].isin(RANGE_EVENT_TYPES)
    sel &= n["domain"].isna() if domain is None else (n["domain"] == domain).fillna(False)
    text = n["text"].fillna("")
    if prefix:
        sel &= text.str.startswith(prefix)
    r = n[sel]
    end = r["end"].fillna(last_timestamp(export)).astype("int64")
    out = pd.DataFrame(
        {
            "start": r["start"].to_numpy(dtype=np.int64),
            "end": end.to_numpy(dtype=np.int64),
            "global_tid": r["global_tid"].to_numpy(dtype=np.int64),
            "event_type": r["event_type"].to_numpy(dtype=np.int64),
        }
    )
    set_text(out, "variant", np.array([t[len(prefix) :] for t in text[sel]], dtype=object))
    set_text(out, "domain", r["domain"].to_numpy(dtype=object))
    out["wall_ns"] = out["end"] - out["start"]
    out = out.sort_values("start", kind="stable").reset_index(drop=True)
    out.insert(0, "range_id", np.arange(len(out), dtype=np.int64))
    return out[RANGE_COLUMNS]


def last_timestamp(export: NsysExport) -> int:
    """The export's latest timestamp: where a range never closed ends, as in nsys's own reports."""
    candidates = [0] if export.runtime_end is None else [export.runtime_end]
    for df in (export.kernels, export.runtime, export.memcpy, export.memset):
        if len(df):
            candidates.append(int(df["end"].max()))
    if len(export.nvtx):
        candidates.append(int(export.nvtx["start"].max()))
        ends = export.nvtx["end"].dropna()
        if len(ends):
            candidates.append(int(ends.max()))
    return max(candidates)


# ------------------------------------------------------------------------------------ diagnostics


def missing_ranges_hint(
    export: NsysExport, *, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX
) -> str | None:
    """Why the export has no variant ranges, or None when it has some.

    The case that matters most: the domain was created (eventType 75) but not one range was
    recorded in it. That is what nsys 2023.4.4 makes of ranges from the `nvtx` package 0.2.13
    and newer; nvtx 0.2.10 is recorded.

    Example:
        >>> msg = missing_ranges_hint(read_export("square_nsys_nvtx0217.sqlite"))
        >>> "nvtx==0.2.10" in msg
        True
    """
    if len(variant_ranges(export, domain, prefix)):
        return None
    n = export.nvtx
    where = f"NVTX domain {domain!r}" if domain is not None else "the default NVTX domain"
    if n.empty:
        return "the export has no NVTX events at all: profile with NVTX tracing (`nsys profile -t nvtx,...`)"
    is_range = n["event_type"].isin(RANGE_EVENT_TYPES)
    in_domain = n["domain"].isna() if domain is None else (n["domain"] == domain).fillna(False)
    created = (n["event_type"] == NVTX_DOMAIN_CREATE) & (n["text"] == domain)
    if domain is not None and created.any() and not (is_range & in_domain).any():
        return (
            f"{where} was created but no range was recorded in it ({int(is_range.sum())} "
            f"ranges in other domains): {_NVTX_TOO_NEW_HINT}"
        )
    if (is_range & in_domain).any():
        seen = sorted(set(n.loc[is_range & in_domain, "text"].dropna()))[:5]
        return f"no range in {where} starts with {prefix!r}; seen: {seen}"
    if domain is not None and not created.any():
        return (
            f"{where} never appears in the export (no domain-create event): the workload did "
            f"not open `nvtx.annotate({prefix}<name>, domain={domain!r})` ranges, or NVTX was "
            f"not traced"
        )
    return f"no NVTX range in {where}"


def require_variant_ranges(
    export: NsysExport, *, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX
) -> pd.DataFrame:
    """variant_ranges(), or ParseError (with missing_ranges_hint as its hint) when there are none."""
    ranges = variant_ranges(export, domain, prefix)
    if ranges.empty:
        raise ParseError(
            export.path, "no variant ranges", hint=missing_ranges_hint(export, domain=domain, prefix=prefix)
        )
    return ranges
