"""Make assets/trace.svg (the README's picture of the trace pane), by hand:

    python tests/bench/make_trace_screenshot.py [--store PATH] [--question demo-0209] [--silence 6]

Audits the demo model on the demo task with the sample probe (budget 16), unless --store holds a run
already, then opens the app on the failure set of the sample probe, selects --question, shows the trace
pane (t), silences MLP --silence on the layer strip and waits for the pane: where the answer changes, the
top-5 under each output and the logit lens along the route. Saves the screen as SVG.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def audit(store_path: Path) -> None:
    from reachtui.engine.audit import run_audit
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.store import Store
    from reachtui.tasks import load_task

    runner = Runner(load_model("demo", device="cpu"))
    with Store(store_path) as store:
        run_audit(store, runner, model_name=runner.loaded.name, model_path=str(runner.loaded.path),
                  model_class=runner.arch.model_class, task=load_task("demo"),
                  protocol=protocol_from_options(Protocol(), probes="sample", budget=16))


async def shoot(store_path: Path, out: Path, qid: str, layer: int, size: tuple[int, int]) -> None:
    from reachtui.tui.app import ReachApp
    from reachtui.tui.widgets.layer_strip import LayerStrip

    app = ReachApp(store_path)
    async with app.run_test(size=size) as pilot:
        await pilot.press("f")
        rows = [r.qid for r in app.table.rows]
        if qid not in rows:
            raise SystemExit(f"{qid} is not in the failure set of the sample probe: choose another (--question)")
        app.table.cursor = rows.index(qid)
        await pilot.press("t")
        await _wait(app, pilot)
        while app.screen.query_one(LayerStrip).position < layer:
            await pilot.press("right_square_bracket")
        await pilot.press("m")
        await _wait(app, pilot)
        app.model_status = f"{app.run_info.model} ready · cpu float32 · {app.runner.num_layers} layers"
        app.main.refresh_chrome()
        await pilot.pause(0.2)
        out.write_text(app.export_screenshot(title=f"reachtui open {app.run_info.model} — the trace pane (t)"))
    t = app.last_trace
    print(f"wrote {out}: {qid} under {t.edited.intervention if t.edited else 'no edit'}, diverges at token "
          f"{t.divergence}: {t.default.answer} -> {t.edited.answer if t.edited else ''} (gold {t.gold})")


async def _wait(app, pilot) -> None:
    for _ in range(3):
        for w in list(app.workers):
            try:
                await w.wait()
            except Exception:  # noqa: BLE001 - a failed worker shows on the screen
                pass
        await pilot.pause(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=Path, default=Path("/tmp/reachtui-trace-screenshot.sqlite"))
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "trace.svg")
    ap.add_argument("--question", default="demo-0209")
    ap.add_argument("--silence", type=int, default=6)
    args = ap.parse_args()
    if not args.store.exists():
        audit(args.store)
    asyncio.run(shoot(args.store, args.out, args.question, args.silence, (150, 42)))


if __name__ == "__main__":
    main()
