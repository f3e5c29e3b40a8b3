"""Modal screens: help, typing a route / silenced set, picking an exploration."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from reachtui.errors import ReachError
from reachtui.tui.intervention import LayerEditor

GLYPH_LEGEND = [
    ("✓ / ✗", "column R: the default output (greedy, normal layer order) is right / wrong"),
    ("● k", "a probe column: the probe's own attempts reached the gold, and the default output has it too; "
            "k = first hit (reachable@k)"),
    ("◆ k", "the probe reached the gold, the default output did not: a failure-set member"),
    ("○", "no attempt of this probe reached the gold (even where the default output has it: a probe's column "
          "counts its own attempts, as its reachable % in the header does)"),
    ("…", "pending: the audit has not written all of this probe's attempts yet"),
]

SECTIONS = [
    ("Browse", ("app.quit", "app.help", "app.palette", "table.", "app.focus_next")),
    ("Filters", ("filter.", "app.search", "app.clear_search")),
    ("Layers (live interventions)", ("layer.", "live.")),
    ("Views and export", ("view.", "export.")),
    ("Comparison (reachtui open --compare A B)", ("compare.",)),
]


def _section(binding_id: str | None) -> str:
    for title, prefixes in SECTIONS:
        if binding_id and binding_id.startswith(prefixes):
            return title
    return "Other"


class HelpScreen(ModalScreen[None]):
    """Every key (read from the live bindings, so a remapped key shows as remapped) and the glyphs."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    def __init__(self, bindings: list[tuple[str, str, str | None]]) -> None:
        super().__init__()
        self.rows = bindings  # (key display, description, id)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Text("reachtui — keys", style="bold"), id="help-title")
            sections: dict[str, list] = {}
            for key, desc, bid in self.rows:
                sections.setdefault(_section(bid), []).append((key, desc, bid))
            for title in [s[0] for s in SECTIONS] + ["Other"]:
                if title not in sections:
                    continue
                table = Table(show_header=False, box=None, padding=(0, 2, 0, 0), expand=True)
                table.add_column(style="bold cyan", no_wrap=True, width=16)
                table.add_column()
                table.add_column(style="dim", no_wrap=True, justify="right")
                for key, desc, bid in sections[title]:
                    table.add_row(key, desc, bid)
                yield Static(Text(title, style="bold underline"), classes="help-section")
                yield Static(table)
            legend = Table(show_header=False, box=None, padding=(0, 2, 0, 0), expand=True)
            legend.add_column(style="bold", no_wrap=True, width=16)
            legend.add_column()
            for glyph, meaning in GLYPH_LEGEND:
                legend.add_row(glyph, meaning)
            yield Static(Text("The question table", style="bold underline"), classes="help-section")
            yield Static(legend)
            yield Static(Text("ctrl+p opens the command palette: every action by name "
                              "(filter: …, layer: …, run: …, export: …, view: …). Remap a key by its id (the "
                              'right column): reachtui open --keymap keys.toml, with lines like "filter.failure" '
                              '= "F". Escape closes this.', style="dim"), classes="help-section")


class RouteScreen(ModalScreen[LayerEditor | None]):
    """Type a route (`0-3,3,5-11`) and the silenced MLPs (`5` or `3,5`); validated as you type."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="route.cancel")]

    def __init__(self, current: LayerEditor) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="route-box"):
            yield Label(f"route over layers 0-{self.current.num_layers - 1} (ranges a-b, commas; "
                        f"a layer at most twice)")
            yield Input(self.current.route_text, id="route-input", placeholder="e.g. 0-3,3,5-7")
            yield Label("silence MLPs (layers, e.g. 5 or 3,5; empty = none)")
            yield Input(self.current.silenced_text, id="silence-input", placeholder="none")
            yield Static("", id="route-error")
            yield Label("enter: use it   escape: cancel", classes="dim")

    def _parse(self) -> LayerEditor:
        return self.current.with_texts(self.query_one("#route-input", Input).value,
                                       self.query_one("#silence-input", Input).value)

    @on(Input.Changed)
    def _validate(self) -> None:
        err = self.query_one("#route-error", Static)
        try:
            iv = self._parse()
        except ReachError as exc:
            err.update(Text(str(exc), style="bold red"))
        else:
            err.update(Text("→ " + iv.describe(), style="green"))

    @on(Input.Submitted)
    def _submit(self) -> None:
        try:
            iv = self._parse()
        except ReachError as exc:
            self.query_one("#route-error", Static).update(Text(str(exc), style="bold red"))
            return
        self.dismiss(iv)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PickScreen(ModalScreen[Any]):
    """Pick one of a list (explorations, runs); enter picks, escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="pick.cancel")]

    def __init__(self, title: str, items: list[tuple[str, Any]], empty: str = "nothing here yet") -> None:
        super().__init__()
        self.title_text = title
        self.items = items
        self.empty = empty

    def compose(self) -> ComposeResult:
        with Vertical(id="pick-box"):
            yield Label(Text(self.title_text, style="bold"))
            if self.items:
                yield OptionList(*[Option(label, id=str(i)) for i, (label, _) in enumerate(self.items)])
            else:
                yield Static(Text(self.empty, style="dim"))

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.items[int(event.option.id)][1])

    def action_cancel(self) -> None:
        self.dismiss(None)
