"""Unbiased pass@k and reachable@k (pure Python).

pass@k (Chen et al. 2021): with n attempts of which c are correct, the probability that a random subset of
k attempts holds at least one correct one: 1 - C(n-c, k) / C(n, k). Computed as a product, never with the
huge binomials: 1 - prod_{i=n-c+1}^{n} (1 - k / i), and 1.0 when n - c < k. NaN when n < k (too few
attempts to say), as Inspect AI does.

reachable@k is the ordered version, for probes whose attempts come in a fixed order (routes, MCTS): the
share of questions whose first correct attempt has index < k (0-based attempt indices).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimate for one question: n attempts, c correct, subset size k."""
    if n < 0 or c < 0 or k < 1 or c > n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and k >= 1 (got n={n}, c={c}, k={k})")
    if n < k:
        return math.nan
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass@k over questions given (n, c) per question; NaN if no question or any has n < k."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        return math.nan
    return math.fsum(values) / len(values)


def pass_at_k_curve(counts: Sequence[tuple[int, int]], max_k: int | None = None) -> list[float]:
    """[mean pass@1, ..., mean pass@K] with K = max_k or the smallest n over questions."""
    counts = list(counts)
    if not counts:
        return []
    if max_k is None:
        max_k = min(n for n, _ in counts)
    return [mean_pass_at_k(counts, k) for k in range(1, max_k + 1)]


def reachable_at_k(first_hits: Sequence[int | None], k: int) -> float:
    """Share of questions whose first correct attempt index (0-based; None = never) is < k."""
    if not first_hits:
        return math.nan
    return sum(1 for h in first_hits if h is not None and h < k) / len(first_hits)


def reachable_curve(first_hits: Sequence[int | None], max_k: int) -> list[float]:
    """[reachable@1, ..., reachable@max_k] from first-hit indices."""
    return [reachable_at_k(first_hits, k) for k in range(1, max_k + 1)]


def first_hit(correct: Sequence[bool]) -> int | None:
    """Index of the first True in attempt order, None if there is none."""
    for i, ok in enumerate(correct):
        if ok:
            return i
    return None
