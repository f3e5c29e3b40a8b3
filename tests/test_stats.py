"""reachtui.stats: Wilson, the closed-form chance baseline, quantiles, exact binomial draws and the seeded
bootstrap, against hand-computed values."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter

import pytest

from reachtui import stats


def test_wilson_against_hand_computed_values():
    # p = x/n, centre = (p + z²/2n) / (1 + z²/n), half = z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)
    z = 1.959963984540054
    lo, hi = stats.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx((z * z / 10) / (1 + z * z / 10))  # 0.27753
    assert hi == pytest.approx(0.2775328, abs=1e-7)
    assert stats.wilson(5, 10) == pytest.approx((0.2365931, 0.7634069), abs=1e-7)
    assert stats.wilson(10, 10) == pytest.approx((0.7224672, 1.0), abs=1e-7)
    assert stats.wilson(10, 10)[1] == 1.0
    assert stats.wilson(1, 40) == pytest.approx((0.0044268, 0.1288137), abs=1e-7)
    # 80.5% of 200 questions: centre = (0.805 + 0.0096037) / 1.0192074 = 0.799252,
    # half = 1.96 * sqrt(0.000784875 + 0.0000240092) / 1.0192074 = 0.054692
    lo, hi = stats.wilson(161, 200)
    assert (lo, hi) == pytest.approx((0.744560, 0.853944), abs=2e-6)
    assert all(math.isnan(v) for v in stats.wilson(0, 0))
    # symmetric: the interval of x/n mirrors that of (n-x)/n
    a, b = stats.wilson(3, 17), stats.wilson(14, 17)
    assert a[0] == pytest.approx(1 - b[1]) and a[1] == pytest.approx(1 - b[0])


def test_closed_form_chance():
    assert stats.chance_at_k(4, 1) == 0.25
    assert stats.chance_at_k(4, 2) == pytest.approx(1 - 0.75**2) == pytest.approx(0.4375)
    assert stats.chance_at_k(4, 16) == pytest.approx(0.98997740, abs=1e-8)  # CoLa's "oracle accuracy" regime
    assert stats.chance_at_k(2, 3) == pytest.approx(0.875)
    assert stats.chance_at_k(26, 0) == 0.0
    assert stats.chance_at_k(None, 16) is None and stats.chance_at_k(4, None) is None


def test_quantile_is_linear_interpolation():
    assert stats.quantile([1, 2, 3, 4], 0.25) == pytest.approx(1.75)
    assert stats.quantile([1, 2, 3, 4], 0.5) == pytest.approx(2.5)
    assert stats.quantile([1, 2, 3, 4], 0.0) == 1 and stats.quantile([1, 2, 3, 4], 1.0) == 4
    assert stats.quantile([7], 0.975) == 7
    assert math.isnan(stats.quantile([], 0.5))
    vals = sorted(range(1001))
    assert stats.quantile(vals, 0.025) == pytest.approx(25.0) and stats.quantile(vals, 0.975) == pytest.approx(975.0)


def test_bootstrap_draws_resample_the_questions():
    """A replicate is n draws with replacement: its counts over the distinct vectors are multinomial, so
    the replicate mean of a 0/1 dimension with share p has mean p and variance p(1 - p)/n."""
    vectors = {(1.0,): 30, (0.0,): 70}
    reps = stats.bootstrap_replicates(vectors, [lambda m: m[0]], B=20000, seed=4)[0]
    assert len(reps) == 20000 and all(0.0 <= r <= 1.0 for r in reps)
    assert statistics.fmean(reps) == pytest.approx(0.3, abs=0.002)
    assert statistics.pvariance(reps) == pytest.approx(0.3 * 0.7 / 100, rel=0.05)
    assert all(abs(r * 100 - round(r * 100)) < 1e-9 for r in reps)  # whole questions


def test_bootstrap_against_the_exact_bootstrap_distribution():
    """Two questions, gaps 1 and 0: resampling 2 with replacement gives mean gap 0, 1/2, 1 with
    probabilities 1/4, 1/2, 1/4, so the 95% percentile interval is [0, 1]."""
    vectors = [(0, 1), (0, 0)]  # (realized, reachable) per question
    gap = lambda m: m[1] - m[0]  # noqa: E731
    reps = stats.bootstrap_replicates(vectors, [gap], B=8000, seed=5)[0]
    share = Counter(reps)
    assert set(share) == {0.0, 0.5, 1.0}
    assert share[0.5] / 8000 == pytest.approx(0.5, abs=0.02)
    assert share[0.0] / 8000 == pytest.approx(0.25, abs=0.02)
    assert stats.bootstrap_means(vectors, [gap], B=8000, seed=5) == [(0.0, 1.0)]


def test_bootstrap_percentiles_against_a_hand_computed_case():
    """Ten questions, three with gap 1: the bootstrap mean is Binomial(10, 0.3)/10. Its 2.5% and 97.5%
    quantiles (of the exact distribution) are 0.0 and 0.6; with many replicates the interval lands there."""
    vectors = {(0.0, 1.0): 3, (0.0, 0.0): 7}
    (lo, hi), = stats.bootstrap_means(vectors, [lambda m: m[1] - m[0]], B=20000, seed=1)
    assert lo == pytest.approx(0.0, abs=1e-9)
    assert hi == pytest.approx(0.6, abs=1e-9)
    # the exact distribution: P(X <= 0) = 0.7^10 = 0.028 > 0.025, P(X <= 5) = 0.9527 < 0.975 <= P(X <= 6) = 0.9894
    assert sum(math.comb(10, k) * 0.3**k * 0.7 ** (10 - k) for k in range(6)) < 0.975


def test_bootstrap_degenerate_and_undefined_cases():
    # every question alike: the interval is the point
    assert stats.bootstrap_means({(1.0, 1.0, 0.0): 50}, [lambda m: m[0] - m[2]], B=200) == [(1.0, 1.0)]
    # retained = (blind - realized) / (reachable - realized) is undefined when reachable = realized everywhere
    retained = lambda m: stats.ratio_or_nan(m[2] - m[0], m[1] - m[0])  # noqa: E731
    lo, hi = stats.bootstrap_means({(1.0, 1.0, 1.0): 10, (0.0, 0.0, 0.0): 10}, [retained], B=200)[0]
    assert math.isnan(lo) and math.isnan(hi)
    # B = 0 turns the bootstrap off; no questions give no interval
    assert all(math.isnan(v) for v in stats.bootstrap_means({(1.0,): 5}, [lambda m: m[0]], B=0)[0])
    assert all(math.isnan(v) for v in stats.bootstrap_means({}, [lambda m: m[0]], B=100)[0])


def test_bootstrap_is_seeded_and_ignores_counting_order():
    a = {(0, 1, 1): 30, (1, 1, 0): 20, (0, 0, 0): 50}
    b = dict(reversed(list(a.items())))
    fn = [lambda m: m[1] - m[0], lambda m: m[2]]
    assert stats.bootstrap_means(a, fn, B=300, seed=9) == stats.bootstrap_means(b, fn, B=300, seed=9)
    rows = [k for k, c in a.items() for _ in range(c)]
    random.Random(0).shuffle(rows)
    assert stats.bootstrap_means(rows, fn, B=300, seed=9) == stats.bootstrap_means(a, fn, B=300, seed=9)
    assert stats.bootstrap_means(a, fn, B=300, seed=9) != stats.bootstrap_means(a, fn, B=300, seed=10)
    from reachtui.seeds import derive_seed

    assert derive_seed("summary", 0, "routes") == derive_seed("summary", 0, "routes") != \
        derive_seed("summary", 0, "sample")


def test_paired_bootstrap_delta():
    # every question gained (A wrong, B right): Δ = 1 in every replicate
    assert stats.paired_bootstrap_delta([(0, 1)] * 12, B=100) == (1.0, 1.0)
    # one gained and one lost of two questions: Δ replicate ∈ {-1, 0, 1} w.p. 1/4, 1/2, 1/4 -> [-1, 1]
    assert stats.paired_bootstrap_delta([(0, 1), (1, 0)], B=4000, seed=2) == (-1.0, 1.0)
    # pairing matters: 20 kept + 2 gained on 22 questions gives a narrow interval around +2/22, and never
    # below 0 (no question was lost), unlike two unpaired proportions
    lo, hi = stats.paired_bootstrap_delta([(1, 1)] * 20 + [(0, 1)] * 2, B=2000, seed=3)
    assert lo == 0.0 and 2 / 22 < hi <= 6 / 22
