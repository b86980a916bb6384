"""From nsys's ids to text: the StringIds table, enum labels, and NVTX messages and domain names."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd

from orchestrator.parsers.nsys.schema import NVTX_COLUMNS, NVTX_DOMAIN_CREATE, TID_BITS, set_text


def string_table(con: sqlite3.Connection) -> np.ndarray:
    """StringIds as an array indexed by id, None where absent (nsys numbers strings densely)."""
    rows = con.execute("SELECT id, value FROM StringIds").fetchall()
    if not rows:
        return np.array([None], dtype=object)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if ids.min() < 0 or ids.max() > 16 * len(rows) + 1_000_000:
        raise sqlite3.DatabaseError("StringIds ids are not the small integers nsys writes")
    table = np.full(int(ids.max()) + 1, None, dtype=object)
    table[ids] = [r[1] for r in rows]
    return table


def lookup(strings: np.ndarray, ids: pd.Series) -> np.ndarray:
    """The strings `ids` name in string_table()'s array; None for an id outside it."""
    idx = ids.to_numpy(dtype=np.int64)
    ok = (idx >= 0) & (idx < len(strings))
    if ok.all():  # the usual case, in one pass
        return strings.take(idx)
    out = np.full(len(idx), None, dtype=object)
    out[ok] = strings[idx[ok]]
    return out


def lookup_categorical(strings: np.ndarray, ids: pd.Series) -> pd.Categorical:
    """lookup() as a categorical (missing: NaN): its categories are the distinct strings the
    ids name, found by counting the ids (small dense integers), never by hashing the rows."""
    idx = ids.to_numpy(dtype=np.int64)
    ok = (idx >= 0) & (idx < len(strings))
    used = np.flatnonzero(np.bincount(idx[ok], minlength=len(strings)))
    code_of_used, names = pd.factorize(strings[used])  # two ids with one string share a category
    code_of_id = np.full(len(strings), -1, dtype=np.int64)
    code_of_id[used] = code_of_used
    codes = np.full(len(idx), -1, dtype=np.int64)
    codes[ok] = code_of_id[idx[ok]]
    return pd.Categorical.from_codes(
        codes, categories=pd.Index(np.asarray(names, dtype=object), dtype=object)
    )


def enum_labels(
    con: sqlite3.Connection, tables: frozenset[str], table: str, fallback: dict[int, str], ids: pd.Series
) -> pd.Series:
    """The labels of an nsys enum for `ids`: from its ENUM_* `table` where the export has it, else
    `fallback` (object dtype; NaN for an id neither knows)."""
    labels = dict(fallback)
    if table in tables:
        labels.update({int(i): str(lab) for i, lab in con.execute(f'SELECT id, label FROM "{table}"')})
    return ids.map(labels).astype(object)


def resolve_nvtx_text(n: pd.DataFrame, strings: np.ndarray) -> pd.DataFrame:
    """NVTX_EVENTS as read (text, text_id, domain_id) -> NVTX_COLUMNS: each event's message, and
    its domain's name (None for the default domain), resolved; row order kept."""
    # registered strings (nvtx 0.2.10 registers every message) live in StringIds; others in text
    registered = lookup(strings, n.pop("text_id").fillna(-1).astype("int64"))
    set_text(n, "text", np.where(pd.isna(n["text"]).to_numpy(), registered, n["text"].to_numpy(dtype=object)))
    # Domain ids are per process: resolve (process, domainId) through the domain-create events,
    # whose text is the domain's name. Domain 0 is the default domain and has no name.
    pid = n["global_tid"].to_numpy() & ~TID_BITS
    dom = n["domain_id"].to_numpy()
    created = n["event_type"].to_numpy() == NVTX_DOMAIN_CREATE
    lut: dict[tuple[int, int], str] = {}
    for p, d, name in zip(pid[created].tolist(), dom[created].tolist(), n["text"].to_numpy()[created]):
        lut.setdefault((p, d), name)
    names = np.full(len(n), None, dtype=object)
    if lut:
        keys = pd.MultiIndex.from_arrays([pid, dom])
        found = pd.Series(list(lut.values()), index=pd.MultiIndex.from_tuples(list(lut))).reindex(keys)
        names[:] = found.to_numpy(dtype=object)
        names[pd.isna(names) | (dom == 0)] = None
    set_text(n, "domain", names)
    return n[NVTX_COLUMNS]
