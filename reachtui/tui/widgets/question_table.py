"""The question table: a line-API `ScrollView` (as in Toolong) that renders only the rows on screen.

Textual's `DataTable` keeps a widget-side copy of every row and costs about a second per 10,000 adds;
this table holds a plain list of `QRow` tuples (built by `reachtui.tui.data`) and renders a row into a
`Strip` only when it scrolls into view, so 10,000 rows open and filter in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from reachtui.tui.actions import bindings
from reachtui.tui.fit import cut_at_word
from reachtui.tui.state import QRow, cell_status

ID_WIDTH = 12
PROBE_WIDTH = 9
#: A probe cell's glyph per `reachtui.tui.state.cell_status`: a probe column shows the probe's own hit, so
#: its ● and ◆ together are the questions its reachable % counts.
GLYPHS = {
    "hit": "●",  # the probe reached the gold, and the default output has it too
    "reached": "◆",  # the probe reached the gold, the default output did not: a failure-set member
    "unreached": "○",  # no attempt of the probe reached the gold
    "pending": "…",  # the audit has not written all of the probe's attempts yet
}
#: The style part (a component class) a cell status is drawn in.
STYLE_OF = {"hit": "realized", "reached": "reached", "unreached": "unreached", "pending": "pending"}


def probe_cell(status: str, first_hit: int | None) -> str:
    """The text of one probe cell: glyph, then the first hit k (1-based) when the probe reached the gold."""
    glyph = GLYPHS[status]
    hit = "" if first_hit is None or status not in ("hit", "reached") else str(first_hit)
    return f" {glyph} {hit:>4}  "[:PROBE_WIDTH].ljust(PROBE_WIDTH)


def header_text(probes: Sequence[str]) -> str:
    cols = ["id".ljust(ID_WIDTH), " R "]
    cols += [f" {p[:PROBE_WIDTH - 2]}".ljust(PROBE_WIDTH) for p in probes]
    cols.append(" question")
    return "".join(cols)


class QuestionTable(ScrollView, can_focus=True):
    """One line per question: id, realized mark, a status glyph + first hit per probe, first line."""

    COMPONENT_CLASSES = {
        "questiontable--cursor",
        "questiontable--realized",
        "questiontable--reached",
        "questiontable--unreached",
        "questiontable--pending",
        "questiontable--id",
    }

    DEFAULT_CSS = """
    QuestionTable { height: 1fr; overflow-x: hidden; }
    QuestionTable > .questiontable--cursor { background: $primary 35%; text-style: bold; }
    QuestionTable:focus > .questiontable--cursor { background: $primary 70%; }
    QuestionTable > .questiontable--realized { color: $success; }
    QuestionTable > .questiontable--reached { color: $warning; text-style: bold; }
    QuestionTable > .questiontable--unreached { color: $error; }
    QuestionTable > .questiontable--pending { color: $text-muted; }
    QuestionTable > .questiontable--id { color: $text-muted; }
    """

    BINDINGS = bindings("table")

    cursor: reactive[int] = reactive(0, always_update=False)

    class Highlighted(Message):
        """The cursor moved onto a question (or the view emptied: qid None)."""

        def __init__(self, table: QuestionTable, qid: str | None) -> None:
            super().__init__()
            self.table = table
            self.qid = qid

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None):
        super().__init__(name=name, id=id, classes=classes)
        self.rows: list[QRow] = []
        self.probes: tuple[str, ...] = ()
        self._index: dict[str, int] = {}
        self._last_posted: str | None = None

    # ---- data -------------------------------------------------------------------------------------

    def set_rows(self, rows: list[QRow], probes: Sequence[str], *, keep_qid: str | None = None,
                 new_view: bool = True) -> None:
        """Replace the view. The cursor stays on `keep_qid` (or the current question) if still shown; else a
        new view (another filter, an exploration's questions) starts at its top, and the same view re-read
        (the audit moved on) keeps the cursor's place."""
        current = keep_qid if keep_qid is not None else self.current_qid
        self.rows = rows
        self.probes = tuple(probes)
        self._index = {r.qid: i for i, r in enumerate(rows)}
        self.virtual_size = Size(self.size.width, len(rows))
        target = self._index.get(current, None) if current is not None else None
        if target is None:
            target = 0 if new_view else min(self.cursor, max(len(rows) - 1, 0))
        self.set_reactive(QuestionTable.cursor, target)
        self._scroll_cursor_into_view()
        self.refresh()
        self._post_highlight()

    @property
    def current_qid(self) -> str | None:
        if 0 <= self.cursor < len(self.rows):
            return self.rows[self.cursor].qid
        return None

    @property
    def row_ids(self) -> list[str]:
        return [r.qid for r in self.rows]

    def select_qid(self, qid: str) -> bool:
        i = self._index.get(qid)
        if i is None:
            return False
        self.cursor = i
        return True

    # ---- cursor -----------------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        top = round(self.scroll_y)
        self._scroll_cursor_into_view()
        if round(self.scroll_y) == top:  # no scroll: only the two rows whose highlight changed
            width = self.size.width
            self.refresh(Region(0, old - top, width, 1), Region(0, new - top, width, 1))
        else:
            self.refresh()
        self._post_highlight()

    def _post_highlight(self) -> None:
        qid = self.current_qid
        if qid != self._last_posted:
            self._last_posted = qid
            self.post_message(self.Highlighted(self, qid))

    def _scroll_cursor_into_view(self) -> None:
        height = max(self.scrollable_content_region.height, 1)
        top = round(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_page_down(self) -> None:
        self.cursor += max(self.scrollable_content_region.height - 1, 1)

    def action_page_up(self) -> None:
        self.cursor -= max(self.scrollable_content_region.height - 1, 1)

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = len(self.rows) - 1

    def on_click(self, event: events.Click) -> None:
        y = round(self.scroll_y) + event.y
        if 0 <= y < len(self.rows):
            self.cursor = y

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.rows))
        self._scroll_cursor_into_view()

    # ---- rendering --------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _line_styles(self) -> dict[tuple[str, bool], Style]:
        """The styles of each part (id, glyphs, text) for a normal and a cursor row, computed once per
        theme/CSS change rather than once per rendered line."""
        if getattr(self, "_styles", None) is None:
            base = self.rich_style
            cursor = base + self.get_component_rich_style("questiontable--cursor")
            styles: dict[tuple[str, bool], Style] = {("text", False): base, ("text", True): cursor}
            for part in ("id", "realized", "reached", "unreached", "pending"):
                colour = self.get_component_rich_style(f"questiontable--{part}", partial=True)
                styles[(part, False)] = base + colour
                styles[(part, True)] = cursor + Style(color=colour.color, bold=colour.bold)
            self._styles = styles
        return self._styles

    def status_segments(self, row: QRow, cur: bool, styles) -> list[Segment]:
        """The cells between the id and the question text: realized, then a glyph and first hit per probe."""
        if row.realized is None:
            out = [Segment(" … ", styles[("pending", cur)])]
        elif row.realized:
            out = [Segment(" ✓ ", styles[("realized", cur)])]
        else:
            out = [Segment(" ✗ ", styles[("unreached", cur)])]
        for p in range(len(self.probes)):
            status = cell_status(row, p)
            out.append(Segment(probe_cell(status, row.first_hit[p]), styles[(STYLE_OF[status], cur)]))
        return out

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width     # the scroll bar's columns are not the text's
        index = round(self.scroll_y) + y
        styles = self._line_styles()
        if index >= len(self.rows):
            return Strip.blank(width, styles[("text", False)])
        row = self.rows[index]
        cur = index == self.cursor
        segments = [Segment(f"{row.qid[:ID_WIDTH - 1]:<{ID_WIDTH}}", styles[("id", cur)])]
        segments += self.status_segments(row, cur, styles)
        used = sum(seg.cell_length for seg in segments)
        segments.append(Segment(" " + cut_at_word(row.text, max(width - used - 1, 0)), styles[("text", cur)]))
        return Strip(segments).adjust_cell_length(width, styles[("text", cur)]).apply_offsets(0, index)
