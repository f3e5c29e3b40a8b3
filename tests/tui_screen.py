"""The app's screen as text, for tests that read what a person sees: the lines exactly as the terminal
shows them (`screen_text`), and a check that nothing on them is cut mid-word (`cut_words`): every word
a widget shows must be a whole word of the texts it was given, read from the widget itself (its content,
its border title, the table's rows, a footer key's label), and an interval never breaks across lines."""

from __future__ import annotations

import io
import re

from rich.console import Console

#: Characters that are no part of a word: spaces, box drawing, block elements (scroll bars, progress
#: bars), braille (plots), the pane borders.
SEPARATORS = re.compile(r"[\s\u2500-\u259f\u2800-\u28ff\u2190-\u21ff▕▏]+")
#: An interval that opens on a line and does not close on it: "[8.2," at a line's end.
#: A plot's tick label (plotext writes its axes' numbers).
NUMBER = re.compile(r"^[-+]?\d+(\.\d+)?%?$")
OPEN_INTERVAL = re.compile(r"\[[-+]?\d[\d.]*,?[^\]]*$")


def screen_text(app) -> list[str]:
    """The screen's lines as the terminal shows them, column for column (the top screen over the ones
    under it, as in a screenshot)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    lines = console.export_text(styles=False).split("\n")
    return [line.ljust(width) for line in lines[:height]]


def words(text: str) -> list[str]:
    return [w for w in SEPARATORS.split(text) if any(ch.isalnum() for ch in w)]


def plain(renderable, width: int = 4000) -> str:
    """A renderable's whole text, unwrapped (a wide console)."""
    if renderable is None:
        return ""
    if isinstance(renderable, str):
        return renderable
    if hasattr(renderable, "plain"):
        return renderable.plain
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text(styles=False)


def given_texts(widget) -> list[str]:
    """The texts a widget was given to show (not how it laid them out)."""
    from textual.widgets import Input, OptionList, Static
    from textual.widgets._collapsible import CollapsibleTitle
    from textual.widgets._footer import FooterKey
    from textual.widgets._tabs import Tab
    from textual.widgets._toast import Toast
    from textual_plotext import PlotextPlot

    from reachtui.tui.widgets.fitted import Fitted
    from reachtui.tui.widgets.panes import IntervalsGrid
    from reachtui.tui.widgets.question_table import QuestionTable

    out = [str(widget.border_title or ""), str(widget.border_subtitle or "")]
    if isinstance(widget, Toast):
        out += [widget._notification.title or "", widget._notification.message]
    elif isinstance(widget, QuestionTable):
        styles = widget._line_styles()
        out += [f"{r.qid} {r.text} " + "".join(seg.text for seg in widget.status_segments(r, False, styles))
                for r in widget.rows]
    elif isinstance(widget, FooterKey):
        out += [widget.key_display, widget.description]
    elif isinstance(widget, Input):
        out += [widget.value, widget.placeholder]
    elif isinstance(widget, CollapsibleTitle):
        out += [str(widget.label)]
    elif isinstance(widget, OptionList):
        out += [plain(widget.get_option_at_index(i).prompt) for i in range(widget.option_count)]
    elif isinstance(widget, Tab):
        out += [str(widget.label)]
    elif isinstance(widget, PlotextPlot):
        out += [getattr(widget, "texts", "")]
    elif isinstance(widget, Fitted):
        out += [widget.plain]
    elif isinstance(widget, IntervalsGrid):
        out += [plain(widget.renderable_for(4000))]
    elif isinstance(widget, Static):
        out += [plain(widget.content), plain(widget.render())]
    else:
        out += [plain(widget.render())]
    return out


def _leaves(screen):
    """(widget, its visible region) for every widget on the screen that draws text of its own."""
    from textual.screen import Screen

    visible = screen._compositor.visible_widgets
    for widget, (region, clip) in visible.items():
        if isinstance(widget, Screen) or any(child in visible for child in widget.children):
            continue
        yield widget, region.intersection(clip)


def cut_words(app) -> list[str]:
    """Every word on the top screen that is no whole word of what its widget was given ("palett", "He
    give", "cp…"), and every line where an interval opens and does not close: empty when nothing is cut.
    Only the cells a widget is on top at count as its own (a notification or the palette's list may lie
    over it; a word such an overlay covers in part is not cut by the layout)."""
    from textual.errors import NoWidget
    from textual_plotext import PlotextPlot

    lines = screen_text(app)
    screen = app.screen
    width, height = app.size
    owner = {}
    for y in range(height):
        for x in range(width):
            try:
                owner[x, y] = screen.get_widget_at(x, y)[0]
            except NoWidget:
                owner[x, y] = None
    problems = []
    for widget, region in _leaves(screen):
        vocab = set()
        for text in given_texts(widget):
            vocab.update(words(text))
        # a word wider than the widget (a long path) can only fold: its pieces are no cut
        folded = [v for v in vocab if len(v) >= region.width - 2]
        for y in range(max(region.y, 0), min(region.bottom, height)):
            x = region.x
            while x < region.right:
                if owner.get((x, y)) is not widget:
                    x += 1
                    continue
                x0 = x
                while x < region.right and owner.get((x, y)) is widget:
                    x += 1
                seen = _trim_covered(lines[y][x0:x], x0 > region.x, x < region.right)
                for w in words(seen):
                    if w not in vocab and not any(w in v for v in folded) and not (
                            isinstance(widget, PlotextPlot) and NUMBER.match(w)):
                        problems.append(f"{type(widget).__name__}#{widget.id}: {w!r} in {seen.strip()!r}")
                if OPEN_INTERVAL.search(seen.rstrip()):
                    problems.append(f"{type(widget).__name__}#{widget.id}: an interval breaks: {seen.strip()!r}")
    return problems


def _trim_covered(seen: str, left: bool, right: bool) -> str:
    """A span beside a notification, less the word the notification covers in part."""
    if right and seen and not seen[-1].isspace():
        seen = seen[:len(seen) - len(SEPARATORS.split(seen)[-1])]
    if left and seen and not seen[0].isspace():
        seen = seen[len(SEPARATORS.split(seen)[0]):]
    return seen


def region_text(app, selector: str) -> str:
    """What a widget of the top screen shows, its lines joined with single spaces (wrapping undone)."""
    r = app.screen.query_one(selector).region
    return " ".join(" ".join(line[r.x:r.right] for line in screen_text(app)[r.y:r.bottom]).split())
