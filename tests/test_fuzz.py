"""Damaged inputs: every file the tool reads back, given seeded random damage.

For each kind of input (the run folder's manifest.json and workload.json, an nsys SQLite
export, a .ncu-rep, a torch.profiler trace, compressed raw files) hypothesis picks damage:
truncation at an offset, a flipped byte, a zeroed 4 KiB page, and for JSON a deleted key or a
value of another type. The report is rebuilt from the damaged folder and the outcome must be

- "same": the very table of the undamaged folder (the damage hit bytes no reader uses), or
- "error": a ParseError (exit code 4) whose message names the damaged file, or
- "flagged": exit 0, every variant that changed is marked (status not ok, with a note) and
  the others are the same;
- "renamed": every number and status the same, only text read from the file differs (a flipped
  byte inside a kernel's name in the export's string table: as with a digit in JSON, no reader
  can tell, the files carry no checksum);

never different numbers with exit 0 ("different"), never a traceback ("crash").

A flipped digit inside a JSON number is another valid number, which no reader can tell from
the original (the files carry no checksum), so text files get no byte flips; see docs/fuzz.md.

200 cases per kind, derandomized (the same cases on every run); GPROF_FUZZ_CASES=N runs N
(scripts/fuzz.py --cases N), GPROF_FUZZ_COUNTS=FILE appends each case's outcome to FILE.

Time goes into rebuilding the report (pandas) and, for .ncu-rep, ncu_report's walk of ~6,400
metrics in a forked child (~0.15 s). Two shortcuts that change no outcome: a raw file that parses
to exactly the undamaged frame (or ncu records) is "same" without building the rest (_Same), and
an nsys export the case did not damage (the workload.json kind) is read once.
"""

from __future__ import annotations

import copy
import hashlib
import json
import lzma
import os
import pickle
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from orchestrator.errors import EXIT_PARSE, GprofError  # noqa: E402

RUNS = Path(__file__).resolve().parent / "fixtures" / "runs" / "h200"
CASES = int(os.environ.get("GPROF_FUZZ_CASES", "200"))
COUNTS = os.environ.get("GPROF_FUZZ_COUNTS")
PAGE = 4096
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

# kind -> (committed run folder, the damaged file in it, binary?)
KINDS = {
    "manifest.json": ("time-mean", "manifest.json", False),
    "workload.json": ("nsys-triton-mean", "workload.json", False),
    "nsys-sqlite": ("nsys-triton-mean", "report.sqlite", True),
    "ncu-rep": ("ncu-triton-mean", "report.ncu-rep", True),
    "torch-trace": ("torch-trace-mean", "trace.json", False),
    "ncu-rep.xz": ("ncu-triton-mean", "report.ncu-rep.xz", True),
    # a user's program under `exec nsys`, exported by Nsight Systems 2024.2.3 (nested ranges)
    "program-sqlite": ("../h100-programs/exec-nested-steps", "report.sqlite", True),
}


# -- reading a folder the way `gprof-orch report` does, without writing into it -----------------


class _Same(Exception):
    """The damaged file read back to exactly what the undamaged one gave (the raw ncu_report
    records, or the backend's parsed frame): everything after that is a function of it and of
    files the case left alone, so the table is the baseline's and is not built again."""


_WARMED: list[bool] = []


def _warm_ncu_report(path: Path) -> None:
    """Read the undamaged report once in this process, before the first fork, so that every forked
    child starts with ncu_report's one-time set-up done: a child's CPU time 0.27 s -> 0.12 s. It
    reads a copy under another name, so nothing ncu_report might keep by path can answer for the
    damaged file (the cases' outcomes are the same with and without it, checked case by case)."""
    if _WARMED:
        return
    from orchestrator.parsers import ncu_rep

    _WARMED.append(True)
    with tempfile.TemporaryDirectory(prefix="ncu-warm-") as tmp:
        copy = Path(tmp) / "warm-up.ncu-rep"
        shutil.copyfile(path, copy)
        ncu_rep.extract_raw(str(copy))


