"""An intervention on the model, as one value: which decoder layers run in which order (a route) and whose MLP
output is zeroed (silenced). Pure Python: the engine plans with it, the runner executes it, the store keeps its
text forms, the app edits it, and its seeds come from it, without loading a model.

A new kind of intervention is a field here, with its text form (`texts`, `parse`), its part of `describe`,
and the runner's installation of it (`reachtui.model.routing`); the plan, the store rows, the seeds and the
app carry it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from reachtui.errors import ReachError
from reachtui.probes.registry import EXPLORE, MLP
from reachtui.routes import (Route, format_route, format_silenced, identity, parse_route, parse_silenced,
                             validate_route)


@dataclass(frozen=True)
class Intervention:
    """`route`: the layers run, in order (None: the model's own order); `silenced`: the layers whose MLP
    output is zeroed (every occurrence in the route). Hashable: plans group attempts by it."""

    route: Route | None = None
    silenced: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.route is not None and not isinstance(self.route, Route):
            object.__setattr__(self, "route", Route(tuple(self.route)))
        if not isinstance(self.silenced, frozenset):
            object.__setattr__(self, "silenced", frozenset(int(i) for i in self.silenced))

    @classmethod
    def of(cls, value: Intervention | tuple | None) -> Intervention:
        """An Intervention from itself, None (the default) or a (route, silenced) pair."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        route, silenced = value
        return cls(route, frozenset(silenced))

    @classmethod
    def parse(cls, route: str | None, silenced: str | None, num_layers: int, *, max_repeat: int = 2) -> Intervention:
        """From the text forms (`0-3,3,5-7`, `5` or `3,5`; None or '' for none), checked against a model of
        `num_layers` layers: what `texts` gives back, what the store keeps, what `--route`/`--silence` take."""
        layers = None if route is None or not str(route).strip() else parse_route(route, num_layers,
                                                                                  max_repeat=max_repeat)
        return cls(layers, parse_silenced(silenced, num_layers))

    # ---- reading -------------------------------------------------------------------------------------

    @property
    def is_default(self) -> bool:
        """The model as deployed: its own layer order, nothing silenced."""
        return self.route is None and not self.silenced

    def layers(self, num_layers: int) -> tuple[int, ...]:
        """The layers run, in order (the identity route when `route` is None)."""
        return tuple(range(num_layers)) if self.route is None else self.route.layers

    def normalized(self, num_layers: int) -> Intervention:
        """The same intervention with the identity route written as None (so equal interventions are equal)."""
        if self.route is not None and self.route.is_identity(num_layers):
            return Intervention(None, self.silenced)
        return self

    def checked(self, num_layers: int) -> Intervention:
        """What a runner of a `num_layers`-layer model runs: this intervention checked against the model, its
        route written out (the identity route when it has none; a layer may repeat any number of times).
        ReachError, one line, where it does not fit."""
        route = identity(num_layers) if self.route is None else validate_route(self.route, num_layers,
                                                                               max_repeat=10**9)
        bad = sorted(i for i in self.silenced if not 0 <= i < num_layers)
        if bad:
            raise ReachError(f"silenced layer {bad[0]} is out of range (the model has {num_layers} layers)")
        return Intervention(route, self.silenced)

    def texts(self) -> tuple[str | None, str | None]:
        """The stored forms (attempts and explorations rows): (route text or None for the model's own order,
        silenced layers' text or None for none)."""
        return (None if self.route is None else format_route(self.route), format_silenced(self.silenced) or None)

    def describe(self, num_layers: int) -> str:
        """One line for people: `route 0-3,3,5-7 · silence MLP 5` (the identity route is left out)."""
        parts = []
        if self.route is not None and not self.route.is_identity(num_layers):
            parts.append(f"route {format_route(self.route)}")
        if self.silenced:
            parts.append(f"silence MLP {format_silenced(self.silenced)}")
        return " · ".join(parts) or "default (identity route, nothing silenced)"

    def seed_stream(self, probe: str) -> str:
        """The seed stream of the attempts stored as `probe` under this intervention (`stream_of`)."""
        return stream_of(probe, *self.texts())


def stream_of(probe: str, route: str | None, silenced: str | None) -> str:
    """The seed stream (`reachtui.seeds.attempt_seed`) of attempts stored as `probe` with these text forms of
    their intervention (`Intervention.texts`; an export recomputes a stored attempt's seed from its row): the
    probe's own name, except that an exploration silencing one MLP with no route draws the MLP scan's seeds
    (so it repeats the scan's row for that layer exactly) and every other exploration the stream "explore"."""
    if not EXPLORE.owns(probe):
        return probe
    if route is None and silenced is not None and silenced.isdigit():
        return MLP.name(int(silenced))
    return EXPLORE.prefix
