"""The main screen's panes: the run header, the question detail, the live-run result, the intervals."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Collapsible, ProgressBar, Static

from reachtui.tasks.metadata import shown_value
from reachtui.outcomes import gap
from reachtui.tables.formats import human_value
from reachtui.tui.data import RunInfo, printable, printable_row
from reachtui.tui.state import Counters
from reachtui.tui.diff import same_text, word_diff
from reachtui.tui.fit import cut_at_word
from reachtui.tui.widgets.fitted import Fitted

MAX_HITS_SHOWN = 24


def mark(correct: bool | None) -> Text:
    if correct is None:
        return Text("?", style="dim")
    return Text("✓", style="bold green") if correct else Text("✗", style="bold red")


class RunHeader(Vertical):
    """Model, task, protocol hash, the live counters and (while the audit runs or the model loads) a progress
    bar. Its lines fit the width they get: the title drops its least important parts, the counters wrap
    between probes, so no word is cut at 80 columns."""

    DEFAULT_CSS = """
    RunHeader { height: auto; background: $panel; padding: 0 1; }
    RunHeader #run-title { text-style: bold; }
    RunHeader #progress-row { display: none; height: 1; }
    RunHeader.running #progress-row { display: block; }
    RunHeader #progress-label { width: 1fr; height: 1; margin-left: 2; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Fitted(mode="fit", sep=" · ", id="run-title")
        yield Fitted(mode="pack", sep=" │ ", id="run-counters")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=None, show_eta=False, id="progress")
            yield Static("", id="progress-label")

    def show(self, run: RunInfo | None, counters: Counters | None, model_status: str) -> None:
        self.query_one("#run-title", Fitted).show(title_parts(run, model_status))
        self.query_one("#run-counters", Fitted).show(counter_parts(run, counters))

    def progress(self, done: int | None, total: int | None, label: str = "") -> None:
        """Show a job's progress (done/total attempts of the audit's current phase, or None: a pulse) under `label`; done None hides the bar."""
        bar = self.query_one(ProgressBar)
        if done is None:
            self.remove_class("running")
            return
        self.add_class("running")
        bar.update(total=total or None, progress=done)
        self.query_one("#progress-label", Static).update(label or "audit running")


def title_parts(run: RunInfo | None, model_status: str) -> list[tuple[Text, int]]:
    """The header's title as (part, priority): at a narrow width the model's details go first, then the
    task, then the protocol hash; the model name, the run and the model's state stay."""
    if run is None:
        parts = [(Text("reachtui", style="bold"), 9), (Text("no run yet", style="dim"), 8)]
    else:
        style = {"complete": "green", "running": "yellow"}.get(run.status, "red")
        parts = [(Text(run.model, style="bold"), 9),
                 (Text.assemble(("task ", "dim"), run.task), 5),
                 (Text.assemble(("protocol ", "dim"), (run.protocol_hash[:8], "bold cyan")), 6),
                 (Text.assemble((f"run {run.id} ", "dim"), (run.status, style)), 8)]
    state, *details = model_status.split(" · ")      # "demo ready · cpu float32 · 8 layers · loaded in 2.1 s"
    parts.append((Text.assemble(("model ", "dim"), (state, "italic")), 7))
    parts += [(Text(d, style="italic dim"), 4 - min(i, 3)) for i, d in enumerate(details)]
    return parts


