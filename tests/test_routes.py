"""Routes: text form, validation messages, the seeded sampler and its action space (pure Python)."""

import random
import subprocess
import sys

import pytest

from reachtui.errors import ReachError
from reachtui.routes import (
    Action,
    Route,
    apply_action,
    format_route,
    identity,
    legal_actions,
    length_bounds,
    parse_route,
    parse_silenced,
    sample_route,
    sample_routes,
    validate_route,
)


def test_parse_and_format_round_trip():
    r = parse_route("0-3,3,5-11", 12)
    assert r.layers == (0, 1, 2, 3, 3, 5, 6, 7, 8, 9, 10, 11)
    assert len(r) == 12
    assert str(r) == format_route(r) == "0-3,3,5-11"
    assert parse_route(" 0 - 2 , 2,  3 ", 4).layers == (0, 1, 2, 2, 3)
    assert str(identity(8)) == "0-7"
    assert format_route((1, 2, 0)) == "1-2,0"
    assert format_route((5,)) == "5"
    for text in ["0-7", "1-7", "0-3,3-7", "0,2,4,6-7", "0-2,1-7"]:
        assert str(parse_route(text, 8)) == text
    assert parse_route("0-3,3,4-7", 8) == parse_route("0-3,3-7", 8)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("3-1", "descending range 3-1"),
        ("3-1,99", "descending range 3-1"),
        ("0-3,99", "layer 99 is out of range"),
        ("0-12", "layer 12 is out of range"),
        ("a,b", "'a' is not a layer index"),
        ("1,,2", "empty item"),
        ("-1", "is not a layer index"),
        ("0,0,0,1", "layer 0 appears 3 times"),
    ],
)
def test_parse_errors_are_clear(text, fragment):
    with pytest.raises(ReachError) as err:
        parse_route(text, 12)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_length_bounds_and_repeat_limit():
    with pytest.raises(ReachError, match="below the minimum 3"):
        parse_route("0,1", 8, min_len=3)
    with pytest.raises(ReachError, match="above the maximum 4"):
        parse_route("0-4", 8, max_len=4)
    assert parse_route("0,0,0", 2, max_repeat=3).layers == (0, 0, 0)
    with pytest.raises(ReachError, match="empty route"):
        validate_route((), 4)
    with pytest.raises(ReachError, match="out of range"):
        validate_route((0, 4), 4)


def test_parse_silenced():
    assert parse_silenced("3,5", 8) == frozenset({3, 5})
    assert parse_silenced("2-4", 8) == frozenset({2, 3, 4})
    assert parse_silenced("", 8) == frozenset() == parse_silenced(None, 8) == parse_silenced("none", 8)
    with pytest.raises(ReachError, match="out of range"):
        parse_silenced("9", 8)


def test_actions():
    ident = identity(8)
    assert apply_action(ident, Action("skip", 2, 2)).layers == (0, 1, 4, 5, 6, 7)
    assert apply_action(ident, Action("repeat", 2, 2)).layers == (0, 1, 2, 3, 2, 3, 4, 5, 6, 7)
    acts = legal_actions(ident, 8)
    lo, hi = length_bounds(8)
    assert (lo, hi) == (5, 9)
    # skips never drop layer 0 or 7; repeats only up to length 9 (one layer)
    assert all(not (a.kind == "skip" and (a.start == 0 or a.start + a.size == 8)) for a in acts)
    assert all(a.size == 1 for a in acts if a.kind == "repeat")
    assert all(a.size <= 3 for a in acts if a.kind == "skip")  # length >= 5
    for a in acts:
        r = apply_action(ident, a)
        assert lo <= len(r) <= hi and 0 in r.layers and 7 in r.layers
    loose = legal_actions(ident, 8, {"keep_first": False, "keep_last": False})
    assert any(a.kind == "skip" and a.start == 0 for a in loose)


def _check_route(r: Route, n: int, params=None):
    lo, hi = length_bounds(n, params)
    assert lo <= len(r) <= hi
    assert r.layers[0] == 0 and r.layers[-1] == n - 1 or (0 in r.layers and n - 1 in r.layers)
    assert max(r.layers.count(x) for x in set(r.layers)) <= 2
    validate_route(r, n)


def test_sampler_is_seeded_and_legal():
    a = sample_routes(12, 32, seed=7)
    b = sample_routes(12, 32, seed=7)
    c = sample_routes(12, 32, seed=8)
    assert a == b and a != c
    assert len(a) == 32 and len(set(a)) == 32
    assert identity(12) not in a
    for r in a:
        _check_route(r, 12)
    # both kinds of action show up, and composed routes (more than one action) too
    lengths = {len(r) for r in sample_routes(12, 200, seed=1)}
    assert min(lengths) < 12 < max(lengths)


def test_sampler_respects_params():
    class P:
        min_frac, max_frac, min_actions, max_actions, max_block, max_repeat = 0.9, 1.0, 1, 1, 1, 2
        keep_first, keep_last = True, True

    for r in sample_routes(10, 20, seed=3, params=P()):
        assert len(r) == 9  # one skip of one layer, never a repeat (max 1.0 L)
        assert r.layers[0] == 0 and r.layers[-1] == 9
    rng = random.Random(0)
    assert len(sample_route(10, rng, P())) == 9


def test_sampler_tiny_models():
    assert sample_routes(2, 4, seed=0) == []          # no legal action within [2, 2]
    rs = sample_routes(3, 10, seed=0)                  # few distinct routes: filled with repeats
    assert len(rs) == 10 and identity(3) not in rs


def test_routes_module_is_pure_python():
    code = "import sys, reachtui.model, reachtui.routes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_legal_actions_are_the_first_implementation_s_in_its_order():
    """`legal_actions` lists each start's blocks growing (O(positions x max_block)); the sampler draws by
    position in the list, so it must be the first implementation's list exactly, or every stored routes run
    would draw other routes."""
    import random

    import reference
    from reachtui.protocol import RouteSamplerParams

    rng = random.Random(7)
    for _ in range(300):
        L = rng.randint(1, 14)
        params = RouteSamplerParams(min_frac=rng.choice([0.3, 0.6, 1.0]), max_frac=rng.choice([1.0, 1.2, 2.0]),
                                    max_block=rng.randint(1, 6), max_repeat=rng.randint(1, 3),
                                    keep_first=rng.random() < 0.7, keep_last=rng.random() < 0.7)
        route = sample_route(L, rng, params)
        assert legal_actions(route, L, params) == reference.legal_actions(route, L, params), (route, params)


def test_the_largest_route_sampler_settings_draw_in_bounded_time():
    """The protocol's ROUTE_LIMITS (every field at its largest) on an 80-layer model: 16 routes in seconds,
    not the hang unbounded settings gave."""
    import time

    from reachtui.protocol import ROUTE_LIMITS, RouteSamplerParams

    params = RouteSamplerParams(min_frac=0.6, min_actions=1, **{k: v for k, (v, _why) in ROUTE_LIMITS.items()})
    t0 = time.monotonic()
    routes = sample_routes(80, 16, 0, params)
    assert len(routes) == 16 and time.monotonic() - t0 < 10
    assert max(len(r) for r in routes) <= 80 * ROUTE_LIMITS["max_frac"][0]
