"""Interval estimates and chance baselines for the tables (pure stdlib: `math` and `random`, no numpy).

Every interval is a two-sided 95% interval (`LEVEL`) and comes back as a pair (lo, hi), NaN where it
cannot be computed (no questions, or too few bootstrap replicates where the statistic is defined).

- `wilson(x, n)`: the Wilson score interval for one proportion x/n (realized, reachable, control,
  robust reachable, a point of a budget curve). Unlike the normal (Wald) interval it never leaves
  [0, 1] and is not degenerate at 0/n or n/n: wilson(0, 10) = (0, 0.278), wilson(5, 10) = (0.237, 0.763).
- `chance_at_k(m, k)`: the closed-form chance that k blind guesses among m equally likely options hit
  at least once, 1 - (1 - 1/m)^k (CoLa's 95.8-98.2% "oracle accuracy" on 4-way ARC is 1 - 0.75^K).
- `bootstrap_means(vectors, stats, B, seed)`: the seeded percentile bootstrap over questions for
  statistics that are functions of per-question means (gap = reachable - realized, retained =
  (blind - realized) / (reachable - realized), excess = reachable - control, and the paired Δs of a
  comparison). Each question is a vector of numbers (its outcomes); a replicate resamples the n
  questions with replacement and evaluates every statistic on the replicate's mean vector; the interval
  is the 2.5% and 97.5% quantiles of the B replicate values (`quantile`, linear interpolation between
  order statistics, numpy's default "type 7").

  Questions with equal vectors are interchangeable, so a replicate is drawn as multinomial counts over
  the distinct vectors (conditional binomials, `binomial`), which has exactly the distribution of n
  draws with replacement but costs O(distinct vectors) instead of O(n): a 10,000-question run with a
  handful of outcome patterns bootstraps 1,000 replicates in a few milliseconds.
  Replicates where a statistic is undefined (NaN: retained when a replicate has reachable = realized)
  are left out of that statistic's quantiles; if fewer than half are defined, its interval is NaN.
  The replicates depend only on the seed and the data (never on Python's hash seed or the run id), so an
  export repeats exactly.
- `paired_bootstrap_delta(pairs, B, seed)`: the same for the mean difference b - a of paired outcomes
  (question-level: run A's and run B's result on the same question), beside McNemar's test.
- `mcnemar_exact(gained, lost)`: the two-sided exact McNemar test of paired transitions.
- `frac`, `diff`, `ratio`: a share, a difference and a ratio that are NaN where a part is missing
  (`is_missing`: None or NaN) instead of raising.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

LEVEL = 0.95
Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal
DEFAULT_BOOTSTRAP = 1000  # replicates
MIN_DEFINED = 0.5  # share of replicates where a statistic must be defined for its interval to be given

NAN_PAIR = (math.nan, math.nan)


# ------------------------------------------------------------------------------------------------
# Missing values, shares, differences, ratios
# ------------------------------------------------------------------------------------------------


def is_missing(v: Any) -> bool:
    """None or NaN: a number that is not known (written "–" for people, empty or null in data)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def frac(num: Any, den: Any) -> float:
    """num / den as a share; NaN when num is None or den is 0 or None."""
    if num is None or not den:
        return math.nan
    return num / den


def diff(a: float, b: float) -> float:
    """a - b, NaN when either is missing."""
    if is_missing(a) or is_missing(b):
        return math.nan
    return a - b


def ratio(num: float | None, den: float | None) -> float:
    """num / den, NaN when either is missing or den is 0."""
    if is_missing(num) or is_missing(den) or den == 0:
        return math.nan
    return num / den


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar test: binomial test of the discordant pairs against p = 1/2.

    p = min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c)); 1.0 when there are no discordant pairs.
    """
    if gained < 0 or lost < 0:
        raise ValueError("counts must be non-negative")
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1))
    p = Fraction(2 * tail, 2**n)
    return float(min(Fraction(1), p))


def _z(level: float) -> float:
    if level == LEVEL:
        return Z95
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(x: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval for the proportion x/n; (nan, nan) when n is 0 or missing."""
    if n is None or x is None or n <= 0 or (isinstance(x, float) and math.isnan(x)):
        return NAN_PAIR
    z = _z(level)
    p = x / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p) / n + z2 / (4 * n * n), 0.0)) / denom
    lo, hi = centre - half, centre + half
    # exact ends where the data sit on a boundary (rounding would leave 1e-17 instead of 0)
    return (0.0 if x <= 0 else max(0.0, lo), 1.0 if x >= n else min(1.0, hi))


