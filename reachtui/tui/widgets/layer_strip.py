"""The layer strip: per decoder layer, how many times the edited route runs it and whether its MLP is
silenced — with a cursor the keys move along; what the edit does is on its top border. Wider models than the terminal show the layers around the
cursor; the cursor's layer is marked with brackets, so it reads without colour too."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from reachtui.tui.intervention import LayerEditor

CELL = 5
LABEL = 6   # "layer ", "runs  ", "mlp   "


def window(n: int, cursor: int, cells: int) -> range:
    """The layers shown: all of them when they fit in `cells`, else `cells` of them around the cursor."""
    if n <= cells:
        return range(n)
    start = min(max(0, cursor - cells // 2), n - cells)
    return range(start, start + cells)


class LayerStrip(Widget):
    DEFAULT_CSS = """
    LayerStrip { height: 3; padding: 0 1; }
    """

    intervention: reactive[LayerEditor | None] = reactive(None)
    position: reactive[int] = reactive(0)
    #: why the layers are not known (the model failed to load), shown instead of waiting for them
    problem: reactive[str | None] = reactive(None)

    def watch_intervention(self, iv: LayerEditor | None) -> None:
        """What the edited intervention does, on the strip's top border."""
        self.border_title = iv.describe() if iv is not None else None

    def validate_position(self, value: int) -> int:
        n = self.intervention.num_layers if self.intervention else 0
        return max(0, min(value, n - 1)) if n else 0

    def render(self) -> Text:
        iv = self.intervention
        if iv is None:
            if self.problem:
                return Text(f"layers: unknown, the model {self.problem}", style="bold red", overflow="fold")
            return Text("layers: (the model's layer count is not known yet)", style="dim", no_wrap=True,
                        overflow="ellipsis")
        counts = iv.counts()
        shown = window(len(counts), self.position, max(1, (self.size.width - LABEL - 2) // CELL))
        top = Text("layer ", style="dim")
        mid = Text("runs  ", style="dim")
        mlp = Text("mlp   ", style="dim")
        for i in shown:
            c = counts[i]
            here = i == self.position
            cursor = " reverse" if here else ""
            top.append(f"{f'[{i}]' if here else str(i):^{CELL}}", style=("bold" + cursor) if here else "dim")
            if c == 0:
                mid.append(f"{'skip':^{CELL}}", style="red" + cursor)
            elif c == 1:
                mid.append(f"{'1':^{CELL}}", style="green" + cursor)
            else:
                mid.append(f"{'×' + str(c):^{CELL}}", style="bold yellow" + cursor)
            mlp.append(f"{'off' if i in iv.silenced else 'on':^{CELL}}",
                       style=("bold magenta" if i in iv.silenced else "dim") + cursor)
        if shown.start or shown.stop < len(counts):
            mid.append(f" {shown.start}-{shown.stop - 1} of {len(counts)}", style="dim")
        lines = [top, mid, mlp]
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
        return Text("\n", no_wrap=True).join(lines)
