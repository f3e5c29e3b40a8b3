"""Monte Carlo tree search over layer routes, one search per question (pure Python).

The search never runs the model. It proposes routes and is told their rewards, so the audit engine can
advance the searches of many questions in lock-step and batch the generations of all questions whose
proposed route is the same:

    search = RouteSearch(num_layers=L, budget=K, seed=derive_seed(protocol.seed, "mcts", q_index),
                         mcts=protocol.mcts, sampler=protocol.route_sampler)
    while (route := search.propose()) is not None:
        search.observe(route, reward)          # reward of that route's generation

The tree (as in CoLa, arXiv 2507.07996, with the protocol's parameters):

- The root is the identity route (the model as deployed; it is the `realized` probe, never proposed).
- Root actions: skip a contiguous block of 1..max_block layers, or repeat such a block once (the copy
  follows the block). Deeper actions act on one position of the route: skip it, or repeat it once.
- Every route obeys the route sampler's bounds: length within [ceil(min_frac·L), floor(max_frac·L)], a
  layer at most `max_repeat` times, first / last layer never dropped when `keep_first` / `keep_last`
  (as `reachtui.routes.legal_actions`).
  The identity route is never a child.
- Selection: from the root, descend to the child with the highest
  UCB = mean reward − λ·len(route)/L + c·sqrt(ln N / n)
  (N: visits of the parent, n: of the child), or, with probability p_random, to a uniformly random child.
- Expansion (progressive widening): a node visited N times may hold at most 1 + floor(w·sqrt(N))
  children (w = the protocol's mcts.widening, 2 by default; 0 = no limit); while it holds fewer and untried actions remain, the search expands one untried action
  (in a seeded random order) instead of descending, and proposes that child's route. With a budget of
  K = 16 this gives about 8 root actions and 8 deeper refinements, instead of spending the whole
  budget on root actions.
- Budget: K DISTINCT generations. A route already evaluated (reached again by another action path) is
  not proposed again: its known reward is backed up for free and the search continues.
- Backup: visits += 1 and reward sum += reward along the path.

Everything random comes from one `random.Random(seed)`; the search is a pure function of its seed and
the rewards it observed, so a resumed audit replays the stored attempts through `observe` and continues
exactly as an uninterrupted one would.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

#: Safety net: iterations of free (cached) backups in one propose() before the space counts as exhausted.
_MAX_FREE_ITERATIONS = 10_000


def max_children(visits: int, widening: float = 2.0) -> float:
    """Progressive widening: how many children a node visited `visits` times may hold (0: no limit)."""
    if widening <= 0:
        return math.inf
    return 1 + int(widening * math.sqrt(visits))


def length_bounds(num_layers: int, sampler: Any) -> tuple[int, int]:
    """[min_len, max_len] of a route, from the sampler's min_frac / max_frac."""
    lo = max(1, math.ceil(getattr(sampler, "min_frac", 0.6) * num_layers - 1e-9))
    hi = max(lo, math.floor(getattr(sampler, "max_frac", 1.2) * num_layers + 1e-9))
    return lo, hi