def chance_at_k(m: int | None, k: int | None) -> float | None:
    """1 - (1 - 1/m)^k: the chance that k independent uniform guesses among m options hit the gold at
    least once; None when the format has no fixed number of options (m unknown) or k is unknown."""
    if m is None or k is None or m < 1 or k < 0:
        return None
    return 1.0 - (1.0 - 1.0 / m) ** k


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of already sorted values, interpolating linearly between order statistics
    (numpy's default): position q·(n-1). NaN for an empty sequence."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


# ------------------------------------------------------------------------------------------------
# Exact binomial and multinomial draws (Python 3.11 has no random.binomialvariate)
# ------------------------------------------------------------------------------------------------


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One draw from Binomial(n, p), exact. Small means: waiting times between successes (geometric
    jumps); otherwise Hörmann's BTRS transformed rejection with squeeze (1993), O(1) per draw."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        log_q = math.log1p(-p)
        x = y = 0
        while True:
            y += math.floor(math.log(1.0 - rng.random()) / log_q) + 1
            if y > n:
                return x
            x += 1
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / (1.0 - p))
    mode = math.floor((n + 1) * p)
    h = math.lgamma(mode + 1) + math.lgamma(n - mode + 1)
    while True:
        u = rng.random() - 0.5
        v = rng.random()
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = v * alpha / (a / (us * us) + b)
        if v > 0 and math.log(v) <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - mode) * lpq:
            return k


def multinomial(rng: random.Random, n: int, weights: Sequence[float]) -> list[int]:
    """One draw of counts for n items over categories with the given (unnormalised) weights, as
    conditional binomials: count_i ~ Binomial(n left, w_i / weight left)."""
    out = []
    left, rest = n, float(sum(weights))
    for w in weights[:-1]:
        if left <= 0 or rest <= 0:
            out.append(0)
            continue
        k = binomial(rng, left, min(1.0, w / rest))
        out.append(k)
        left -= k
        rest -= w
    if weights:
        out.append(max(left, 0))
    return out


# ------------------------------------------------------------------------------------------------
# The bootstrap over questions
# ------------------------------------------------------------------------------------------------

Stat = Callable[[Sequence[float]], float]


def bootstrap_replicates(vectors: Mapping[tuple, int] | Iterable[tuple], stats: Sequence[Stat], *,
                         B: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> list[list[float]]:
    """For each statistic, its B replicate values (unsorted, NaN kept). `vectors` is one tuple of
    numbers per question (or a {vector: count} mapping); a statistic maps the mean vector of a
    replicate to a number."""
    counts = vectors if isinstance(vectors, Mapping) else Counter(tuple(v) for v in vectors)
    # the distinct vectors in sorted order: the replicates depend on the multiset of questions only,
    # not on the order they were counted in
    merged: dict[tuple[float, ...], int] = {}
    for k, c in counts.items():
        key = tuple(float(x) for x in k)
        merged[key] = merged.get(key, 0) + int(c)
    items = sorted((k, c) for k, c in merged.items() if c > 0)
    keys = [k for k, _c in items]
    weights = [float(c) for _k, c in items]
    n = sum(c for _k, c in items)
    out: list[list[float]] = [[] for _ in stats]
    if n == 0 or not keys or B <= 0:
        return out
    dim = len(keys[0])
    rng = random.Random(seed)
    for _ in range(B):
        draw = multinomial(rng, n, weights) if len(keys) > 1 else [n]
        means = [0.0] * dim
        for key, cnt in zip(keys, draw):
            if cnt:
                for d in range(dim):
                    means[d] += cnt * key[d]
        means = [m / n for m in means]
        for i, fn in enumerate(stats):
            try:
                value = fn(means)
            except ZeroDivisionError:
                value = math.nan
            out[i].append(value)
    return out


def percentile_interval(values: Iterable[float], level: float = LEVEL) -> tuple[float, float]:
    """The central `level` percentile interval of replicate values; NaN ones are left out, and when
    fewer than half of them are defined the interval is (nan, nan)."""
    values = list(values)
    defined = sorted(v for v in values if v is not None and not math.isnan(v))
    if not values or len(defined) < MIN_DEFINED * len(values):
        return NAN_PAIR
    alpha = (1.0 - level) / 2
    return quantile(defined, alpha), quantile(defined, 1.0 - alpha)


def bootstrap_means(vectors: Mapping[tuple, int] | Iterable[tuple], stats: Sequence[Stat], *,
                    B: int = DEFAULT_BOOTSTRAP, seed: int = 0, level: float = LEVEL) -> list[tuple[float, float]]:
    """Percentile intervals, one per statistic, from the seeded bootstrap over questions (see the module
    docstring). B = 0 gives (nan, nan) for each."""
    if B <= 0:
        return [NAN_PAIR for _ in stats]
    reps = bootstrap_replicates(vectors, stats, B=B, seed=seed)
    return [percentile_interval(r, level) for r in reps]


def paired_bootstrap_delta(pairs: Mapping[tuple, int] | Iterable[tuple[float, float]], *, B: int = DEFAULT_BOOTSTRAP,
                           seed: int = 0, level: float = LEVEL) -> tuple[float, float]:
    """The paired bootstrap interval for mean(b) - mean(a) over (a, b) pairs (one pair per question,
    both runs' outcomes on it, or a {pair: questions} mapping): questions are resampled, each keeping
    its pair."""
    return bootstrap_means(pairs, [lambda m: m[1] - m[0]], B=B, seed=seed, level=level)[0]


def ratio_or_nan(num: float, den: float) -> float:
    return num / den if den else math.nan