def _fork_isolated(path: Path, timeout: float | None, seen: dict | None = None) -> dict:
    """ncu_tool._extract_isolated's contract (a child reads the report; a child that dies is a
    ParseError naming the file) with a fork instead of a new interpreter: 0.15 s a case, not 1.5.
    `seen` records (key "raw") or compares (_Same) what the child read."""
    from orchestrator.errors import ParseError
    from orchestrator.parsers import ncu_rep

    if seen is not None and seen.get("record"):  # the undamaged folder's report
        _warm_ncu_report(path)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(r)
            data = pickle.dumps(ncu_rep.extract_raw(str(path)))
            with os.fdopen(w, "wb") as fh:
                fh.write(data)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        raise ParseError(path, f"ncu_report could not read it (wait status {status})")
    if seen is not None:
        if seen.get("record"):
            seen["raw"] = data
        elif data == seen.get("raw"):
            raise _Same
    return pickle.loads(data)


_EXPORTS: dict[tuple[str, str], object] = {}


@contextmanager
def _reading_in_place(seen: dict | None = None):
    """load_run as `report` runs it, with the folder taken as read-only (nothing written) and
    ncu_report's child forked (see _fork_isolated). With `seen` ({"record": True} for the
    undamaged folder, then what that recorded), a case whose raw ncu records or parsed frame
    equal the undamaged folder's raises _Same."""
    from orchestrator import backends
    from orchestrator.backends import ncu_tool
    from orchestrator.parsers import nsys as ns
    from orchestrator.runfolder import RunFolder

    def fork(path, timeout):
        return _fork_isolated(path, timeout, seen)

    def read_export(path, **options):  # an export this case left alone reads as it did in the last case
        key = (
            str(Path(path).resolve()),
            hashlib.sha1(Path(path).read_bytes()).hexdigest(),
            repr(sorted(options.items())),
        )
        if key not in _EXPORTS:
            _EXPORTS.clear()
            _EXPORTS[key] = real_read_export(path, **options)
        return copy.deepcopy(_EXPORTS[key])

    def get(name):
        backend = real_get(name)
        if seen is not None and name != "ncu":  # ncu's rules come from the raw records too
            parse = backend.parse

            def parse_and_compare(rf):
                parsed = parse(rf)
                if seen.get("record"):
                    seen["parsed"] = parsed
                elif seen.get("parsed") is not None and _same_parse(parsed, seen["parsed"]):
                    raise _Same
                return parsed

            backend.parse = parse_and_compare
        return backend

    saved = RunFolder.writable, ncu_tool._extract_isolated, backends.get, ns.read_export
    real_get, real_read_export = backends.get, ns.read_export
    RunFolder.writable, ncu_tool._extract_isolated, backends.get = (lambda self: False), fork, get
    if seen is None:  # the export is not the damaged file
        ns.read_export = read_export
    try:
        yield
    finally:
        RunFolder.writable, ncu_tool._extract_isolated, backends.get, ns.read_export = saved
        if seen is not None:
            seen.pop("record", None)


def _same_parse(a, b) -> bool:
    """Two parses of a folder alike in everything the report is built from (Backend.parse's
    Parsed): the frame, the findings, the warnings, the lost events and the rest it read."""

    def same_frame(x, y):
        return (x is None and y is None) or (x is not None and y is not None and x.equals(y))

    return (
        same_frame(a.frame, b.frame)
        and same_frame(a.findings, b.findings)
        and a.warnings == b.warnings
        and a.lost == b.lost
        and repr(a.meta) == repr(b.meta)
    )


