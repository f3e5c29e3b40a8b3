"""pass@k against the closed form 1 - C(n-c,k)/C(n,k) (math.comb, exact rationals), and reachable@k."""

import math
from fractions import Fraction

import pytest

from reachtui.probes.passk import (
    first_hit,
    mean_pass_at_k,
    pass_at_k,
    pass_at_k_curve,
    reachable_at_k,
    reachable_curve,
)


def closed_form(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def test_pass_at_k_matches_closed_form_for_many_cases():
    checked = 0
    for n in range(1, 41):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(closed_form(n, c, k), abs=1e-12), (n, c, k)
                checked += 1
    assert checked > 10_000


def test_pass_at_k_large_n_is_stable():
    # C(1000, 500) overflows a float; the product form does not.
    for c in (0, 1, 10, 300, 999, 1000):
        for k in (1, 16, 500):
            assert pass_at_k(1000, c, k) == pytest.approx(closed_form(1000, c, k), abs=1e-12)


def test_edge_cases():
    assert math.isnan(pass_at_k(3, 1, 4))
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(16, 1, 16) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 0)


def test_mean_and_curve():
    counts = [(4, 0), (4, 1), (4, 4)]
    assert mean_pass_at_k(counts, 1) == pytest.approx((0 + 0.25 + 1) / 3)
    curve = pass_at_k_curve(counts)
    assert len(curve) == 4
    assert curve[-1] == pytest.approx(2 / 3)
    assert all(a <= b + 1e-12 for a, b in zip(curve, curve[1:]))
    assert math.isnan(mean_pass_at_k([], 1))
    assert math.isnan(mean_pass_at_k([(2, 1)], 3))


def test_reachable_at_k_from_first_hits():
    hits = [0, 3, None, 1]
    assert reachable_at_k(hits, 1) == 0.25
    assert reachable_at_k(hits, 2) == 0.5
    assert reachable_at_k(hits, 4) == 0.75
    assert reachable_curve(hits, 4) == [0.25, 0.5, 0.5, 0.75]
    assert first_hit([False, False, True, True]) == 2
    assert first_hit([False]) is None
