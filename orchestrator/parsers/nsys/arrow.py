"""Reading an export's integer columns through Apache Arrow's ADBC SQLite driver, when it is
installed: SQLite's own values go into Arrow arrays in C, where the sqlite3 module's path has
SQLite print every integer as text and numpy parse it back (docs/scale-cpu.md: on a
3,000,000-kernel export that printing and parsing were most of the read). Used by
table_reader, which falls back to that path without the driver or with
GPROF_NSYS_READER=sqlite3."""

from __future__ import annotations

import os
import sqlite3
import threading

import numpy as np

# GPROF_NSYS_READER=sqlite3 takes the text path even where the driver is installed (to compare
# the two, or to step around a driver that misbehaves)
READER_ENV = "GPROF_NSYS_READER"


def driver():
    """The ADBC SQLite DB-API module, or None when it is not installed or not wanted."""
    if os.environ.get(READER_ENV, "").strip().lower() == "sqlite3":
        return None
    try:
        from adbc_driver_sqlite import dbapi
    except ImportError:
        return None
    return dbapi


class ArrowFetcher:
    """One ADBC connection per worker thread to the export (opened read-only and immutable, as
    the sqlite3 ones), each reading a range of rowids at a time."""

    def __init__(self, dbapi, uri: str):
        import pyarrow

        self._dbapi = dbapi
        self._uri = uri
        self._errors = (dbapi.Error, pyarrow.ArrowException)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list = []

    def _con(self):
        if not hasattr(self._local, "con"):
            try:
                con = self._dbapi.connect(self._uri, autocommit=True)
            except self._errors as exc:
                raise sqlite3.DatabaseError(f"cannot open ({exc})") from exc
            with self._lock:
                self._conns.append(con)
            self._local.con = con
        return self._local.con

    def fetch(self, table: str, exprs: list[str], first: int, last: int) -> tuple[int, list[np.ndarray]]:
        """The rows of `table` with rowid in [first, last): their count and each expression's
        values as int64 arrays. A value that is not an integer (SQLite keeps whatever it is given), or
        NULL, raises sqlite3.DatabaseError, as the text path does."""
        cur = self._con().cursor()
        try:
            # one batch for the whole range: the driver infers each column's type from its
            # batch, so every value is looked at, and the arrays need no joining
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(max(1, last - first))})
            cur.execute(
                f'SELECT {", ".join(exprs)} FROM "{table}" NOT INDEXED WHERE rowid >= {int(first)} '
                f"AND rowid < {int(last)}"
            )
            result = cur.fetch_arrow_table()
        except self._errors as exc:
            raise sqlite3.DatabaseError(f"{table}: {exc}") from exc
        finally:
            cur.close()
        return result.num_rows, [_int64(col, table) for col in result.columns]

    def close(self) -> None:
        with self._lock:
            for con in self._conns:
                con.close()
            self._conns.clear()


def _int64(col, table: str) -> np.ndarray:
    """A fetched column as int64 (Arrow's buffer, read-only: table_reader copies what it
    does not join or filter); DatabaseError unless it holds only integers."""
    import pyarrow

    if len(col) and (not pyarrow.types.is_int64(col.type) or col.null_count):
        what = "NULL" if col.null_count and pyarrow.types.is_int64(col.type) else str(col.type)
        raise sqlite3.DatabaseError(f"{table}: a column holds something other than integers ({what})")
    if not len(col):
        return np.empty(0, dtype=np.int64)
    return col.to_numpy()
