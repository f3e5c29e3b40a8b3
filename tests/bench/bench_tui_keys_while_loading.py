"""Bench for the app (run by hand: `python tests/bench/bench_tui_keys_while_loading.py`; never collected):
how long a key takes while the first live run of a browsed store loads the demo model in a worker thread
(torch's import and the load share the GIL with the UI), against the same key with nothing loading,
measured in the same run. Each press is `j` / `k` sent as the terminal driver sends a key, timed until the
table's cursor has moved (Pilot's own press waits for an idle screen, which a pulsing progress bar never is).

    python tests/bench/bench_tui_keys_while_loading.py [--presses 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


async def presses(app, pilot, n: int, until=None) -> list[float]:
    from textual import events

    out = []
    for i in range(n):
        if until is not None and until():
            break
        table = app.main.table
        before = table.cursor
        key = "j" if i % 2 == 0 else "k"
        event = events.Key(key, key)
        event.set_sender(app)
        t0 = time.perf_counter()
        app._driver.send_message(event)
        while table.cursor == before and time.perf_counter() - t0 < 30:
            await asyncio.sleep(0.002)
        out.append(time.perf_counter() - t0)
        await asyncio.sleep(0.1)
    return out


async def main(n: int) -> None:
    from reachtui.settings import Placement
    from reachtui.tui.app import Launch, ReachApp
    from tui_store import build_store

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.sqlite"
        build_store(path, n=200, k=4)
        app = ReachApp(path, launch=Launch(model="demo", placement=Placement(device="cpu")))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.3)
            idle = await presses(app, pilot, n)
            t0 = time.perf_counter()
            await pilot.press("enter")
            loading = await presses(app, pilot, 10 * n, until=lambda: app.runner is not None)
            while app.last_live is None:
                await pilot.pause(0.05)
            total = time.perf_counter() - t0
    for name, xs in (("idle", idle), ("while loading", loading)):
        print(f"{name:14s} {len(xs):3d} presses: median {1000 * statistics.median(xs):6.1f} ms, "
              f"max {1000 * max(xs):6.1f} ms")
    print(f"model load + first live run: {total:.1f} s; median ratio loading/idle "
          f"{statistics.median(loading) / statistics.median(idle):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--presses", type=int, default=40)
    asyncio.run(main(parser.parse_args().presses))
