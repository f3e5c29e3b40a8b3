"""The route MCTS as a pure search object: budget of distinct routes, validity, determinism, replay."""

import random
from types import SimpleNamespace

import pytest

from reachtui.probes.mcts import RouteRules, RouteSearch, max_children

SAMPLER = SimpleNamespace(min_frac=0.6, max_frac=1.2, max_block=4, max_repeat=2, keep_first=True,
                          keep_last=True)
MCTS = SimpleNamespace(c=2 ** 0.5, lam=5.0, p_random=0.1)


def make(L=8, K=16, seed=0):
    return RouteSearch(L, K, seed, mcts=MCTS, sampler=SAMPLER, route_factory=tuple)


def reward_fn(seed):
    """A deterministic, route-dependent fake reward (like 'correct under this route')."""
    def f(route):
        return 1.0 if random.Random(f"{seed}:{route}").random() < 0.15 else 0.0
    return f


def run(search, f):
    routes = []
    while (r := search.propose()) is not None:
        routes.append(r)
        search.observe(r, f(r))
    return routes


def test_root_actions_are_blocks_within_bounds():
    rules = RouteRules(8, SAMPLER)
    acts = rules.root_actions()
    assert (rules.min_len, rules.max_len) == (5, 9)
    # skips of 1..3 layers not touching layer 0 or 7: 6 + 5 + 4 = 15; repeats of 1 layer: 8.
    assert len(acts) == 23
    assert all(rules.valid(a) for a in acts)
    assert tuple(range(8)) not in acts
    assert (0, 1, 2, 2, 3, 4, 5, 6, 7) in acts and (0, 1, 5, 6, 7) in acts


@pytest.mark.parametrize("seed", range(5))
def test_budget_counts_distinct_routes(seed):
    s = make(seed=seed)
    routes = run(s, reward_fn(seed))
    assert len(routes) == 16
    assert len(set(routes)) == 16
    rules = RouteRules(8, SAMPLER)
    assert all(rules.valid(r) for r in routes)
    assert s.done and s.propose() is None


def test_search_goes_deeper_than_root_actions():
    s = make(K=16, seed=3)
    routes = run(s, lambda r: 0.0)
    root = set(RouteRules(8, SAMPLER).root_actions())
    assert any(r not in root for r in routes)        # refinements of root actions were proposed
    assert sum(r in root for r in routes) <= 10       # progressive widening keeps the root narrow


def test_deterministic_given_seed_and_rewards():
    f = reward_fn(7)
    a = run(make(seed=11), f)
    b = run(make(seed=11), f)
    c = run(make(seed=12), f)
    assert a == b
    assert a != c


@pytest.mark.parametrize("cut", [0, 1, 5, 15])
def test_replay_then_continue_equals_uninterrupted(cut):
    f = reward_fn(2)
    full = make(seed=5)
    routes = run(full, f)
    resumed = make(seed=5)
    for r in routes[:cut]:
        assert resumed.propose() == r
        resumed.observe(r, f(r))
    assert routes[:cut] + run(resumed, f) == routes


def test_first_hit_and_best_index():
    s = make(seed=1)
    rewards = iter([0, 0, 0, 1, 0, 1] + [0] * 10)
    while (r := s.propose()) is not None:
        s.observe(r, next(rewards))
    assert s.first_hit() == 3
    blind = make(seed=1)
    lps = iter([-0.5, -0.2, -0.9, -0.2] + [-1.0] * 12)
    while (r := blind.propose()) is not None:
        blind.observe(r, next(lps))
    assert blind.best_index() == 1


def test_small_space_is_exhausted_without_repeats():
    s = RouteSearch(3, 10, 0, mcts=MCTS, sampler=SAMPLER, route_factory=tuple)
    routes = run(s, lambda r: 0.0)
    assert sorted(routes) == sorted([(0, 2), (0, 0, 2), (0, 2, 2)])
    assert s.exhausted
    assert RouteSearch(2, 4, 0, mcts=MCTS, sampler=SAMPLER, route_factory=tuple).propose() is None


def test_observe_must_match_pending():
    s = make()
    r = s.propose()
    assert s.propose() == r          # idempotent until observed
    with pytest.raises(ValueError):
        s.observe((0, 7), 1.0)
    s.observe(r, 1.0)


def test_max_children_widening():
    assert [max_children(n) for n in (0, 1, 4, 9, 16)] == [1, 3, 5, 7, 9]
    assert [max_children(n, 1.0) for n in (0, 1, 4, 9, 16)] == [1, 2, 3, 4, 5]
    assert max_children(100, 0.0) == float("inf")


def test_widening_comes_from_the_protocol():
    """widening = 0 (no limit): the search expands every root action before it refines any route, so with
    a budget below the number of root actions every proposal is a root action."""
    rules = RouteRules(8, SAMPLER)
    roots = set(rules.root_actions())
    plain = RouteSearch(8, 16, 3, mcts=SimpleNamespace(c=2 ** 0.5, lam=5.0, p_random=0.0, widening=0.0),
                        sampler=SAMPLER, route_factory=tuple)
    assert len(roots) > 16 and set(run(plain, reward_fn(1))) <= roots
    narrow = RouteSearch(8, 16, 3, mcts=SimpleNamespace(c=2 ** 0.5, lam=5.0, p_random=0.0, widening=2.0),
                         sampler=SAMPLER, route_factory=tuple)
    assert not set(run(narrow, reward_fn(1))) <= roots      # the default widening refines deeper routes


def test_larger_model_budget():
    s = RouteSearch(32, 64, 9, mcts=MCTS, sampler=SAMPLER, route_factory=tuple)
    routes = run(s, reward_fn(1))
    assert len(set(routes)) == len(routes) == 64
