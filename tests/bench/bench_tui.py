"""Bench for the app (run by hand: `python tests/bench/bench_tui.py`; never collected by pytest).

1. First paint of `reachtui open --store` on a store of 10,000 questions x 32 attempts (+ the realized
   attempt), in a fresh process: from just before the process is spawned to Textual's Ready event (sent
   once the first frame, with the table's rows, is on screen), headless. Also checks that torch is not in
   sys.modules. Target <= 1.0 s. With tmux present, also the same in a real terminal: spawn to the first
   table row visible in `tmux capture-pane` (polled every 10 ms).
2. A live run on the demo model (model already loaded): one question under an edited intervention
   (silence MLP + a route), through the engine job the app's worker runs (`reachtui.engine.live`).
   Target <= 0.3 s on CPU.

    python tests/bench/bench_tui.py [--questions 10000] [--attempts 32] [--repeats 5] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

CHILD = r"""
import json, sys, time
T0 = float(sys.argv[1])
store = sys.argv[2]
from reachtui.tui import app as A
orig_run = A.ReachApp.run
def run(self, **kw):
    async def pilot(p):
        await p.pause()
        import resource
        ru = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"first_paint": self.ready_at - T0, "since_import": self.first_paint_s,
                          "cpu": ru.ru_utime + ru.ru_stime,
                          "rows": len(self.table.rows), "torch": "torch" in sys.modules}), flush=True)
        self.exit()
    return orig_run(self, headless=True, auto_pilot=pilot, size=(160, 50))
A.ReachApp.run = run
from reachtui.cli import main
main(["open", "--store", store])
"""


def build(path: Path, n: int, attempts: int) -> float:
    from tui_store import build_store

    t = time.perf_counter()
    build_store(path, n=n, k=attempts // 2, probes=("sample", "routes"), seed=1)
    return time.perf_counter() - t


def first_paint(path: Path, repeats: int) -> list[dict]:
    out = []
    for _ in range(repeats):
        t0 = time.time()
        r = subprocess.run([sys.executable, "-c", CHILD, repr(t0), str(path)], capture_output=True, text=True,
                           cwd=ROOT)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-3000:])
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def tmux_paint(path: Path, repeats: int) -> list[float]:
    if shutil.which("tmux") is None:
        return []
    exe = Path(sys.executable).with_name("reachtui")
    times = []
    keeper = f"bench-tui-keeper-{os.getpid()}"  # keeps the tmux server up between the timed sessions
    subprocess.run(["tmux", "new-session", "-d", "-s", keeper, "sleep 600"], check=True)
    try:
        for i in range(repeats):
            t = _tmux_once(exe, path, f"bench-tui-{os.getpid()}-{i}")
            if t is not None:
                times.append(t)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", keeper], capture_output=True)
    return times


def _tmux_once(exe: Path, path: Path, name: str) -> float | None:
    t0 = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50",
                    f"{exe} open --store {path}"], check=True, cwd=ROOT)
    seen = None
    while time.perf_counter() - t0 < 20:
        cap = subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
        if "syn-00000" in cap and "realized" in cap:
            seen = time.perf_counter() - t0
            break
        time.sleep(0.01)
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    return seen


def live_run(repeats: int, model: str = "demo") -> dict:
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task
    from dataclasses import asdict

    from reachtui.engine.live import live_run as engine_live_run
    from reachtui.tui.intervention import LayerEditor

    def live_generate(runner, protocol, question, iv):   # what the app's live-run worker does
        return asdict(engine_live_run(runner, protocol, question, iv.value))

    t = time.perf_counter()
    runner = Runner(load_model(model, device="cpu"))
    load_s = time.perf_counter() - t
    task = load_task("demo")
    protocol = Protocol()
    iv = LayerEditor.identity(runner.num_layers).toggle_silence(runner.num_layers // 2)
    iv_route = iv.more(2).toggle_skip(5)
    qs = [{"question": q.question, "gold": q.answer} for q in task.questions[:repeats]]
    live_generate(runner, protocol, qs[0], iv)  # warm-up
    times, routed = [], []
    for q in qs:
        t = time.perf_counter()
        r = live_generate(runner, protocol, q, iv)
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        live_generate(runner, protocol, q, iv_route)
        routed.append(time.perf_counter() - t)
    return {"load_s": load_s, "silence": iv.describe(), "route": iv_route.describe(), "new_tokens": r["new_tokens"],
            "median_s": statistics.median(times), "max_s": max(times),
            "median_route_s": statistics.median(routed), "max_route_s": max(routed)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=10000)
    ap.add_argument("--attempts", type=int, default=32, help="attempts per question (split over sample, routes)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--store", type=Path, default=None, help="reuse/keep this store file")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument("--skip-paint", action="store_true")
    ap.add_argument("--model", default="demo", help="the model of the live-run bench")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads for the live run (default: torch's; 1 is faster on a busy CPU)")
    args = ap.parse_args()
    tmp = None
    path = args.store
    if path is None:
        tmp = tempfile.mkdtemp(prefix="bench-tui-")
        path = Path(tmp) / "bench.sqlite"
    if not args.skip_paint and not path.exists():
        secs = build(path, args.questions, args.attempts)
        print(f"built {args.questions} questions x (1 + {args.attempts}) attempts in {secs:.1f} s "
              f"({path.stat().st_size / 1e6:.0f} MB)")
    try:
        if args.skip_paint:
            raise StopIteration
        runs = first_paint(path, args.repeats)
        fp = [r["first_paint"] for r in runs]
        print(f"first paint (spawn -> Ready, headless): median {statistics.median(fp):.3f} s, "
              f"min {min(fp):.3f}, max {max(fp):.3f} over {len(fp)} runs; rows {runs[0]['rows']}; "
              f"after import of the app: {statistics.median(r['since_import'] for r in runs):.3f} s; "
              f"CPU time of the process to that point: {statistics.median(r['cpu'] for r in runs):.3f} s; "
              f"torch imported: {any(r['torch'] for r in runs)}  [target <= 1.0 s, torch absent]")
        tm = tmux_paint(path, args.repeats)
        if tm:
            print(f"first rows on a real terminal (tmux, spawn -> row visible): median {statistics.median(tm):.3f} s, "
                  f"min {min(tm):.3f}, max {max(tm):.3f}")
    except StopIteration:
        pass
    finally:
        if tmp and args.store is None:
            shutil.rmtree(tmp, ignore_errors=True)
    if not args.skip_live:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        lr = live_run(max(args.repeats, 5), args.model)
        import torch

        print(f"live run on {args.model} ({torch.get_num_threads()} torch threads; loaded in {lr['load_s']:.1f} s), one question, {lr['silence']}: "
              f"median {lr['median_s'] * 1000:.0f} ms, max {lr['max_s'] * 1000:.0f} ms; "
              f"{lr['route']}: median {lr['median_route_s'] * 1000:.0f} ms, max {lr['max_route_s'] * 1000:.0f} ms  "
              f"[target <= 300 ms]")


if __name__ == "__main__":
    main()
