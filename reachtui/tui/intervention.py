"""The intervention being edited in the layer strip: a route (original layer indices, in execution
order) plus the set of layers whose MLP is silenced. Pure Python (routes.py is pure Python too), so
editing, validating and displaying an intervention never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_REPEAT = 2


@dataclass(frozen=True)
class Intervention:
    num_layers: int
    layers: tuple[int, ...] = ()
    silenced: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def identity(cls, num_layers: int) -> Intervention:
        return cls(num_layers, tuple(range(num_layers)), frozenset())

    def __post_init__(self) -> None:
        if not self.layers and self.num_layers:
            object.__setattr__(self, "layers", tuple(range(self.num_layers)))

    # ---- reading ----------------------------------------------------------------------------------

    def count(self, layer: int) -> int:
        return self.layers.count(layer)

    def counts(self) -> list[int]:
        out = [0] * self.num_layers
        for i in self.layers:
            out[i] += 1
        return out

    @property
    def is_identity_route(self) -> bool:
        return self.layers == tuple(range(self.num_layers))

    @property
    def is_default(self) -> bool:
        return self.is_identity_route and not self.silenced

    @property
    def route_text(self) -> str:
        from reachtui.routes import Route, format_route

        return format_route(Route(self.layers))

    @property
    def silenced_text(self) -> str:
        from reachtui.routes import format_silenced

        return format_silenced(self.silenced)

    def describe(self) -> str:
        """One line: what this intervention does, e.g. `route 0-3,3,5-7 · silence MLP 5`."""
        from reachtui.routes import describe_intervention

        return describe_intervention(self.layers, self.silenced, self.num_layers)

    def route(self):
        """The `Route` value for the runner (None for the identity route)."""
        from reachtui.routes import Route

        return None if self.is_identity_route else Route(self.layers)

    # ---- editing (each returns a new value) -------------------------------------------------------

    def with_count(self, layer: int, count: int) -> Intervention:
        """Set how many times `layer` runs (0 skipped, 1, 2 repeated), keeping the order of the rest:
        a new occurrence goes right after the layer's last one, or after the nearest lower layer."""
        count = max(0, min(count, MAX_REPEAT))
        current = self.count(layer)
        layers = list(self.layers)
        if count < current:
            for _ in range(current - count):
                pos = len(layers) - 1 - layers[::-1].index(layer)
                del layers[pos]
        elif count > current:
            if current:
                pos = len(layers) - layers[::-1].index(layer)
            else:
                pos = 0
                for j, l in enumerate(layers):
                    if l < layer:
                        pos = j + 1
            layers[pos:pos] = [layer] * (count - current)
        if not layers:
            return self
        return Intervention(self.num_layers, tuple(layers), self.silenced)

    def toggle_skip(self, layer: int) -> Intervention:
        return self.with_count(layer, 0 if self.count(layer) else 1)

    def more(self, layer: int) -> Intervention:
        return self.with_count(layer, self.count(layer) + 1)

    def less(self, layer: int) -> Intervention:
        return self.with_count(layer, self.count(layer) - 1)

    def toggle_silence(self, layer: int) -> Intervention:
        return Intervention(self.num_layers, self.layers, self.silenced ^ {layer})

    def reset(self) -> Intervention:
        return Intervention.identity(self.num_layers)

    def with_route_text(self, text: str) -> Intervention:
        """Parse a typed route (`0-3,3,5-11`); a bad one raises ReachError with a clear line."""
        from reachtui.routes import parse_route

        route = parse_route(text, self.num_layers, max_repeat=MAX_REPEAT)
        return Intervention(self.num_layers, tuple(route.layers), self.silenced)

    def with_silenced_text(self, text: str) -> Intervention:
        from reachtui.routes import parse_silenced

        return Intervention(self.num_layers, self.layers, frozenset(parse_silenced(text, self.num_layers)))