def counter_parts(run: RunInfo | None, c: Counters | None) -> list[Text]:
    """The header's counters, one part per figure group (they wrap between parts): realized and, per probe,
    reachable, gap and the failure set's size, written as the tables write them
    (`reachtui.tables.formats.human_value`, the gap of `reachtui.outcomes`). A figure that is not final yet
    (the audit has not given every question its attempts) says so: "so far (n of N questions)", and no gap."""
    if run is None or c is None or not c.n:
        return [Text("waiting for the first attempts…", style="dim")]
    t = Text()
    t.append("realized ", style="dim")
    if not c.final():
        t.append(f"{c.realized} of {c.done} so far", style="bold green")
        t.append(f" ({c.done} of {c.n} questions)", style="dim")
    else:
        t.append(f"{human_value(c.share(c.realized), 'frac')}%", style="bold green")
    parts = [t]
    for p in run.probes:
        t = Text()
        t.append(f"{p} ", style="dim")
        parts.append(t)
        complete = c.complete[p]
        if complete == 0 and not c.reached[p]:
            t.append("pending", style="dim italic")
            continue
        if not c.final(p):
            t.append(f"{c.reached[p]} reached so far", style="bold yellow")
            t.append(f" ({complete} of {c.n} questions)", style="dim")
            continue
        reachable = c.share(c.reached[p])
        t.append(f"{human_value(reachable, 'frac')}%", style="bold yellow")
        if c.final():
            t.append(f" gap {human_value(gap(reachable, c.share(c.realized)), 'frac', signed=True)}")
        t.append(f" F={c.failure[p]}", style="bold")
    parts.append(Text(run.questions_label(c.n), style="dim"))
    return parts


def counter_text(run: RunInfo | None, c: Counters | None) -> Text:
    """The counters on one line, as the header shows them where the width allows."""
    return Text(" │ ").join(counter_parts(run, c))


