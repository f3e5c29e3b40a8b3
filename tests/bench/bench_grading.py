"""Grading throughput: attempts graded per second by `reachtui.grading.grade`, as an audit grades them.

    python tests/bench/bench_grading.py [--n 18000]

- number: demo-style outputs (" 21-8=13. 13*2=26. 26-20=6. #### 6") against their gold: what a demo audit
  grades (about 18,000 attempts); the fast path, no sympy and no worker process.
- math, numbers: math-format answers that are plain numbers (\\boxed{0.5} against 1/2): still the fast path.
- math, expressions: \\boxed{...} expressions against an equivalent or a different gold, 200 distinct pairs
  repeated (an audit's K samples repeat answers): math-verify, behind its time limit.
- math, first grade: the first math-verify grade of a process (starting what it needs), timed alone.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reachtui import grading  # noqa: E402


def demo_texts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.randint(2, 40), rng.randint(2, 9), rng.randint(1, 30)
        gold = (a - b) * 2 - c
        answer = gold if rng.random() < 0.5 else gold + rng.randint(1, 5)
        out.append((f" {a}-{b}={a - b}. {a - b}*2={(a - b) * 2}. {(a - b) * 2}-{c}={answer}. #### {answer}",
                    str(gold)))
    return out


def math_numbers(n: int, seed: int = 1) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"so the answer is \\boxed{{{k}/8}}", str(k / 8)) for k in (rng.randint(1, 64) for _ in range(n))]


def math_expressions(n: int, seed: int = 2) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for i in range(200):
        a, b = i % 9 + 1, i % 7 + 2
        pairs.append((f"\\boxed{{x^{b} + {a}x}}", f"{a}x + x^{b}" if i % 2 else f"x^{b} - {a}x"))
        pairs.append((f"\\boxed{{\\frac{{{a}}}{{\\sqrt{{{b}}}}}}}", f"\\frac{{{a}\\sqrt{{{b}}}}}{{{b}}}"))
    return [rng.choice(pairs) for _ in range(n)]


def rate(label: str, pairs: list[tuple[str, str]], fmt: str) -> None:
    t0 = time.perf_counter()
    correct = sum(grading.grade(text, gold, fmt).correct for text, gold in pairs)
    dt = time.perf_counter() - t0
    print(f"  {label:<24} {len(pairs):>7} attempts {dt:8.3f} s  {len(pairs) / dt:>10,.0f} attempts/s  "
          f"({correct} correct)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=18_000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    first = grading.grade("\\boxed{x^2 + 2x}", "2x + x^2", "math")
    print(f"  {'math, first grade':<24} {time.perf_counter() - t0:8.3f} s  (correct: {first.correct})")
    rate("number (demo)", demo_texts(args.n), "number")
    rate("math, numbers", math_numbers(args.n), "math")
    rate("math, expressions", math_expressions(min(args.n, 2000)), "math")


if __name__ == "__main__":
    main()
