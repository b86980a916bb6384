"""Which NVTX ranges of a capture are variants (RangeFilter, `--ranges DOMAIN@PREFIX`), which of
them hold others, and the activity launched inside a range, nested ranges' included."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.errors import UsageError
from orchestrator.parsers import nsys as ns
from orchestrator.parsers.range_nesting import innermost_containing

ANY_DOMAIN = "*"


@dataclass(frozen=True)
class RangeFilter:
    """Which NVTX ranges are variants.

    `DOMAIN@PREFIX`: ranges in DOMAIN whose text starts with PREFIX, nested or not (where they
    nest, a kernel belongs to the innermost). An empty DOMAIN is the default domain (torch.cuda.nvtx,
    nvtx without `domain=`), `*` any domain; an empty PREFIX takes every range of the domain.
    `PREFIX` alone (no `@`) looks in every domain. No filter (`spec=None`): every range of every
    domain, nested ones too (`*@`), as `nsys stats -r nvtx_kern_sum` lists them. `top_level`
    (kept for run folders written before that default) takes only the ranges no other range on
    their thread encloses.

    The variant is the text after PREFIX (the whole text where that leaves nothing); where
    ranges of several domains are taken it is `domain:text` for a named domain, as nsys's own
    reports name them.

    Example:
        >>> RangeFilter.parse("gprof@variant:")   # gprof-orch's own ranges
        >>> RangeFilter.parse("@step")            # torch.cuda.nvtx.range_push("step...")
    """

    domain: str | None = ANY_DOMAIN
    prefix: str = ""
    top_level: bool = False

    @classmethod
    def parse(cls, spec: str | None) -> RangeFilter:
        if spec is None:
            return cls()
        if "/" in spec:
            raise UsageError(f"--ranges {spec!r}: a range name cannot hold '/' (NVTX nesting levels)")
        if "@" in spec:
            domain, prefix = spec.split("@", 1)
            return cls(domain if domain else None, prefix, False)
        return cls(ANY_DOMAIN, spec, False)

    @property
    def spec(self) -> str:
        if self.top_level and self.domain == ANY_DOMAIN and not self.prefix:
            return "top-level ranges"
        return f"{'' if self.domain is None else self.domain}@{self.prefix}"

    def to_json(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "prefix": self.prefix,
            "top_level": self.top_level,
            "ranges": self.spec,
        }

    @classmethod
    def from_json(cls, nvtx: dict[str, Any]) -> RangeFilter:
        return cls(nvtx.get("domain"), nvtx.get("prefix") or "", bool(nvtx.get("top_level", False)))

    def select(self, export) -> pd.DataFrame:
        """The export's ranges this filter takes, shaped as nsys.variant_ranges() returns
        them (range_id 0.. in start order), for attribute_kernels(ranges=...) and summarize()."""
        every = all_ranges(export)
        sel = every["text"].str.startswith(self.prefix) if self.prefix else pd.Series(True, index=every.index)
        if self.domain is None:
            sel &= every["domain"].isna()
        elif self.domain != ANY_DOMAIN:
            sel &= (every["domain"] == self.domain).fillna(False)
        if self.top_level:
            sel &= every["top_level"]
        r = every[sel].reset_index(drop=True)
        rest = [t[len(self.prefix) :] or t for t in r["text"]]  # `@step` names the range "step", not ""
        if self.domain == ANY_DOMAIN:
            rest = [f"{d}:{t}" if isinstance(d, str) else t for d, t in zip(r["domain"], rest)]
        out = r[["start", "end", "wall_ns", "global_tid", "event_type"]].copy()
        out["variant"] = pd.Series(rest, dtype=object)
        out["domain"] = r["domain"].astype(object)
        out.insert(0, "range_id", np.arange(len(out), dtype=np.int64))
        return out[ns.RANGE_COLUMNS]


def unclosed(export, ranges: pd.DataFrame, session_end: int | None) -> pd.Series:
    """Per variant of `ranges` (select()'s), how many of its instances were never closed: the
    program was stopped inside them, or never ended them; each runs to the end of the capture.
    nsys (2023.4.4) leaves a start/end range's end empty, and ends a push/pop range at the
    session's end (ANALYSIS_DETAILS.duration, `session_end`), to the nanosecond."""
    n = export.nvtx
    open_ = n[n["event_type"].isin(ns.RANGE_EVENT_TYPES) & n["end"].isna()]
    keys = set(zip(open_["start"].astype("int64").tolist(), open_["global_tid"].astype("int64").tolist()))
    hit = [(s, t) in keys for s, t in zip(ranges["start"].tolist(), ranges["global_tid"].tolist())]
    if session_end is not None:
        hit = [h or e == session_end for h, e in zip(hit, ranges["end"].tolist())]
    return ranges.loc[hit, "variant"].value_counts() if any(hit) else pd.Series(dtype="int64")


def all_ranges(export) -> pd.DataFrame:
    """Every push/pop and start/end range of the export, any domain, in start order: text,
    domain (None: default), start, end (a range never closed ends at the last timestamp),
    wall_ns, global_tid, event_type, and top_level (no other range on its thread encloses it)."""
    n = export.nvtx
    domains = n.loc[n["event_type"].isin(ns.RANGE_EVENT_TYPES), "domain"]
    parts = []
    for d in [None] + sorted({x for x in domains.dropna()}):
        r = ns.variant_ranges(export, d, "")
        if len(r):
            parts.append(r.rename(columns={"variant": "text"}).drop(columns="range_id"))
    if not parts:
        cols = {
            "text": object,
            "domain": object,
            "start": "int64",
            "end": "int64",
            "wall_ns": "int64",
            "global_tid": "int64",
            "event_type": "int64",
            "top_level": bool,
        }
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})
    r = pd.concat(parts, ignore_index=True)
    r = r.sort_values(["start", "end"], ascending=[True, False], kind="stable").reset_index(drop=True)
    r["top_level"] = _top_level(r["global_tid"].to_numpy(), r["start"].to_numpy(), r["end"].to_numpy())
    return r