class DetailPane(VerticalScroll):
    """The selected question: text, gold, the default output, and the attempts that reached the gold."""

    DEFAULT_CSS = """
    DetailPane { height: 1fr; padding: 0 1; }
    DetailPane .section { color: $text-muted; text-style: bold; margin-top: 1; }
    DetailPane Collapsible { padding: 0; border: none; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-title")
        yield Static("", id="detail-question")
        yield Static("", id="detail-default")
        yield Static("", id="detail-hits-title", classes="section")
        with Vertical(id="detail-hits"):
            # a fixed pool, updated in place: moving through 10,000 questions never mounts a widget
            for i in range(MAX_HITS_SHOWN):
                c = Collapsible(Static("", classes="hit-text"), title="", collapsed=True, id=f"hit-{i}")
                c.display = False
                yield c
            yield Static("", id="detail-more")

    def show(self, question: dict[str, Any] | None, default: dict[str, Any] | None,
             hits: list[dict[str, Any]]) -> None:
        with self.app.batch_update():      # text from models and files, shown without its control characters
            self._show(printable_row(question), printable_row(default), [printable_row(h) for h in hits])

    def _show(self, question: dict[str, Any] | None, default: dict[str, Any] | None,
              hits: list[dict[str, Any]]) -> None:
        if not question:
            self.query_one("#detail-title", Static).update(Text("no question selected", style="dim"))
            for wid in ("#detail-question", "#detail-default", "#detail-hits-title", "#detail-more"):
                self.query_one(wid, Static).update("")
            hits = []
        else:
            title = Text()
            title.append(f"{question['qid']}", style="bold")
            title.append("  gold ", style="dim")
            title.append(str(question["gold"]), style="bold green")
            for key, value in (question.get("meta") or {}).items():     # the task's other columns, one line each
                title.append(f"  {printable(key, one_line=True)} ", style="dim")
                title.append(cut_at_word(printable(shown_value(value), one_line=True), 60))
            self.query_one("#detail-title", Static).update(title)
            self.query_one("#detail-question", Static).update(Text(question["question"]))
            d = Text()
            d.append("default output  ", style="bold dim")
            if default is None:
                d.append("not yet run", style="dim")
            else:
                d.append_text(mark(bool(default["correct"]) if default["correct"] is not None else None))
                d.append(f"  answer {default['answer'] if default['answer'] is not None else '∅'}\n", style="bold")
                d.append((default["text"] or "").strip() or "(empty)")
            self.query_one("#detail-default", Static).update(d)
            self.query_one("#detail-hits-title", Static).update(
                f"attempts that reached the gold: {len(hits)}" if hits else "no attempt reached the gold")
            more = len(hits) - MAX_HITS_SHOWN
            self.query_one("#detail-more", Static).update(
                Text(f"… and {more} more (export: attempts)", style="dim") if more > 0 else "")
        for i, c in enumerate(self.query(Collapsible)):
            if i < len(hits):
                h = hits[i]
                how = f"route {h['route']}" if h.get("route") else (
                    f"T={h['temperature']:g}" if h.get("temperature") else "default decoding")
                if h.get("silenced"):
                    how += f" · silence {h['silenced']}"
                c.title = f"{h['probe']} #{h['attempt'] + 1} · {how} → {h['answer']}"
                c.query_one(".hit-text", Static).update(Text((h["text"] or "").strip()))
                c.collapsed = True
                c.display = True
            elif c.display:
                c.display = False
        self.scroll_home(animate=False)


class LivePane(VerticalScroll):
    """The answer under the edited intervention beside the default one and how the text differs (the diff
    before the full texts, so a short pane shows it), or an apply's repaired/broken counts. Labels in a
    column of their own: wrapped lines stay aligned. It scrolls where the result is longer than the pane."""

    DEFAULT_CSS = """
    LivePane { height: auto; max-height: 60%; padding: 0 1; border-top: solid $primary; }
    LivePane > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.qid: str | None = None     # the question whose live result (or run) is shown; None: none

    def compose(self) -> ComposeResult:
        yield Static("", id="live-text")

    def on_mount(self) -> None:
        self.clear()

    def _show(self, content, *, qid: str | None = None) -> None:
        self.qid = qid
        self.query_one("#live-text", Static).update(content)
        self.scroll_home(animate=False)

    def clear(self, note: str | None = None) -> None:
        self._show(Text(note or "live run: edit the layers below, then enter", style="dim"))

    def busy(self, what: str, qid: str | None = None) -> None:
        self._show(Text(what, style="italic yellow"), qid=qid)

    def result(self, r: dict[str, Any], *, elsewhere: bool = False) -> None:
        """r: qid, gold, intervention (text), default_text/answer/correct (or None), text, answer,
        correct, route, silenced, new_tokens, seconds. `elsewhere`: the table has moved to another
        question since this one was started (the result says whose it is)."""
        r = printable_row(r)
        title = Text()
        title.append(f"live run on {r['qid']}", style="bold")
        title.append(f" · {r['intervention']}", style="bold magenta")
        if elsewhere:
            title.append(" (not the selected question)", style="yellow")
        rows = _grid()
        answer = Text()
        has_default = r.get("default_text") is not None
        if has_default:
            answer.append("default ")
            answer.append_text(mark(r["default_correct"]))
            answer.append(f" {_answer(r['default_answer'])} → ", style="bold")
        answer.append("edited ")
        answer.append_text(mark(r["correct"]))
        answer.append(f" {_answer(r['answer'])}", style="bold")
        answer.append(f" · gold {r['gold']}" + ("" if has_default else " · no default output yet"), style="dim")
        rows.add_row("answer", answer)
        if has_default:
            same = same_text(r["default_text"], r["text"])
            rows.add_row("diff", Text("same text as the default", style="dim") if same
                         else word_diff(r["default_text"].strip(), r["text"].strip()))
        waited = r.get("waited") or 0.0
        wait = f" · after {waited:.1f} s waiting for the audit's batch" if waited >= 0.05 else ""
        rows.add_row("run", Text(f"route {r['route']} · silenced {r['silenced'] or 'none'} · {r['new_tokens']} new "
                                 f"tokens · {r['seconds']:.2f} s{wait}", style="dim"))
        if has_default:
            rows.add_row("default", r["default_text"].strip() or "(empty)")
        rows.add_row("edited", r["text"].strip() or "(empty)")
        self._show(Group(title, rows), qid=r["qid"])

    def applied(self, a: dict[str, Any]) -> None:
        """a: name, done, total, repaired, failure_n, broken, realized_n, status, exploration_id."""
        title = Text()
        title.append(f"exploration #{a['exploration_id']}", style="bold")
        title.append(f" · {a['name']}", style="bold magenta")
        title.append(f" · {a['status']} {a['done']}/{a['total']}", style="dim")
        rows = _grid()
        for label, k, n, style, of in (("repaired", "repaired", "failure_n", "bold green", f"of {a['target']}"),
                                       ("broken", "broken", "realized_n", "bold red", "of the realized set")):
            t = Text()
            t.append(f"{a[k]}/{a[n]}", style=style)
            if a[n]:
                t.append(f" ({100 * a[k] / a[n]:.1f}%)")
            t.append(f" {of}", style="dim")
            rows.add_row(label, t)
        self._show(Group(title, rows))


