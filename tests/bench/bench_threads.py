"""A live run on a busy machine, by torch thread count: the default reachtui picks against 1 thread and
against every core (run by hand, never collected).

    python tests/bench/bench_threads.py [--busy N] [--settle 70] [--repeats 5]

Starts N spinning processes (default: one per core, a machine whose every core is taken by other jobs),
waits `--settle` seconds so the load average sees them, then times a live run (one demo question, the
middle MLP block silenced: what the app's enter key runs) in a fresh process per setting: 1 thread, the
app's default (`reachtui.commands.options.default_threads`, chosen in that process as `reachtui open`
chooses it), the audit's default, and one thread per core (torch's own default). Prints the median
seconds and the ratio to 1 thread; the target is that the defaults never reach 10x.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

CHILD = r"""
import json, os, statistics, sys, time
mode = sys.argv[1]
from reachtui.commands.options import set_threads
if mode in ("app", "audit"):
    os.environ.pop("OMP_NUM_THREADS", None); os.environ.pop("MKL_NUM_THREADS", None)
    set_threads(None, interactive=mode == "app")
else:
    set_threads(int(mode))
import torch
from reachtui.engine.live import live_run
from reachtui.model.load import load_model
from reachtui.model.run import Runner
from reachtui.protocol import Protocol
from reachtui.tasks import load_task
runner = Runner(load_model("demo", device="cpu"))
protocol, task = Protocol(), load_task("demo")
from reachtui.intervention import Intervention
silenced = Intervention(None, frozenset({runner.num_layers // 2}))
qs = [{"question": q.question, "gold": q.answer} for q in task.questions[:int(sys.argv[2]) + 1]]
live_run(runner, protocol, qs[0], silenced)   # warm-up
times = []
for q in qs[1:]:
    t = time.perf_counter(); live_run(runner, protocol, q, silenced); times.append(time.perf_counter() - t)
print(json.dumps({"threads": torch.get_num_threads(), "median_s": statistics.median(times), "max_s": max(times)}))
"""


def spin() -> None:
    while True:
        pass


def measure(mode: str, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(repeats)], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    cores = len(os.sched_getaffinity(0))
    ap = argparse.ArgumentParser()
    ap.add_argument("--busy", type=int, default=cores, help="spinning processes (default: one per core)")
    ap.add_argument("--settle", type=float, default=70.0, help="seconds for the load average to see them")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    spinners = [mp.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        time.sleep(args.settle)
        print(f"{cores} cores, {args.busy} busy processes, load average {os.getloadavg()[0]:.2f}")
        rows = {mode: measure(mode, args.repeats) for mode in ("1", "app", "audit", str(cores))}
    finally:
        for p in spinners:
            p.terminate()
    one = rows["1"]["median_s"]
    names = {"1": "1 thread", "app": "app default", "audit": "audit default", str(cores): f"{cores} threads (every core)"}
    for mode, r in rows.items():
        ratio = r["median_s"] / one
        verdict = "" if mode in ("1", str(cores)) else ("  PASS (< 10x)" if ratio < 10 else "  FAIL (>= 10x)")
        print(f"{names[mode]:26} {r['threads']:>2} threads  median {r['median_s']:.3f} s  max {r['max_s']:.3f} s  "
              f"{ratio:5.1f}x of 1 thread{verdict}")


if __name__ == "__main__":
    main()
