"""Budget curves, defined once: unbiased pass@k and reachable@k (pure Python).

pass@k (Chen et al. 2021): with n attempts of which c are correct, the probability that a random subset of
k attempts holds at least one correct one: 1 - C(n-c, k) / C(n, k). Computed as a product, never with the
huge binomials: 1 - prod_{j=0}^{k-1} (n - c - j) / (n - j), and 1.0 when n - c < k; every k of a question
in one pass. NaN when n < k (too few
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
    return pass_at_every_k(n, c, upto=k)[-1]


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass@k over questions given (n, c) per question; NaN if no question or any has n < k."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        return math.nan
    return math.fsum(values) / len(values)


def pass_at_every_k(n: int, c: int, upto: int | None = None) -> list[float]:
    """[pass@k for k = 1..n (or ..upto)] of one question, in O(n): the miss ratio C(n-c, k) / C(n, k) is
    carried from k - 1 to k by one factor (n - c - k + 1) / (n - k + 1), and is 0 once k > n - c."""
    out, miss = [], 1.0
    for k in range(1, (n if upto is None else upto) + 1):
        miss = miss * (n - c - k + 1) / (n - k + 1) if n - c >= k else 0.0
        out.append(1.0 - miss)
    return out


def curve_points(ordered: bool, groups: Sequence[Group]) -> list[tuple[int, float, int]]:
    """[(k, value, questions counted)] for k = 1..max n. A question counts at k when it has at least k
    attempts, or (ordered) a first hit at or before k. pass@k (not ordered): the mean of the per-question
    estimator; reachable@k (ordered): the share of counted questions whose first hit is <= k. One pass per
    outcome group, so a budget of 1024 costs 1024 steps per distinct (n, c), not per k."""
    top = max((n for n, *_ in groups), default=0)
    total, counted = [0.0] * (top + 1), [0] * (top + 1)
    for n, c, first, count in groups:
        if ordered:
            reach = top if first is not None else n      # counted up to n, or from the first hit on, always
            for k in range(1, reach + 1):
                counted[k] += count
                if first is not None and first <= k:
                    total[k] += count
        else:
            for k, value in enumerate(pass_at_every_k(n, c), start=1):
                total[k] += count * value
                counted[k] += count
    return [(k, total[k] / counted[k] if counted[k] else math.nan, counted[k]) for k in range(1, top + 1)]


def budget_curve(points: Sequence[tuple[int, float, int]], ordered: bool, budget: int, n: int) -> list[float]:
    """The curve for k = 1..budget as a summary reports it: reachable@k as counted; pass@k only where every
    one of the run's `n` questions counts (NaN elsewhere)."""
    if ordered:
        return [v for k, v, _c in points if k <= budget]
    return [v if c == n else math.nan for k, v, c in points if k <= budget]