def _top_level(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range (sorted by start, outer first on ties): whether no earlier range on its thread
    is still open over it."""
    top = np.ones(len(tid), dtype=bool)
    open_until: dict[int, int] = {}  # per thread, the end of the enclosing top-level range
    for i, (t, s, e) in enumerate(zip(tid.tolist(), start.tolist(), end.tolist())):
        until = open_until.get(t)
        if until is not None and s <= until and e <= until:
            top[i] = False
        else:
            open_until[t] = e
    return top


def nesting(ranges: pd.DataFrame) -> dict[str, list[str]]:
    """Which selected ranges hold others: per variant whose instances enclose other selected
    ranges on their thread, the variants of the ranges directly inside (in order of first
    appearance; its own name where a range nests in one of the same name). Variants that hold
    none are absent. `ranges` is RangeFilter.select()'s frame.

    Example:
        >>> nesting(RangeFilter.parse("*@").select(export))
        {'step': ['forward', 'backward', 'train:loss']}
    """
    tid = pd.factorize(ranges["global_tid"])[0]  # torch traces name threads by strings
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    variant = ranges["variant"].to_numpy(dtype=object)
    holds: dict[str, dict[str, None]] = {}
    stack: list[int] = []
    prev_tid = None
    for i in np.lexsort((-end, start, tid)).tolist():  # per thread, by start, outer first
        if tid[i] != prev_tid:
            stack, prev_tid = [], tid[i]
        while stack and end[stack[-1]] < start[i]:
            stack.pop()
        # the innermost still-open range that wholly encloses it (start/end ranges may overlap)
        parent = next((j for j in reversed(stack) if end[j] >= end[i]), None)
        if parent is not None:
            holds.setdefault(variant[parent], {})[variant[i]] = None
        stack.append(i)
    order = {v: k for k, v in enumerate(dict.fromkeys(variant))}
    return {v: list(c) for v, c in sorted(holds.items(), key=lambda kv: order[kv[0]])}


def inclusive_activity(attributed: pd.DataFrame, ranges: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The activity launched inside `variant`'s ranges, its nested ranges' included, as
    `nsys stats -r nvtx_kern_sum` counts a range's kernels: rows of attribute_kernels(..., ranges=)
    whose launch call starts inside an instance of `variant` on the thread of the range each was
    given to (the launching thread's own; by `window`, another's), with variant and range_id set to
    that instance (the innermost where instances of one name nest)."""
    mine = ranges[ranges["variant"] == variant]
    act = attributed[
        attributed["range_id"] >= 0
    ]  # activity outside every selected range is outside these too
    if mine.empty or act.empty:
        return attributed.iloc[:0]
    hit = innermost_containing(
        mine["global_tid"].to_numpy(),
        mine["start"].to_numpy(),
        mine["end"].to_numpy(),
        ranges["global_tid"].to_numpy()[act["range_id"].to_numpy()],
        act["launch_start"].to_numpy(dtype=np.int64),
    )
    out = act[hit >= 0].copy()
    out["range_id"] = mine["range_id"].to_numpy()[hit[hit >= 0]]
    out["variant"] = pd.Series(variant, index=out.index, dtype=attributed["variant"].dtype)
    return out


def held_ranges(export, limit: int = 25) -> str:
    """What ranges a capture holds, for the message when none matched: domain, name, count."""
    every = all_ranges(export)
    if every.empty:
        created = export.nvtx[export.nvtx["event_type"] == 75]
        if len(created):
            return (
                "no NVTX range at all, though NVTX domains were created "
                f"({', '.join(sorted(set(created['text'].dropna())))}): nsys 2023.4.4 drops the ranges of "
                "the nvtx package 0.2.13 and newer (pip install nvtx==0.2.10, or a newer nsys)"
            )
        return "no NVTX range at all (was NVTX traced? `nsys profile -t nvtx,...`)"
    g = (
        every.assign(domain=every["domain"].fillna("(default)"))
        .groupby(["domain", "text"], sort=False)
        .size()
        .sort_values(ascending=False, kind="stable")
    )
    lines = [f"{d}@{t} x{n}" for (d, t), n in g.head(limit).items()]
    more = f", and {len(g) - limit} more" if len(g) > limit else ""
    return "it holds (domain@name xcount): " + ", ".join(lines) + more
