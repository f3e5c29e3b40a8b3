"""A line of text laid out for the width it gets (`reachtui.tui.fit`): the header's title, its counters and
the status line drop or move whole parts rather than cut a word or trail off in an ellipsis."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from reachtui.tui.fit import fit_line, pack_lines


class Fitted(Static):
    """Parts of text laid out per width (a Static that ignores `update`: `show` gives it its parts): `mode="fit"` keeps one line, dropping the least important parts
    (`show` takes (text or its forms longest first, priority) pairs); `mode="pack"` wraps between parts, never inside one."""

    DEFAULT_CSS = """
    Fitted { height: auto; }
    """

    def __init__(self, *, mode: str = "pack", sep: str = "  ", id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.mode, self.sep = mode, sep
        self.parts: list = []

    def show(self, parts: Sequence) -> None:
        self.parts = list(parts)
        self.refresh(layout=True)

    def text_for(self, width: int) -> Text:
        if self.mode == "fit":
            return fit_line([(p, 1) if isinstance(p, Text) else p for p in self.parts], width, self.sep)
        return pack_lines(self.parts, width, self.sep)

    @property
    def plain(self) -> str:
        """The whole text, nothing dropped (what the widget says where the width allows)."""
        texts = [p if isinstance(p, Text) else p[0] for p in self.parts]
        return Text(self.sep).join(t if isinstance(t, Text) else Text(" ").join(t) for t in texts).plain

    def render(self) -> Text:
        return self.text_for(self.content_size.width or 10_000)

    def get_content_height(self, container, viewport, width: int) -> int:
        text = self.text_for(width)
        return max(1, len(text.wrap(self.app.console, max(width, 1))))
