"""Run tests/test_fuzz.py for longer and count the outcomes per kind of input.

    python scripts/fuzz.py --cases 5000          # 5,000 damaged cases per kind
    python scripts/fuzz.py --cases 500 -k ncu    # only the kinds whose name matches

The cases are hypothesis's, derandomized: the same N cases on every run. Prints one line per
kind: same / error / flagged / renamed (and any different / crash / unclear error, which fail the run).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=5000, help="damaged cases per kind (default 5000)")
    ap.add_argument("-k", default="damaged_input", help="pytest -k expression (default: every kind)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gprof-fuzz-") as tmp:
        counts_file = Path(tmp) / "outcomes.jsonl"
        env = {**os.environ, "GPROF_FUZZ_CASES": str(args.cases), "GPROF_FUZZ_COUNTS": str(counts_file)}
        rc = subprocess.call(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(REPO / "tests" / "test_fuzz.py"),
                "-k",
                args.k,
            ],
            cwd=REPO,
            env=env,
        )
        counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        if counts_file.exists():
            for line in counts_file.read_text().splitlines():
                rec = json.loads(line)
                counts[rec["kind"]][rec["outcome"]] += 1
    print(f"\n{'kind':<15} {'cases':>6} {'same':>6} {'error':>6} {'flagged':>8} {'renamed':>8} other")
    for kind, c in counts.items():
        other = (
            ", ".join(f"{k} {v}" for k, v in c.items() if k not in ("same", "error", "flagged", "renamed"))
            or "-"
        )
        print(
            f"{kind:<15} {sum(c.values()):>6} {c['same']:>6} {c['error']:>6} {c['flagged']:>8} {c['renamed']:>8} {other}"
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
