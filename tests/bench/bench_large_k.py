"""An audit at large K: `sample` with a budget of 1024 per question (run by hand, never collected).

    python tests/bench/bench_large_k.py [--questions 1000] [--k 1024] [--repeats 3]

Builds a store of N questions x (1 realized + K sample attempts), then prints, each measured in this run:
- bytes per attempt (the store file after VACUUM over the attempts it holds);
- one plain SQL aggregate scan of the attempts (the baseline) and the pass@k table, every k = 1..K,
  with its ratio to the scan;
- the app's first paint on the store in a fresh process (torch must stay unloaded; target <= 1 s).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from bench_tables_scale import BASELINE_SQL  # noqa: E402
from bench_tui import first_paint  # noqa: E402
from tui_store import build_store  # noqa: E402

from reachtui import tables as T  # noqa: E402
from reachtui.store import Store  # noqa: E402


def scan_seconds(path: Path) -> float:
    con = sqlite3.connect(path)
    t = time.perf_counter()
    con.execute(BASELINE_SQL).fetchall()
    took = time.perf_counter() - t
    con.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "large_k.sqlite"
        t = time.perf_counter()
        build_store(path, n=args.questions, k=args.k, probes=("sample",), seed=1, mlp_scan=False)
        built = time.perf_counter() - t
        con = sqlite3.connect(path)
        con.execute("VACUUM")
        attempts = con.execute("SELECT count(*) FROM attempts").fetchone()[0]
        con.close()
        size = path.stat().st_size
        print(f"store: {args.questions} questions x (1 + {args.k}) attempts = {attempts:,} attempts, built in "
              f"{built:.0f} s; {size / 1e6:.1f} MB = {size / attempts:.0f} bytes per attempt")
        scan = min(scan_seconds(path) for _ in range(args.repeats))
        with Store(path, readonly=True) as store:
            best = None
            for _ in range(args.repeats):
                t = time.perf_counter()
                table = T.build_table(store, "passk", [1])
                took = time.perf_counter() - t
                best = took if best is None else min(best, took)
        ks = sorted({int(r["k"]) for r in table.dicts()})
        every = ks == list(range(1, args.k + 1))
        print(f"SQL aggregate scan {scan:.3f} s; passk table {best:.3f} s ({len(table.rows)} rows, "
              f"k = {ks[0]}..{ks[-1]}{', every k' if every else ', NOT every k'}): {best / scan:.1f}x the scan")
        runs = first_paint(path, args.repeats)
        paint = statistics.median(r["first_paint"] for r in runs)
        print(f"app first paint: median {paint:.3f} s over {len(runs)} (torch loaded: "
              f"{any(r['torch'] for r in runs)}) {'PASS' if paint <= 1.0 else 'FAIL'} (<= 1 s)")


if __name__ == "__main__":
    main()
