"""Attempts per second of the `mcts` probe: each round as mixed decode batches (every proposed route over
the questions that proposed it, one forward per step for all of them: `Runner.generate_many(rows=...)`)
against one batched generation per proposed route (the runner with mixing off), in the same process.

    python tests/bench/bench_mcts_probe.py [--model demo] [--task demo] [--questions 96] [--budget 16]
                                           [--batch-size 64] [--threads N]

Both sides run the real audit (`run_audit`, grading and store writes included) on a temporary store; times
run from the phase's first progress event to its last (model loading and the realized phase excluded).
Wall-clock and process CPU time are both printed. The two runs' attempts are compared: the same routes
and texts are expected (log-probs may differ in their last bits: the batch differs); mismatches are
reported, not hidden.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="demo")
    ap.add_argument("--task", default="demo")
    ap.add_argument("--questions", type=int, default=96)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import torch

    from probe_timing import load, timed_audit
    from reachtui.protocol import ProbeSpec, Protocol

    loaded, runner, task = load(args.model, args.task, args.device, args.threads)
    protocol = Protocol(probes=(ProbeSpec("mcts", budget=args.budget),), seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_mcts_"))
    can_mix = runner.mixing

    def audit(store_name: str, mixing: bool):
        runner.mixing = mixing
        return timed_audit(tmp / store_name, loaded, runner, task, protocol, "mcts", limit=args.questions,
                           batch_size=args.batch_size)

    print(f"model {loaded.name}: {runner.num_layers} layers, {loaded.device}, {torch.get_num_threads()} torch "
          f"thread(s); {args.questions} questions x MCTS budget {args.budget}; batch size {args.batch_size}")
    if not can_mix:
        print("this model cannot mix routes in one batch (not every layer is a plain full-attention layer)")
        return
    sm, rm, nm, tm, cm = audit("mixed.sqlite", True)
    print(f"mixed batches: {nm} attempts in {tm:.2f}s wall = {nm / tm:.1f} attempts/s "
          f"({cm:.2f}s CPU = {nm / cm:.1f} attempts per CPU-second)")
    sp, rp, np_, tp, cp = audit("per_route.sqlite", False)
    print(f"one batch per route: {np_} attempts in {tp:.2f}s wall = {np_ / tp:.1f} attempts/s "
          f"({cp:.2f}s CPU = {np_ / cp:.1f} attempts per CPU-second)")
    print(f"speed-up: {(nm / tm) / (np_ / tp):.2f}x wall, {(nm / cm) / (np_ / cp):.2f}x CPU")

    q = ("SELECT q.qid, a.attempt, a.route, a.text, a.mean_logprob FROM attempts a JOIN questions q "
         "ON q.id = a.question_id WHERE a.run_id = ? AND a.probe = 'mcts'")
    mixed = {(r[0], r[1]): r[2:] for r in sm.conn.execute(q, (rm,))}
    per_route = {(r[0], r[1]): r[2:] for r in sp.conn.execute(q, (rp,))}
    same = sum(1 for k, v in per_route.items() if k in mixed and mixed[k][:2] == v[:2])
    diff = max((abs(mixed[k][2] - v[2]) for k, v in per_route.items() if k in mixed), default=0.0)
    print(f"attempts with the same route and text: {same}/{len(per_route)} (mixed run: {len(mixed)}); "
          f"largest log-prob difference {diff:.2g}")


if __name__ == "__main__":
    main()
