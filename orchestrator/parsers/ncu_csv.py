"""ncu's CSV -> `NcuReport`: the raw page (`ncu --csv --page raw`, or `ncu --import R --csv
--page raw`) for the measurements, the details page (`--page details`) for ncu's rule results.
Reads a file or the text; running ncu to get it is orchestrator.backends.ncu_tool's part."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers.ncu_frames import build_report, variant_of
from orchestrator.parsers.ncu_metrics import DEFAULT_DOMAIN, DEFAULT_PREFIX, RULE_COLUMNS, NcuReport
from reports.demangle import function_name

# Reading ncu's raw-page CSV: `ncu --import r.ncu-rep --csv --page raw`, or the stdout of
# `ncu --csv --page raw ...` where ncu's ==PROF== lines and the program's own output come first.
# Row 1 names the columns, row 2 gives units, then one row per kernel; numbers may carry
# thousands separators ("1,980,000"); a missing value reads "no data".

CSV_META_COLUMNS = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
}
CSV_PUSHPOP_PREFIX = "thread Domain:Push/Pop_Range"
CSV_STARTEND_PREFIX = "Id:Domain:Start/Stop_Range"
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
# one push/pop range as the CSV writes it: Domain:Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg
# (a range name may itself hold ':', so the fixed-vocabulary fields after it anchor the split)
_CSV_RANGE = re.compile(
    r"(?P<domain>[^:]*):(?P<range>.*?):(?P<pl_type>none|[A-Z][A-Z0-9_]*):(?P<pl_value>[^:]*)"
    r":(?P<clr_type>none|[A-Z][A-Z0-9_]*):(?P<color>[^:]*)"
    r":(?P<msg_type>none|[A-Z][A-Z0-9_]*):(?P<msg>.*)",
    re.S,
)


def _parse_number(cell: str) -> float | None:
    s = cell.strip()
    if _NUMBER.fullmatch(s):
        return float(s.replace(",", ""))
    return None


def _parse_triple(cell: str) -> tuple[int, int, int] | None:
    nums = re.findall(r"\d+", cell or "")
    return (int(nums[0]), int(nums[1]), int(nums[2])) if len(nums) == 3 else None


def _csv_nvtx(cell: str, where: str | Path) -> list[tuple[str, str]]:
    out = []
    for quoted in re.findall(r'"([^"]*)"', cell or ""):
        m = _CSV_RANGE.fullmatch(quoted)
        if not m:
            raise ParseError(
                where, f"cannot read the NVTX range {quoted!r} of column {CSV_PUSHPOP_PREFIX}..."
            )
        out.append((m.group("domain"), m.group("range")))
    return out


def _csv_source(source: str | Path) -> tuple[Path | None, str | Path, str]:
    """(path or None, what to name in errors, text) of a file (Path, or a str without a newline)
    or of the text itself."""
    if isinstance(source, Path) or "\n" not in source:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ParseError(path, "no such file") from None
        except OSError as exc:
            raise ParseError(path, f"cannot read it ({exc.strerror})") from exc
        where: str | Path = path
        if not text.strip():
            raise ParseError(where, "empty file")
        return path, where, text
    if not source.strip():
        raise ParseError("<ncu CSV text>", "empty file")
    return None, "<ncu CSV text>", source


def _ncu_said(text: str) -> str:
    """ ": ncu said " and ncu's ==ERROR== / ==WARNING== lines in `text`, to end an error message; ""
    when it holds none."""
    # the lines orchestrator.backends.ncu_tool.ncu_errors takes from a log: parsers import no backend
    said = [ln.strip() for ln in text.splitlines() if ln.lstrip().startswith(("==ERROR==", "==WARNING=="))]
    return ": ncu said " + " | ".join(said) if said else ""


def read_csv_raw(
    source: str | Path, *, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX
) -> NcuReport:
    """Read ncu's `--csv --page raw` output: a file (Path, or a str without a newline) or the
    text itself. Lines before the header (ncu's ==PROF== lines, the program's own output) and
    ncu's ==X== lines anywhere are skipped. No rule results: the raw page has none.

    Example:
        >>> rep = read_csv_raw(Path("square_raw.csv"))
        >>> rep.metrics.query("metric == 'gpu__time_duration.sum'")[["id", "value", "unit"]]
    """
    path, where, text = _csv_source(source)
    lines = text.lstrip("\ufeff").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",') or ln.startswith("ID,")), None)
    if start is None:
        raise ParseError(
            where,
            'no ncu CSV header (a line starting with "ID",)' + _ncu_said(text),
            hint="expected the output of ncu --csv --page raw",
        )
    body = [ln for ln in lines[start:] if ln.strip() and not re.match(r"==[A-Z]+==", ln)]
    rows = list(csv.reader(body))
    header = rows[0]
    units = [""] * len(header)
    data = rows[1:]
    if data and data[0] and data[0][0] == "":
        units, data = data[0], data[1:]
    if not data:
        raise ParseError(where, "no kernel rows after the CSV header" + _ncu_said(text))
    col = {name: i for i, name in enumerate(header)}
    pushpop = next((i for i, name in enumerate(header) if name.startswith(CSV_PUSHPOP_PREFIX)), None)
    metric_cols = [
        i
        for i, name in enumerate(header)
        if name not in CSV_META_COLUMNS and not name.startswith((CSV_PUSHPOP_PREFIX, CSV_STARTEND_PREFIX))
    ]
    kernels, metrics = [], []
    for n, row in enumerate(data, start=1):
        if len(row) != len(header):
            raise ParseError(where, f"kernel row {n} has {len(row)} fields, the header {len(header)}")
        try:
            kid = int(_parse_number(row[col["ID"]]))  # type: ignore[arg-type]
        except (KeyError, TypeError):
            raise ParseError(where, f"kernel row {n} has no numeric ID") from None
        demangled = row[col["Kernel Name"]] if "Kernel Name" in col else ""
        grid = _parse_triple(row[col["Grid Size"]]) if "Grid Size" in col else None
        block = _parse_triple(row[col["Block Size"]]) if "Block Size" in col else None
        launch = {
            "device": _parse_number(row[col["Device"]]) if "Device" in col else None,
            "stream": _parse_number(row[col["Stream"]]) if "Stream" in col else None,
        }
        for axis, grid_v, block_v in zip("xyz", grid or (None,) * 3, block or (None,) * 3):
            launch[f"grid_{axis}"], launch[f"block_{axis}"] = grid_v, block_v
        kernels.append(
            {
                "id": kid,
                "kernel": function_name(demangled),
                "kernel_demangled": demangled,
                "nvtx": _csv_nvtx(row[pushpop], where) if pushpop is not None else [],
                "launch": launch,
            }
        )
        for i in metric_cols:
            metrics.append((kid, header[i], row[i], units[i], _parse_number(row[i])))
    return build_report(
        path,
        {"kernels": kernels, "metrics": metrics, "rules": []},
        domain=domain,
        prefix=prefix,
        source="csv",
    )


# --------------------------------------------------------------------------------------------
# Reading ncu's rule results from its details page: `ncu --import r.ncu-rep --csv --page details`.
# Not yet checked against ncu 2025.3.1's own output (no capture of it exists here:
# scripts/capture_roofline_fixture.sh takes one on the H200). What it relies on, from ncu's CSV as
# its raw page prints it (our fixtures) and as public captures of the details page show it: one row
# per kernel and section item, columns named in the header ("ID", the NVTX columns, "Kernel Name",
# ..., "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name", "Rule Type",
# "Rule Description", "Estimated Speedup Type", "Estimated Speedup"); a rule result is a row whose
# "Rule Name" is set, its "Section Name" the section's identifier ("SpeedOfLight"), its type a
# short word, its speedup a bare percentage; a metric row may stop after "Metric Value". Rule
# titles ("Tail Effect") and focus metrics are not on this page.

DETAILS_RULE_COLUMNS = ("Section Name", "Rule Name", "Rule Type", "Rule Description")
# the CLI's rule types -> ncu_report's message types (ncu_rep._MSG_TYPES)
CSV_RULE_TYPES = {"OPT": "optimization", "WRN": "warning", "ERR": "error", "INF": "ok"}


def read_csv_details(
    source: str | Path, *, domain: str | None = DEFAULT_DOMAIN, prefix: str = DEFAULT_PREFIX
) -> pd.DataFrame:
    """ncu's rule results (RULE_COLUMNS) from its `--csv --page details` output: a file (Path, or
    a str without a newline) or the text. `title` is empty and `rule_name` None: the page names a
    rule by its identifier only. ParseError when the text has no details header or no rule columns.

    Example:
        >>> rules = read_csv_details(Path("details.csv"))
        >>> rules[["variant", "kernel", "section", "rule", "type", "estimated_speedup_pct"]]
    """
    _, where, text = _csv_source(source)
    body = "\n".join(ln for ln in text.lstrip("\ufeff").splitlines() if not re.match(r"==[A-Z]+==", ln))
    start = re.search(r'^"?ID"?,', body, re.M)
    if start is None:
        raise ParseError(
            where,
            'no ncu CSV header (a line starting with "ID",)' + _ncu_said(text),
            hint="expected the output of ncu --import REPORT --csv --page details",
        )
    rows = list(csv.reader(io.StringIO(body[start.start() :])))  # a quoted message may span lines
    header, data = rows[0], [r for r in rows[1:] if any(c.strip() for c in r)]
    missing = [c for c in ("ID", "Kernel Name", *DETAILS_RULE_COLUMNS) if c not in header]
    if missing:
        raise ParseError(
            where,
            f"no {', '.join(missing)} column in the CSV header: not ncu's details page with rule results",
            hint="expected the output of ncu --import REPORT --csv --page details",
        )
    col = {name: i for i, name in enumerate(header)}
    pushpop = next((i for i, name in enumerate(header) if name.startswith(CSV_PUSHPOP_PREFIX)), None)
    out = []
    for n, row in enumerate(data, start=1):
        if len(row) > len(header):
            raise ParseError(where, f"row {n} has {len(row)} fields, the header {len(header)}")
        row = row + [""] * (len(header) - len(row))
        rule = row[col["Rule Name"]].strip()
        if not rule:
            continue
        kid = _parse_number(row[col["ID"]])
        if kid is None:
            raise ParseError(where, f"row {n} has no numeric ID")
        speedup = _parse_number(row[col["Estimated Speedup"]]) if "Estimated Speedup" in col else None
        speedup_type = row[col["Estimated Speedup Type"]].strip() if "Estimated Speedup Type" in col else ""
        kind = row[col["Rule Type"]].strip()
        message = row[col["Rule Description"]].strip()
        out.append(
            {
                "id": int(kid),
                "variant": variant_of(_csv_nvtx(row[pushpop], where), domain, prefix)
                if pushpop is not None
                else None,
                "kernel": function_name(row[col["Kernel Name"]]),
                "section": row[col["Section Name"]].strip(),
                "rule": rule,
                "rule_name": None,
                "type": CSV_RULE_TYPES.get(kind.upper(), kind.lower() or "none"),
                "title": "",
                "message": message,
                "message_raw": message,
                "speedup_type": speedup_type or None,
                "estimated_speedup_pct": speedup if speedup is not None else math.nan,
                "focus_metrics": "",
            }
        )
    rules = pd.DataFrame(out, columns=RULE_COLUMNS)
    rules["id"] = rules["id"].astype("int64")
    rules["variant"] = rules["variant"].astype("object")
    rules["estimated_speedup_pct"] = rules["estimated_speedup_pct"].astype("float64")
    return rules
