"""Behaviour kept: every committed run folder rebuilds to the tables saved in
tests/fixtures/golden by scripts/golden_tables.py before the schema/backend refactor began.
A refactor that changes a number, a column, a row or a footer line fails here."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("golden_tables", ROOT / "scripts" / "golden_tables.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

FOLDERS = golden.run_folders()


def _same(a, b, where="") -> list[str]:
    """Differences between two JSON values; floats equal to 1e-9 relative. A column added since
    the snapshot is allowed where it is empty on every row (old captures lack its metric)."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
                return []
        return [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        new_empty = {
            k for k in set(b) - set(a) if isinstance(b[k], list) and all(x in (None, "") for x in b[k])
        }
        out = [f"{where}: key {k!r} only on one side" for k in sorted((set(a) ^ set(b)) - new_empty)]
        for k in sorted(set(a) & set(b)):
            out += _same(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}: {a!r} vs {b!r}"[:400]]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def _by_column(snap):
    """Tables as {column: values}: the columns' order in JSON/CSV follows the schema's display
    order (reports/schema.py), the values and the set of columns are what must not change."""
    if isinstance(snap, dict) and set(snap) >= {"columns", "data"}:
        return {c: [row[i] for row in snap["data"]] for i, c in enumerate(snap["columns"])}
    if isinstance(snap, dict):
        return {k: _by_column(v) for k, v in snap.items()}
    return snap


def test_every_run_folder_has_a_golden_snapshot():
    assert len(FOLDERS) >= 25
    missing = [str(f) for f in FOLDERS if not golden.golden_path(f).is_file()]
    assert not missing


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(golden.RUNS)) for f in FOLDERS])
def test_run_folder_rebuilds_to_its_saved_tables(folder):
    saved = json.loads(golden.golden_path(folder).read_text())
    now = json.loads(json.dumps(golden.snapshot(folder)))
    diffs = _same(_by_column(saved), _by_column(now))
    assert not diffs, "\n".join(diffs[:20])
    assert saved["table"]["data"], "a golden table is never empty"
