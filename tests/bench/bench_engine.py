"""Engine speed, by hand (never collected as a test):

    python tests/bench/bench_engine.py [--model demo] [--n 300] [--batch 64] [--threads 1] [--clock cpu]

Prints, all measured in the same run on the same prompts (the demo task under the default protocol:
template, greedy, max 48 new tokens, stop "\\n"):

1. identity route (Runner.generate) vs plain batched `model.generate` (left padding, the same batches,
   the same stop string via `stop_strings`, the same EOS): time ratio (target <= 1.10), and whether
   the greedy tokens agree;
2. routes of length L' vs the identity route: time per new token, next to L'/L;
3. batch B vs one prompt at a time: throughput ratio (one-at-a-time on the first --n-single prompts).

Timing: `--clock cpu` (default) counts this process's CPU time (time.process_time), which stays fair on a
machine shared with other jobs; `--clock wall` counts wall time (use it on a quiet machine). Each
comparison is interleaved (A, B, A, B, ...) and the best of --repeats is kept.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="demo")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--n-single", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--repeats", type=int, default=3, help="timing repeats (the best is kept)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from reachtui.model.load import load_model
    from reachtui.routes import Route, format_route, sample_routes
    from reachtui.generation import Decoding
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    lm = load_model(args.model, device=args.device)
    runner = Runner(lm)
    L = runner.num_layers
    proto = Protocol()
    questions = load_task("demo").questions
    prompts = [proto.render_prompt(questions[i % len(questions)].question, lm.tokenizer) for i in range(args.n)]
    dec = Decoding(max_new_tokens=proto.max_new_tokens, stop=tuple(proto.stop))
    tok = lm.tokenizer
    print(f"model {lm.name}: {lm.arch.model_class}, {L} layers, "
          f"{sum(p.numel() for p in lm.model.parameters()) / 1e6:.2f}M params, {lm.device}, {lm.dtype}, "
          f"{args.threads} thread(s), {args.clock} clock; {args.n} prompts, batch {args.batch}, "
          f"max_new_tokens {dec.max_new_tokens}, stop {dec.stop!r}")

    def timed(fn):
        t = clock()
        out = fn()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return clock() - t, out

    def interleaved(*fns):
        """Best time of each fn over --repeats rounds of (fn1, fn2, ...); the last outputs."""
        best = [float("inf")] * len(fns)
        outs = [None] * len(fns)
        for _ in range(args.repeats):
            for k, fn in enumerate(fns):
                t, outs[k] = timed(fn)
                best[k] = min(best[k], t)
        return best, outs

    # the same batches for both: prompts sorted by length (the runner sorts the same way)
    enc_all = [tok(p)["input_ids"] for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(enc_all[i]))
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos

    def hf_generate():
        outs = [None] * len(prompts)
        with torch.inference_mode():
            for s in range(0, len(order), args.batch):
                chunk = order[s : s + args.batch]
                enc = tok([prompts[i] for i in chunk], return_tensors="pt", padding=True, padding_side="left")
                enc = {k: v.to(lm.device) for k, v in enc.items()}
                out = lm.model.generate(**enc, max_new_tokens=dec.max_new_tokens, do_sample=False,
                                        pad_token_id=pad, eos_token_id=eos, stop_strings=list(dec.stop),
                                        tokenizer=tok)
                for i, row in zip(chunk, out[:, enc["input_ids"].shape[1]:].tolist()):
                    outs[i] = row
        return outs

    def ours(route=None, prompts_=prompts, batch=args.batch):
        return runner.generate(prompts_, route=route, decoding=dec, batch_size=batch)

    ours(), hf_generate()  # warm-up
    (t_hf, t_id), (hf_rows, id_gens) = interleaved(hf_generate, ours)
    agree = sum(h[: g.new_tokens] == g.token_ids for h, g in zip(hf_rows, id_gens))
    new_tok = sum(g.new_tokens for g in id_gens)
    print(f"\n1. identity route vs model.generate: {t_id:.2f}s vs {t_hf:.2f}s, ratio {t_id / t_hf:.3f} "
          f"(target <= 1.10); {new_tok} new tokens, {new_tok / t_id:.0f} tok/s; "
          f"greedy tokens agree on {agree}/{len(prompts)}")

    # 2. route cost: no stop string (every row runs the full max_new_tokens unless it emits EOS), so
    # routes that ramble and routes that stop early compare per new token
    dec_long = Decoding(max_new_tokens=dec.max_new_tokens)
    sub = prompts[: max(args.batch, 64)]
    routes = [Route(tuple(i for i in range(L) if i not in (2, 3))),
              Route(tuple(i for i in range(L) if i != 4)),
              Route(tuple(range(3)) + (1, 2) + tuple(range(3, L))),
              *sample_routes(L, 2, seed=0)]
    fns = [lambda r=r: runner.generate(sub, route=r, decoding=dec_long, batch_size=args.batch)
           for r in [None, *routes]]
    times, outs = interleaved(*fns)
    per_tok = [t / sum(g.new_tokens for g in o) for t, o in zip(times, outs)]
    print(f"\n2. routes vs identity, {len(sub)} prompts, no stop string (time per new token, and L'/L):")
    print(f"   {'0-' + str(L - 1):24s} L'={L:2d}  1.00x  (L'/L 1.00)  {per_tok[0] * 1e3:.3f} ms/token")
    for r, pt in zip(routes, per_tok[1:]):
        print(f"   {format_route(r):24s} L'={len(r):2d}  {pt / per_tok[0]:.2f}x  (L'/L {len(r) / L:.2f})")

    ns = min(args.n_single, len(prompts))
    (t_one, t_b), _ = interleaved(lambda: [ours(None, [p], 1) for p in prompts[:ns]],
                                  lambda: ours(None, prompts[:ns], args.batch))
    print(f"\n3. batch {args.batch} vs one at a time ({ns} prompts): {ns / t_b:.1f} vs {ns / t_one:.1f} prompts/s, "
          f"throughput ratio {t_one / t_b:.1f}x")


if __name__ == "__main__":
    main()
