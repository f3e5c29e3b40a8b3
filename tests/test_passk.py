"""pass@k against the closed form 1 - C(n-c,k)/C(n,k) (math.comb, exact rationals), and reachable@k."""

import math
from fractions import Fraction

import pytest

from reachtui.curves import budget_curve, curve_points, mean_pass_at_k, pass_at_k


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


def test_mean_and_pass_at_k_curve():
    counts = [(4, 0), (4, 1), (4, 4)]
    assert mean_pass_at_k(counts, 1) == pytest.approx((0 + 0.25 + 1) / 3)
    points = curve_points(False, [(n, c, None, 1) for n, c in counts])
    assert [k for k, _v, _c in points] == [1, 2, 3, 4] and all(c == 3 for _k, _v, c in points)
    curve = [v for _k, v, _c in points]
    assert curve[0] == pytest.approx((0 + 0.25 + 1) / 3)
    assert curve[-1] == pytest.approx(2 / 3)
    assert all(a <= b + 1e-12 for a, b in zip(curve, curve[1:]))
    assert math.isnan(mean_pass_at_k([], 1))
    assert math.isnan(mean_pass_at_k([(2, 1)], 3))
    # a question with fewer attempts than k is left out at that k; the summary then reports NaN there
    points = curve_points(False, [(4, 1, 2, 1), (2, 0, None, 1)])
    assert [c for _k, _v, c in points] == [2, 2, 1, 1]
    summary = budget_curve(points, False, 4, 2)
    assert summary[:2] == [v for _k, v, _c in points[:2]] and all(math.isnan(v) for v in summary[2:])


def test_reachable_at_k_from_first_hits():
    # first hits (1-based k): 1, 4, never, 2; four attempts each
    groups = [(4, 1, 1, 1), (4, 1, 4, 1), (4, 0, None, 1), (4, 2, 2, 1)]
    assert [v for _k, v, _c in curve_points(True, groups)] == [0.25, 0.5, 0.5, 0.75]
    # a hit at k = 1 counts at every k; a question with 2 attempts and no hit only up to k = 2
    points = curve_points(True, [(1, 1, 1, 1), (2, 0, None, 1)])
    assert points == [(1, 0.5, 2), (2, 0.5, 2)]
    assert budget_curve(points, True, 2, 2) == [0.5, 0.5]
