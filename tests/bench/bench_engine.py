"""Engine speed, by hand (never collected as a test):

    python tests/bench/bench_engine.py [--model demo] [--n 300] [--batch 64] [--threads 2] [--device cpu]

Prints, all measured in the same run on the same prompts (the demo task under the default protocol:
template, greedy, max 48 new tokens, stop "\\n"):

1. identity route (Runner.generate) vs plain batched `model.generate` (left padding, same batches,
   same stop string and EOS): time ratio (target <= 1.10), and whether the greedy tokens agree;
2. routes of length L' vs the identity route: time ratio next to L'/L;
3. batch B vs one prompt at a time: throughput ratio (one-at-a-time on the first --n-single prompts).
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
    ap.add_argument("--n-single", type=int, default=48)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2, help="timing repeats (the best is kept)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from reachtui.model.load import load_model
    from reachtui.model.routes import Route, format_route
    from reachtui.model.run import Decoding, Runner
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

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
          f"{args.threads} threads; {args.n} prompts, batch {args.batch}, max_new_tokens {dec.max_new_tokens}, "
          f"stop {dec.stop!r}")

    def best(fn, repeats=args.repeats):
        times, out = [], None
        for _ in range(repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return min(times), out

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

    ours()  # warm-up
    # interleaved (hf, ours) pairs, so that load from other processes hits both alike; best of each kept
    t_hf = t_id = float("inf")
    pair_ratios = []
    for _ in range(args.repeats):
        a, hf_rows = best(hf_generate, 1)
        b, id_gens = best(ours, 1)
        t_hf, t_id = min(t_hf, a), min(t_id, b)
        pair_ratios.append(b / a)

    def trim(row, n):
        return row[:n]

    agree = sum(trim(h, g.new_tokens) == g.token_ids for h, g in zip(hf_rows, id_gens))
    new_tok = sum(g.new_tokens for g in id_gens)
    print(f"\n1. identity route vs model.generate: {t_id:.2f}s vs {t_hf:.2f}s  ratio {t_id / t_hf:.3f} "
          f"(target <= 1.10); {new_tok} new tokens, {new_tok / t_id:.0f} tok/s; "
          f"greedy tokens agree on {agree}/{len(prompts)}; per-pair ratios "
          f"{', '.join(f'{x:.3f}' for x in pair_ratios)}")

    from reachtui.model.routes import sample_routes

    routes = [Route(tuple(i for i in range(L) if i not in (2, 3))),
              Route(tuple(i for i in range(L) if i != 4)),
              Route(tuple(range(3)) + (1, 2) + tuple(range(3, L)))]
    routes += sample_routes(L, 2, seed=0)
    print("\n2. routes vs identity (time ratio, L'/L):")
    ratios = []
    for r in routes:
        t_r, gens = best(lambda r=r: ours(r), repeats=1)
        toks = sum(g.new_tokens for g in gens)
        per_tok = (t_r / toks) / (t_id / new_tok)
        ratios.append((per_tok, len(r) / L))
        print(f"   {format_route(r):24s} L'={len(r):2d}  time {t_r / t_id:.2f}x  per new token {per_tok:.2f}x  "
              f"L'/L {len(r) / L:.2f}")

    ns = min(args.n_single, len(prompts))
    t_one, _ = best(lambda: [ours(None, [p], 1) for p in prompts[:ns]], repeats=1)
    t_b = t_id * ns / len(prompts)
    print(f"\n3. batch {args.batch} vs one at a time ({ns} prompts): {ns / t_b:.1f} vs {ns / t_one:.1f} prompts/s, "
          f"throughput ratio {t_one / t_b:.1f}x")


if __name__ == "__main__":
    main()
