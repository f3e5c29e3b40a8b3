"""Layer routes: which decoder layers run, in which order. Pure Python: the syntax and the sampler, so
the app, the engine and the store parse and format routes without loading a model.

A route is a tuple of original layer indices, e.g. `0-3,3,5-11` = 0,1,2,3,3,5,6,...,11 (layer 4 skipped,
layer 3 repeated). Text form: comma-separated items, each `i` or an inclusive ascending range `a-b`;
whitespace is tolerated.

The random sampler draws from the same action space as the MCTS probe: starting from the identity route,
apply 1-3 actions, each either *skip* a contiguous block of 1-4 route positions or *repeat* a contiguous
block of 1-4 route positions once (the copy goes right after the block), keeping the route length within
[0.6 L, 1.2 L], no layer more than `max_repeat` times, and the first and last layer never dropped unless
asked. `legal_actions` / `apply_action` expose that action space to the MCTS probe.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from reachtui.errors import ReachError

_ITEM = re.compile(r"^([0-9]+)(?:\s*-\s*([0-9]+))?$")


@dataclass(frozen=True)
class Route:
    layers: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def __getitem__(self, i):
        return self.layers[i]

    def __str__(self) -> str:
        return format_route(self)

    def is_identity(self, num_layers: int | None = None) -> bool:
        n = len(self.layers) if num_layers is None else num_layers
        return self.layers == tuple(range(n))


def identity(n: int) -> Route:
    if n < 1:
        raise ReachError(f"a model needs at least one layer, got {n}")
    return Route(tuple(range(n)))


def format_route(route: Route | tuple[int, ...] | list[int]) -> str:
    """Compact text form: ascending runs of consecutive layers become `a-b`."""
    layers = tuple(route.layers if isinstance(route, Route) else route)
    parts: list[str] = []
    i = 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] == layers[j] + 1:
            j += 1
        parts.append(str(layers[i]) if i == j else f"{layers[i]}-{layers[j]}")
        i = j + 1
    return ",".join(parts)


#: Layer numbers are ASCII digits ("٣" is not 3), at most this many (no model has a billion layers): longer
#: ones are out of range without being converted (Python refuses integers of over 4,300 digits).
_MAX_DIGITS = 9


def _parse_ranges(text: str, num_layers: int | None, what: str) -> list[tuple[int, int]]:
    """The items of `text` as inclusive ranges (a, b), checked (syntax, order, and against `num_layers`
    when given) without expanding them: `0-1999999999` costs nothing."""
    if not isinstance(text, str) or not text.strip():
        hint = f"0-3,3,5-{max(num_layers - 1, 0)}" if num_layers else "0-3,3,5-7"
        raise ReachError(f"empty {what}: give layers like {hint}")
    shown = text.strip() if len(text) <= 80 else text.strip()[:77] + "..."
    out: list[tuple[int, int]] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ReachError(f"{what} {shown!r}: empty item between commas")
        m = _ITEM.match(item)
        if not m:
            item = item if len(item) <= 40 else item[:37] + "..."
            raise ReachError(f"{what} {shown!r}: {item!r} is not a layer index or a range a-b (ASCII digits)")
        ends = [m.group(1), m.group(2) if m.group(2) is not None else m.group(1)]
        for digits in ends:
            if len(digits.lstrip("0")) > _MAX_DIGITS or (num_layers is not None and int(digits) >= num_layers):
                number = digits if len(digits) <= 12 else digits[:9] + f"... ({len(digits)} digits)"
                limit = f"the model has {num_layers} layers: 0-{num_layers - 1}" if num_layers is not None \
                    else "no model has that many layers"
                raise ReachError(f"{what} {shown!r}: layer {number} is out of range ({limit})")
        a, b = int(ends[0]), int(ends[1])
        if b < a:
            raise ReachError(f"{what} {shown!r}: descending range {a}-{b} (write ascending ranges)")
        out.append((a, b))
    return out


def check_syntax(text: str, what: str = "route") -> None:
    """A route's (or silenced layers') syntax, before the model and its layer count are known."""
    _parse_ranges(text, None, what)


def validate_route(
    route: Route | tuple[int, ...] | list[int],
    num_layers: int,
    *,
    max_repeat: int = 2,
    min_len: int = 1,
    max_len: int | None = None,
) -> Route:
    """Check a route against a model of `num_layers` layers; returns it as a Route or raises ReachError."""
    layers = tuple(route.layers if isinstance(route, Route) else route)
    text = format_route(layers) if layers else ""
    if not layers:
        raise ReachError("empty route: a route runs at least one layer")
    for x in layers:
        if not isinstance(x, int) or isinstance(x, bool) or x < 0 or x >= num_layers:
            raise ReachError(
                f"route {text!r}: layer {x} is out of range (the model has {num_layers} layers: 0-{num_layers - 1})"
            )
    counts: dict[int, int] = {}
    for x in layers:
        counts[x] = counts.get(x, 0) + 1
    over = sorted(x for x, c in counts.items() if c > max_repeat)
    if over:
        x = over[0]
        raise ReachError(f"route {text!r}: layer {x} appears {counts[x]} times (at most {max_repeat} allowed)")
    if len(layers) < min_len:
        raise ReachError(f"route {text!r}: length {len(layers)} is below the minimum {min_len}")
    if max_len is not None and len(layers) > max_len:
        raise ReachError(f"route {text!r}: length {len(layers)} is above the maximum {max_len}")
    return Route(layers)


def parse_route(
    text: str, num_layers: int, *, max_repeat: int = 2, min_len: int = 1, max_len: int | None = None
) -> Route:
    """`0-3,3,5-11` -> Route((0,1,2,3,3,5,...,11)), validated for a model of `num_layers` layers. Its
    length is checked before the layers are listed: a route longer than `max_len`, or than `max_repeat`
    times every layer, is refused as text."""
    ranges = _parse_ranges(text, num_layers, "route")
    length = sum(b - a + 1 for a, b in ranges)
    longest = max_repeat * num_layers if max_len is None else min(max_len, max_repeat * num_layers)
    if length > longest:
        shown = text.strip() if len(text) <= 80 else text.strip()[:77] + "..."
        why = f"the maximum {max_len}" if max_len is not None and max_len <= max_repeat * num_layers else \
            f"{max_repeat} times each of the model's {num_layers} layers"
        raise ReachError(f"route {shown!r}: length {length} is above {why}")
    layers = [x for a, b in ranges for x in range(a, b + 1)]
    return validate_route(layers, num_layers, max_repeat=max_repeat, min_len=min_len, max_len=max_len)


def parse_silenced(text: str | None, num_layers: int) -> frozenset[int]:
    """`3,5` (or `2-4`) -> frozenset of layer indices whose MLP is silenced; '' / 'none' -> empty."""
    if text is None or not str(text).strip() or str(text).strip().lower() == "none":
        return frozenset()
    return frozenset(x for a, b in _parse_ranges(str(text), num_layers, "silenced layers") for x in range(a, b + 1))


def format_silenced(silenced) -> str:
    return format_route(sorted(silenced)) if silenced else ""


# ---------------------------------------------------------------- the action space (sampler and MCTS)

_DEFAULTS = dict(
    min_frac=0.6, max_frac=1.2, min_actions=1, max_actions=3, max_block=4, max_repeat=2,
    keep_first=True, keep_last=True,
)


def _p(params: Any, name: str):
    if params is None:
        return _DEFAULTS[name]
    if isinstance(params, dict):
        return params.get(name, _DEFAULTS[name])
    return getattr(params, name, _DEFAULTS[name])


def length_bounds(num_layers: int, params: Any = None) -> tuple[int, int]:
    """[ceil(min_frac L), floor(max_frac L)], at least 1."""
    lo = max(1, math.ceil(_p(params, "min_frac") * num_layers - 1e-9))
    hi = max(lo, math.floor(_p(params, "max_frac") * num_layers + 1e-9))
    return lo, hi


@dataclass(frozen=True)
class Action:
    kind: str    # "skip" | "repeat"
    start: int   # route position where the block starts
    size: int    # block length (positions)

    def __str__(self) -> str:
        return f"{self.kind} {self.start}+{self.size}"


def apply_action(route: Route, action: Action) -> Route:
    r = route.layers
    s, e = action.start, action.start + action.size
    if action.kind == "skip":
        return Route(r[:s] + r[e:])
    if action.kind == "repeat":
        return Route(r[:e] + r[s:e] + r[e:])
    raise ValueError(f"unknown action kind {action.kind!r}")


def legal_actions(route: Route, num_layers: int, params: Any = None) -> list[Action]:
    """Every skip/repeat of a contiguous block of 1..max_block positions whose result stays legal, in the
    order the sampler draws from (by block size, then start; a skip before a repeat). O(positions x
    max_block): each start's blocks are grown one position at a time."""
    lo, hi = length_bounds(num_layers, params)
    max_repeat = _p(params, "max_repeat")
    keep_first, keep_last = _p(params, "keep_first"), _p(params, "keep_last")
    r = route.layers
    n = len(r)
    biggest = min(_p(params, "max_block"), n)
    counts: dict[int, int] = {}
    for x in r:
        counts[x] = counts.get(x, 0) + 1
    last = num_layers - 1
    # how many times layer 0 / the last layer occur before each position: a skip keeps one of each
    firsts, lasts = [0], [0]
    for x in r:
        firsts.append(firsts[-1] + (x == 0))
        lasts.append(lasts[-1] + (x == last))
    # repeat_ok[s][size - 1]: repeating r[s:s+size] keeps every layer within max_repeat (once a block is
    # over, every longer block from the same start is too)
    repeat_ok: list[list[bool]] = []
    for s in range(n):
        oks: list[bool] = []
        added: dict[int, int] = {}
        fine = True
        for size in range(1, min(biggest, n - s) + 1):
            x = r[s + size - 1]
            added[x] = added.get(x, 0) + 1
            fine = fine and counts[x] + added[x] <= max_repeat
            oks.append(fine)
        repeat_ok.append(oks)
    out: list[Action] = []
    for size in range(1, biggest + 1):
        can_skip, can_repeat = lo <= n - size, n + size <= hi
        for s in range(0, n - size + 1):
            if can_skip and not (keep_first and counts.get(0, 0) - (firsts[s + size] - firsts[s]) <= 0) \
                    and not (keep_last and counts.get(last, 0) - (lasts[s + size] - lasts[s]) <= 0):
                out.append(Action("skip", s, size))
            if can_repeat and repeat_ok[s][size - 1]:
                out.append(Action("repeat", s, size))
    return out


