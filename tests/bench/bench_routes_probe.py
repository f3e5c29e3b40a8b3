"""Attempts per second of the `routes` probe: the shared pool (attempt j of every question uses route j,
one batched generation per route) against a one-question-one-route loop, in the same process.

    python tests/bench/bench_routes_probe.py [--model demo] [--task demo] [--questions N] [--routes 16]
                                             [--batch-size 64] [--loop-attempts 64] [--threads N]

Both sides go through the real engine (`reachtui.engine`), grading and store writes included, on a
temporary store:
- batched: the routes probe as `reachtui audit` runs it: jobs of --batch-size questions, each with all K
  routes in one `Runner.generate_many` call (the chunk's prompts prefilled once for the positions a route
  shares with the identity, then one batched decode per route);
- loop: the same attempts one at a time (`Audit._run_calls([[[attempt]]], ...)`: one generate call of one
  question under one route, one transaction each), --loop-attempts of them spread evenly over the plan
  (every route, questions of every length: routes differ in depth, so one route alone would bias it).
Times run from the phase's first progress event to its last stored chunk (model loading, the realized
phase and set-up excluded); wall-clock and process CPU time are both printed (CPU time is the fairer
figure on a machine shared with other jobs). The loop's attempts are checked against the batched run's
rows (greedy: the same text is expected; a mismatch is reported, not hidden).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="demo")
    ap.add_argument("--task", default="demo")
    ap.add_argument("--questions", type=int, default=None, help="the first N questions [default: the whole task]")
    ap.add_argument("--routes", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--loop-attempts", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import torch

    from probe_timing import load, timed_audit
    from reachtui.engine.audit import Audit, open_run
    from reachtui.protocol import ProbeSpec, Protocol
    from reachtui.store import Store

    loaded, runner, task = load(args.model, args.task, args.device, args.threads)
    protocol = Protocol(probes=(ProbeSpec("routes", budget=args.routes),), seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_routes_"))

    def batched(store_name: str):
        return timed_audit(tmp / store_name, loaded, runner, task, protocol, "routes", limit=args.questions,
                           batch_size=args.batch_size)

    def loop(store_name: str, n: int):
        store = Store(tmp / store_name)
        rid, _ = open_run(store, model_name=loaded.name, model_path=str(loaded.path),
                          model_class=loaded.arch.model_class, num_layers=runner.num_layers, task=task,
                          protocol=protocol, limit=args.questions)
        audit = Audit(store, runner, rid, batch_size=1)
        work = sorted((w for job in audit._plan_routes(protocol.probe("routes")) for w in job),
                      key=lambda w: (w.attempt, w.pos))
        work = work[:: max(1, len(work) // n)][:n]      # spread over every route and question
        t0, c0 = time.perf_counter(), time.process_time()
        for w in work:
            audit._run_calls([[[w]]], lambda todo, rows: None)
        return store, rid, len(work), time.perf_counter() - t0, time.process_time() - c0

    print(f"model {loaded.name}: {runner.num_layers} layers, {loaded.device}, {torch.get_num_threads()} torch "
          f"thread(s); {args.questions or len(task.questions)} questions x {args.routes} shared routes; batch size "
          f"{args.batch_size}")
    sb, rb, nb, tb, cb = batched("batched.sqlite")
    print(f"batched (shared pool): {nb} attempts in {tb:.2f}s wall = {nb / tb:.1f} attempts/s "
          f"({cb:.2f}s CPU = {nb / cb:.1f} attempts per CPU-second)")
    sl, rl, nl, tl, cl = loop("loop.sqlite", args.loop_attempts)
    print(f"loop (one question, one route per call): {nl} attempts in {tl:.2f}s wall = {nl / tl:.1f} attempts/s "
          f"({cl:.2f}s CPU = {nl / cl:.1f} attempts per CPU-second)")
    print(f"speed-up: {(nb / tb) / (nl / tl):.1f}x wall, {(nb / cb) / (nl / cl):.1f}x CPU")

    q = ("SELECT q.qid, a.attempt, a.route, a.text FROM attempts a JOIN questions q ON q.id = a.question_id "
         "WHERE a.run_id = ? AND a.probe = 'routes'")
    batched = {(r[0], r[1]): r[2:] for r in sb.conn.execute(q, (rb,))}
    loop = {(r[0], r[1]): r[2:] for r in sl.conn.execute(q, (rl,))}
    same = sum(1 for k, v in loop.items() if batched.get(k) == v)
    print(f"loop rows identical to the batched run's: {same}/{len(loop)}")


if __name__ == "__main__":
    main()
