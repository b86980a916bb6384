"""Reading an export's integer tables fast: column by column as group_concat strings (or, where
adbc-driver-sqlite is installed, as Arrow arrays: arrow), in chunks of rowids on worker
threads. Used by export.read_export; knows tables and specs, not what the columns mean."""

from __future__ import annotations

import os
import sqlite3
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.errors import ParseError
from orchestrator.parsers.nsys import arrow
from orchestrator.parsers.nsys.schema import REQUIRED_COLUMNS, Spec

# Integer columns travel as one comma-separated string per column and chunk (SQLite's
# group_concat) parsed by numpy in C: about 3x faster than fetchall(), which builds a Python
# tuple per row (measured on 1e6 kernels). NULLs would be skipped, hence every nullable column
# is wrapped in ifnull() (a NULL in a NOT NULL column, which only damage makes, reads back one
# integer short and is an error). Tasks (every column of a range of rowids: one walk of the
# b-tree decodes each row once for all its columns) run on worker threads, since sqlite3
# releases the GIL while SQLite works, and parse their own strings, so that only integers wait
# for the caller. The tasks' chunks line up because every task walks the table's own b-tree in
# rowid order: NOT INDEXED keeps the planner off any index that a later nsys might add. A task
# reads about _TASK_VALUES values: its strings (about 15 bytes a value, some 30 MB) stay far
# below SQLite's 1e9-byte limit, and few wait in memory beside the integers.
_TASK_VALUES = 1 << 21
_DELTA_COLUMNS = ("start", "globalTid", "globalPid")  # sent as differences from the first row's value
_NULL = -(2**63) + 1  # stands for NULL in nullable integer columns on the way through


