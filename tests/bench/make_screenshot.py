"""Make assets/screenshot.svg (the README's picture of the app), by hand:

    python tests/bench/make_screenshot.py [--store PATH] [--out assets/screenshot.svg]

Audits the demo model on the demo task as `reachtui open demo` does (the quick demo: `QUICK_DEMO`'s limit and
budget, sample and routes, the MLP scan, one torch thread as the app takes on 2 cores), or uses the latest
run in --store, opens the app on the failure set of the sample probe, picks a question that the best MLP
block of the scan repairs, silences that block and runs it live, then saves the screen as SVG. So its
protocol hash and numbers are those a fresh `reachtui open demo` shows.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def audit(store_path: Path, limit: int | None, budget: int, model: str = "demo") -> int:
    import torch

    from reachtui.engine.audit import run_audit
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.store import Store
    from reachtui.tasks import load_task

    torch.set_num_threads(1)
    runner = Runner(load_model(model, device="cpu"))
    protocol = protocol_from_options(Protocol(), budget=budget)
    with Store(store_path) as store:
        res = run_audit(store, runner, model_name=runner.loaded.name, model_path=str(runner.loaded.path),
                        model_class=runner.arch.model_class, task=load_task("demo"), protocol=protocol,
                        limit=limit, mlp_scan="sample")
    return res.run_id


async def shoot(store_path: Path, out: Path, size: tuple[int, int]) -> None:
    from reachtui.store import Store
    from reachtui.tui.app import ReachApp

    with Store(store_path, readonly=True) as s:
        run_id = s.latest_run()["id"]
        scan = s.mlp_scan(run_id)
        best = max(scan, key=lambda r: (r["repaired"], -r["broken"]))["layer"]
        repaired = {r[0] for r in s.conn.execute(
            "SELECT question_id FROM attempts WHERE run_id = ? AND probe = ? AND correct = 1",
            (run_id, f"mlp:{best}"))}
    app = ReachApp(store_path, run_id)
    async with app.run_test(size=size) as pilot:
        await pilot.press("f")
        target = next((i for i, r in enumerate(app.table.rows) if r.key in repaired), 0)
        app.table.cursor = target
        for _ in range(best):
            await pilot.press("right_square_bracket")
        await pilot.press("m", "enter")
        for w in list(app.workers):
            try:
                await w.wait()
            except Exception:  # noqa: BLE001
                pass
        await pilot.pause(0.3)
        app.model_status = f"{app.run_info.model} ready · cpu float32 · {app.runner.num_layers} layers"
        app.main.refresh_chrome()
        await pilot.pause(0.1)
        out.write_text(app.export_screenshot(title=f"reachtui open {app.run_info.model}"))
    print(f"wrote {out} (run {run_id}, silenced MLP {best}, question {app.last_live['qid']}: "
          f"{app.last_live['default_answer']} -> {app.last_live['answer']}, gold {app.last_live['gold']})")


def main() -> None:
    from reachtui.commands.open import QUICK_DEMO

    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=Path, default=Path("/tmp/reachtui-screenshot.sqlite"))
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot.svg")
    ap.add_argument("--limit", type=int, default=QUICK_DEMO["limit"])
    ap.add_argument("--budget", type=int, default=QUICK_DEMO["budget"])
    ap.add_argument("--model", default="demo")
    args = ap.parse_args()
    if not args.store.exists():
        audit(args.store, args.limit, args.budget, args.model)
    asyncio.run(shoot(args.store, args.out, (150, 42)))


if __name__ == "__main__":
    main()
