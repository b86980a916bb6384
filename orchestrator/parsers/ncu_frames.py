"""The plain records either reader gathers (kernels with their NVTX stacks, metrics, rule
results) -> an `NcuReport`'s frames: values normalised, each kernel's variant found, the key
metrics and roofline rates computed, a record that lost everything rejected as damage."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers.ncu_metrics import (
    KERNEL_COLUMNS,
    KEY_METRICS,
    LAUNCH_METRICS,
    METRIC_COLUMNS,
    ROOFLINE_RATES,
    RULE_COLUMNS,
    TENSOR_FLOPS,
    KeyMetric,
    NcuReport,
    RooflineRate,
    TensorFlops,
    normalize_unit,
)


def variant_of(stack: list[tuple[str, str]], domain: str | None, prefix: str) -> str | None:
    """The variant a kernel's NVTX stack names: the text after `prefix` of its innermost range of
    `domain` (None: any domain) that starts with it; None when no range does.

    Example:
        >>> variant_of([("gprof", "outer"), ("gprof", "variant:a*a")], "gprof", "variant:")
        'a*a'
    """
    for dom, name in reversed(stack):
        if (domain is None or dom == domain) and name.startswith(prefix):
            # a range named exactly PREFIX (`--ranges @step` on "step") is the variant "step"
            return name[len(prefix) :] or name
    return None


_LINK = re.compile(r"@(section|url|sass|source):([^@]*)@")


def _plain_message(text: str | None) -> str | None:
    """ncu's rule message with its @kind:...@ links replaced by their text."""
    if text is None:
        return None

    def repl(m: re.Match) -> str:
        kind, body = m.group(1), m.group(2)
        parts = body.split(":")
        if kind == "url":
            return parts[0]
        if kind == "source":
            return ":".join(parts[2:]) if len(parts) > 2 else body
        return ":".join(parts[1:]) if len(parts) > 1 else body

    return _LINK.sub(repl, text)


def build_report(path: Path | None, raw: dict, *, domain: str | None, prefix: str, source: str) -> NcuReport:
    """The frames of one report from the plain records a reader gathered: `raw` holds "kernels"
    (dicts: id, kernel, kernel_demangled, nvtx stack, launch attributes), "metrics" (tuples: id,
    name, raw value, raw unit, number or None) and "rules" (dicts of RULE_COLUMNS but variant,
    kernel and message). ParseError for repeated kernel IDs or a record that lost everything.

    Example:
        >>> rep = build_report(None, raw, domain="gprof", prefix="variant:", source="csv")
    """
    where = path if path is not None else "<ncu CSV text>"
    _check_records(where, raw)
    variant = {k["id"]: variant_of(k["nvtx"], domain, prefix) for k in raw["kernels"]}
    kname = {k["id"]: k["kernel"] for k in raw["kernels"]}
    rows = []
    for kid, name, raw_value, raw_unit, number in raw["metrics"]:
        unit, factor = normalize_unit(raw_unit)
        value = number * factor if number is not None else math.nan
        rows.append((kid, variant[kid], kname[kid], name, value, unit, raw_value, raw_unit))
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    metrics["id"] = metrics["id"].astype("int64")
    metrics["value"] = metrics["value"].astype("float64")
    metrics["variant"] = metrics["variant"].astype("object")
    lookup = {(r[0], r[3]): (r[4], r[5]) for r in rows}
    kernels = _kernels_frame(where, raw["kernels"], variant, lookup)
    rule_rows = [
        {
            **r,
            "variant": variant[r["id"]],
            "kernel": kname[r["id"]],
            "message": _plain_message(r.get("message_raw")),
        }
        for r in raw["rules"]
    ]
    rules = pd.DataFrame(rule_rows, columns=RULE_COLUMNS)
    rules["id"] = rules["id"].astype("int64")
    rules["estimated_speedup_pct"] = rules["estimated_speedup_pct"].astype("float64")
    return NcuReport(path=path, kernels=kernels, metrics=metrics, rules=rules, source=source)