class TableReader:
    """One export opened read-only, with worker threads and their own connections."""

    def __init__(self, path: Path):
        self.path = path
        self.uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"  # an export is never rewritten
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self.gates: list = []  # LaunchFilter whose workers wait: opened on close, so none waits forever
        dbapi = arrow.driver()  # integers without text on the way, where the driver is installed
        self._arrow = arrow.ArrowFetcher(dbapi, self.uri) if dbapi is not None else None
        try:
            self.con = self._connect()
            self.tables = frozenset(
                r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            )
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ParseError(path, f"cannot open as SQLite ({exc})") from exc

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.uri, uri=True, check_same_thread=False)
        with self._lock:
            self._conns.append(con)
        return con

    def _worker_con(self) -> sqlite3.Connection:
        if not hasattr(self._local, "con"):
            self._local.con = self._connect()
        return self._local.con

    def _fetch(
        self,
        table: str,
        exprs: list[str],
        first: int,
        last: int,
        names: list[str],
        keep: Callable[[dict[str, np.ndarray]], np.ndarray] | None,
        decode: list[tuple[int, int | None, int | None]],
    ) -> tuple[int, list[np.ndarray]]:
        if self._arrow is not None:
            count, values = self._arrow.fetch(table, exprs, first, last)
        else:
            count, values = self._fetch_text(table, exprs, first, last)
        for i, base, _ in decode:  # the differences back to values: first the bases, then the ends
            if base is not None:
                values[i] += base
        for i, _, relative_to in decode:
            if relative_to is not None:
                values[i] += values[relative_to]
        if keep is not None and count:
            mask = keep(dict(zip(names, values)))
            values = [v[mask] for v in values]
            count = int(mask.sum())
        return count, values

    def _fetch_text(
        self, table: str, exprs: list[str], first: int, last: int
    ) -> tuple[int, list[np.ndarray]]:
        select = ", ".join(f"group_concat({e})" for e in exprs)
        count, *texts = (
            self._worker_con()
            .execute(
                f'SELECT count(*), {select} FROM "{table}" NOT INDEXED WHERE rowid >= ? AND rowid < ?',
                (first, last),
            )
            .fetchone()
        )
        values = []
        while texts:  # parsed one by one, each string freed once read
            values.append(_parse_ints(texts.pop(0), count, table))
        return count, values

    def submit(
        self, table: str, spec: Spec, keep: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None
    ) -> Callable[[], pd.DataFrame]:
        """Start reading the spec's columns of `table`; the returned call gives the frame
        (empty, with the spec's columns, when the table is missing or has no rows). `keep`,
        given each chunk's integer columns (by our names), says which of its rows to keep."""
        if table not in self.tables:
            return lambda: _empty(spec)
        info = self.con.execute(f'PRAGMA table_info("{table}")').fetchall()
        have = {r[1] for r in info}
        not_null = {r[1] for r in info if r[3]}
        lost = sorted({col for _, col, _, _ in spec} & REQUIRED_COLUMNS - have)
        if lost:
            raise ParseError(
                self.path,
                f"table {table} has no column {', '.join(lost)}",
                hint="the export is damaged (or not from nsys); run `nsys export` again",
            )
        ints = [(name, col, dtype, default) for name, col, dtype, default in spec if dtype != "object"]
        texts = [(name, col) for name, col, dtype, _ in spec if dtype == "object"]
        # min() and max() apart: SQLite finds each at one end of the b-tree, but both in one
        # SELECT walk the whole table (seconds for millions of rows)
        lo = self.con.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
        hi = self.con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
        if lo is None:
            return lambda: _empty(spec)
        exprs, decode = self._select(table, ints, have, not_null, lo, with_rowid=bool(texts))
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1))
        rows = max(1 << 12, _TASK_VALUES // len(exprs))
        names = (["rowid"] if texts else []) + [name for name, _, _, _ in ints]
        futures = [
            self._pool.submit(self._fetch, table, exprs, first, first + rows, names, keep, decode)
            for first in range(lo, hi + 1, rows)
        ]
        return lambda: self._collect(table, spec, ints, texts, have, len(exprs), futures)

    def _select(
        self, table: str, ints: Spec, have: set[str], not_null: set[str], lo: int, *, with_rowid: bool
    ) -> tuple[list[str], list[tuple[int, int | None, int | None]]]:
        """The SELECT's expressions for the integer columns `ints` (after rowid when `with_rowid`)
        and how _fetch decodes them: (column, base, column it is relative to)."""
        fills = {col: _NULL if default is None else int(default) for _, col, _, default in ints}
        value = {
            col: f'"{col}"' if col in not_null else f'ifnull("{col}", {fills[col]})'
            for _, col, _, _ in ints
            if col in have
        }
        # Times and thread/process ids have 11 to 15 digits: they travel as differences, from the
        # first row's value (start, globalTid, globalPid) or from the row's start (end), in a few
        # digits; turning them into text and back was a fifth of the reading. Decoded in _fetch.
        delta: dict[str, int] = {}
        firsts = [
            c
            for c in _DELTA_COLUMNS
            if c in value and any(col == c and d is not None for _, col, _, d in ints)
        ]
        if firsts and self._arrow is None:  # Arrow takes integers as they are
            first = self.con.execute(
                f'SELECT {", ".join(value[c] for c in firsts)} FROM "{table}" WHERE rowid = ?', (lo,)
            ).fetchone()
            delta = {c: int(v) for c, v in zip(firsts, first) if isinstance(v, int)}
        exprs = ["rowid"] if with_rowid else []  # rowids place the sparse text columns
        at = {col: i for i, (_, col, _, _) in enumerate(ints, start=len(exprs))}
        decode: list[tuple[int, int | None, int | None]] = []
        for i, (_, col, _, default) in enumerate(ints, start=len(exprs)):
            if col not in have:
                exprs.append(str(_NULL if default is None else int(default)))
            elif col in delta:
                exprs.append(f"{value[col]} - {delta[col]}")
                decode.append((i, delta[col], None))
            elif (
                col == "end" and default is not None and "start" in value and self._arrow is None
            ):  # a few digits
                exprs.append(f"{value[col]} - {value['start']}")
                decode.append((i, None, at["start"]))
            else:
                exprs.append(value[col])
        return exprs, decode

    def _collect(
        self,
        table: str,
        spec: Spec,
        ints: Spec,
        texts: list[tuple[str, str]],
        have: set[str],
        n_exprs: int,
        futures: list,
    ) -> pd.DataFrame:
        """The frame from the tasks' chunks, once they are done."""
        chunks: list[list[np.ndarray]] = []
        for fut in futures:
            count, parts = fut.result()
            if count:
                chunks.append(parts)
        if not chunks:
            return _empty(spec)
        cols = []
        for i in range(n_exprs):  # a column's chunks freed once joined: never two copies of the table
            # one chunk may be Arrow's read-only buffer: the frames are the caller's to change
            one = chunks[0][i] if len(chunks) == 1 else None
            cols.append(
                np.concatenate([c[i] for c in chunks])
                if one is None
                else one
                if one.flags.writeable
                else one.copy()
            )
            for c in chunks:
                c[i] = None
        rowid = cols.pop(0) if texts else None
        out: dict[str, object] = {}
        for (name, _, dtype, _), values in zip(ints, cols):
            out[name] = values if dtype == "int64" else pd.arrays.IntegerArray(values, values == _NULL)
        for name, col in texts:
            out[name] = pd.Series(self._text_column(table, col, have, rowid), dtype=object, copy=False)
        # copy=False keeps one block per column: consolidating 1e6-row columns costs ~1 s
        return pd.DataFrame(out, columns=[c for c, _, _, _ in spec], copy=False)

    def _text_column(self, table: str, col: str, have: set[str], rowid: np.ndarray) -> np.ndarray:
        """A sparse text column (NVTX messages): the non-NULL values, placed by rowid."""
        values = np.full(len(rowid), None, dtype=object)
        if col in have:
            rows = self.con.execute(
                f'SELECT rowid, "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL'
            ).fetchall()
            if rows:
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                values[np.searchsorted(rowid, ids)] = [r[1] for r in rows]
        return values

    def close(self) -> None:
        """Release the reader: let any waiting worker go, stop the pool and close every SQLite
        connection (safe to call twice)."""
        for gate in self.gates:
            if gate is not None:
                gate.open(None)  # a no-op once opened; else its waiting workers go on, and are not needed
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._arrow is not None:
            self._arrow.close()
        with self._lock:
            for con in self._conns:
                con.close()
            self._conns.clear()


def _parse_ints(text: str | None, count: int, table: str) -> np.ndarray:
    """One group_concat string -> int64 array of exactly `count` values."""
    with warnings.catch_warnings():
        # numpy warns (and stops) at anything that is not an integer: make that an error here
        warnings.simplefilter("error")
        try:
            values = np.fromstring(text or "", dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning) as exc:
            raise sqlite3.DatabaseError(
                f"{table}: a column holds something other than integers ({exc})"
            ) from exc
    if len(values) != count:
        raise sqlite3.DatabaseError(f"{table}: a column read back {len(values)} integers, not {count}")
    return values


def _empty(spec: Spec) -> pd.DataFrame:
    """No rows, the spec's columns and dtypes: a table the export lacks or that has no rows."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, _, t, _ in spec})
