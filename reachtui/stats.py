"""Interval estimates and chance baselines for the tables (`math`; numpy, imported when a bootstrap runs).

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
  the distinct vectors, which has exactly the distribution of n draws with replacement but costs
  O(distinct vectors) instead of O(n). All B replicates are drawn at once, a B x (distinct vectors)
  matrix of counts from numpy's seeded PCG64 Generator (`Generator.multinomial`), and their mean vectors
  are one matrix product; the statistics are evaluated on whole columns of replicates (numpy arrays), so
  a 10,000-question run bootstraps 1,000 replicates in about a millisecond.
  Replicates where a statistic is undefined (NaN: retained when a replicate has reachable = realized)
  are left out of that statistic's quantiles; if fewer than half are defined, its interval is NaN.
  The replicates depend only on the seed and the data (never on Python's hash seed, the run id or the
  order the questions were counted in), so an export repeats exactly.
- `paired_bootstrap_delta(pairs, B, seed)`: the same for the mean difference b - a of paired outcomes
  (question-level: run A's and run B's result on the same question), beside McNemar's test.
- `mcnemar_exact(gained, lost)`: the two-sided exact McNemar test of paired transitions.
- `frac`, `diff`, `ratio`: a share, a difference and a ratio that are NaN where a part is missing
  (`is_missing`: None or NaN) instead of raising.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

LEVEL = 0.95
Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal
DEFAULT_BOOTSTRAP = 1000  # replicates
#: The most bootstrap replicates asked for (--bootstrap, the API): more would run for hours, not add precision.
MAX_BOOTSTRAP = 100_000
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
    term = tail = 1  # C(n, 0); each next term from the last (exact integers, no C(n, i) from scratch)
    for i in range(min(gained, lost)):
        term = term * (n - i) // (i + 1)
        tail += term
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
# The bootstrap over questions
# ------------------------------------------------------------------------------------------------

#: A statistic of a replicate's mean vector `m`: m[d] is dimension d's mean in every replicate (a numpy
#: array of B values), and the statistic returns B values (an array, or a number for all of them). Use
#: `ratio_or_nan` for a ratio: it is NaN where the denominator is 0.
Stat = Callable[[Sequence[Any]], Any]


def bootstrap_replicates(vectors: Mapping[tuple, int] | Iterable[tuple], stats: Sequence[Stat], *,
                         B: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> list[list[float]]:
    """For each statistic, its B replicate values (unsorted, NaN kept). `vectors` is one tuple of
    numbers per question (or a {vector: count} mapping); a statistic maps the mean vector of a
    replicate to a number (all B replicates at once, see `Stat`)."""
    return [v.tolist() for v in _replicates(vectors, stats, B=B, seed=seed)]


def _replicates(vectors: Mapping[tuple, int] | Iterable[tuple], stats: Sequence[Stat], *, B: int,
                seed: int) -> list[Any]:
    import numpy as np

    counts = vectors if isinstance(vectors, Mapping) else Counter(tuple(v) for v in vectors)
    # the distinct vectors in sorted order: the replicates depend on the multiset of questions only,
    # not on the order they were counted in
    merged: dict[tuple[float, ...], int] = {}
    for k, c in counts.items():
        key = tuple(float(x) for x in k)
        merged[key] = merged.get(key, 0) + int(c)
    items = sorted((k, c) for k, c in merged.items() if c > 0)
    n = sum(c for _k, c in items)
    if n == 0 or B <= 0:
        return [np.empty(0) for _ in stats]
    keys = np.array([k for k, _c in items], dtype=float)                  # distinct vectors x dim
    weights = np.array([c for _k, c in items], dtype=float) / n
    draws = np.random.Generator(np.random.PCG64(seed)).multinomial(n, weights, size=B)  # B x distinct
    means = (draws @ keys / n).T                                            # dim x B
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for fn in stats:
            out.append(np.broadcast_to(np.asarray(fn(means), dtype=float), (B,)))
    return out


def percentile_interval(values: Iterable[float], level: float = LEVEL) -> tuple[float, float]:
    """The central `level` percentile interval of replicate values (numpy's default linear
    interpolation, as `quantile`); NaN ones are left out, and when fewer than half of them are defined
    the interval is (nan, nan)."""
    import numpy as np

    values = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    defined = values[~np.isnan(values)]
    if not values.size or defined.size < MIN_DEFINED * values.size:
        return NAN_PAIR
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(defined, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_means(vectors: Mapping[tuple, int] | Iterable[tuple], stats: Sequence[Stat], *,
                    B: int = DEFAULT_BOOTSTRAP, seed: int = 0, level: float = LEVEL) -> list[tuple[float, float]]:
    """Percentile intervals, one per statistic, from the seeded bootstrap over questions (see the module
    docstring). B = 0 gives (nan, nan) for each."""
    if B <= 0:
        return [NAN_PAIR for _ in stats]
    reps = _replicates(vectors, stats, B=B, seed=seed)
    return [percentile_interval(r, level) for r in reps]


def paired_bootstrap_delta(pairs: Mapping[tuple, int] | Iterable[tuple[float, float]], *, B: int = DEFAULT_BOOTSTRAP,
                           seed: int = 0, level: float = LEVEL) -> tuple[float, float]:
    """The paired bootstrap interval for mean(b) - mean(a) over (a, b) pairs (one pair per question,
    both runs' outcomes on it, or a {pair: questions} mapping): questions are resampled, each keeping
    its pair."""
    return bootstrap_means(pairs, [lambda m: m[1] - m[0]], B=B, seed=seed, level=level)[0]


def ratio_or_nan(num: Any, den: Any) -> Any:
    """num / den, NaN where den is 0: numbers, or numpy arrays of bootstrap replicates (`Stat`)."""
    if not hasattr(den, "shape"):
        return num / den if den else math.nan
    import numpy as np

    out = np.full(np.shape(den), math.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out
