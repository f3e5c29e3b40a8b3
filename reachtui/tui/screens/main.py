"""The main screen: the question table and its filters, the selected question, the layer strip. It shows
the app's open run and asks the app (which owns the store, the model and the workers) for everything that
takes time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Input, Static

from reachtui.errors import ReachError
from reachtui.tasks.metadata import same_value, value_kind
from reachtui.tui.actions import bindings
from reachtui.tui.intervention import LayerEditor
from reachtui.tui.state import Counters, Filter, QRow, apply_filter, counters
from reachtui.tui.widgets.layer_strip import LayerStrip
from reachtui.tui.widgets.fitted import Fitted
from reachtui.tui.widgets.footer import FittingFooter
from reachtui.tui.widgets.panes import DetailPane, IntervalsPane, LivePane, RunHeader
from reachtui.tui.widgets.question_table import QuestionTable, header_text
from reachtui.tui.widgets.trace_pane import TracePane

_ABSENT = object()   # a question without the metadata key a filter asks for


def shown_path(path: Path) -> str:
    """A path as the status line writes it: relative to the working folder when inside it (shorter)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class MainScreen(Screen):
    BINDINGS = bindings("main")
    #: under 110 columns the detail pane and the live result stack under the table (app.tcss)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    def __init__(self) -> None:
        super().__init__()
        self.filter = Filter()
        self.found: set[int] | None = None      # search hits (None: no search)
        self.changed: set[int] = set()          # questions an exploration changed (filter "changed")
        self._meta: tuple[int, dict[int, dict[str, Any]]] | None = None   # (run id, its questions' metadata)
        self.members: dict[int, set[int]] = {}  # frozen set id -> its question keys
        self.counters: Counters | None = None
        self.intervention: LayerEditor | None = None
        self.detail_timer = None
        self.lens_order: dict[str, dict[str, int]] = {}   # probe -> qid -> place (the failure set sorted by the lens)
        self.trace_target: int | None = None    # the token `<` / `>` asked for, while a move is on its way

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static(header_text(()), id="table-header")
                yield QuestionTable(id="questions")
            with Vertical(id="right"):      # what the selected question and the keys show
                yield DetailPane(id="detail")
                yield IntervalsPane(id="intervals")
                yield LivePane(id="live")
                yield TracePane(id="trace")
        yield LayerStrip(id="layers")
        with Horizontal(id="search-row"):    # one line over the status line, which stays
            yield Static("search ", id="search-label")
            yield Input(placeholder="questions and outputs (FTS) — enter to filter, escape to clear", id="search",
                        compact=True)
        yield Fitted(mode="fit", sep="  │ ", id="status")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.query_one("#search-row").display = False
        self.query_one(QuestionTable).focus()
        self.app.main_ready()

    @property
    def table(self) -> QuestionTable:
        return self.query_one(QuestionTable)

    # ---- the open run -----------------------------------------------------------------------------

    def show_run(self, new_run: bool) -> None:
        """Draw the app's open run (after a load or a reload)."""
        run, app = self.app.run_info, self.app
        self.query_one("#table-header", Static).update(header_text(run.probes))
        if self.intervention is None or new_run:
            n = run.num_layers or (app.runner.num_layers if app.runner is not None else None)
            if n:
                self.set_intervention(LayerEditor.identity(n))
        if (self.filter.kind == "failure" and self.filter.probe not in run.probes) or (
                new_run and self.filter.kind in ("changed", "meta")):
            self.filter = Filter(search=self.filter.search)
        self.apply_view(new_view=new_run)

    def reset_view(self) -> None:
        self.members.clear()
        self.lens_order.clear()
        self.filter = Filter()
        self.found = None

    def members_of(self, probe: str | None) -> set[int] | None:
        fs = self.app.frozen.get(probe)
        if fs is None or self.app.data is None:
            return None
        if fs["id"] not in self.members:
            self.members[fs["id"]] = self.app.data.set_members(fs["id"])
        return self.members[fs["id"]]

    def view_rows(self) -> list[QRow]:
        run = self.app.run_info
        if run is None:
            return []
        if self.filter.kind == "changed":
            members = self.changed
        elif self.filter.kind == "meta":
            members = {key for key, meta in self.question_meta().items()
                       if same_value(meta.get(self.filter.probe, _ABSENT), self.filter.value)}
        else:
            members = self.members_of(self.filter.probe) if self.filter.kind == "failure" else None
        rows = apply_filter(self.app.all_rows, run.probes, self.filter, members=members, found=self.found)
        order = self.lens_order.get(self.filter.probe) if self.filter.kind == "failure" else None
        if order:           # L: the failure set sorted by the logit lens
            rows = sorted(rows, key=lambda r: order.get(r.qid, len(order)))
        return rows

    def apply_view(self, new_view: bool = True) -> None:
        """Show the rows of the filter (`new_view`: another filter, whose rows start at the top unless the
        selected question is among them; else the same view re-read)."""
        run = self.app.run_info
        before = self.current_row()
        self.table.set_rows(self.view_rows(), run.probes if run else (), new_view=new_view)
        if self.current_row() != before:  # same question, new attempts (the audit moved on): redraw it
            self.highlighted(None)
        self.counters = counters(self.app.all_rows, run.probes, {p: fs["size"] for p, fs in self.app.frozen.items()}) \
            if run else None
        self.refresh_chrome()

    def refresh_chrome(self) -> None:
        app = self.app
        self.query_one(RunHeader).show(app.run_info, self.counters, app.model_status)
        shown, total, label = len(self.table.rows), len(app.all_rows), self.filter.label()
        note = ""
        if self.filter.kind == "failure":
            note = " [frozen set]" if self.filter.probe in app.frozen else " [live: reachable ∧ ¬realized]"
        app.sub_title = f"{label} — {shown} of {total}"
        parts = [(Text(f"filter: {label} — {shown} of {total} questions{note}"), 9)]
        if self.found is not None:
            parts.append((Text("escape clears the search"), 2))
        if self.filter.kind == "failure" and self.filter.probe in self.lens_order:
            parts.append((Text("sorted by the logit lens (L)"), 3))
        if app.last_export is not None:
            parts.append(([Text(f"exported → {shown_path(app.last_export)}"), Text(f"exported → {app.last_export.name}")], 5))
        self.query_one("#status", Fitted).show(parts)

    # ---- what the app shows on this screen (its workers' progress and results) ----------------------

    def show_progress(self, done: int | None, total: int | None, text: str = "") -> None:
        """The progress bar in the header: the background audit's, or the model loading (None, None: none)."""
        self.query_one(RunHeader).progress(done, total, text)

    @property
    def intervals_shown(self) -> bool:
        return self.query_one("#right").has_class("-intervals")

    def show_intervals(self, content: str | tuple | None) -> None:
        """The intervals in the detail pane's place (a line, or `tables.header_grid`'s cells; None: the
        detail again)."""
        self.query_one("#right").set_class(content is not None, "-intervals")
        self._front("info")
        if content is not None:
            self.query_one(IntervalsPane).show(content)

    def _front(self, which: str) -> None:
        """Under 110 columns the pane under the table shows one thing: the live pane (a live run, an apply)
        or the question / the intervals; the latest key decides (app.tcss)."""
        self.query_one("#right").set_class(which == "live", "-live-front")

    def show_live(self, result: dict[str, Any]) -> None:
        current = self.current_row()
        self.query_one(LivePane).result(result, elsewhere=current is not None and current.qid != result["qid"])
        self._front("live")

    def live_failed(self, line: str) -> None:
        self.query_one(LivePane).clear(line)
        self._front("live")

    def show_trace(self, trace) -> None:
        self.query_one(TracePane).show(trace, self.query_one(LayerStrip).position)
        target, self.trace_target = self.trace_target, None
        if target is not None and target != trace.position:      # keys pressed while it was on its way
            self._move_trace_to(target)

    def trace_failed(self, line: str) -> None:
        self.query_one(TracePane).clear(line)

    def show_applied(self, info: dict[str, Any]) -> None:
        self.query_one(LivePane).applied(info)
        self._front("live")

    def model_problem(self, text: str) -> None:
        """The model failed to load: said on the layer strip, where it stays."""
        self.query_one(LayerStrip).problem = text

    def forget_members(self) -> None:
        """The frozen sets changed: their members are read again when shown."""
        self.members.clear()

    # ---- filters and search -----------------------------------------------------------------------

    def question_meta(self) -> dict[int, dict[str, Any]]:
        """The open run's questions' metadata (read once per run)."""
        run, data = self.app.run_info, self.app.data
        if run is None or data is None:
            return {}
        if self._meta is None or self._meta[0] != run.id:
            self._meta = (run.id, data.question_meta(run.id))
        return self._meta[1]

    def meta_values(self, most: int = 100) -> dict[str, list[Any]]:
        """Per metadata key, its distinct values (first seen first), for keys with at most `most` of them:
        what the palette offers as `filter: KEY = VALUE`."""
        values: dict[str, dict[tuple[str, Any], Any]] = {}      # by kind too: 1 and true are two values
        for meta in self.question_meta().values():
            for key, value in meta.items():
                if isinstance(value, (str, int, float, bool)) or value is None:
                    values.setdefault(key, {}).setdefault((value_kind(value), value), value)
        return {k: list(v.values()) for k, v in values.items() if len(v) <= most}

    def set_meta_filter(self, key: str, value: Any) -> None:
        """Show the questions whose metadata `key` is `value`."""
        self.filter = Filter("meta", key, self.filter.search, value)
        self.apply_view()

    def set_filter(self, kind: str, probe: str | None = None) -> None:
        self.filter = Filter(kind, probe, self.filter.search)
        self.apply_view()

    def action_filter(self, kind: str) -> None:
        self.set_filter(kind)

    def action_failure_filter(self) -> None:
        run = self.app.run_info
        if run is None or not run.probes:
            self.notify("no reach probe in this run", severity="warning")
            return
        probes = list(run.probes)
        if self.filter.kind == "failure" and self.filter.probe in probes:
            nxt = probes[(probes.index(self.filter.probe) + 1) % len(probes)]
        else:
            nxt = probes[0]
        self.set_filter("failure", nxt)

    def show_changed(self, exploration_id: int) -> None:
        """Filter the table to the questions an exploration repaired or broke."""
        if self.app.data is None or self.app.run_info is None:
            return
        repaired, broken = self.app.data.exploration_changes(self.app.run_info.id, exploration_id)
        self.changed = repaired | broken
        self.filter = Filter("changed", f"exploration #{exploration_id} ({len(repaired)} repaired, "
                                        f"{len(broken)} broken)", self.filter.search)
        self.apply_view()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`/` is a priority binding (see actions.Action.priority): inside an input it types a slash."""
        if action == "search" and isinstance(self.focused, Input):
            return False
        return True

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        self.query_one("#search-row").display = True
        # focus now, not after the queue (Widget.focus defers): keys typed right after `/` are already
        # queued behind this action and must reach the box, never the screen's bindings
        self.set_focus(box)

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self.action_clear_search()
            return
        if self.app.data is None or self.app.run_info is None:
            return
        self.found = self.app.data.search(self.app.run_info.id, text)
        self.filter = Filter(self.filter.kind, self.filter.probe, text)
        self.query_one("#search-row").display = False  # the search stays on (status line) until escape
        self.table.focus()
        self.apply_view()

    def action_clear_search(self) -> None:
        box = self.query_one("#search", Input)
        box.value = ""
        self.query_one("#search-row").display = False
        if self.found is not None:
            self.found = None
            self.filter = Filter(self.filter.kind, self.filter.probe, None)
            self.apply_view()
        self.table.focus()

    # ---- the selected question --------------------------------------------------------------------

    @on(QuestionTable.Highlighted)
    def highlighted(self, msg: QuestionTable.Highlighted | None) -> None:
        live = self.query_one(LivePane)
        if msg is not None and live.qid is not None and live.qid != msg.qid:
            live.clear()      # another question: the last one's live result would read as this one's
            self._front("info")
        if self.detail_timer is not None:
            self.detail_timer.stop()
        self.detail_timer = self.set_timer(0.05, self._show_detail)

    def _show_detail(self) -> None:
        self.detail_timer = None
        try:
            detail = self.query_one(DetailPane)
        except NoMatches:  # the timer fired while the app was closing
            return
        row, data, run = self.current_row(), self.app.data, self.app.run_info
        if self.tracing:            # the detail is hidden: drawn again when the pane goes (`action_toggle_trace`)
            self.request_trace()
            return
        if row is None or data is None or run is None:
            detail.show(None, None, [])
            return
        detail.show(data.question(row.key), data.default_attempt(run.id, row.key), data.hits(run, row.key))

    def current_row(self) -> QRow | None:
        t = self.table
        return t.rows[t.cursor] if 0 <= t.cursor < len(t.rows) else None

    # ---- the layer strip --------------------------------------------------------------------------

    def set_intervention(self, iv: LayerEditor) -> None:
        changed = iv != self.intervention
        self.intervention = iv
        self.query_one(LayerStrip).intervention = iv
        if changed and self.tracing:        # silencing a block shows on the lens at once
            self.request_trace()

    def _need_layers(self) -> bool:
        if self.intervention is None:
            self.notify("the layer count is not known until the model loads (press enter to load it)",
                        severity="warning")
            return False
        return True

    def action_layer_move(self, step: int) -> None:
        if self._need_layers():
            strip = self.query_one(LayerStrip)
            strip.position = strip.position + step
            if self.tracing and self.app.last_trace is not None:      # the lens strip follows the cursor
                self.query_one(TracePane).show(self.app.last_trace, strip.position)

    def edit_layer(self, op: str, layer: int | None = None) -> None:
        if not self._need_layers():
            return
        strip = self.query_one(LayerStrip)
        if layer is None:
            layer = strip.position
        else:
            strip.position = layer
        iv = self.intervention
        new = {"skip": iv.toggle_skip, "repeat": iv.more, "less": iv.less, "silence": iv.toggle_silence}[op](layer)
        if new is iv and op != "silence":
            self.notify("a route needs at least one layer", severity="warning")
        elif new == iv and op == "repeat":
            self.notify("a layer runs at most twice in a route", severity="warning")
        self.set_intervention(new)

    def action_layer(self, op: str) -> None:
        self.edit_layer(op)

    def action_reset_layers(self) -> None:
        if self._need_layers():
            self.set_intervention(self.intervention.reset())

    def action_edit_route(self) -> None:
        from reachtui.tui.screens.modals import RouteScreen

        def done(iv: LayerEditor | None) -> None:
            if iv is not None:
                self.set_intervention(iv)

        if self._need_layers():
            self.app.push_screen(RouteScreen(self.intervention), done)

    # ---- actions that need the model --------------------------------------------------------------

    def action_live_run(self) -> None:
        row, data, run = self.current_row(), self.app.data, self.app.run_info
        if row is None or data is None or run is None:
            self.notify("no question selected", severity="warning")
            return
        what = self.intervention.describe() if self.intervention else "default"
        if self.app.runner is None and not self.app.audit_running:
            wait = " … after loading the model (once, a few seconds; keys stay live)"
        elif self.app.audit_running:
            wait = " … (waits for the model between audit batches)"
        else:
            wait = " …"
        if self.tracing:            # the pane shows the edited output, its answer and its tokens: no second run
            self.request_trace()
            self.query_one(LivePane).clear(f"live run of {row.qid} under {what}: in the trace pane (t)")
            return
        self.query_one(LivePane).busy(f"running {row.qid} under {what}{wait}", qid=row.qid)
        self._front("live")
        self.app.start_live_run(run, data.question(row.key), data.default_attempt(run.id, row.key), self.intervention)

    # ---- the trace pane ---------------------------------------------------------------------------

    @property
    def tracing(self) -> bool:
        """The trace pane is shown (in place of the detail and the live result: app.tcss, `#right.-trace`)."""
        try:
            return self.query_one("#right").has_class("-trace")
        except NoMatches:       # the app is closing
            return False

    def action_toggle_trace(self) -> None:
        on = not self.tracing
        self.query_one("#right").set_class(on, "-trace")
        if on:
            self.request_trace()
        else:
            self._show_detail()

    def request_trace(self, position: int | None = None) -> None:
        """Trace the selected question under the edited layers (the app's worker; a newer request wins)."""
        row, data, run = self.current_row(), self.app.data, self.app.run_info
        if row is None or data is None or run is None:
            self.query_one(TracePane).clear("trace: no question selected")
            return
        what = self.intervention.describe() if self.intervention else "default"
        self.trace_target = None
        self.query_one(TracePane).busy(f"tracing {row.qid} under {what} …")
        self.app.start_trace(data.question(row.key), self.intervention, position)

    def action_trace_move(self, step: int) -> None:
        trace, row = self.app.last_trace, self.current_row()
        if not self.tracing or trace is None or row is None or trace.qid != row.qid:
            return
        start = trace.position if self.trace_target is None else self.trace_target
        self._move_trace_to(max(0, min(start + step, trace.longest - 1)))

    def _move_trace_to(self, position: int) -> None:
        """Read the trace on screen at token `position`; while a trace or a move is on its way, remember it
        (`show_trace` moves there once that one arrives)."""
        if any(w.group == "trace" and w.is_running for w in self.app.workers):
            self.trace_target = position
        elif position != self.app.last_trace.position:
            self.trace_target = position
            self.app.move_trace(position)

    def sort_by_lens(self, probe: str, rows: list[dict[str, Any]]) -> None:
        """Order failure set `probe` by the logit lens over its members (`reachtui.tables.lens.lens_order`)."""
        from reachtui.tables.lens import lens_order

        self.lens_order[probe] = {qid: i for i, qid in enumerate(lens_order(rows))}
        if self.filter.kind == "failure" and self.filter.probe == probe:
            self.apply_view()

    def apply_probe(self) -> str | None:
        """The failure set `A` applies to: the one shown, else the one the MLP scan ran on, else the first."""
        run, app = self.app.run_info, self.app
        if run is None or not run.probes:
            return None
        if self.filter.kind == "failure":
            return self.filter.probe
        scan = app.data.mlp_scan(run.id) if app.data is not None else []
        for p, fs in app.frozen.items():
            if scan and fs["name"] == scan[0]["set_name"]:
                return p
        return next((p for p in run.probes if p in app.frozen), run.probes[0])

    def action_apply(self) -> None:
        probe = self.apply_probe()
        if probe is None:
            self.notify("no failure set to apply to", severity="warning")
            return
        self.app.apply_intervention(probe)

    def action_explorations(self) -> None:
        from reachtui.tui.screens.modals import PickScreen

        data, run = self.app.data, self.app.run_info
        if data is None or run is None:
            return
        items = [(f"#{e['id']} {e['name']} · repaired {e['repaired']} · broken {e['broken']} · {e['status']}", e)
                 for e in data.explorations(run.id)]
        self.app.push_screen(PickScreen("explorations of this run (enter re-opens one)", items,
                                        "no exploration yet: edit the layers, then A"), self.reopen_exploration)

    def reopen_exploration(self, e: dict[str, Any] | None) -> None:
        """Show a stored exploration: its intervention on the layer strip, its counts, the questions it changed."""
        data, run = self.app.data, self.app.run_info
        if e is None or run is None or data is None:
            return
        n = self.intervention.num_layers if self.intervention else run.num_layers
        if n:
            try:
                self.set_intervention(LayerEditor.identity(n).with_texts(e["route"], e["silenced"]))
            except ReachError as exc:
                self.notify(str(exc), severity="error")
        target = e["target"].split("+")[0]
        fs = next((f for f in self.app.frozen.values() if f["name"] == target), None)
        self.app.show_apply(dict(exploration_id=e["id"], name=e["name"], target=target, done=e["n"], total=e["n"],
                                 repaired=e["repaired"], failure_n=fs["size"] if fs else 0, broken=e["broken"],
                                 realized_n=len(data.store.realized_ids(run.id)), status=e["status"]))
        self.show_changed(e["id"])
