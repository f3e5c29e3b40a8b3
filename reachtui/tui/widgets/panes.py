"""The main screen's panes: the run header, the question detail, the live-run result, the status line."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Collapsible, ProgressBar, Static

from reachtui.metadata import shown_value
from reachtui.outcomes import gap
from reachtui.tables.formats import human_value
from reachtui.tui.data import RunInfo, printable, printable_row
from reachtui.tui.state import Counters
from reachtui.tui.diff import same_text, word_diff

MAX_HITS_SHOWN = 24


def mark(correct: bool | None) -> Text:
    if correct is None:
        return Text("?", style="dim")
    return Text("✓", style="bold green") if correct else Text("✗", style="bold red")


class RunHeader(Vertical):
    """Model, task, protocol hash, the live counters and (while the audit runs) a progress bar."""

    DEFAULT_CSS = """
    RunHeader { height: auto; background: $panel; padding: 0 1; }
    RunHeader #run-title { text-style: bold; text-wrap: nowrap; text-overflow: ellipsis; }
    RunHeader #progress-row { display: none; height: 1; }
    RunHeader.running #progress-row { display: block; }
    RunHeader #run-intervals { display: none; color: $text-muted; }
    RunHeader.intervals #run-intervals { display: block; }
    RunHeader #progress-label { width: auto; margin-left: 2; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Static("reachtui", id="run-title")
        yield Static("", id="run-counters")
        yield Static("", id="run-intervals")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=None, show_eta=False, id="progress")
            yield Static("", id="progress-label")

    def show(self, run: RunInfo | None, counters: Counters | None, model_status: str) -> None:
        title = Text()
        if run is None:
            title.append("reachtui", style="bold")
            title.append("  no run yet", style="dim")
        else:
            title.append(f"{run.model}", style="bold")
            title.append(" · task ", style="dim")
            title.append(f"{run.task}")
            title.append(" · protocol ", style="dim")
            title.append(run.protocol_hash[:8], style="bold cyan")
            title.append(f" · run {run.id} ", style="dim")
            style = {"complete": "green", "running": "yellow"}.get(run.status, "red")
            title.append(run.status, style=style)
        title.append("  │ model ", style="dim")
        title.append(model_status, style="italic")
        self.query_one("#run-title", Static).update(title)
        self.query_one("#run-counters", Static).update(counter_text(run, counters))

    @property
    def intervals_shown(self) -> bool:
        return self.has_class("intervals")

    def show_intervals(self, text: str | None) -> None:
        """Show `text` (reachable / control / excess with intervals) under the counters; None hides it."""
        self.set_class(text is not None, "intervals")
        self.query_one("#run-intervals", Static).update(text or "")

    def progress(self, done: int | None, total: int | None, label: str = "") -> None:
        """Show the audit's progress (done/total attempts of the current phase); None hides the bar."""
        bar = self.query_one(ProgressBar)
        if done is None:
            self.remove_class("running")
            return
        self.add_class("running")
        bar.update(total=total or None, progress=done)
        self.query_one("#progress-label", Static).update(f"audit: {label}" if label else "audit running")


def counter_text(run: RunInfo | None, c: Counters | None) -> Text:
    """The header's counters: realized and, per probe, reachable, gap and the failure set's size, written as
    the tables write them (`reachtui.tables.formats.human_value`, the gap of `reachtui.outcomes`). A
    figure that is not final yet (the audit has not given every question its attempts) says so: "so far
    (n of N questions)", and no gap."""
    t = Text()
    if run is None or c is None or not c.n:
        t.append("waiting for the first attempts…", style="dim")
        return t
    t.append("realized ", style="dim")
    if not c.final():
        t.append(f"{c.realized} of {c.done} so far", style="bold green")
        t.append(f" ({c.done} of {c.n} questions)", style="dim")
    else:
        t.append(f"{human_value(c.share(c.realized), 'frac')}%", style="bold green")
    for p in run.probes:
        t.append("  │ ", style="dim")
        t.append(f"{p} ", style="dim")
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
            t.append(f"  gap {human_value(gap(reachable, c.share(c.realized)), 'frac', signed=True)}", style="")
        t.append(f"  F={c.failure[p]}", style="bold")
    t.append(f"  │ {run.questions_label(c.n)}", style="dim")
    return t


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
                text = printable(shown_value(value), one_line=True)
                title.append(text if len(text) <= 60 else text[:59] + "…")
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


class LivePane(Static):
    """The answer under the edited intervention beside the default one, and how the text differs."""

    DEFAULT_CSS = """
    LivePane { height: auto; max-height: 12; padding: 0 1; border-top: solid $primary; }
    """

    def on_mount(self) -> None:
        self.clear()

    def clear(self, note: str | None = None) -> None:
        self.update(Text(note or "live run: edit the layers below, then enter", style="dim"))

    def busy(self, what: str) -> None:
        self.update(Text(what, style="italic yellow"))

    def result(self, r: dict[str, Any]) -> None:
        """r: qid, gold, intervention (text), default_text/answer/correct (or None), text, answer,
        correct, route, silenced, new_tokens, seconds."""
        r = printable_row(r)
        t = Text()
        t.append(f"live run on {r['qid']}", style="bold")
        t.append(f"  {r['intervention']}\n", style="bold magenta")
        t.append("  default ", style="dim")
        if r.get("default_text") is None:
            t.append("(not yet run)\n", style="dim")
        else:
            t.append_text(mark(r["default_correct"]))
            t.append(f" {r['default_answer'] if r['default_answer'] is not None else '∅':<8}", style="bold")
            t.append(f" {r['default_text'].strip()}\n")
        t.append("  edited  ", style="dim")
        t.append_text(mark(r["correct"]))
        t.append(f" {r['answer'] if r['answer'] is not None else '∅':<8}", style="bold")
        t.append(f" {r['text'].strip()}\n")
        waited = r.get("waited") or 0.0
        wait = f" (after {waited:.1f} s waiting for the audit's batch)" if waited >= 0.05 else ""
        t.append(f"  route {r['route']} · silenced {r['silenced'] or 'none'} · {r['new_tokens']} new tokens"
                 f" · {r['seconds']:.2f} s{wait} · gold {r['gold']}\n", style="dim")
        if r.get("default_text") is not None:
            t.append("  diff    ", style="dim")
            if same_text(r["default_text"], r["text"]):
                t.append("same text as the default", style="dim")
            else:
                t.append_text(word_diff(r["default_text"].strip(), r["text"].strip()))
        self.update(t)

    def applied(self, a: dict[str, Any]) -> None:
        """a: name, done, total, repaired, failure_n, broken, realized_n, status, exploration_id."""
        t = Text()
        t.append(f"exploration #{a['exploration_id']} ", style="bold")
        t.append(a["name"], style="bold magenta")
        t.append(f"  [{a['status']}] {a['done']}/{a['total']}\n", style="dim")
        t.append("  repaired ", style="dim")
        t.append(f"{a['repaired']}/{a['failure_n']}", style="bold green")
        if a["failure_n"]:
            t.append(f" ({100 * a['repaired'] / a['failure_n']:.1f}%)")
        t.append(f" of {a['target']}", style="dim")
        t.append("   broken ", style="dim")
        t.append(f"{a['broken']}/{a['realized_n']}", style="bold red")
        if a["realized_n"]:
            t.append(f" ({100 * a['broken'] / a['realized_n']:.1f}%)")
        t.append(" of the realized set", style="dim")
        self.update(t)

