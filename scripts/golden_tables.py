"""Save (or check) the tables every committed run folder rebuilds to: the fixed point that a
refactor of the parsers, the schema or the reports must keep.

    python scripts/golden_tables.py            # write tests/fixtures/golden/*.json
    python scripts/golden_tables.py --missing  # only for run folders committed since (new fixtures)
    python scripts/golden_tables.py --check    # compare, exit 1 on a difference

tests/test_golden.py runs the same comparison in CI. Nothing is written into the run folders.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "tests" / "fixtures" / "runs"
GOLDEN = ROOT / "tests" / "fixtures" / "golden"


def run_folders() -> list[Path]:
    """Every committed run folder that is not a child of another (children are rebuilt by their parent)."""
    folders = sorted(p.parent for p in RUNS.rglob("manifest.json"))
    return [f for f in folders if not any(p in folders for p in f.parents)]


def snapshot(folder: Path) -> dict:
    """The folder's tables as plain JSON: the main table, each child's, the footer lines, kernels."""
    sys.path.insert(0, str(ROOT))
    from orchestrator import api

    run = api.load_run(folder, write=False)
    out = {
        "table": _frame(run.table),
        "footer": [_norm(line, folder) for line in run.footer()],
        "kernels": _frame(run.kernels),
    }
    for name, child in sorted(getattr(run, "runs", {}).items()):
        out[f"child:{name}"] = {
            "table": _frame(child.table),
            "footer": [_norm(line, folder) for line in child.footer()],
        }
    return out


def _frame(df) -> dict:
    return json.loads(df.to_json(orient="split", index=False, double_precision=12, default_handler=str))


def _norm(line: str, folder: Path) -> str:
    return line.replace(str(folder), "<run>")


def golden_path(folder: Path) -> Path:
    return GOLDEN / (str(folder.relative_to(RUNS)).replace("/", "__") + ".json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--missing", action="store_true", help="write only the snapshots that do not exist yet")
    args = ap.parse_args()
    bad = 0
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for folder in run_folders():
        path = golden_path(folder)
        if args.missing and path.exists():
            continue
        snap = snapshot(folder)
        if args.check:
            if json.loads(path.read_text()) != json.loads(json.dumps(snap)):
                print(f"DIFFERS: {folder.relative_to(RUNS)}")
                bad += 1
        else:
            path.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
            print(f"saved {path.relative_to(ROOT)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
