"""Time every table of reachtui.tables on a large synthetic store (run by hand, never collected).

    python tests/bench/bench_tables.py [--questions 10000] [--k 32]

Builds a store with one run: realized + sample, routes, mcts at K attempts each (random answers), then
times each table build and a csv render, in a fresh process-free loop.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tables_fixtures import make_task  # noqa: E402

from reachtui.tables import formats as F
from reachtui import tables as T  # noqa: E402
from reachtui.engine.finish import write_stored_pass  # noqa: E402
from reachtui.store import Store  # noqa: E402


def build(path: Path, n: int, k: int, stored_pass: bool = True) -> None:
    """Two runs ("base", "tuned"): per question 1 realized attempt (correct with p 0.4), then K per probe
    (p 0.1), answers from a few candidates so that votes tie and log-probs matter. bench_tables_scale uses it.
    Each run finishes as an audit's does, with the tables' pass stored (`stored_pass`; without it, as a
    store of an older reachtui: the tables make the pass each time)."""
    rng = random.Random(0)
    task = make_task("bench", n)
    with Store(path) as store:
        for model in ("base", "tuned"):
            mid, tid = store.upsert_model(model), store.upsert_task(task)
            ids = store.task_question_ids(tid)
            run = store.create_run(mid, tid, protocol_json={"answer_format": "number",
                                                            "probes": [{"name": p, "budget": k} for p in
                                                                       ("sample", "routes", "mcts")]},
                                   protocol_hash="bench", question_ids=list(ids.values()))
            rows = []
            for q in task.questions:
                qi = ids[q.id]
                rows.append({"question_id": qi, "probe": "realized", "attempt": 0, "answer": q.answer,
                             "correct": rng.random() < 0.4, "mean_logprob": -rng.random()})
                for probe in ("sample", "routes", "mcts"):
                    for j in range(k):
                        ok = rng.random() < 0.1
                        rows.append({"question_id": qi, "probe": probe, "attempt": j,
                                     "answer": q.answer if ok else str(rng.randint(0, 5)), "correct": ok,
                                     "mean_logprob": round(-rng.random(), 2)})
                if len(rows) > 200_000:
                    store.insert_attempts(run, rows)
                    rows = []
            store.insert_attempts(run, rows)
            for probe in ("sample", "routes", "mcts"):
                store.create_failure_set(run, f"failure:{probe}", probe, store.failure_candidates(run, probe))
            if stored_pass:
                write_stored_pass(store, run)
            store.set_run_status(run, "complete")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=10000)
    ap.add_argument("--k", type=int, default=32)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.sqlite"
        t0 = time.perf_counter()
        build(path, args.questions, args.k)
        print(f"store: {args.questions} questions x 2 runs x (1 + 3 x {args.k}) attempts "
              f"built in {time.perf_counter() - t0:.1f} s")
        with Store(path, readonly=True) as store:
            for name in ("summary", "questions", "passk", "hits", "mlp-scan", "attempts", "compare"):
                t0 = time.perf_counter()
                table = T.build_table(store, name, [1, 2] if name == "compare" else [1])
                t1 = time.perf_counter()
                F.render(table, "csv")
                t2 = time.perf_counter()
                print(f"{name:10s} {len(table.rows):8d} rows  build {t1 - t0:6.2f} s  csv {t2 - t1:6.2f} s")


if __name__ == "__main__":
    main()
