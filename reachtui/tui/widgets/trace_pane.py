"""The trace pane (`t` toggles it in place of the question detail and the live result): where the edited
intervention changes the selected question's answer — the first token where the default and the edited
outputs differ, the top-5 next tokens under each there with the rank of the gold token, the logit
lens along each route as a strip on the layer strip's grid (one column per route position: a repeated
layer twice, a skipped one absent), and both outputs' tokens by probability. `<` / `>` move the token it
reads. The app's trace worker fills it (`reachtui.engine.trace`); every rank is a number and every
probability a glyph, so it reads without colour too."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from reachtui.engine.trace import At, Trace, legend, token_rows, visible
from reachtui.tui.widgets.layer_strip import CELL, LABEL, window


def rank_cell(rank: int, k: int) -> tuple[str, str]:
    """A lens cell: the rank, bracketed inside the top-k (so it reads without colour), and its style."""
    if rank <= k:
        return f"[{rank}]", "bold reverse green" if rank == 1 else "bold green"
    return (str(rank) if rank < 1000 else f"{rank // 1000}k"), "dim"


def _token(text: str, width: int) -> str:
    shown = visible(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def lens_strip(trace: Trace, at: At, cursor: int, width: int) -> Text:
    """One output's lens as rows on the layer strip's grid: the route's layers, the lens's top token, and
    per watched token its rank after each route position (the route positions around the layer cursor
    when they do not all fit)."""
    route = [r.layer for r in at.lens]
    near = next((p for p, layer in enumerate(route) if layer >= cursor), len(route) - 1)
    shown = window(len(route), near, max(1, (width - LABEL) // CELL))
    head = Text("layer ", style="dim")
    tops = Text("top   ", style="dim")
    for p in shown:
        head.append(f"{route[p]:^{CELL}}", style="bold" if route[p] == cursor else "dim")
        tops.append(f"{_token(at.lens_tops[p], CELL - 1):^{CELL}}", style="italic")
    if shown.start or shown.stop < len(route):
        head.append(f" {shown.start}-{shown.stop - 1} of {len(route)}", style="dim")
    lines = [head, tops]
    for w_i, w in enumerate(trace.watched):
        role = "".join(part[0] for part in w.label.split("+"))       # d, e, de, g
        row = Text(f"{_token(w.text, 3):<3}{role:<3}"[:LABEL], style="bold")
        for p in shown:
            text, style = rank_cell(at.lens[p].ranks[w_i], trace.k)
            row.append(f"{text:^{CELL}}", style=style)
        lines.append(row)
    for line in lines:
        line.no_wrap, line.overflow = True, "ellipsis"
    return Text("\n").join(lines)


def lens_key(trace: Trace) -> Text:
    """What the lens rows say, in one line."""
    return Text(f"lens: rank after each route position ([n]: in the top-{trace.k}) · d default · e edited · "
                f"g the gold token (where the default output leaves the gold)", style="dim")


def at_lines(trace: Trace) -> Text:
    """Per output: the token chosen at the lens position, the gold token's rank there, the top-5."""
    t = Text()
    gold = trace.gold_token
    for a in trace.at:
        t.append(f"{a.output:<8}", style="bold")
        t.append(f"'{visible(a.chosen.text)}' {a.chosen.prob:.2f}", style="bold magenta")
        if gold is not None and a.gold_rank is not None:
            t.append(f"  gold '{visible(gold.text)}' ", style="dim")
            t.append(f"rank {a.gold_rank}", style="bold green" if a.gold_rank <= trace.k else "bold red")
            t.append(f" ({a.gold_prob:.2g})", style="dim")
        t.append("\n  top-5 ", style="dim")
        t.append("  ".join(f"'{visible(x.text)}' {x.prob:.2f}" for x in a.top))
        t.append("\n")
    return t


def output_lines(trace: Trace, width: int) -> Text:
    """Each output's tokens coloured by probability, a bar of glyphs under them (the same probability); the
    token at the lens position in reverse video."""
    t = Text()
    for o in trace.outputs:
        t.append(f"{o.name:<8}", style="bold")
        t.append("✓" if o.correct else "✗", style="bold green" if o.correct else "bold red")
        t.append(f" {o.answer if o.answer is not None else '∅'}\n", style="bold")
        index = 0
        for row in token_rows(o.pieces, o.logprobs, max(10, width - 2)):
            t.append("  ")
            for text, _, style in row:
                t.append(text, style=style + (" reverse" if index == trace.position else ""))
                index += 1
            t.append("\n  ")
            for _, bar, style in row:
                t.append(bar, style=style)
            t.append("\n")
    t.append(legend(), style="dim")
    return t


class TracePane(VerticalScroll):
    """The trace of the selected question (see the module); `show` draws a trace, `busy`/`clear` a line."""

    DEFAULT_CSS = """
    TracePane { height: 1fr; padding: 0 1; }
    TracePane #trace-title { text-style: bold; }
    """

    def compose(self):
        yield Static("", id="trace-title")
        yield Static("", id="trace-body")

    def on_mount(self) -> None:
        self.trace: Trace | None = None
        self.cursor = 0
        self.clear()

    def clear(self, note: str | None = None) -> None:
        self.trace = None
        self.query_one("#trace-title", Static).update(Text(
            note or "trace: where the edited layers change the answer — select a question; edit the layers", style="dim"))
        self.query_one("#trace-body", Static).update("")

    def busy(self, what: str) -> None:
        self.query_one("#trace-title", Static).update(Text(what, style="italic yellow"))

    def show(self, trace: Trace, cursor: int) -> None:
        self.trace, self.cursor = trace, cursor
        self._draw()

    def on_resize(self) -> None:
        if getattr(self, "trace", None) is not None:
            self._draw()

    def _draw(self) -> None:
        t = self.trace
        width = max(20, self.scrollable_content_region.width or self.size.width - 2)
        title = Text()
        title.append(f"trace {t.qid}", style="bold")
        title.append(f"  {t.edited.intervention if t.edited else 'no edit: the default output'}", style="bold magenta")
        title.append(f"  gold {t.gold}", style="bold green")
        title.append(f"\ntoken {t.position} of {t.longest}", style="bold")
        title.append(" (< >)", style="dim")
        if t.edited is not None:
            title.append(" · ", style="dim")
            title.append("same output" if t.divergence is None else f"diverges at token {t.divergence}",
                         style="bold yellow")
        lensed = [a for a in reversed(t.at) if a.lens is not None]     # the edited route first: the strip's
        if lensed:
            title.append(f" · lens of the {lensed[0].output} route ↓", style="dim")
        self.query_one("#trace-title", Static).update(title)
        body = Text()
        if t.lens_problem:
            body.append(t.lens_problem + "\n", style="bold red")
        for i, a in enumerate(lensed):
            if i:
                body.append(f"\nlens of the {a.output} route\n", style="dim")
            body.append_text(lens_strip(t, a, self.cursor, width))
            body.append("\n")
            if i == 0:
                body.append("\n")
                body.append_text(at_lines(t))
        if not lensed:
            body.append_text(at_lines(t))
        else:
            body.append_text(lens_key(t))
            body.append("\n")
        body.append("\n")
        body.append_text(output_lines(t, width))
        self.query_one("#trace-body", Static).update(body)
