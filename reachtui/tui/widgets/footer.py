"""The footer: Textual's `Footer`, showing only the keys that fit whole, the most useful first
(`reachtui.tui.actions.FOOTER_ORDER`), so a narrow terminal never shows half a hint; `?` lists them all."""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from reachtui.tui.actions import FOOTER_ORDER


def _width(key: FooterKey) -> int:
    """The cells a key takes in the footer (its label, padding, border and margins), laid out yet or not."""
    return key.render().cell_len + key.styles.gutter.width + key.styles.margin.width


class FittingFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        """Show the keys that fit, by rank (the rest hidden), in the footer's own order. (Called after a
        refresh: by then the footer's screen may have closed, and there is nothing to fit.)"""
        if not self.is_attached:
            return
        keys = [k for k in self.query(FooterKey) if not k.has_class("-command-palette")]
        room = self.size.width - sum(_width(k) for k in self.query(".-command-palette"))
        bound = self.screen.active_bindings

        def rank(key: FooterKey) -> int:
            found = bound.get(key.key)
            bid = found[1].id if found is not None else None
            return FOOTER_ORDER.index(bid) if bid in FOOTER_ORDER else len(FOOTER_ORDER)

        shown = set()
        for key in sorted(keys, key=rank):
            if (w := _width(key)) <= room:
                shown.add(key)
                room -= w
        for key in keys:
            key.display = key in shown
