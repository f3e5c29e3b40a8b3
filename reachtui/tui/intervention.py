"""The layer strip's editor: the intervention being edited (a `reachtui.intervention.Intervention`, the value
the engine runs and the store keeps) on a model of `num_layers` layers, with the edits the keys make. Pure
Python, so editing, validating and displaying an intervention never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reachtui.intervention import Intervention
from reachtui.routes import Route, format_route, format_silenced

MAX_REPEAT = 2


@dataclass(frozen=True)
class LayerEditor:
    num_layers: int
    value: Intervention = field(default_factory=Intervention)

    @classmethod
    def identity(cls, num_layers: int) -> LayerEditor:
        return cls(num_layers)

    def _with(self, layers: tuple[int, ...] | None = None, silenced: frozenset[int] | None = None) -> LayerEditor:
        value = Intervention(Route(self.layers if layers is None else layers),
                             self.silenced if silenced is None else silenced)
        return LayerEditor(self.num_layers, value.normalized(self.num_layers))

    # ---- reading ----------------------------------------------------------------------------------

    @property
    def layers(self) -> tuple[int, ...]:
        return self.value.layers(self.num_layers)

    @property
    def silenced(self) -> frozenset[int]:
        return self.value.silenced

    def count(self, layer: int) -> int:
        return self.layers.count(layer)

    def counts(self) -> list[int]:
        out = [0] * self.num_layers
        for i in self.layers:
            out[i] += 1
        return out

    @property
    def is_default(self) -> bool:
        return self.value.is_default

    @property
    def route_text(self) -> str:
        return format_route(self.layers)

    @property
    def silenced_text(self) -> str:
        return format_silenced(self.silenced)

    def describe(self) -> str:
        """One line: what this intervention does, e.g. `route 0-3,3,5-7 · silence MLP 5`."""
        return self.value.describe(self.num_layers)

    # ---- editing (each returns a new value) -------------------------------------------------------

    def with_count(self, layer: int, count: int) -> LayerEditor:
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
        return self._with(tuple(layers))

    def toggle_skip(self, layer: int) -> LayerEditor:
        return self.with_count(layer, 0 if self.count(layer) else 1)

    def more(self, layer: int) -> LayerEditor:
        return self.with_count(layer, self.count(layer) + 1)

    def less(self, layer: int) -> LayerEditor:
        return self.with_count(layer, self.count(layer) - 1)

    def toggle_silence(self, layer: int) -> LayerEditor:
        return self._with(silenced=self.silenced ^ {layer})

    def reset(self) -> LayerEditor:
        return LayerEditor.identity(self.num_layers)

    def with_texts(self, route: str | None, silenced: str | None) -> LayerEditor:
        """The intervention of these text forms (a typed route `0-3,3,5-11`, silenced layers `3,5`; None or ''
        for none), as the store keeps them; a bad one raises ReachError with a clear line."""
        value = Intervention.parse(route, silenced, self.num_layers, max_repeat=MAX_REPEAT)
        return LayerEditor(self.num_layers, value.normalized(self.num_layers))

    def with_route_text(self, text: str) -> LayerEditor:
        """Parse a typed route (`0-3,3,5-11`), keeping the silenced layers."""
        return self.with_texts(text, self.silenced_text)