def _grid() -> Table:
    """Label | value rows: the labels in a column of their own, a value wraps inside its column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    return grid


def _answer(value: Any) -> str:
    return "∅" if value is None else str(value)


class IntervalsPane(VerticalScroll):
    """Key `i`: per probe reachable, gap, retained, chance control and excess with their 95% intervals, as
    `reachtui export summary` writes the cells, in a grid (a measure per row, a probe per column) and the
    summary's notes under it. An interval never breaks: where a cell does not fit on one line its
    interval goes under its value, and where the probes do not fit side by side they stack."""

    DEFAULT_CSS = """
    IntervalsPane { height: 1fr; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield IntervalsGrid(id="intervals-text")

    def show(self, content: str | tuple | None) -> None:
        """`content`: a line (computing, none), or (labels, rows, notes) of `tables.header_grid`."""
        self.query_one(IntervalsGrid).content = content
        self.query_one(IntervalsGrid).refresh(layout=True)
        self.scroll_home(animate=False)


class IntervalsGrid(Static):
    """The grid of `IntervalsPane`, laid out for the width it gets."""

    content: str | tuple | None = None

    def renderable_for(self, width: int):
        content = self.content
        if not isinstance(content, tuple):
            return Text(content or "", style="dim")
        labels, rows, notes = content
        grid = intervals_grid(labels, rows, width, self.app.console)
        head = [Text("95% intervals", style="bold")] if isinstance(grid, Text) else []   # else the grid's heading
        return Group(*head, grid, *[Text(n, style="dim") for n in notes])

    def render(self):
        return self.renderable_for(self.content_size.width or 10_000)

    def get_content_height(self, container, viewport, width: int) -> int:
        console = self.app.console
        return len(console.render_lines(self.renderable_for(width), console.options.update_width(max(width, 1)),
                                        pad=False))


def intervals_grid(labels: dict[str, str], rows: list[dict[str, str]], width: int, console) -> Table | Text:
    """The measures (rows) by probe (columns), each cell "value [lo, hi]" on one line where they fit, else
    the interval under its value; where even that is too wide, one probe after another."""
    measures = list(labels)

    def table(probes: list[dict[str, str]], split: bool, heads: bool = True) -> Table:
        t = Table(box=None, padding=(0, 2, 0, 0), show_header=heads, header_style="bold", show_edge=False)
        t.add_column("95% intervals", style="dim", no_wrap=True)
        for r in probes:
            t.add_column(r["probe"], no_wrap=True)
        for m in measures:
            t.add_row(labels[m], *[r[m].replace(" [", "\n[", 1) if split else r[m] for r in probes])
        return t

    for split in (False, True):
        t = table(rows, split)
        if console.measure(t).maximum <= width:
            return t
    lines = []           # narrower still: one probe after another, a measure per line, its interval under it
    for r in rows:
        lines.append(Text(r["probe"], style="bold"))
        for m in measures:
            value, _, rest = r[m].partition(" [")
            if cell_len(f"  {labels[m]} {r[m]}") <= width or not rest:
                lines.append(Text.assemble((f"  {labels[m]} ", "dim"), r[m]))
            else:
                lines += [Text.assemble((f"  {labels[m]} ", "dim"), value), Text(f"    [{rest}")]
    return Text("\n").join(lines)