class RouteRules:
    """Validity of a route and the actions available from a node (shared by tests and the search)."""

    def __init__(self, num_layers: int, sampler: Any = None) -> None:
        if num_layers < 1:
            raise ValueError("num_layers must be >= 1")
        self.L = num_layers
        self.max_block = int(getattr(sampler, "max_block", 4))
        self.max_repeat = int(getattr(sampler, "max_repeat", 2))
        self.keep_first = bool(getattr(sampler, "keep_first", True))
        self.keep_last = bool(getattr(sampler, "keep_last", True))
        self.min_len, self.max_len = length_bounds(num_layers, sampler)
        self.identity = tuple(range(num_layers))

    def valid(self, route: tuple[int, ...]) -> bool:
        if not (self.min_len <= len(route) <= self.max_len) or route == self.identity:
            return False
        if self.keep_first and 0 not in route:
            return False
        if self.keep_last and self.L - 1 not in route:
            return False
        counts: dict[int, int] = {}
        for layer in route:
            if not 0 <= layer < self.L:
                return False
            counts[layer] = counts.get(layer, 0) + 1
            if counts[layer] > self.max_repeat:
                return False
        return True

    def root_actions(self) -> list[tuple[int, ...]]:
        """Skip or repeat-once a contiguous block of 1..max_block layers of the identity route."""
        ident = self.identity
        out: list[tuple[int, ...]] = []
        for b in range(1, min(self.max_block, self.L) + 1):    # no block is longer than the model
            for s in range(0, self.L - b + 1):
                out.append(ident[:s] + ident[s + b:])
                out.append(ident[:s + b] + ident[s:s + b] + ident[s + b:])
        return self._dedupe_valid(out)

    def deep_actions(self, route: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Skip one position, or repeat one position once."""
        out: list[tuple[int, ...]] = []
        for p in range(len(route)):
            out.append(route[:p] + route[p + 1:])
            out.append(route[:p + 1] + (route[p],) + route[p + 1:])
        return self._dedupe_valid(out)

    def _dedupe_valid(self, routes: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        seen: set[tuple[int, ...]] = set()
        out = []
        for r in routes:
            if r not in seen and self.valid(r):
                seen.add(r)
                out.append(r)
        return out


@dataclass(eq=False)
class _Node:
    route: tuple[int, ...]
    depth: int
    visits: int = 0
    total: float = 0.0
    children: list[_Node] = field(default_factory=list)
    untried: list[tuple[int, ...]] | None = None   # lazily computed, in seeded random order (pop from end)


class RouteSearch:
    """One question's MCTS over routes with a budget of `budget` distinct evaluated routes."""

    def __init__(self, num_layers: int, budget: int, seed: int, *, mcts: Any = None, sampler: Any = None,
                 route_factory: Any = None) -> None:
        if budget < 0:
            raise ValueError("budget must be >= 0")
        self.rules = RouteRules(num_layers, sampler)
        self.L = num_layers
        self.budget = budget
        self.c = float(getattr(mcts, "c", math.sqrt(2)))
        self.lam = float(getattr(mcts, "lam", 5.0))
        self.p_random = float(getattr(mcts, "p_random", 0.1))
        self.widening = float(getattr(mcts, "widening", 2.0))
        self.rng = random.Random(seed)
        self.root = _Node(self.rules.identity, 0)
        self.values: dict[tuple[int, ...], float] = {}
        self.order: list[tuple[int, ...]] = []        # evaluated routes, in attempt order
        self.rewards: list[float] = []                # their rewards, same order
        self.exhausted = False
        self._pending: tuple[tuple[int, ...], list[_Node]] | None = None
        self._route_factory = route_factory

    # -- public ---------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.exhausted or len(self.order) >= self.budget

    @property
    def pending(self) -> tuple[int, ...] | None:
        return self._pending[0] if self._pending else None

    def propose(self):
        """The next route to evaluate (a `Route`), or None when the budget is spent or the space exhausted.

        Calling propose() again before observe() returns the same pending route."""
        layers = self.propose_layers()
        if layers is None:
            return None
        return self._make_route(layers)

    def propose_layers(self) -> tuple[int, ...] | None:
        if self._pending is not None:
            return self._pending[0]
        if self.done:
            return None
        for _ in range(_MAX_FREE_ITERATIONS):
            step = self._iterate()
            if step is None:           # nothing left anywhere
                self.exhausted = True
                return None
            if step is not True:       # a new route to evaluate
                return step
        self.exhausted = True
        return None

    def observe(self, route, reward: float) -> None:
        """Record the reward of the pending route (must be the route last proposed)."""
        layers = _layers_of(route)
        if self._pending is None or self._pending[0] != layers:
            raise ValueError(f"observe({layers}) does not match the pending proposal "
                             f"{self._pending[0] if self._pending else None}")
        reward = float(reward)
        if math.isnan(reward):
            raise ValueError("reward is NaN")
        _, path = self._pending
        self._pending = None
        self.values[layers] = reward
        self.order.append(layers)
        self.rewards.append(reward)
        self._backup(path, reward)

    def first_hit(self, threshold: float = 1.0) -> int | None:
        """Attempt index of the first evaluated route whose reward reaches `threshold`."""
        for i, r in enumerate(self.rewards):
            if r >= threshold:
                return i
        return None

    def best_index(self) -> int | None:
        """Attempt index of the evaluated route with the highest reward (earliest on ties)."""
        best = None
        for i, r in enumerate(self.rewards):
            if best is None or r > self.rewards[best]:
                best = i
        return best

    # -- internals ------------------------------------------------------------------------------------
    def _make_route(self, layers: tuple[int, ...]):
        if self._route_factory is not None:
            return self._route_factory(layers)
        from reachtui.routes import Route  # pure Python module
        return Route(layers)

    def _ensure_untried(self, node: _Node) -> None:
        if node.untried is None:
            acts = self.rules.root_actions() if node.depth == 0 else self.rules.deep_actions(node.route)
            self.rng.shuffle(acts)
            node.untried = acts

    def _ucb(self, parent: _Node, child: _Node) -> float:
        mean = child.total / child.visits
        explore = self.c * math.sqrt(math.log(max(parent.visits, 1)) / child.visits)
        return mean - self.lam * len(child.route) / self.L + explore

    def _iterate(self):
        """One selection pass. Returns a new route to propose, True after a free backup, None if exhausted."""
        node = self.root
        path = [node]
        while True:
            self._ensure_untried(node)
            if node.untried and len(node.children) < max_children(node.visits, self.widening):
                layers = node.untried.pop()
                child = _Node(layers, node.depth + 1)
                node.children.append(child)
                path.append(child)
                if layers in self.values:            # reached before by another path: no new generation
                    self._backup(path, self.values[layers])
                    return True
                self._pending = (layers, path)
                return layers
            if node.children:
                visited = [ch for ch in node.children if ch.visits > 0]
                if not visited:                      # cannot happen outside a pending proposal
                    return None
                if self.rng.random() < self.p_random:
                    node = visited[self.rng.randrange(len(visited))]
                else:
                    node = max(visited, key=lambda ch: self._ucb(path[-1], ch))
                path.append(node)
                continue
            if node is self.root:                    # no action at all from the identity route
                return None
            if self._subtree_exhausted(self.root):
                return None
            self._backup(path, self.values[node.route])   # terminal leaf: its known reward, for free
            return True

    def _subtree_exhausted(self, node: _Node) -> bool:
        self._ensure_untried(node)
        if node.untried:
            return False
        return all(self._subtree_exhausted(ch) for ch in node.children)

    @staticmethod
    def _backup(path: list[_Node], reward: float) -> None:
        for n in path:
            n.visits += 1
            n.total += reward


def _layers_of(route) -> tuple[int, ...]:
    if isinstance(route, tuple):
        return route
    layers = getattr(route, "layers", None)
    if layers is None:
        return tuple(route)
    return tuple(layers)