def sample_route(num_layers: int, rng: random.Random, params: Any = None) -> Route:
    """Compose min_actions..max_actions random legal actions starting from the identity route.

    May return the identity when no action is legal (tiny models); `sample_routes` filters those out.
    """
    route = identity(num_layers)
    k = rng.randint(_p(params, "min_actions"), _p(params, "max_actions"))
    for _ in range(k):
        actions = legal_actions(route, num_layers, params)
        if not actions:
            break
        route = apply_action(route, rng.choice(actions))
    return route


def sample_routes(num_layers: int, k: int, seed: int, params: Any = None) -> list[Route]:
    """k random routes from `random.Random(seed)`: never the identity, distinct where possible.

    When fewer than k distinct non-identity routes turn up after many draws, duplicates fill the list;
    when the action space is empty (a model too small for the length bounds) the list is empty.
    """
    rng = random.Random(seed)
    ident = identity(num_layers)
    seen: list[Route] = []
    drawn: list[Route] = []
    tries = 0
    while len(seen) < k and tries < 50 * max(k, 1):
        tries += 1
        r = sample_route(num_layers, rng, params)
        if r == ident:
            continue
        drawn.append(r)
        if r not in seen:
            seen.append(r)
    if len(seen) < k and drawn:
        i = 0
        while len(seen) < k:
            seen.append(drawn[i % len(drawn)])
            i += 1
    return seen
