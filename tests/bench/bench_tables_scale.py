"""Every table of reachtui.tables at research scale, against one plain SQL scan (run by hand, never collected).

    python tests/bench/bench_tables_scale.py [--questions 10000] [--k 32] [--rebuild] [--store PATH]
                                             [--profile TABLE]

The store: N questions x 2 runs ("base", "tuned") x (realized 1 + sample K + routes K + mcts K) attempts
(97 per question at K = 32: 970,000 attempts per run at N = 10,000), random answers, frozen failure sets,
built once and cached under /tmp (--rebuild builds it again).

The baseline, measured in the same process on the same store: one plain aggregate scan of the attempts
table (`BASELINE_SQL`, both runs: 1,940,000 attempts), the best of a few. Each table is then built (with
its intervals: 1,000 bootstrap replicates) for the first run ("[1]", what `reachtui export TABLE --run 1`
builds, and what bench_tables.py times) and for both runs ("[1,2]"); compare and compare-questions for
base vs tuned; and the app's header line (`header_lines(summary_table(...))`
for one run, as reachtui/tui/app.py builds it). Printed per table: seconds (best of --repeat), ratio =
seconds / baseline, PASS at <= 3.0. The raw attempts table (every column of every attempt, temperature and
seed recomputed) is a dump, not an aggregate: it is also given as a ratio to `DUMP_SQL`, a plain
`SELECT *` of the same rows. The machine's load moves both; rerun with --repeat 3 to steady them.
First it prints the floor of the pass: reading the answer groups of every run (`ANSWER_GROUPS_SQL`, what
the tables' one pass over a run folds) and doing nothing with them. A finished run stores its pass
(`reachtui.engine.finish`), and the tables read that; a store without it (`--without-stored-pass`, as one
of an older reachtui) makes the pass in every build, and its tables for both runs cannot beat the floor.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tables import build  # noqa: E402  (the same two-run store)

from reachtui import tables as T  # noqa: E402
from reachtui.store import schema as store_schema  # noqa: E402
from reachtui.store.outcomes import ANSWER_GROUPS_SQL  # noqa: E402
from reachtui.probes import registry  # noqa: E402
from reachtui.store import Store  # noqa: E402

BASELINE_SQL = "SELECT run_id, probe, question_id, count(*), sum(correct) FROM attempts GROUP BY 1, 2, 3"
LIMIT = 3.0


#: The raw `attempts` table is a dump, not an aggregate: it is also put beside a plain dump of its rows.
DUMP_SQL = "SELECT * FROM attempts WHERE run_id IN ({runs})"


def baseline(path: Path, sql: str = BASELINE_SQL) -> float:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0 = time.perf_counter()
    con.execute(sql).fetchall()
    dt = time.perf_counter() - t0
    con.close()
    return dt


def groups_floor(path: Path) -> float:
    """Seconds to read the answer groups of every run (`reachtui.store.outcomes.ANSWER_GROUPS_SQL`, what
    `reachtui.control.run_control` folds) doing nothing with them: no table built for all runs is faster."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0 = time.perf_counter()
    for (run_id,) in con.execute("SELECT id FROM runs").fetchall():
        for probe in registry.names(registry.PROBES):
            for _row in con.execute(ANSWER_GROUPS_SQL, {"run": run_id, "probe": probe}):
                pass
    dt = time.perf_counter() - t0
    con.close()
    return dt


def header(store: Store, run_id: int) -> list[str]:
    """What the app's intervals header computes (reachtui/tui/app.py `_intervals_worker`)."""
    return T.header_lines(T.summary_table(store, [run_id]))


def jobs(store: Store) -> dict:
    """{label: build}: each per-run table for the first run (as `reachtui export TABLE --run 1`) and for
    both runs, compare and compare-questions for base vs tuned, the app's header for the first run."""
    runs = store.run_ids()
    out = {}
    for name in T.TABLES:
        if name.startswith("compare"):
            out[name] = lambda name=name: T.build_table(store, name, runs[:2])
        else:
            out[f"{name} [1]"] = lambda name=name: T.build_table(store, name, runs[:1])
            out[f"{name} [1,2]"] = lambda name=name: T.build_table(store, name, runs)
    out["header [1]"] = lambda: header(store, runs[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=10000)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--store", type=Path, default=None, help="the cached store (default under /tmp)")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="time each table this many times, keep the best")
    ap.add_argument("--only", default="", help="comma-separated tables to time (default: all)")
    ap.add_argument("--profile", default="", help="cProfile this table and print the top functions")
    ap.add_argument("--without-stored-pass", action="store_true",
                    help="runs finished without the tables' pass stored (a store of an older reachtui)")
    args = ap.parse_args()
    # one file per schema version: a store this reachtui migrated is newer than an older checkout reads
    path = args.store or Path(f"/tmp/reachtui-bench-tables-{args.questions}x{1 + 3 * args.k}x2"
                              f"-v{getattr(store_schema, 'SCHEMA_VERSION', 0)}"
                              f"{'-nopass' if args.without_stored_pass else ''}.sqlite")
    if args.rebuild or not path.exists():
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)
        t0 = time.perf_counter()
        build(path, args.questions, args.k, stored_pass=not args.without_stored_pass)
        print(f"built {path} in {time.perf_counter() - t0:.1f} s")
    with Store(path, readonly=True) as store:
        per_run = store.conn.execute("SELECT count(*) FROM attempts WHERE run_id = 1").fetchone()[0]
        print(f"store: {args.questions} questions x 2 runs x (1 + 3 x {args.k}) attempts = {per_run:,} per run")
        todo = jobs(store)
        if args.profile and args.profile not in todo:
            raise SystemExit(f"--profile: one of {', '.join(todo)}")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            todo[args.profile]()
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
            return
        names = [n for n in todo if not args.only or n.split(" ")[0] in args.only.split(",")]
        print(f"baseline: {BASELINE_SQL}  (best of 2, measured again before each table)")
        base, floor = min(baseline(path) for _ in range(2)), min(groups_floor(path) for _ in range(2))
        print(f"floor of the pass: the answer groups of every run, read and dropped: {floor:.2f} s = {floor / base:.1f} x "
              f"baseline {base:.3f} s (best of 2)")
        print(f"{'table':22s} {'rows':>8s} {'seconds':>8s} {'baseline':>8s} {'ratio':>6s}")
        worst, bases = 0.0, []
        for name in names:
            base = min(baseline(path) for _ in range(2))
            bases.append(base)
            best, got = float("inf"), None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                got = todo[name]()
                best = min(best, time.perf_counter() - t0)
            r = best / base
            worst = max(worst, r)
            rows = len(got.rows) if hasattr(got, "rows") else len(got)
            dump = ""
            if name.startswith("attempts"):
                runs = "1" if name.endswith("[1]") else "1, 2"
                plain = min(baseline(path, DUMP_SQL.format(runs=runs)) for _ in range(2))
                dump = f"  ({best / plain:.1f}x a plain dump of its rows, {plain:.2f} s)"
            print(f"{name:22s} {rows:8d} {best:8.2f} {base:8.3f} {r:6.1f}  {'PASS' if r <= LIMIT else 'FAIL'}{dump}",
                  flush=True)
        print(f"baseline {min(bases):.3f}-{max(bases):.3f} s; worst ratio {worst:.1f} (limit {LIMIT})")


if __name__ == "__main__":
    main()
