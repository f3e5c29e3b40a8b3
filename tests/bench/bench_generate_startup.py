"""Bench: the start-up of `reachtui generate` (run by hand: `python tests/bench/bench_generate_startup.py`).

One question on the demo model, a whole process each, from spawn to exit, against two yardsticks measured
in the same run, the three commands taking turns (A B C A B C ...) so that a drift of the machine's load
hits them alike:

- A: `reachtui generate demo "What is 12 plus 7?" --threads T`;
- B: `python -c "import torch, transformers"`, the bare import every tool built on them pays;
- C: the same generation in plain transformers (AutoTokenizer, AutoModelForCausalLM.from_pretrained,
  `model.generate` of the same 22 greedy tokens), `torch.set_num_threads(T)`: importing the model's code
  and loading it, which B leaves out (transformers imports lazily).

Prints the medians, A - B (what reachtui adds to the bare import), A - C (what it adds to plain
transformers doing the same work), the cores and the load (1-minute average) before and after.

    python tests/bench/bench_generate_startup.py [--runs 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What is 12 plus 7?"

PLAIN = r"""
import sys
import torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(int(sys.argv[2]))
tok = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
ids = tok("Question: " + sys.argv[3] + "\nAnswer:", return_tensors="pt")
out = model.generate(**ids, max_new_tokens=22, do_sample=False)
print(tok.decode(out[0][ids["input_ids"].shape[1]:]))
"""


def timed(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t


def main() -> None:
    from reachtui.assets import DEMO_MODEL_DIR

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    t = str(args.threads)
    commands = {
        "A reachtui generate": [sys.executable, "-m", "reachtui", "generate", "demo", QUESTION, "--threads", t],
        "B import torch, transformers": [sys.executable, "-c", "import torch, transformers"],
        "C plain transformers, same generation": [sys.executable, "-c", PLAIN, str(DEMO_MODEL_DIR), t, QUESTION],
    }
    before = os.getloadavg()[0]
    for argv in commands.values():          # warm the file cache once, not counted
        timed(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{len(os.sched_getaffinity(0))} cores, load {before:.2f} -> {os.getloadavg()[0]:.2f}; {args.runs} runs each, "
          f"{args.threads} torch thread(s); median (min-max) seconds, spawn to exit:")
    for name, ts in times.items():
        print(f"  {name:40s} {med[name]:6.2f}  ({min(ts):.2f}-{max(ts):.2f})")
    a, b, c = med.values()
    print(f"reachtui generate - bare import: {a - b:+.2f} s ({a / b:.2f}x); - plain transformers doing the same: "
          f"{a - c:+.2f} s ({a / c:.2f}x)")


if __name__ == "__main__":
    main()