def _check_records(where: str | Path, raw: dict) -> None:
    ids = [k["id"] for k in raw["kernels"]]
    if len(set(ids)) != len(ids):
        raise ParseError(where, "kernel IDs repeat")
    # A record that lost its name, its NVTX ranges and its metrics (one flipped byte in a
    # .ncu-rep does this) would fall outside every variant unnoticed, and its variant's time
    # per iteration would be a different number: the report is damaged, say so.
    measured = {r[0] for r in raw["metrics"]}
    for k in raw["kernels"]:
        if not k["kernel"] and not k["nvtx"] and k["id"] not in measured:
            raise ParseError(
                where,
                f"kernel record {k['id']} has no name, no NVTX range and no metrics: the report is damaged",
                hint="take the file again, or profile again",
            )


def _kernels_frame(where: str | Path, records: list[dict], variant: dict, lookup: dict) -> pd.DataFrame:
    """One row per kernel record: KERNEL_COLUMNS, from the normalised metrics in `lookup`."""
    krows = []
    for k in records:
        kid = k["id"]
        rec: dict[str, Any] = {
            "id": kid,
            "variant": variant[kid],
            "kernel": k["kernel"],
            "kernel_demangled": k["kernel_demangled"],
        }
        for column, metric in LAUNCH_METRICS.items():
            value = lookup.get((kid, metric), (math.nan, ""))[0]
            if math.isnan(value):
                fallback = k["launch"].get(column)
                value = math.nan if fallback is None else float(fallback)
            rec[column] = value
        for key in KEY_METRICS:
            rec[key.column] = _key_value(where, lookup, kid, key)
        for rate in ROOFLINE_RATES:
            rec[rate.column] = _rate_value(where, lookup, kid, rate)
        for work in TENSOR_FLOPS:
            rec[work.column] = _tensor_rate(lookup, kid, work, rec["duration_ns"])
        krows.append(rec)
    kernels = pd.DataFrame(krows, columns=KERNEL_COLUMNS)
    kernels["id"] = kernels["id"].astype("int64")
    kernels["variant"] = kernels["variant"].astype("object")
    for column in LAUNCH_METRICS:
        kernels[column] = kernels[column].round().astype("Int64")
    return kernels


def _key_value(where: str | Path, lookup: dict, kid: int, key: KeyMetric) -> float:
    for alternative in key.sources:
        found = [lookup.get((kid, m)) for m in alternative]
        if any(f is None or math.isnan(f[0]) for f in found):
            continue
        for metric, (_, unit) in zip(alternative, found):
            if unit != key.unit:
                raise ParseError(
                    where,
                    f"{metric} is in {unit!r} after normalisation, expected {key.unit!r} for {key.column}",
                )
        return float(sum(f[0] for f in found))
    return math.nan


def _tensor_rate(lookup: dict, kid: int, work: TensorFlops, duration_ns: float) -> float:
    """One launch's tensor FLOPs per second in one format; NaN when the report lacks the counters
    or the duration. A counter in a unit other than a plain count (a CSV scaled to "Gop"?) reads
    as missing: the column is optional, the report stays readable."""
    for alternative in work.sources:
        found = [lookup.get((kid, m)) for m in alternative]
        if all(f is not None and math.isfinite(f[0]) and f[1] == "" for f in found):
            ok = math.isfinite(duration_ns) and duration_ns > 0
            return float(sum(f[0] for f in found)) / duration_ns * 1e9 if ok else math.nan
    return math.nan


# what a clock may be in after normalisation: ncu_report says "hz", ncu's CSV "Ghz" or "cycle/nsecond"
_CLOCK_UNITS = ("Hz", "cycle/s")


def _rate_value(where: str | Path, lookup: dict, kid: int, rate: RooflineRate) -> float:
    """sum(weight x per-cycle count) x clock for one kernel; NaN when any of them is missing."""
    found = [lookup.get((kid, m)) for m, _ in rate.terms] + [lookup.get((kid, rate.clock))]
    if any(f is None or math.isnan(f[0]) for f in found):
        return math.nan
    *terms, (clock, clock_unit) = found
    for (metric, _), (_, unit) in zip(rate.terms, terms):
        if not unit.endswith("/cycle"):
            raise ParseError(
                where,
                f"{metric} is in {unit!r} after normalisation, expected a count per cycle for {rate.column}",
            )
    if clock_unit not in _CLOCK_UNITS:
        raise ParseError(
            where, f"{rate.clock} is in {clock_unit!r} after normalisation, expected Hz for {rate.column}"
        )
    return float(sum(value * weight for (value, _), (_, weight) in zip(terms, rate.terms)) * clock)
