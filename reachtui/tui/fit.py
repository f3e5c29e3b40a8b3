"""Text that fits a terminal's width without cutting a word: a line of parts that drops its least important
parts first (`fit_line`), parts packed into lines without breaking one (`pack_lines`), and a text cut at a
word boundary with an ellipsis (`cut_at_word`). Pure Rich: the widgets call these with their width."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text

ELLIPSIS = "…"


def fit_line(parts: Sequence[tuple[Text | Sequence[Text], int]], width: int, sep: Text | str = "") -> Text:
    """The parts (text, priority) joined by `sep` on one line of at most `width` cells: while it is too
    wide, the part of lowest priority (the last of equal ones first) takes its next shorter form (a part
    may be a list of forms, longest first) or, with none left, goes. What must stay (the highest priority)
    is kept even where it alone is too wide: the widget then wraps it at its words."""
    forms = [[p] if isinstance(p, Text) else list(p) for p, _ in parts]
    chosen = {i: 0 for i in range(len(parts))}     # kept part -> the form it shows
    sep = Text(sep) if isinstance(sep, str) else sep

    def joined() -> Text:
        return sep.join(forms[i][chosen[i]] for i in sorted(chosen))

    top = max((p for _, p in parts), default=0)
    while len(chosen) > 1 and joined().cell_len > width:
        droppable = [i for i in chosen if parts[i][1] < top]
        if not droppable:
            break
        i = min(reversed(droppable), key=lambda i: parts[i][1])
        if chosen[i] + 1 < len(forms[i]):
            chosen[i] += 1
        else:
            del chosen[i]
    return joined()


def pack_lines(parts: Sequence[Text], width: int, sep: Text | str = "  ") -> Text:
    """The parts in order, as many on a line as fit in `width` cells (`sep` between two on a line): a line
    breaks between parts, never inside one, unless a part alone is wider than a line (then the widget
    wraps it at its words)."""
    sep = Text(sep) if isinstance(sep, str) else sep
    lines: list[Text] = []
    for part in parts:
        if lines and lines[-1].cell_len + sep.cell_len + part.cell_len <= width:
            lines[-1] = Text.assemble(lines[-1], sep, part)
        else:
            lines.append(part.copy())
    return Text("\n").join(lines)


def cut_at_word(text: str, width: int) -> str:
    """`text` in at most `width` cells: whole if it fits, else cut after its last whole word that leaves
    room for " …" (a single word wider than that is cut where it must, with the ellipsis)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    room = width - 2                              # " …"
    head = text[:room]
    while cell_len(head) > room:                   # wide characters
        head = head[:-1]
    if room < len(text) and not text[room].isspace() and not head.endswith(" "):    # the cut is inside a word
        if " " not in head.strip():                # a single word wider than the room: cut where it must
            head = text[:width - 1]
            while cell_len(head) > width - 1:
                head = head[:-1]
            return head + ELLIPSIS
        head = head[:head.rstrip().rfind(" ")]      # back to the last space: no half word
    return f"{head.rstrip()} {ELLIPSIS}"
