"""Measure the shipped demo model on the shipped demo task with plain transformers (not reachtui's runner).

    python tests/bench/measure_demo_model.py [--model assets/models/demo] [--task assets/tasks/demo.jsonl]
                                             [--samples 16] [--temperature 1.0] [--seed 0] [--json out.json]

Prompt: "Question: {question}\\nAnswer:" (no BOS, as the model was trained). Each generation is cut at the
first newline (the protocol's stop string). Realized = greedy decoding; reachable@K = any of K samples at
the given temperature (top-k and top-p off) is correct; pass@k is the unbiased estimator
1 - C(n-c, k) / C(n, k) averaged over questions. Grading: `reachtui.grading.grade` when it exists, else
the number after '####' (or the last number) compared with the gold answer.

Deterministic on CPU for a given seed, batch size and thread count.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _grader():
    try:
        from reachtui.grading import grade  # the project's one grader, once it exists

        return lambda text, gold: grade(text, gold).correct
    except ImportError:
        def fallback(text: str, gold: str) -> bool:
            m = re.search(r"####\s*(-?[\d,]+)", text)
            if m:
                pred = m.group(1)
            else:
                nums = re.findall(r"-?\d[\d,]*", text)
                pred = nums[-1] if nums else None
            return pred is not None and pred.replace(",", "").lstrip("0") == gold.lstrip("0")

        return fallback


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "assets" / "models" / "demo")
    ap.add_argument("--task", type=Path, default=ROOT / "assets" / "tasks" / "demo.jsonl")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=256, help="rows per generate() call")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (0 = all)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    rows = [json.loads(line) for line in args.task.read_text().splitlines() if line.strip()]
    if args.limit:
        rows = rows[: args.limit]
    prompts = [f"Question: {r['question']}\nAnswer:" for r in rows]
    golds = [r["answer"] for r in rows]
    correct = _grader()

    def generate(batch_prompts: list[str], sample: bool) -> list[str]:
        enc = tok(batch_prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        kw = dict(do_sample=True, temperature=args.temperature, top_k=0, top_p=1.0) if sample else dict(do_sample=False)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id, **kw)
        texts = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return [t.split("\n", 1)[0] for t in texts]

    greedy: list[str] = []
    for s in range(0, len(prompts), args.batch_size):
        greedy += generate(prompts[s:s + args.batch_size], sample=False)
    realized = [correct(t, g) for t, g in zip(greedy, golds)]
    t_greedy = time.time() - t0

    torch.manual_seed(args.seed)
    k = args.samples
    per_call = max(1, args.batch_size // k)
    n_correct: list[int] = []
    for s in range(0, len(prompts), per_call):
        chunk = prompts[s:s + per_call]
        texts = generate([p for p in chunk for _ in range(k)], sample=True)
        for i, g in enumerate(golds[s:s + per_call]):
            n_correct.append(sum(correct(t, g) for t in texts[i * k:(i + 1) * k]))

    n = len(rows)
    ks = [x for x in (1, 2, 4, 8, 16, 32, 64) if x <= k]
    result = {
        "model": str(args.model), "task": str(args.task), "questions": n,
        "realized_pct": round(100 * sum(realized) / n, 1),
        f"reachable_at_{k}_pct": round(100 * sum(c > 0 for c in n_correct) / n, 1),
        "temperature": args.temperature, "samples": k, "seed": args.seed,
        "pass_at_k_pct": {str(x): round(100 * sum(pass_at_k(k, c, x) for c in n_correct) / n, 1) for x in ks},
        "failure_set_size": sum((c > 0) and not r for c, r in zip(n_correct, realized)),
        "format_ok_pct": round(100 * sum("####" in t for t in greedy) / n, 1),
        "seconds": {"greedy": round(t_greedy, 1), "total": round(time.time() - t0, 1)},
    }
    print(f"questions          {n}")
    print(f"realized (greedy)  {result['realized_pct']:.1f}%")
    print(f"reachable@{k} T={args.temperature}  {result[f'reachable_at_{k}_pct']:.1f}%")
    print("pass@k             " + "  ".join(f"@{x}: {v:.1f}%" for x, v in result["pass_at_k_pct"].items()))
    print(f"failure set        {result['failure_set_size']} questions (reachable, not realized)")
    print(f"'####' in greedy   {result['format_ok_pct']:.1f}%")
    print(f"time               {result['seconds']['total']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
