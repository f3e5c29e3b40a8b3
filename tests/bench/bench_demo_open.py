"""Bench for `reachtui open demo` (run by hand: `python tests/bench/bench_demo_open.py`; never collected).

What a newcomer waits for after the README's set-up line, in a fresh store, in a fresh process, headless
(the app driven by Textual's auto-pilot, as a terminal would show it):

1. the first screen: from just before the process is spawned to Textual's Ready event (the first frame:
   the header, saying the model loads, and the table); and to the first question row with its realized
   result. Target: the first screen within 5 s.
2. the default audit complete (the quick demo, `reachtui.commands.open.QUICK_DEMO`): spawn to the run's
   status `complete` in the app. Target: within 2 minutes on 2 cores.
3. (`--full`) the same for `reachtui open demo --full`: all 320 questions at budget 16.

The baseline, in the same run: the same audit headless, `reachtui audit demo --task demo --limit 64
--budget 8 --mlp-scan --threads T` with T the app's thread count (what the app's worker runs, without the
app). The machine's cores and load (1-minute average, before and after each step) are printed beside each
figure, and each process's CPU time (user + system): on a shared machine the wall times stretch with the load,
the CPU times much less (on 2 idle cores an audit on one thread takes about its CPU time).

    python tests/bench/bench_demo_open.py [--full] [--skip-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
T0 = float(sys.argv[1])
from reachtui.tui import app as A
orig_run = A.ReachApp.run
def run(self, **kw):
    async def pilot(p):
        while self.ready_at is None:          # the auto-pilot may start before the first frame
            await p.pause(0.01)
        seen = {"ready": self.ready_at - T0}
        while True:
            info = self.run_info
            if "first_row" not in seen and self.table is not None and any(
                    r.realized is not None for r in self.table.rows):
                seen["first_row"] = time.time() - T0
            if info is not None and info.status == "complete":
                seen["complete"] = time.time() - T0
                import resource
                ru = resource.getrusage(resource.RUSAGE_SELF)
                seen["cpu"] = ru.ru_utime + ru.ru_stime
                seen["run"] = info.id
                seen["questions"] = len(self.table.rows)
                break
            await p.pause(0.1)
        print(json.dumps(seen), flush=True)
        self.exit()
    return orig_run(self, headless=True, auto_pilot=pilot, size=(120, 40))
A.ReachApp.run = run
from reachtui.cli import main
main(["open", "demo", *sys.argv[2:]])
"""


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def open_demo(store: Path, *extra: str) -> dict:
    t0 = time.time()
    done = subprocess.run([sys.executable, "-c", CHILD, repr(t0), "--store", str(store), *extra],
                          capture_output=True, text=True, cwd=store.parent)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def headless_audit(store: Path, threads: int) -> tuple[float, float]:
    from reachtui.commands.open import QUICK_DEMO

    t0, cpu0 = time.time(), children_cpu()
    subprocess.run([sys.executable, "-m", "reachtui", "audit", "demo", "--task", "demo", "--limit",
                    str(QUICK_DEMO["limit"]), "--budget", str(QUICK_DEMO["budget"]), "--mlp-scan", "--threads",
                    str(threads), "--store", str(store)], check=True, capture_output=True, cwd=store.parent)
    return time.time() - t0, children_cpu() - cpu0


def children_cpu() -> float:
    """User + system seconds of this process's finished children."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    from reachtui.commands.options import default_threads

    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="also time `reachtui open demo --full`")
    ap.add_argument("--skip-baseline", action="store_true")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; {load()} at the start")
    with tempfile.TemporaryDirectory(prefix="bench-demo-open-") as tmp:
        threads = default_threads(interactive=True)
        before = load()
        got = open_demo(Path(tmp) / "app.sqlite")
        print(f"reachtui open demo (the quick demo, {threads} torch thread(s)): first screen {got['ready']:.1f} s, "
              f"first realized row {got.get('first_row', float('nan')):.1f} s, audit of {got['questions']} questions "
              f"complete {got['complete']:.1f} s, CPU time {got['cpu']:.1f} s  [{before} -> {load()}; targets: 5 s, 120 s]")
        if not args.skip_baseline:
            before = load()
            secs, cpu = headless_audit(Path(tmp) / "cli.sqlite", threads)
            print(f"baseline, the same audit headless (reachtui audit ... --threads {threads}): {secs:.1f} s, CPU "
                  f"time {cpu:.1f} s; "
                  f"the app / headless: {got['complete'] / secs:.2f}x  [{before} -> {load()}]")
        if args.full:
            before = load()
            full = open_demo(Path(tmp) / "full.sqlite", "--full")
            print(f"reachtui open demo --full: first screen {full['ready']:.1f} s, audit of {full['questions']} "
                  f"questions complete {full['complete']:.1f} s ({full['complete'] / 60:.1f} min), CPU time {full['cpu']:.1f} s  "
                  f"[{before} -> {load()}]")


if __name__ == "__main__":
    main()
