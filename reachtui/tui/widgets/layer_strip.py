"""The layer strip: one cell per decoder layer — how often it runs in the edited route (0 skipped,
1, 2 repeated) and whether its MLP is silenced — with a cursor the keys move along."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from reachtui.tui.intervention import Intervention

CELL = 5


class LayerStrip(Widget):
    DEFAULT_CSS = """
    LayerStrip { height: 3; padding: 0 1; }
    """

    intervention: reactive[Intervention | None] = reactive(None)
    position: reactive[int] = reactive(0)

    def validate_position(self, value: int) -> int:
        n = self.intervention.num_layers if self.intervention else 0
        return max(0, min(value, n - 1)) if n else 0

    def render(self) -> Text:
        iv = self.intervention
        if iv is None:
            return Text("layers: (the model's layer count is not known yet)", style="dim")
        counts = iv.counts()
        top = Text("layer ", style="dim")
        mid = Text("runs  ", style="dim")
        mlp = Text("mlp   ", style="dim")
        for i, c in enumerate(counts):
            here = i == self.position
            cursor = " reverse" if here else ""
            top.append(f"{i:^{CELL}}", style=("bold" + cursor) if here else "dim")
            if c == 0:
                mid.append(f"{'skip':^{CELL}}", style="red" + cursor)
            elif c == 1:
                mid.append(f"{'1':^{CELL}}", style="green" + cursor)
            else:
                mid.append(f"{'×' + str(c):^{CELL}}", style="bold yellow" + cursor)
            if i in iv.silenced:
                mlp.append(f"{'off':^{CELL}}", style="bold magenta" + cursor)
            else:
                mlp.append(f"{'on':^{CELL}}", style="dim" + cursor)
        top.append("  " + iv.describe(), style="bold" if not iv.is_default else "dim")
        return Text("\n").join([top, mid, mlp])
