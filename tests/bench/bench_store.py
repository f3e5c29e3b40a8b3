"""Benchmark the audit store at app scale: N questions x K attempts, then time the app's first-paint reads.

    python tests/bench/bench_store.py [--questions 10000] [--attempts 32] [--keep PATH]

Attempts per question: 1 realized + the rest split between "sample" and "routes". Writes go in batches
of 1,024 rows (as the audit engine writes them). The reads are timed on a fresh read-only connection,
as the app opens a stored audit (`reachtui.tui.data.AuditData`: the run, its rows, its frozen sets), then
the store's other reads (probe_names, failure_candidates, search, ...).
The app's budget for first paint is 1.0 s in total.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import Q, T  # noqa: E402
from reachtui.store import Store  # noqa: E402

WORDS = "apples pages train hours km buys reads more total each left how many what is plus minus".split()


def timed(label: str, fn, repeat: int = 3):
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    size = 1 if isinstance(result, dict) else len(result) if hasattr(result, "__len__") else result
    print(f"  {label:<34} {best * 1000:8.1f} ms   ({size} rows)")
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=10_000)
    ap.add_argument("--attempts", type=int, default=32, help="attempts per question, realized included")
    ap.add_argument("--keep", type=Path, help="write the store here instead of a temporary folder")
    args = ap.parse_args()
    if args.keep:
        run(args, args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(args, Path(tmp) / "bench.sqlite")


def run(args: argparse.Namespace, path: Path) -> None:
    rng = random.Random(0)
    n, k = args.questions, args.attempts
    n_sample = (k - 1) // 2
    n_routes = k - 1 - n_sample
    task = T("bench", "/bench.jsonl", f"{n:064d}", tuple(
        Q(f"b-{i:05d}", " ".join(rng.choice(WORDS) for _ in range(30)) + f" {i}?", str(i % 97))
        for i in range(n)))

    print(f"store {path}: {n} questions x {k} attempts "
          f"(realized 1, sample {n_sample}, routes {n_routes}) = {n * k} attempts")
    with Store(path) as store:
        t0 = time.perf_counter()
        model_id = store.upsert_model("bench-model", "/m", "LlamaForCausalLM", 24)
        task_id = store.upsert_task(task)
        qids = list(store.task_question_ids(task_id).values())
        run_id = store.create_run(model_id, task_id, protocol_json="{}", protocol_hash="bench",
                                  question_ids=qids)
        t_setup = time.perf_counter() - t0
        batch, inserted, t0 = [], 0, time.perf_counter()
        for probe, count in (("realized", 1), ("sample", n_sample), ("routes", n_routes)):
            for j in range(count):
                for q in qids:
                    ok = rng.random() < (0.5 if probe == "realized" else 0.15)
                    ans = str(rng.randrange(100))
                    batch.append({
                        "question_id": q, "probe": probe, "attempt": j, "correct": ok,
                        "route": f"0-{j % 20},{j % 20},{j % 20 + 2}-23" if probe == "routes" else None,
                        "answer": ans,
                        "rule": "hash", "text": f" {rng.randrange(99)}+{rng.randrange(99)}={ans}. #### {ans}",
                        "mean_logprob": -rng.random(), "new_tokens": 20, "layers_executed": 24,
                        "compute": 24 * 60})
                    if len(batch) == 1024:
                        inserted += store.insert_attempts(run_id, batch)
                        batch = []
        inserted += store.insert_attempts(run_id, batch)
        t_insert = time.perf_counter() - t0
        store.set_run_status(run_id, "complete")
    print(f"  setup (task + run questions)       {t_setup * 1000:8.1f} ms")
    print(f"  insert {inserted} attempts          {t_insert:8.2f} s   ({inserted / t_insert:,.0f} rows/s)")
    print(f"  file size                          {path.stat().st_size / 2**20:8.1f} MiB "
          f"(+ WAL {Path(str(path) + '-wal').stat().st_size / 2**20 if Path(str(path) + '-wal').exists() else 0:.1f} MiB)")

    t0 = time.perf_counter()
    ro = Store(path, readonly=True)
    t_open = time.perf_counter() - t0
    print(f"  open read-only                     {t_open * 1000:8.1f} ms")
    from reachtui.tui.data import AuditData

    t0 = time.perf_counter()
    data = AuditData(path)
    info = data.run(data.latest_run_id())
    data.rows(info)
    data.failure_sets(info.id)
    t_first = time.perf_counter() - t0
    print(f"  FIRST PAINT (AuditData: open + run + rows + failure sets), cold: {t_first * 1000:.1f} ms")
    timed("latest_run", ro.latest_run)
    timed("run_questions", lambda: ro.run_questions(run_id))
    timed("AuditData.rows", lambda: data.rows(info))
    timed("probe_names", lambda: ro.probe_names(run_id))
    timed("list_runs", ro.list_runs)
    timed("failure_candidates(routes)", lambda: ro.failure_candidates(run_id, "routes"))
    timed("attempts(one question)", lambda: ro.attempts(run_id, qids[len(qids) // 2]))
    timed("search 'apples' (question text)", lambda: ro.search(run_id, "apples"))
    timed("search '4242' (question/outputs)", lambda: ro.search(run_id, "4242"))
    timed("search '12+34' (outputs)", lambda: ro.search(run_id, "12+34"))
    timed("done_keys (resume)", lambda: ro.done_keys(run_id), repeat=1)
    ro.close()
    data.close()

    # A fresh process, as `reachtui open --store` starts: import the store module, open, first-paint reads.
    code = (
        "import time, sys; t0 = time.perf_counter()\n"
        "from reachtui.store import Store\n"
        "t1 = time.perf_counter()\n"
        f"s = Store({str(path)!r}, readonly=True); r = s.latest_run()['id']\n"
        "from reachtui.tui.data import AuditData\n"
        "d = AuditData(s.path); d.rows(d.run(r)); d.failure_sets(r)\n"
        "t2 = time.perf_counter()\n"
        "print(f'{(t1 - t0) * 1000:.1f} {(t2 - t1) * 1000:.1f}', 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    print(f"  fresh process: import reachtui.store {out[0]} ms + open and first-paint reads {out[1]} ms "
          f"(torch imported: {out[2]})")


if __name__ == "__main__":
    main()
