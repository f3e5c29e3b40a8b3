"""Attempts per second of the `routes` probe: the shared pool (attempt j of every question uses route j,
one batched generation per route) against a one-question-one-route loop, in the same process.

    python tests/bench/bench_routes_probe.py [--model demo] [--task demo] [--questions 64] [--routes 16]
                                             [--batch-size 64] [--loop-attempts 64] [--threads N]

Both sides go through the real engine (`reachtui.audit`), store writes included, on a temporary store:
- batched: the routes probe over Q questions x K routes with --batch-size (a route's Q prompts per call);
- loop: the same plan with batch size 1 (one generate call per question and route), stopped after
  --loop-attempts attempts (attempts/s does not depend on how many are run).
Times run from the phase's first progress event to its last stored chunk (model loading, the realized
phase and set-up excluded); wall-clock and process CPU time are both printed (CPU time is the fairer
figure on a machine shared with other jobs). The loop's attempts are checked against the batched run's rows (greedy: the same text is expected;
a mismatch is reported, not hidden).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="demo")
    ap.add_argument("--task", default="demo")
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--routes", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--loop-attempts", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    from reachtui.audit import run_audit
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import ProbeSpec, Protocol
    from reachtui.store import Store
    from reachtui.tasks import load_task

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    loaded = load_model(args.model, device=args.device)
    runner = Runner(loaded)
    task = load_task(args.task)
    protocol = Protocol(probes=(ProbeSpec("routes", budget=args.routes),), seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_routes_"))

    def timed(store_name: str, batch_size: int, stop_after: int | None):
        store = Store(tmp / store_name)
        cancel = threading.Event()
        state = {"t_routes": None, "c_routes": None, "n": 0, "t_end": None, "c_end": None}

        def on_event(ev):
            if ev.phase == "routes" and state["t_routes"] is None:
                state["t_routes"] = time.perf_counter()
                state["c_routes"] = time.process_time()
            if ev.phase == "routes":
                state["t_end"], state["c_end"] = time.perf_counter(), time.process_time()
            if ev.phase == "routes":
                state["n"] = ev.generated
                if stop_after is not None and ev.generated >= stop_after:
                    cancel.set()

        res = run_audit(store, runner, model_name=loaded.name, model_path=str(loaded.path),
                        model_class=loaded.arch.model_class, task=task, protocol=protocol, limit=args.questions,
                        batch_size=batch_size, on_event=on_event, cancel=cancel)
        wall = state["t_end"] - state["t_routes"]
        cpu = state["c_end"] - state["c_routes"]
        return store, res.run_id, state["n"], wall, cpu

    print(f"model {loaded.name}: {runner.num_layers} layers, {loaded.device}; {args.questions} questions x "
          f"{args.routes} shared routes; batch size {args.batch_size}")
    sb, rb, nb, tb, cb = timed("batched.sqlite", args.batch_size, None)
    print(f"batched (shared pool): {nb} attempts in {tb:.2f}s wall = {nb / tb:.1f} attempts/s "
          f"({cb:.2f}s CPU = {nb / cb:.1f} attempts per CPU-second)")
    sl, rl, nl, tl, cl = timed("loop.sqlite", 1, args.loop_attempts)
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