def table_of(folder: Path, seen: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The folder's table and the lines under it."""
    from orchestrator import load_run

    with _reading_in_place(seen):
        run = load_run(folder)
    return run.table.reset_index(drop=True), run.footer()


# -- damage -------------------------------------------------------------------------------------


def _json_paths(node, prefix=()):
    """Every (path to a value) in a JSON document, the document itself excluded."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield prefix + (key,)
        yield from _json_paths(value, prefix + (key,))


# a value of another JSON type, for each type
_SWAPS = {
    bool: [0, "true", None],
    int: ["1", 1.5, None, [], True],
    float: ["1.0", 1, None, {}],
    str: [1, None, [], {}],
    list: [{}, "[]", None, 0],
    dict: [[], "{}", None, 0],
    type(None): [0, "", []],
}


def damage_strategy(kind: str, data: bytes, doc):
    """A strategy of (description, damaged bytes)."""
    n = len(data)
    cut = st.integers(0, n - 1).map(lambda o: (f"truncated at {o}", data[:o]))
    pages = max(1, n // PAGE)
    zero = st.integers(0, pages - 1).map(
        lambda p: (
            f"page {p} zeroed",
            data[: p * PAGE] + bytes(len(data[p * PAGE : (p + 1) * PAGE])) + data[(p + 1) * PAGE :],
        )
    )
    choices = [cut, zero]
    if KINDS[kind][2]:
        choices.append(
            st.tuples(st.integers(0, n - 1), st.integers(1, 255)).map(
                lambda t: (
                    f"byte {t[0]} xor {t[1]}",
                    data[: t[0]] + bytes([data[t[0]] ^ t[1]]) + data[t[0] + 1 :],
                )
            )
        )
    if doc is not None:
        paths = list(_json_paths(doc))
        if kind == "torch-trace":  # the events' fields, not each of 2,000 events' args
            paths = [p for p in paths if len(p) <= 3]

        def edit(t):
            path, how, pick = t
            new = copy.deepcopy(doc)
            parent = new
            for key in path[:-1]:
                parent = parent[key]
            key = path[-1]
            if how == "delete":
                del parent[key]
                return f"deleted {'/'.join(map(str, path))}", json.dumps(new).encode()
            swaps = _SWAPS[type(parent[key])]
            if kind == "torch-trace" and type(parent[key]) is float:
                # a trace's floats are measured times: one swapped for the number 1 is another
                # measurement, which no reader can tell from a real one (the reason JSON kinds get
                # no byte flips: a flipped digit is the same). Found as "different" at case 1194
                # (event 706's dur 4.556 -> 1). Text, null and objects stay.
                swaps = [v for v in swaps if not isinstance(v, (int, float))]
            parent[key] = swaps[pick % len(swaps)]
            return f"{'/'.join(map(str, path))} -> {parent[key]!r}", json.dumps(new).encode()

        choices.append(
            st.tuples(st.sampled_from(paths), st.sampled_from(["delete", "swap"]), st.integers(0, 10)).map(
                edit
            )
        )
    return st.one_of(choices)


# -- outcomes -----------------------------------------------------------------------------------


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return a.shape == b.shape and list(a.columns) == list(b.columns) and a.equals(b)


# a column left empty, with a line under the table that says so (no peak bandwidth recorded)
_EMPTIED = {
    "pct_of_peak_bw": ("% peak BW left empty", "GB/s and % peak BW left empty"),
    "achieved_gb_s": ("GB/s and % peak BW left empty",),
}


def _emptied_and_said(table: pd.DataFrame, footer: list[str], baseline: pd.DataFrame) -> list[str]:
    """The lines under the table that explain every difference from the baseline, where every
    difference is a value left empty; [] when something else differs."""
    if table.shape != baseline.shape or list(table.columns) != list(baseline.columns):
        return []
    cols = [c for c in table.columns if not table[c].equals(baseline[c])]
    said = [line for line in footer if any(w in line for c in cols for w in _EMPTIED.get(c, ()))]
    ok = cols and all(
        c in _EMPTIED
        and any(w in line for w in _EMPTIED[c] for line in said)
        and table.loc[table[c].ne(baseline[c]) & baseline[c].notna(), c].isna().all()
        and table[c].notna().le(baseline[c].notna()).all()
        for c in cols
    )
    return said if ok else []


# the table's columns that hold text read from the raw file (kernel names), not numbers
_NAMES = ("kernels", "kernels_full", "why")


def _renamed(table: pd.DataFrame, baseline: pd.DataFrame) -> bool:
    """Only kernel names differ: every number and status is the baseline's."""
    if table.shape != baseline.shape or list(table.columns) != list(baseline.columns):
        return False
    cols = [c for c in table.columns if not table[c].equals(baseline[c])]
    return bool(cols) and set(cols) <= set(_NAMES)


def _why_without_speedup(table: pd.DataFrame, baseline: pd.DataFrame, i: int) -> bool:
    if "why" not in table:
        return True
    return table.loc[i, "why"] == re.sub(r"^[0-9.]+x of [^:]*: ", "", baseline.loc[i, "why"] or "")


def _derived_follow(table: pd.DataFrame, baseline: pd.DataFrame, i: int, gone: set[str]) -> bool:
    """Row i's columns that name or divide by other variants changed only as the flagged ones
    (`gone`) explain: its speedup gone with a flagged baseline (and the "why" line's "1.00x of"
    with it), its same_kernel_as without flagged variants that lost their kernels."""
    speedup_same = _same(table.loc[[i], ["speedup_vs_baseline"]], baseline.loc[[i], ["speedup_vs_baseline"]])
    if not speedup_same and not (
        pd.isna(table.loc[i, "speedup_vs_baseline"]) and _why_without_speedup(table, baseline, i)
    ):
        return False
    if speedup_same and "why" in table and table.loc[i, "why"] != baseline.loc[i, "why"]:
        return False
    for col in ("same_kernel_as", "same_ops_as"):
        if col not in table:
            continue
        # a flagged variant that lost its kernels (operators) drops out; one that kept them may stay
        names = lambda t, col=col: {v for v in str(t.loc[i, col] or "").split(", ") if v}  # noqa: E731
        if not names(baseline) - gone <= names(table) <= names(baseline):
            return False
    return True


def classify(
    folder: Path, damaged: Path, baseline: pd.DataFrame, seen: dict | None = None
) -> tuple[str, str]:
    try:
        table, footer = table_of(folder, seen)
    except _Same:
        return "same", ""
    except GprofError as exc:
        # the damaged file, or (the two disagree: which one is wrong cannot be told) the raw file
        # that a damaged workload.json or manifest.json no longer describes
        named = any(str(p) in exc.message for p in (damaged, damaged.resolve(), folder, folder.resolve()))
        if exc.exit_code == EXIT_PARSE and named:
            return "error", exc.message
        return "unclear error", f"exit {exc.exit_code}: {exc.message}"
    except Exception as exc:  # what the CLI would print a traceback for
        return "crash", f"{type(exc).__name__}: {exc}"
    if _same(table, baseline):
        return "same", ""
    if _renamed(table, baseline):
        return "renamed", ", ".join(sorted(set(table["kernels"]) - set(baseline["kernels"])))
    said = _emptied_and_said(table, footer, baseline)
    if said:
        return "flagged", "; ".join(said)
    if list(table["variant"]) == list(baseline["variant"]):
        changed = [i for i in range(len(table)) if not _same(table.iloc[[i]], baseline.iloc[[i]])]
        flagged = [i for i in changed if table.loc[i, "status"] != "ok" and table.loc[i, "note"]]
        # a flagged baseline has no time: the others' speedups over it are gone (NaN), not other numbers
        rest = [i for i in changed if i not in flagged]
        # (and the "why" line loses its leading "1.00x of <baseline>: ")
        derived = [c for c in ("speedup_vs_baseline", "same_kernel_as", "same_ops_as", "why") if c in table]
        gone = {table.loc[i, "variant"] for i in flagged}
        if all(
            _same(table.drop(columns=derived).iloc[[i]], baseline.drop(columns=derived).iloc[[i]])
            and _derived_follow(table, baseline, i, gone)
            for i in rest
        ) and (flagged or not rest):
            return "flagged", "; ".join(
                f"{table.loc[i, 'variant']}: {table.loc[i, 'status']}" for i in flagged
            )
    return "different", table.to_string()


# kinds whose file only the backend's parse reads (ncu: its rules too, from the same records):
# a case that parses to the undamaged frame (or raw records) is "same" without the rest (_Same)
_PARSED_ONLY = {"nsys-sqlite", "program-sqlite", "ncu-rep", "ncu-rep.xz", "torch-trace"}
_BASE: dict[str, tuple[Path, bytes, object, pd.DataFrame, object, dict | None]] = {}


def prepared(kind: str, root: Path):
    """The undamaged folder of `kind` (raw files decompressed, but for the .xz kind), its file's
    bytes, its parsed JSON (or None) and its table."""
    if kind not in _BASE:
        name, fname, binary = KINDS[name_kind := kind]
        folder = Path(tempfile.mkdtemp(prefix=f"base-{name_kind.replace('.', '-')}-", dir=root))
        shutil.copytree(RUNS / name, folder, dirs_exist_ok=True)
        if not fname.endswith(".xz"):
            for xz in folder.rglob("*.xz"):
                xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
                xz.unlink()
        data = (folder / fname).read_bytes()
        doc = None if binary else json.loads(data)
        seen = {"record": True} if kind in _PARSED_ONLY else None
        _BASE[kind] = (folder, data, doc, table_of(folder, seen)[0], damage_strategy(kind, data, doc), seen)
    return _BASE[kind]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _record(kind: str, outcome: str, what: str) -> None:
    if COUNTS:
        with open(COUNTS, "a") as fh:
            fh.write(json.dumps({"kind": kind, "outcome": outcome, "damage": what}) + "\n")


def check(kind: str, root: Path, draw) -> None:
    folder, data, doc, baseline, damage, seen = prepared(kind, root)
    what, bad = draw(damage)
    damaged = folder / KINDS[kind][1]
    damaged.write_bytes(bad)  # the folder is read, never written: only this file changes
    try:
        outcome, detail = classify(folder, damaged, baseline, seen)
    finally:
        damaged.write_bytes(data)
    _record(kind, outcome, what)
    assert outcome in ("same", "error", "flagged", "renamed"), f"{kind}, {what}: {outcome}\n{detail}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_damaged_input_gives_the_same_numbers_or_a_clear_error(kind, root):
    @FUZZ
    @given(st.data())
    def run(data):
        check(kind, root, data.draw)

    run()


def test_a_kernel_record_without_name_range_or_metrics_is_an_error(tmp_path):
    """The .ncu-rep flip the fuzz found first: a kernel that loses its name, NVTX range and
    metrics was dropped without a word, and torch.mean read 11.00 us (total / iters) for 16.03."""
    from orchestrator.errors import ParseError
    from orchestrator.parsers import ncu_frames

    raw = {
        "kernels": [
            {"id": 0, "kernel": "k", "kernel_demangled": "k", "nvtx": [("gprof", "variant:a")], "launch": {}},
            {"id": 1, "kernel": "", "kernel_demangled": "", "nvtx": [], "launch": {}},
        ],
        "metrics": [(0, "gpu__time_duration.sum", 5.0, "ns", 5.0)],
        "rules": [],
    }
    with pytest.raises(ParseError) as e:
        ncu_frames.build_report(
            tmp_path / "r.ncu-rep", raw, domain="gprof", prefix="variant:", source="ncu_report"
        )
    assert "r.ncu-rep" in e.value.message and "kernel record 1" in e.value.message


def test_uneven_launches_mark_the_variant_incomplete(h200_run):
    """Two of three iterations' kernels: no per-iteration time (not total / iters), status
    incomplete, and a note that says why."""
    from orchestrator.backends.ncu import frame_from_report
    from reports import summary

    folder = h200_run("ncu-triton-mean")
    wman = json.loads((folder / "workload.json").read_text())
    wman["iters"] = 2  # 3 launches of torch.mean in 2 iterations
    frame = frame_from_report(folder / "report.ncu-rep", wman, run="r", domain="gprof", prefix="variant:")
    t = summary.variant_table(frame, wman).set_index("variant")
    assert t.loc["torch_mean", "status"] == "incomplete"
    assert pd.isna(t.loc["torch_mean", "time_median_us"])
    assert "3 launches do not split into 2 iterations" in t.loc["torch_mean", "note"]


def test_fork_reader_is_what_the_real_isolation_reads(root):
    """The fuzz's forked reader gives what ncu_tool's real child reads, on the undamaged report."""
    from orchestrator.backends import ncu_tool

    folder = prepared("ncu-rep", root)[0]
    mine = _fork_isolated(folder / "report.ncu-rep", None)
    theirs = ncu_tool._extract_isolated(folder / "report.ncu-rep", 600)
    assert pickle.dumps(mine) == pickle.dumps(theirs)  # NaN == NaN, which == would not say


def _flipped_export_error(tmp_path, offset: int, mask: int):
    """The ParseError of nsys-triton-mean's export with byte `offset` xor `mask`; it names the file."""
    from orchestrator.errors import ParseError
    from orchestrator.parsers import nsys as ns

    data = bytearray((RUNS / "nsys-triton-mean" / "report.sqlite").read_bytes())
    data[offset] ^= mask
    p = tmp_path / "report.sqlite"
    p.write_bytes(bytes(data))
    with pytest.raises(ParseError) as e:
        ns.read_export(p)
    assert str(p) in e.value.message
    return e.value


def test_a_renamed_memset_column_is_an_error(tmp_path):
    """The nsys flip the fuzz found: byte 294269 of nsys-triton-mean's export is the "c" of
    CUPTI_ACTIVITY_KIND_MEMSET's `correlationId` in the schema; the column read as missing, every
    memset fell outside the variants and torch.mean read 100.93 us for 101.74, exit 0."""
    assert (RUNS / "nsys-triton-mean" / "report.sqlite").read_bytes()[294269:294282] == b"correlationId"
    err = _flipped_export_error(tmp_path, 294269, 1)
    assert "CUPTI_ACTIVITY_KIND_MEMSET has no column correlationId" in err.message


def test_a_runtime_call_that_ends_before_it_starts_is_an_error(tmp_path):
    """The nsys flip the 5,000-case run found: byte 305481 xor 1 of nsys-triton-mean's export
    moves a cudaLaunchKernel's start 16.8 ms past its end; triton_lecture's launch CPU time read
    -816.6 us/iter (and its median 2193.59 us for 2193.83), exit 0."""
    err = _flipped_export_error(tmp_path, 305481, 1)
    assert "CUPTI_ACTIVITY_KIND_RUNTIME: 1 record(s) end before they start" in err.message


def test_a_flipped_kernel_name_is_renamed_not_different(root):
    """Byte 8426 xor 1 of nsys-triton-mean's export turns lecture_row_mean_kernel into
    mecture_row_mean_kernel in StringIds: every number stays, only the name moves."""
    base, data, _, table = prepared("nsys-sqlite", root)[:4]
    folder = Path(tempfile.mkdtemp(dir=root))
    shutil.copytree(base, folder, dirs_exist_ok=True)
    bad = bytearray(data)
    bad[8426] ^= 1
    (folder / "report.sqlite").write_bytes(bytes(bad))
    outcome, detail = classify(folder, folder / "report.sqlite", table)
    assert (outcome, detail) == ("renamed", "mecture_row_mean_kernel, reduce_kernel<MeanOps>")


def test_a_variant_range_lost_from_a_torch_trace_is_not_in_report(tmp_path):
    """Deleting event 163 of torch-trace-mean's trace (the `variant:sum_div_numel` range) left
    sum_div_numel an `ok` row with no numbers, exit 0; now it is `not in report`, with the reason."""
    from orchestrator import load_run

    folder = tmp_path / "run"
    shutil.copytree(RUNS / "torch-trace-mean", folder)
    doc = json.loads((folder / "trace.json").read_text())
    assert doc["traceEvents"][163]["name"] == "variant:sum_div_numel"
    del doc["traceEvents"][163]
    (folder / "trace.json").write_text(json.dumps(doc))
    t = load_run(folder).table.set_index("variant")
    assert t.loc["sum_div_numel", "status"] == "not in report"
    assert "no range for it" in t.loc["sum_div_numel", "note"]
    assert (t.drop("sum_div_numel")["status"] == "ok").all()


def test_a_lost_range_drops_the_variant_from_the_others_same_kernel_as(root):
    """Deleting event 82 (the `variant:tensor_mean` range) of torch-trace-mean's trace, case 934 of
    the 5,000: tensor_mean is `not in report`, and torch_mean no longer names it as running the
    same kernel. Every measured number of the others stays; the classifier called it "different"
    because it only allowed a lost baseline to change the others' derived columns."""
    base, _, doc, table = prepared("torch-trace", root)[:4]
    folder = Path(tempfile.mkdtemp(dir=root))
    shutil.copytree(base, folder, dirs_exist_ok=True)
    doc = copy.deepcopy(doc)
    assert doc["traceEvents"][82]["name"] == "variant:tensor_mean"
    del doc["traceEvents"][82]
    (folder / "trace.json").write_text(json.dumps(doc))
    outcome, detail = classify(folder, folder / "trace.json", table)
    assert (outcome, detail) == ("flagged", "tensor_mean: not in report")
    assert table.set_index("variant").loc["torch_mean", "same_kernel_as"] == "tensor_mean"


def test_an_incomplete_baseline_keeps_its_kernels_in_the_others_same_kernel_as(root):
    """Deleting event 26 of torch-trace-mean's trace (one of torch_mean's iterations): the
    baseline is `incomplete` (19 of 20 iterations), the others lose their speedups over it, and
    tensor_mean still names it as running the same kernel: it still launched that kernel."""
    base, _, doc, table = prepared("torch-trace", root)[:4]
    folder = Path(tempfile.mkdtemp(dir=root))
    shutil.copytree(base, folder, dirs_exist_ok=True)
    doc = copy.deepcopy(doc)
    del doc["traceEvents"][26]
    (folder / "trace.json").write_text(json.dumps(doc))
    outcome, detail = classify(folder, folder / "trace.json", table)
    assert (outcome, detail) == ("flagged", "torch_mean: incomplete")


def test_a_string_that_is_not_utf8_is_an_error(tmp_path):
    """Byte 284553 xor 128 of nsys-triton-mean's export breaks a string's UTF-8 (sqlite_master's
    text): a UnicodeDecodeError traceback before; a ParseError naming the file now."""
    assert "not valid UTF-8" in _flipped_export_error(tmp_path, 284553, 128).message


def _edited_trace_error(tmp_path, edit) -> str:
    """The ParseError message of torch-trace-mean's trace after `edit(events)`; it names the file."""
    from orchestrator.errors import ParseError
    from orchestrator.parsers import torch_trace as tt

    doc = json.loads((RUNS / "torch-trace-mean" / "trace.json").read_text())
    edit(doc["traceEvents"])
    p = tmp_path / "trace.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ParseError) as e:
        tt.summarize(tt.read_trace(p), "variant:")
    assert str(p) in e.value.message
    return e.value.message


def test_an_event_name_that_is_not_text_is_an_error(tmp_path):
    """torch-trace-mean's event 2 named 1 (a number): a pandas ValueError traceback before."""

    def edit(events):
        assert events[2]["name"] == "iter"
        events[2]["name"] = 1

    assert "is not a string (1)" in _edited_trace_error(tmp_path, edit)


def test_a_kernel_without_a_name_is_an_error(tmp_path):
    """The 5,000-case run of 2026-12-04, case 3476: the name of event 300 (torch_mean's
    reduce_kernel) deleted gave a kernel named "" in torch_mean's kernels, exit 0."""

    def edit(events):
        assert events[300]["cat"] == "kernel" and events[300]["name"].startswith(
            "void at::native::reduce_kernel"
        )
        del events[300]["name"]

    assert "complete event" in (msg := _edited_trace_error(tmp_path, edit)) and "has no name" in msg


def test_a_launch_call_without_a_duration_is_an_error(tmp_path):
    """Deleting `dur` of event 472 (a cudaLaunchKernel) of torch-trace-mean's trace read it as a
    0 us call and moved the launch CPU time, exit 0; now a ParseError naming the file."""

    def edit(events):
        assert events[472]["name"] == "cudaLaunchKernel"
        del events[472]["dur"]

    assert "('cudaLaunchKernel') has no duration" in _edited_trace_error(tmp_path, edit)


def test_a_duration_given_as_text_is_an_error(tmp_path):
    """Case 1195 of the 5,000: `dur` of event 706 (a cudaLaunchKernel, 4.556 us) turned into the
    text "1.0" was read as 1 us and moved the launch CPU time, exit 0; now a ParseError naming
    the file. torch.profiler writes every ts and dur as a JSON number."""

    def edit(events):
        assert events[706]["name"] == "cudaLaunchKernel" and events[706]["dur"] == 4.556
        events[706]["dur"] = "1.0"

    assert "is not a JSON number" in _edited_trace_error(tmp_path, edit)


@pytest.mark.parametrize("change", ["delete", None, 1207.0, True])
def test_a_range_without_its_thread_is_an_error(tmp_path, change):
    """The 5,000-case run of 2026-12-04: deleting the tid of event 1 (torch_mean's variant range)
    left torch_mean with no kernels and status ok, exit 0. A read event's pid and tid are an int
    or text, as torch.profiler writes them; missing, null, a float or a bool is a ParseError."""

    def edit(events):
        assert events[1]["name"] == "variant:torch_mean" and events[1]["tid"] == 1207
        if change == "delete":
            del events[1]["tid"]
        else:
            events[1]["tid"] = change

    assert "has no pid or tid of its own" in _edited_trace_error(tmp_path, edit)


def test_a_range_moved_to_another_thread_is_flagged(root):
    """The same run, resumed: torch_mean's range given the tid "1" (a valid thread, no other
    event on it) held none of its iterations or kernels and its row was ok and empty, exit 0.
    Now it is `incomplete`: "the report holds 0 of its 20 iterations"; the other rows are the same."""
    folder, data, doc, baseline, damage, seen = prepared("torch-trace", root)
    damaged = folder / KINDS["torch-trace"][1]
    edited = json.loads(data)
    assert edited["traceEvents"][1]["name"] == "variant:torch_mean"
    edited["traceEvents"][1]["tid"] = "1"
    damaged.write_text(json.dumps(edited))
    try:
        table, footer = table_of(folder)
    finally:
        damaged.write_bytes(data)
    row = table.set_index("variant").loc["torch_mean"]
    assert row["status"] == "incomplete" and pd.isna(row["time_median_us"])
    assert "the report holds 0 of its 20 iterations" in row["note"]
    # the others keep every number; only what is relative to torch_mean (the baseline) is gone
    derived = ["speedup_vs_baseline", "same_kernel_as", "same_ops_as", "why"]
    others = table[table["variant"] != "torch_mean"].drop(columns=derived).reset_index(drop=True)
    want = baseline[baseline["variant"] != "torch_mean"].drop(columns=derived).reset_index(drop=True)
    pd.testing.assert_frame_equal(others, want)
    assert table.loc[table["variant"] != "torch_mean", "speedup_vs_baseline"].isna().all()


def test_no_peak_bandwidth_is_said_under_the_table(root):
    """A workload.json without env/peak_bandwidth_bytes_per_s: % peak BW is empty, and the line
    under the table says why (it was silent)."""
    folder = prepared("workload.json", root)[0]
    damaged = folder / "workload.json"
    data = damaged.read_bytes()
    wman = json.loads(data)
    del wman["env"]["peak_bandwidth_bytes_per_s"]
    damaged.write_text(json.dumps(wman))
    try:
        table, footer = table_of(folder)
    finally:
        damaged.write_bytes(data)
    assert table["pct_of_peak_bw"].isna().all() and table["achieved_gb_s"].notna().all()
    assert "no peak bandwidth recorded for this device: % peak BW left empty" in footer


@pytest.mark.parametrize(
    "path,value",
    [
        (("variants", 1, "status"), None),
        (("variants", 1, "label"), "delete"),
        (("nvtx", "prefix"), None),
        (("iters",), None),
        (("env", "peak_bandwidth_bytes_per_s"), 1),
        (("variants", 1), "delete"),
    ],
)
def test_workload_json_damage_found_past_200_cases_is_an_error(root, path, value):
    """Cases the longer runs found (docs/fuzz.md): each gave other numbers, an empty row or a
    traceback with exit 0; now a ParseError naming workload.json or the folder."""
    folder, data, doc, baseline, _, _ = prepared("workload.json", root)
    new = copy.deepcopy(doc)
    parent = new
    for key in path[:-1]:
        parent = parent[key]
    if value == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    damaged = folder / "workload.json"
    damaged.write_text(json.dumps(new))
    try:
        outcome, detail = classify(folder, damaged, baseline)
    finally:
        damaged.write_bytes(data)
    assert outcome == "error", detail
