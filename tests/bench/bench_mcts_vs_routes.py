"""The `mcts` probe's time against the `routes` probe's at the same budget of generations, in one process.

    python tests/bench/bench_mcts_vs_routes.py [--model demo] [--task demo] [--questions 64 | --full]
                                               [--budget 16] [--batch-size 64] [--threads 1] [--repeat 1]
                                               [--profile PREFIX]

One real audit (`run_audit`: grading and store writes included) of the protocol `routes,mcts` at --budget
each, on a temporary store; each probe is timed from its phase's first progress event to its last (model
loading and the realized phase excluded). Prints both probes' wall and process-CPU seconds and the ratio
mcts / routes (CPU time is the fairer figure on a machine shared with other jobs); PASS when the CPU ratio
is at most --target (1.5: issue 18). --repeat N audits N times (a new store each) and keeps each probe's
fastest run (a busy machine slows some runs). --full audits the whole task (320 demo questions). --profile PREFIX
runs the audit again under cProfile and writes each probe phase's profile to PREFIX.routes and PREFIX.mcts
(the timed run is never profiled).
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
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--full", action="store_true", help="every question of the task (overrides --questions)")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--target", type=float, default=1.5)
    ap.add_argument("--repeat", type=int, default=1, help="audits to run; each probe's fastest is kept")
    ap.add_argument("--profile", default=None, metavar="PREFIX",
                    help="write cProfiles of the two phases to PREFIX.routes and PREFIX.mcts")
    args = ap.parse_args()

    import torch

    from probe_timing import load, timed_phases
    from reachtui.protocol import ProbeSpec, Protocol

    loaded, runner, task = load(args.model, args.task, args.device, args.threads)
    limit = None if args.full else args.questions
    n = len(task.questions) if limit is None else min(limit, len(task.questions))
    protocol = Protocol(probes=(ProbeSpec("routes", budget=args.budget), ProbeSpec("mcts", budget=args.budget)),
                        seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_mcts_vs_routes_"))
    print(f"model {loaded.name}: {runner.num_layers} layers, {loaded.device}, {torch.get_num_threads()} torch "
          f"thread(s); {n} questions x budget {args.budget}; batch size {args.batch_size}")
    runs = [timed_phases(tmp / f"audit{i}.sqlite", loaded, runner, task, protocol, ("routes", "mcts"), limit=limit,
                         batch_size=args.batch_size) for i in range(max(1, args.repeat))]
    times = {phase: min((run[phase] for run in runs), key=lambda t: t[2]) for phase in ("routes", "mcts")}
    if len(runs) > 1:
        for phase in ("routes", "mcts"):
            cpu = ", ".join(f"{run[phase][2]:.2f}" for run in runs)
            print(f"{phase:>6} CPU seconds of the {len(runs)} runs: {cpu}")
    for phase in ("routes", "mcts"):
        n_att, wall, cpu = times[phase]
        print(f"{phase:>6}: {n_att} attempts in {wall:.2f}s wall, {cpu:.2f}s CPU ({n_att / cpu:.1f} attempts per "
              f"CPU-second)")
    ratio_wall = times["mcts"][1] / times["routes"][1]
    ratio_cpu = times["mcts"][2] / times["routes"][2]
    verdict = "PASS" if ratio_cpu <= args.target else "FAIL"
    print(f"ratio mcts/routes: {ratio_cpu:.2f}x CPU, {ratio_wall:.2f}x wall -> {verdict} (target <= {args.target})")

    if args.profile:
        import cProfile

        profiles = {phase: cProfile.Profile() for phase in ("routes", "mcts")}

        def on_phase(phase: str, start: bool) -> None:
            (profiles[phase].enable if start else profiles[phase].disable)()

        timed_phases(tmp / "profile.sqlite", loaded, runner, task, protocol, ("routes", "mcts"), limit=limit,
                     batch_size=args.batch_size, on_phase=on_phase)
        for phase, prof in profiles.items():
            prof.dump_stats(f"{args.profile}.{phase}")
        print(f"cProfiles of the phases: {args.profile}.routes, {args.profile}.mcts")

if __name__ == "__main__":
    main()
