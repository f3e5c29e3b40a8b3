"""Budget curves, defined once: unbiased pass@k and reachable@k (pure Python).

pass@k (Chen et al. 2021): with n attempts of which c are correct, the probability that a random subset of
k attempts holds at least one correct one: 1 - C(n-c, k) / C(n, k). Computed as a product, never with the
huge binomials: 1 - prod_{i=n-c+1}^{n} (1 - k / i), and 1.0 when n - c < k. NaN when n < k (too few
attempts to say), as Inspect AI does. For probes whose attempts are exchangeable (sample).

reachable@k: for probes whose attempts come in a fixed order (routes, MCTS; `registry.Probe.ordered`),
the share of questions whose first hit (1-based k, `reachtui.outcomes.first_hit`) is at most k.

Both are computed from per-question outcome groups (n, c, first_hit, questions with that outcome), which
SQL counts; the same function gives a probe's curve and its chance control's curve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: (n attempts, c correct, first hit k or None, number of questions with exactly this outcome)
Group = tuple[int, int, "int | None", int]


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


def curve_points(ordered: bool, groups: Sequence[Group]) -> list[tuple[int, float, int]]:
    """[(k, value, questions counted)] for k = 1..max n. A question counts at k when it has at least k
    attempts, or (ordered) a first hit at or before k. pass@k (not ordered): the mean of the per-question
    estimator; reachable@k (ordered): the share of counted questions whose first hit is <= k."""
    points = []
    for k in range(1, max((n for n, *_ in groups), default=0) + 1):
        total, counted = 0.0, 0
        for n, c, first, count in groups:
            if ordered:
                if first is not None and first <= k:
                    total += count
                    counted += count
                elif n >= k:
                    counted += count
            elif n >= k:
                total += count * pass_at_k(n, c, k)
                counted += count
        points.append((k, total / counted if counted else math.nan, counted))
    return points


def budget_curve(points: Sequence[tuple[int, float, int]], ordered: bool, budget: int, n: int) -> list[float]:
    """The curve for k = 1..budget as a summary reports it: reachable@k as counted; pass@k only where every
    one of the run's `n` questions counts (NaN elsewhere)."""
    if ordered:
        return [v for k, v, _c in points if k <= budget]
    return [v if c == n else math.nan for k, v, c in points if k <= budget]
