"""How long the trace pane takes (issue 35: divergence plus lens within 0.3 s of enter on the demo model on a
CPU, within 3 s for a 0.5B shape), against the live run enter already makes (run by hand, never collected).

    python tests/bench/bench_trace.py [--questions 8] [--threads N] [--no-large] [--max-new-tokens 48]

Per question, in one process and on one torch thread count (the app's default unless --threads):
- live: `reachtui.engine.live.live_run` under the edit (what enter ran before the pane): the baseline;
- first: `trace_question` of a question never traced (its default and its edited output both generated,
  read token by token, the gold token found, the lens read at the divergence);
- edit: the same question under another edit (the default output kept by the runner: one generation);
- move: the lens read at another token (`move`: no generation).
Then, in the app (Pilot, the trace pane shown), the seconds from pressing enter to the pane's trace.
Then the same engine figures for a model of Qwen2.5-0.5B's shape with random weights (24 layers, hidden 896,
vocabulary 151,936; greedy outputs of random weights never stop early: every output is max-new-tokens
long). Prints medians and ratios to the live run measured in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _median_ms(xs) -> str:
    return f"{1000 * statistics.median(xs):7.1f} ms"


def measure_engine(runner, protocol, questions, first_edit, second_edit, label: str) -> dict:
    from reachtui.engine.live import live_run
    from reachtui.engine.trace import move, trace_question

    live, first, edit, moved = [], [], [], []
    live_run(runner, protocol, questions[0], first_edit)                 # warm-up (not counted)
    for q in questions[1:]:
        t0 = time.perf_counter()
        live_run(runner, protocol, q, first_edit)
        live.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        t = trace_question(runner, protocol, q, first_edit)
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        trace_question(runner, protocol, q, second_edit)
        edit.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        move(runner, t, max(0, t.position - 1) if t.position else min(1, t.longest - 1))
        moved.append(time.perf_counter() - t0)
    base = statistics.median(live)
    print(f"{label} ({len(live)} questions, torch threads {__import__('torch').get_num_threads()}):")
    for name, xs in (("live run (enter, before)", live), ("trace, first", first), ("trace, another edit", edit),
                     ("move the lens", moved)):
        print(f"  {name:<26}{_median_ms(xs)}   max {1000 * max(xs):7.1f} ms   x{statistics.median(xs) / base:5.2f} live")
    return dict(live=base, first=statistics.median(first), edit=statistics.median(edit))


async def measure_app(runner, store: Path, repeats: int) -> dict[str, list[float]]:
    """Seconds to the trace pane in the app (pane shown, MLP 4 silenced), per failure-set question: from `j`
    (a question never traced: its default and edited outputs), from `m` on MLP 5 (another edit: one output),
    and from enter (the trace already on screen: the runner keeps it)."""
    from reachtui.tui.app import ReachApp

    app = ReachApp(store)
    app.runner = runner
    times: dict[str, list[float]] = {"select (j)": [], "edit (m)": [], "enter": []}

    async def timed(keys, done) -> float:
        """Seconds from pressing `keys` until `done()`."""
        t0 = time.perf_counter()
        await pilot.press(*keys)
        await until(done)
        return time.perf_counter() - t0

    async def until(done) -> None:
        while not done():
            await pilot.pause(0.002)

    def shows(qid: str, what: str):
        return lambda: (app.last_trace is not None and app.last_trace.qid == qid and app.last_trace.edited is not None
                        and app.last_trace.edited.intervention == what)

    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.press("f", "t")
        for _ in range(4):
            await pilot.press("right_square_bracket")
        await pilot.press("m")
        await until(lambda: not any(w.is_running for w in app.workers))
        for _ in range(repeats):
            qid = app.table.rows[app.table.cursor + 1].qid
            times["select (j)"].append(await timed(["j"], shows(qid, "silence MLP 4")))
            await pilot.press("right_square_bracket")
            times["edit (m)"].append(await timed(["m"], shows(qid, "silence MLP 4-5")))
            await pilot.press("m", "left_square_bracket")
            await until(shows(qid, "silence MLP 4"))
            app.last_trace = None
            times["enter"].append(await timed(["enter"], shows(qid, "silence MLP 4")))
            await until(lambda: not any(w.is_running for w in app.workers))
    return times


def small_store(runner, path: Path) -> Path:
    from reachtui.engine.audit import run_audit
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.store import Store
    from reachtui.tasks import load_task

    if not path.exists():
        with Store(path) as store:
            run_audit(store, runner, model_name="demo", model_path=str(ROOT / "assets/models/demo"),
                      model_class=runner.arch.model_class, task=load_task("demo"),
                      protocol=protocol_from_options(Protocol(), probes="sample", budget=4), limit=48)
    return path


def large_runner():
    import torch
    import transformers as T

    from reachtui.model.layers import discover
    from reachtui.model.load import LoadedModel, load_tokenizer, quiet_transformers
    from reachtui.model.run import Runner

    quiet_transformers()
    cfg = T.Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6, bos_token_id=1,
                        eos_token_id=2)
    torch.manual_seed(0)
    model = T.AutoModelForCausalLM.from_config(cfg).eval()
    tokenizer = load_tokenizer(str(ROOT / "assets/models/demo"))
    return Runner(LoadedModel(name="qwen2.5-0.5b-shape", path=None, model=model, tokenizer=tokenizer, device="cpu",
                              dtype="float32", arch=discover(model)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--no-demo", action="store_true")
    ap.add_argument("--large-questions", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=48, help="the 0.5B shape's protocol (default: 48)")
    ap.add_argument("--store", type=Path, default=Path("/tmp/reachtui-bench-trace.sqlite"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from reachtui.commands.options import set_threads

    set_threads(args.threads, interactive=True)
    import os

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    from reachtui.intervention import Intervention
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

    runner = Runner(load_model("demo", device="cpu"))
    protocol = Protocol()
    questions = [dict(qid=q.id, question=q.question, gold=q.answer) for q in load_task("demo").questions]
    demo_qs = [next(q for q in questions if q["qid"] == "demo-0026")] + questions[: args.questions]
    four, three = Intervention(None, frozenset({4})), Intervention(None, frozenset({3}))
    if not args.no_demo:
        measure_engine(runner, protocol, demo_qs, four, three, "demo model, MLP 4 then MLP 3 silenced")
        app_times = asyncio.run(measure_app(runner, small_store(runner, args.store), args.questions))
        for name, xs in app_times.items():
            print(f"  app: {name + ' -> pane':<21}{_median_ms(xs)}   max {1000 * max(xs):7.1f} ms ({len(xs)} "
                  f"failure-set questions)")
    if args.no_large:
        return
    t0 = time.perf_counter()
    large = large_runner()
    print(f"0.5B shape built in {time.perf_counter() - t0:.1f} s")
    small = Protocol(max_new_tokens=args.max_new_tokens)
    measure_engine(large, small, questions[: args.large_questions + 1], Intervention(None, frozenset({20})), Intervention(None, frozenset({12})),
                   f"Qwen2.5-0.5B shape, random weights, {args.max_new_tokens} new tokens, MLP 20 then MLP 12 silenced")


if __name__ == "__main__":
    main()
