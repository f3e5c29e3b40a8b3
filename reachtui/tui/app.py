"""The reachtui app: browse an audit question by question, filter failure sets, edit the layers of
the selected question live, apply an intervention to a whole set, look at the charts, export.

Structure (after Harlequin and Posting):
- everything slow runs in thread workers that live on the App (`exit_on_error=False`), post Messages,
  and are handled with `@on`; one `Worker.StateChanged` handler turns a failed worker into a
  notification, never a crash;
- the store is read through `reachtui.tui.data` (read-only connections, one per thread);
- the model loads lazily, once, in whichever worker first needs it (a live run, an apply, the audit),
  with its state in the header; every generation goes through `Runner.generate`, which holds
  `Runner.lock`, so live runs queue between audit batches and never race them;
- correctness of live runs comes from `reachtui.grading.grade`, the one grader.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Footer, Input, Static
from textual.css.query import NoMatches
from textual.worker import Worker, WorkerState, get_current_worker

from reachtui.errors import ReachError
from reachtui.tui.data import AuditData, Counters, Filter, QRow, RunInfo, apply_filter, counters
from reachtui.tui.intervention import Intervention
from reachtui.tui.palette import ReachCommands
from reachtui.tui.widgets.layer_strip import LayerStrip
from reachtui.tui.widgets.panes import DetailPane, LivePane, RunHeader
from reachtui.tui.widgets.question_table import QuestionTable, header_text

START = time.perf_counter()
APPLY_CHUNK = 64  # batch size of a run that stored none (imported runs): the audit's CPU default
RELOAD_EVERY_S = 0.5


# ---- messages posted by workers -------------------------------------------------------------------


class RowsLoaded(Message):
    def __init__(self, run: RunInfo, rows: list[QRow], frozen: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.run, self.rows, self.frozen = run, rows, frozen


class AuditEvent(Message):
    """Progress from the audit engine: `run_id` once known, done/total attempts, a phase text."""

    def __init__(self, run_id: int | None, done: int | None, total: int | None, text: str = "",
                 finished: bool = False) -> None:
        super().__init__()
        self.run_id, self.done, self.total, self.text, self.finished = run_id, done, total, text, finished


class ModelState(Message):
    def __init__(self, text: str, num_layers: int | None = None) -> None:
        super().__init__()
        self.text, self.num_layers = text, num_layers


class LiveDone(Message):
    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__()
        self.result = result


class ApplyProgress(Message):
    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__()
        self.info = info


@dataclass
class Launch:
    """How `reachtui open MODEL` started the app: the model to load and, if no finished run exists,
    the audit job to run (a callable `job(get_runner, on_event, cancel) -> run_id`)."""

    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    device_map: str | None = None
    offload_folder: str | None = None
    trust_remote_code: bool = False
    allow_download: bool = False
    audit_job: Any = None


class ReachApp(App[None]):
    """`reachtui open`: the question-by-question audit browser."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "reachtui"
    COMMANDS = App.COMMANDS | {ReachCommands}
    COMMAND_PALETTE_BINDING = "ctrl+p"

    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Quit reachtui (a running audit stops after its batch)"),
        Binding("question_mark", "help", "Help", id="app.help", tooltip="Every key and what the glyphs mean"),
        Binding("a", "filter('all')", "All", id="filter.all", tooltip="Show every question"),
        Binding("f", "failure_filter", "Failure set", id="filter.failure",
                tooltip="Reachable under a probe, not realized; press again for the next probe"),
        Binding("r", "filter('realized')", "Realized", id="filter.realized", tooltip="Right by default"),
        Binding("u", "filter('unreachable')", "Unreachable", id="filter.unreachable",
                tooltip="Wrong by default and under every probe"),
        Binding("slash", "search", "Search", id="app.search", tooltip="Full-text search in questions and outputs"),
        Binding("escape", "clear_search", "Clear search", show=False, id="app.clear_search"),
        Binding("enter", "live_run", "Run", id="live.run",
                tooltip="Run the selected question under the edited layers"),
        Binding("left_square_bracket", "layer_move(-1)", "◂ layer", show=False, id="layer.left",
                key_display="[", tooltip="Move the layer cursor left"),
        Binding("right_square_bracket", "layer_move(1)", "layer ▸", show=False, id="layer.right",
                key_display="]", tooltip="Move the layer cursor right"),
        Binding("x", "layer('skip')", "Skip", id="layer.skip", tooltip="Skip / restore the layer under the cursor"),
        Binding("plus,equals_sign", "layer('repeat')", "Repeat", show=False, id="layer.repeat",
                key_display="+", tooltip="Run the layer under the cursor once more (at most twice)"),
        Binding("minus", "layer('less')", "Less", show=False, id="layer.less", key_display="-",
                tooltip="Run the layer under the cursor one time fewer (0 = skipped)"),
        Binding("m", "layer('silence')", "Silence MLP", id="layer.silence",
                tooltip="Silence / restore the MLP of the layer under the cursor"),
        Binding("0", "reset_layers", "Reset", show=False, id="layer.reset",
                tooltip="Back to the default route with nothing silenced"),
        Binding("e", "edit_route", "Type route", id="layer.edit", tooltip="Type a route like 0-3,3,5-7"),
        Binding("A", "apply", "Apply to set", id="live.apply",
                tooltip="Apply the intervention to the failure set and the realized set"),
        Binding("o", "explorations", "Explorations", show=False, id="live.explorations",
                tooltip="Re-open a stored exploration and list the questions it changed"),
        Binding("c", "cancel_work", "Cancel", show=False, id="live.cancel",
                tooltip="Cancel a running apply"),
        Binding("v", "charts", "Charts", id="view.charts", tooltip="MLP scan, reachable@k, pass@k"),
        Binding("i", "intervals", "Intervals", show=False, id="view.intervals",
                tooltip="Show/hide reachable beside its chance control, with 95% intervals, in the header"),
        Binding("E", "export('questions', 'csv')", "Export", id="export.csv",
                tooltip="Write the table as filtered now to a CSV file"),
        Binding("tab", "focus_next", "Focus", show=False, id="app.focus_next",
                tooltip="Move the focus (question table, detail pane)"),
    ]

    def __init__(self, store: str | Path, run_id: int | None = None, *, launch: Launch | None = None,
                 export_dir: str | Path | None = None, preloaded: Any = None,
                 keymap: dict[str, str] | None = None) -> None:
        super().__init__()
        if keymap:
            self.set_keymap(keymap)  # binding id -> key(s), as Posting does
        self.preloaded = preloaded  # a Future from reachtui.tui.data.preload, or None
        self.store_path = Path(store)
        self.requested_run = run_id
        self.launch = launch or Launch()
        self.export_dir = Path(export_dir) if export_dir else self.store_path.parent / "exports"
        self.data: AuditData | None = None
        self.run_info: RunInfo | None = None
        self.all_rows: list[QRow] = []
        self.frozen: dict[str, dict[str, Any]] = {}
        self._members: dict[int, set[int]] = {}
        self.filter = Filter()
        self._found: set[int] | None = None
        self._changed: set[int] = set()  # questions an exploration changed (filter "changed")
        self.counters: Counters | None = None
        self.intervention: Intervention | None = None
        self.runner = None
        self.model_status = "not loaded (loads on the first live run)"
        self._model_lock = threading.Lock()
        self._audit_cancel = threading.Event()
        self._audit_running = False
        self._audit_run_id: int | None = None
        self._last_reload = 0.0
        self._reload_pending = False
        self._detail_timer = None
        self.last_export: Path | None = None
        self.last_live: dict[str, Any] | None = None
        self.last_apply: dict[str, Any] | None = None
        self.last_exploration: int | None = None
        self.first_paint_s: float | None = None
        self.ready_at: float | None = None

    # ---- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static(header_text(()), id="table-header")
                yield QuestionTable(id="questions")
            with Vertical(id="right"):
                yield DetailPane(id="detail")
                yield LivePane(id="live")
        yield LayerStrip(id="layers")
        yield Input(placeholder="search questions and outputs (FTS) — enter to filter, escape to clear",
                    id="search")
        yield Static("", id="status")
        yield Footer()

    @property
    def main(self):
        """The main screen (the bottom of the stack): its widgets are there even while charts, help or
        a modal is on top, which `App.query_one` (the active screen) would not find."""
        return self.screen_stack[0]

    @property
    def table(self) -> QuestionTable:
        return self.main.query_one(QuestionTable)

    def on_mount(self) -> None:
        self.main.query_one("#search", Input).display = False
        self.table.focus()
        if self.store_path.is_file():
            self._open_data()
            run_id = self.requested_run
            if run_id is None and self.launch.audit_job is None and self.data is not None:
                run_id = self.data.latest_run_id()
            if self.preloaded is not None:
                self._use_preloaded(run_id)
            elif run_id is not None:
                self._load_now(run_id)
        if self.launch.audit_job is not None:
            self._start_audit()
        self._refresh_chrome()

    def on_ready(self) -> None:
        """The first frame is on screen (Textual sends Ready after it): log the start-up time, as Posting."""
        self.ready_at = time.time()
        self.first_paint_s = time.perf_counter() - START
        self.log(f"first paint {self.first_paint_s:.3f} s after import")

    def _open_data(self) -> None:
        if self.data is None and self.store_path.is_file():
            try:
                self.data = AuditData(self.store_path)
            except ReachError as exc:
                self.notify(str(exc), title="store", severity="error")

    # ---- loading a run ----------------------------------------------------------------------------

    def _load_now(self, run_id: int) -> None:
        """Read a run on the UI thread (the first paint, a run picked from the palette)."""
        assert self.data is not None
        try:
            run = self.data.run(run_id)
            rows = self.data.rows(run)
            frozen = self.data.failure_sets(run_id)
        except ReachError as exc:
            self.notify(str(exc), title="store", severity="error")
            return
        self._show_rows(run, rows, frozen)

    def _use_preloaded(self, run_id: int | None) -> None:
        fut, self.preloaded = self.preloaded, None
        try:
            result = fut.result()
        except ReachError as exc:
            self.notify(str(exc), title="store", severity="error")
            return
        if result is None:
            return
        run, rows, frozen = result
        if run_id is not None and run.id != run_id:
            self._load_now(run_id)
            return
        self._show_rows(run, rows, frozen)

    def open_run(self, run_id: int) -> None:
        self._members.clear()
        self.filter = Filter()
        self._found = None
        self._load_now(run_id)
        self._refresh_chrome()

    @work(thread=True, exclusive=True, group="reload", exit_on_error=False, name="reload")
    def _reload_worker(self, run_id: int) -> None:
        data = AuditData(self.store_path)
        try:
            run = data.run(run_id)
            rows = data.rows(run)
            frozen = data.failure_sets(run_id)
        finally:
            data.close()
        if not get_current_worker().is_cancelled:
            self.post_message(RowsLoaded(run, rows, frozen))

    def action_intervals(self) -> None:
        """Toggle the header's honesty line: per probe reachable, chance control and excess, 95% intervals."""
        header = self.main.query_one(RunHeader)
        if header.intervals_shown:
            header.show_intervals(None)
        elif self.run_info is None:
            self.notify("no run is open", severity="warning")
        else:
            header.show_intervals("computing intervals (bootstrap over questions) …")
            self._intervals_worker(self.run_info.id)

    @work(thread=True, exclusive=True, group="intervals", exit_on_error=False, name="intervals")
    def _intervals_worker(self, run_id: int) -> None:
        from reachtui.store import Store
        from reachtui.tables import summary_lines, summary_rows

        with Store(self.store_path, readonly=True) as store:
            lines = summary_lines(summary_rows(store, run_id, intervals=True), short=True)
        text = "   │ ".join(lines) if lines else "no reachability probe in this run"
        if not get_current_worker().is_cancelled:
            self.call_from_thread(self.main.query_one(RunHeader).show_intervals, f"95% CI  {text}")

    def reload(self, force: bool = False) -> None:
        """Re-read the open run in a worker, at most every RELOAD_EVERY_S unless forced."""
        if self.run_info is None:
            return
        now = time.monotonic()
        if not force and now - self._last_reload < RELOAD_EVERY_S:
            if not self._reload_pending:
                self._reload_pending = True
                self.set_timer(RELOAD_EVERY_S, self._deferred_reload)
            return
        self._last_reload = now
        self._reload_worker(self.run_info.id)

    def _deferred_reload(self) -> None:
        self._reload_pending = False
        if self.is_running:
            self.reload(force=True)

    @on(RowsLoaded)
    def _rows_loaded(self, msg: RowsLoaded) -> None:
        if self.run_info is not None and msg.run.id != self.run_info.id:
            return
        self._show_rows(msg.run, msg.rows, msg.frozen)

    def _show_rows(self, run: RunInfo, rows: list[QRow], frozen: dict[str, dict[str, Any]]) -> None:
        new_run = self.run_info is None or self.run_info.id != run.id
        self.run_info = run
        self.all_rows = rows
        if frozen.keys() != self.frozen.keys():
            self._members.clear()
        self.frozen = frozen
        self.main.query_one("#table-header", Static).update(header_text(run.probes))
        if self.intervention is None or new_run:
            n = run.num_layers or (self.runner.num_layers if self.runner is not None else None)
            if n:
                self.intervention = Intervention.identity(n)
                self.main.query_one(LayerStrip).intervention = self.intervention
        if (self.filter.kind == "failure" and self.filter.probe not in run.probes) or (
                new_run and self.filter.kind == "changed"):
            self.filter = Filter(search=self.filter.search)
        self._apply_view()

    # ---- the view ---------------------------------------------------------------------------------

    def _members_of(self, probe: str) -> set[int] | None:
        fs = self.frozen.get(probe)
        if fs is None or self.data is None:
            return None
        if fs["id"] not in self._members:
            self._members[fs["id"]] = self.data.set_members(fs["id"])
        return self._members[fs["id"]]

    def view_rows(self) -> list[QRow]:
        run = self.run_info
        if run is None:
            return []
        if self.filter.kind == "changed":
            members = self._changed
        else:
            members = self._members_of(self.filter.probe) if self.filter.kind == "failure" else None
        return apply_filter(self.all_rows, run.probes, self.filter, members=members, found=self._found)

    def _apply_view(self) -> None:
        run = self.run_info
        rows = self.view_rows()
        before = self.current_row()
        self.table.set_rows(rows, run.probes if run else ())
        if self.current_row() != before:  # same question, new attempts (the audit moved on): redraw it
            self._highlighted(None)
        self.counters = counters(self.all_rows, run.probes, {p: fs["size"] for p, fs in self.frozen.items()}) \
            if run else None
        self._refresh_chrome()

    def _refresh_chrome(self) -> None:
        run = self.run_info
        self.main.query_one(RunHeader).show(run, self.counters, self.model_status)
        shown = len(self.table.rows)
        total = len(self.all_rows)
        label = self.filter.label()
        note = ""
        if self.filter.kind == "failure":
            note = " [frozen set]" if self.filter.probe in self.frozen else " [live: reachable ∧ ¬realized]"
        self.sub_title = f"{label} — {shown} of {total}"
        status = f"filter: {label} — {shown} of {total} questions{note}"
        if self._found is not None:
            status += "  (escape clears the search)"
        if self.last_export is not None:
            status += f"  │ exported → {self.last_export}"
        self.main.query_one("#status", Static).update(status)

    def set_filter(self, kind: str, probe: str | None = None) -> None:
        self.filter = Filter(kind, probe, self.filter.search)
        self._apply_view()

    def action_filter(self, kind: str) -> None:
        self.set_filter(kind)

    def action_failure_filter(self) -> None:
        run = self.run_info
        if run is None or not run.probes:
            self.notify("no reach probe in this run", severity="warning")
            return
        probes = list(run.probes)
        if self.filter.kind == "failure" and self.filter.probe in probes:
            nxt = probes[(probes.index(self.filter.probe) + 1) % len(probes)]
        else:
            nxt = probes[0]
        self.set_filter("failure", nxt)

    def action_search(self) -> None:
        box = self.main.query_one("#search", Input)
        box.display = True
        box.focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self.action_clear_search()
            return
        if self.data is None or self.run_info is None:
            return
        self._found = self.data.search(self.run_info.id, text)
        self.filter = Filter(self.filter.kind, self.filter.probe, text)
        event.input.display = False  # the search stays on (status line) until escape
        self.table.focus()
        self._apply_view()

    def action_clear_search(self) -> None:
        box = self.main.query_one("#search", Input)
        box.value = ""
        box.display = False
        if self._found is not None:
            self._found = None
            self.filter = Filter(self.filter.kind, self.filter.probe, None)
            self._apply_view()
        self.table.focus()

    # ---- the detail pane --------------------------------------------------------------------------

    @on(QuestionTable.Highlighted)
    def _highlighted(self, msg: QuestionTable.Highlighted | None) -> None:
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(0.05, self._show_detail)

    def _show_detail(self) -> None:
        self._detail_timer = None
        try:
            detail = self.screen_stack[0].query_one(DetailPane)
        except (NoMatches, IndexError):  # the timer fired while the app was closing
            return
        row = self.current_row()
        if row is None or self.data is None or self.run_info is None:
            detail.show(None, None, [])
            return
        run = self.run_info
        detail.show(self.data.question(row.key), self.data.default_attempt(run.id, row.key),
                    self.data.hits(run.id, row.key, run.probes))

    def current_row(self) -> QRow | None:
        t = self.table
        return t.rows[t.cursor] if 0 <= t.cursor < len(t.rows) else None

    # ---- the layer strip --------------------------------------------------------------------------

    def _set_intervention(self, iv: Intervention) -> None:
        self.intervention = iv
        strip = self.main.query_one(LayerStrip)
        strip.intervention = iv
        strip.refresh()

    def _need_layers(self) -> bool:
        if self.intervention is None:
            self.notify("the layer count is not known until the model loads (press enter to load it)",
                        severity="warning")
            return False
        return True

    def action_layer_move(self, step: int) -> None:
        if self._need_layers():
            strip = self.main.query_one(LayerStrip)
            strip.position = strip.position + step

    def edit_layer(self, op: str, layer: int | None = None) -> None:
        if not self._need_layers():
            return
        strip = self.main.query_one(LayerStrip)
        if layer is None:
            layer = strip.position
        else:
            strip.position = layer
        iv = self.intervention
        new = {"skip": iv.toggle_skip, "repeat": iv.more, "less": iv.less,
               "silence": iv.toggle_silence}[op](layer)
        if new is iv and op != "silence":
            self.notify("a route needs at least one layer", severity="warning")
        elif new == iv and op == "repeat":
            self.notify("a layer runs at most twice in a route", severity="warning")
        self._set_intervention(new)

    def action_layer(self, op: str) -> None:
        self.edit_layer(op)

    def action_reset_layers(self) -> None:
        if self._need_layers():
            self._set_intervention(self.intervention.reset())

    def action_edit_route(self) -> None:
        from reachtui.tui.screens.modals import RouteScreen

        if not self._need_layers():
            return

        def done(iv: Intervention | None) -> None:
            if iv is not None:
                self._set_intervention(iv)

        self.push_screen(RouteScreen(self.intervention), done)

    # ---- the model --------------------------------------------------------------------------------

    def model_spec(self) -> str:
        if self.launch.model:
            return self.launch.model
        run = self.run_info
        if run is None:
            raise ReachError("no run is open, so there is no model to load")
        if run.model_path and Path(run.model_path).exists():
            return run.model_path
        return run.model

    def ensure_runner(self):
        """The loaded model's Runner, loading it (once) in the calling worker thread."""
        with self._model_lock:
            if self.runner is None:
                spec = self.model_spec()
                self.post_message(ModelState(f"loading {spec} …"))
                from reachtui.model.load import load_model
                from reachtui.model.run import Runner

                t0 = time.perf_counter()
                try:
                    loaded = load_model(spec, device=self.launch.device, dtype=self.launch.dtype,
                                        device_map=self.launch.device_map,
                                        offload_folder=self.launch.offload_folder,
                                        trust_remote_code=self.launch.trust_remote_code,
                                        allow_download=self.launch.allow_download)
                except Exception:
                    self.post_message(ModelState("failed to load (see the notification)"))
                    raise
                self.runner = Runner(loaded)
                self.post_message(ModelState(
                    f"{loaded.name} ready · {loaded.device} {loaded.dtype} · {self.runner.num_layers} layers "
                    f"· loaded in {time.perf_counter() - t0:.1f} s", self.runner.num_layers))
            return self.runner

    @on(ModelState)
    def _model_state(self, msg: ModelState) -> None:
        self.model_status = msg.text
        if msg.num_layers and (self.intervention is None or self.intervention.num_layers != msg.num_layers):
            self._set_intervention(Intervention.identity(msg.num_layers))
        self._refresh_chrome()

    def _protocol(self):
        from reachtui.protocol import Protocol

        return Protocol.from_dict(self.run_info.protocol)

    # ---- live run on the selected question --------------------------------------------------------

    def action_live_run(self) -> None:
        row = self.current_row()
        if row is None or self.data is None or self.run_info is None:
            self.notify("no question selected", severity="warning")
            return
        iv = self.intervention
        question = self.data.question(row.key)
        default = self.data.default_attempt(self.run_info.id, row.key)
        what = iv.describe() if iv else "default"
        self.main.query_one(LivePane).busy(f"running {row.qid} under {what} … (waits for the model between audit "
                                      f"batches)")
        self._live_worker(self.run_info, question, default, iv)

    @work(thread=True, exclusive=True, group="live", exit_on_error=False, name="live run")
    def _live_worker(self, run: RunInfo, question: dict[str, Any], default: dict[str, Any] | None,
                     iv: Intervention | None) -> None:
        worker = get_current_worker()
        runner = self.ensure_runner()
        if iv is None or iv.num_layers != runner.num_layers:
            iv = Intervention.identity(runner.num_layers)
        result = live_generate(runner, self._protocol(), question, iv)
        result["qid"] = question["qid"]
        if default is not None:
            result.update(default_text=default["text"] or "", default_answer=default["answer"],
                          default_correct=None if default["correct"] is None else bool(default["correct"]))
        if not worker.is_cancelled:
            self.post_message(LiveDone(result))

    @on(LiveDone)
    def _live_done(self, msg: LiveDone) -> None:
        self.last_live = msg.result
        self.main.query_one(LivePane).result(msg.result)

    # ---- apply to a set ---------------------------------------------------------------------------

    def _apply_probe(self) -> str | None:
        run = self.run_info
        if run is None or not run.probes:
            return None
        if self.filter.kind == "failure":
            return self.filter.probe
        if self.data is not None:
            scan = self.data.mlp_scan(run.id)
            if scan:
                name = scan[0]["set_name"]
                for p, fs in self.frozen.items():
                    if fs["name"] == name:
                        return p
        for p in run.probes:
            if p in self.frozen:
                return p
        return run.probes[0]

    def action_apply(self) -> None:
        probe = self._apply_probe()
        if probe is None:
            self.notify("no failure set to apply to", severity="warning")
            return
        self.apply_intervention(probe)

    def apply_intervention(self, probe: str) -> None:
        run = self.run_info
        if run is None or self.data is None:
            return
        if self.intervention is not None and self.intervention.is_default:
            self.notify("edit the layers first (x skip, + repeat, m silence MLP, e type a route)",
                        severity="warning")
            return
        members = self._members_of(probe)
        if members is None:
            members = {r.key for r in self.all_rows if r.realized is False and
                       r.reach[run.probes.index(probe)]}
        realized = set(self.data.store.realized_ids(run.id))
        questions = {}
        for key in members | realized:
            q = self.data.question(key)
            questions[key] = (q["question"], q["gold"], q["idx"])
        self._apply_worker(run, probe, self.intervention, members, realized, questions)

    @work(thread=True, exclusive=True, group="apply", exit_on_error=False, name="apply")
    def _apply_worker(self, run: RunInfo, probe: str, iv: Intervention | None, failure: set[int],
                      realized: set[int], questions: dict[int, tuple[str, str, int]]) -> None:
        """Run the intervention on F ∪ R in order of prompt length, in chunks of the run's batch size, as
        the audit's MLP scan does (same prompts, same batches, same seeds), so that silencing one MLP here
        reproduces that layer's scan row exactly. Every attempt is stored under `explore:<id>`."""
        from reachtui.grading import grade
        from reachtui.model.run import Decoding
        from reachtui.seeds import derive_seed
        from reachtui.store import Store

        worker = get_current_worker()
        runner = self.ensure_runner()
        if iv is None:
            iv = Intervention.identity(runner.num_layers)
        protocol = self._protocol()
        decoding = Decoding(max_new_tokens=protocol.max_new_tokens, temperature=protocol.temperature,
                            top_p=protocol.top_p, stop=tuple(protocol.stop))
        route_text = None if iv.is_identity_route else iv.route_text
        silenced_text = iv.silenced_text or None
        # the seed stream of the MLP scan when this is one silenced MLP (only matters when not greedy)
        stream = f"mlp:{next(iter(iv.silenced))}" if iv.is_identity_route and len(iv.silenced) == 1 else "explore"
        target = f"failure:{probe}+realized"
        name = f"{iv.describe()} on failure:{probe}"
        prompts_of = {k: protocol.render_prompt(questions[k][0], runner.tokenizer) for k in failure | realized}
        items = sorted(prompts_of, key=lambda k: (len(prompts_of[k]), questions[k][2]))
        store = Store(self.store_path)
        eid = None
        try:
            size = store.get_run(run.id)["batch_size"] or APPLY_CHUNK
            eid = store.create_exploration(run.id, name, target=target, route=route_text, silenced=silenced_text,
                                           n=0)
            info = dict(exploration_id=eid, name=name, target=f"failure:{probe}", done=0, total=len(items),
                        repaired=0, failure_n=len(failure), broken=0, realized_n=len(realized),
                        status="running")
            self.post_message(ApplyProgress(dict(info)))
            for start in range(0, len(items), size):
                if worker.is_cancelled:
                    store.update_exploration(eid, status="cancelled")
                    info["status"] = "cancelled"
                    self.post_message(ApplyProgress(dict(info)))
                    return
                chunk = items[start:start + size]
                prompts = [prompts_of[k] for k in chunk]
                greedy = decoding.temperature <= 0
                seeds = [0 if greedy else derive_seed(protocol.seed, stream, questions[k][2], 0) for k in chunk]
                gens = runner.generate(prompts, route=iv.route(), silenced=iv.silenced, decoding=decoding,
                                       seeds=seeds, batch_size=len(prompts))
                rows = []
                for key, seed, gen in zip(chunk, seeds, gens):
                    g = grade(gen.text, questions[key][1], protocol.answer_format)
                    if key in failure and g.correct:
                        info["repaired"] += 1
                    if key in realized and not g.correct:
                        info["broken"] += 1
                    rows.append(dict(question_id=key, probe=f"explore:{eid}", attempt=0, route=route_text,
                                     silenced=silenced_text, temperature=decoding.temperature,
                                     seed=None if greedy else seed, text=gen.text, answer=g.answer, rule=g.rule,
                                     correct=g.correct, mean_logprob=gen.mean_logprob, new_tokens=gen.new_tokens,
                                     layers_executed=gen.layers_executed, compute=gen.compute))
                store.insert_attempts(run.id, rows)
                info["done"] += len(chunk)
                store.update_exploration(eid, n=info["done"], repaired=info["repaired"], broken=info["broken"])
                self.post_message(ApplyProgress(dict(info)))
            store.update_exploration(eid, status="complete")
            info["status"] = "complete"
            self.post_message(ApplyProgress(dict(info)))
        except BaseException:
            if eid is not None:
                try:
                    store.update_exploration(eid, status="failed")
                except Exception:  # noqa: BLE001 - the original error is the one to show
                    pass
            raise
        finally:
            store.close()

    @on(ApplyProgress)
    def _apply_progress(self, msg: ApplyProgress) -> None:
        self.last_apply = msg.info
        self.main.query_one(LivePane).applied(msg.info)
        if msg.info["status"] == "complete":
            self.last_exploration = msg.info["exploration_id"]
            self.notify(f"{msg.info['name']}: repaired {msg.info['repaired']}/{msg.info['failure_n']}, "
                        f"broken {msg.info['broken']}/{msg.info['realized_n']} — stored as exploration "
                        f"#{msg.info['exploration_id']} (o re-opens it and lists the questions it changed)", title="applied")

    def stop_audit(self) -> None:
        """Stop the background audit after its current batch (the run stays resumable: open it again)."""
        if self._audit_running:
            self._audit_cancel.set()
            self.notify("the audit stops after its current batch; `reachtui open` with the same options resumes it",
                        title="audit")

    def action_cancel_work(self) -> None:
        cancelled = self.workers.cancel_group(self, "apply")
        if cancelled:
            self.notify("cancelling after the current chunk")

    def action_explorations(self) -> None:
        from reachtui.tui.screens.modals import PickScreen

        if self.data is None or self.run_info is None:
            return
        items = []
        for e in self.data.explorations(self.run_info.id):
            label = (f"#{e['id']} {e['name']} · repaired {e['repaired']} · broken {e['broken']} · "
                     f"{e['status']}")
            items.append((label, e))
        self.push_screen(PickScreen("explorations of this run (enter re-opens one)", items,
                                    "no exploration yet: edit the layers, then A"), self._reopen_exploration)

    def _reopen_exploration(self, e: dict[str, Any] | None) -> None:
        if e is None or self.run_info is None or self.data is None:
            return
        n = self.intervention.num_layers if self.intervention else self.run_info.num_layers
        if n:
            try:
                iv = Intervention.identity(n)
                if e["route"]:
                    iv = iv.with_route_text(e["route"])
                if e["silenced"]:
                    iv = iv.with_silenced_text(e["silenced"])
                self._set_intervention(iv)
            except ReachError as exc:
                self.notify(str(exc), severity="error")
        probe = e["target"].split("+")[0].removeprefix("failure:")
        fs = self.frozen.get(probe)
        failure_n = fs["size"] if fs else 0
        info = dict(exploration_id=e["id"], name=e["name"], target=f"failure:{probe}", done=e["n"],
                    total=e["n"], repaired=e["repaired"], failure_n=failure_n, broken=e["broken"],
                    realized_n=len(self.data.store.realized_ids(self.run_info.id)), status=e["status"])
        self.last_apply = info
        self.main.query_one(LivePane).applied(info)
        self.show_changed(e["id"])

    def show_changed(self, exploration_id: int) -> None:
        """Filter the table to the questions an exploration repaired or broke."""
        if self.data is None or self.run_info is None:
            return
        repaired, broken = self.data.exploration_changes(self.run_info.id, exploration_id)
        self._changed = repaired | broken
        self.filter = Filter("changed", f"exploration #{exploration_id} ({len(repaired)} repaired, "
                                        f"{len(broken)} broken)", self.filter.search)
        self._apply_view()

    # ---- the audit --------------------------------------------------------------------------------

    def _start_audit(self) -> None:
        self._audit_running = True
        self.main.query_one(RunHeader).progress(0, None, "loading the model …")
        self._audit_worker()

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False, name="audit")
    def _audit_worker(self) -> None:
        job = self.launch.audit_job

        def on_event(run_id: int | None, done: int | None, total: int | None, text: str = "") -> None:
            self.post_message(AuditEvent(run_id, done, total, text))

        run_id = job(self.ensure_runner, on_event, self._audit_cancel)
        self.post_message(AuditEvent(run_id, None, None, "finished", finished=True))

    @on(AuditEvent)
    def _audit_event(self, msg: AuditEvent) -> None:
        if msg.run_id is not None and self._audit_run_id is None:
            self._audit_run_id = msg.run_id  # open the audit's run once; the user may browse away from it
            self._open_data()
            if self.data is not None and (self.run_info is None or self.run_info.id != msg.run_id):
                self._load_now(msg.run_id)
        if self.run_info is None or self.run_info.id != self._audit_run_id:
            if msg.finished:
                self._audit_running = False
                self.main.query_one(RunHeader).progress(None, None)
                self.notify(f"the audit (run {msg.run_id}) finished", title="audit")
            return
        if msg.finished:
            self._audit_running = False
            self.main.query_one(RunHeader).progress(None, None)
            self.reload(force=True)
            self.notify("audit finished", title="audit")
            return
        if msg.done is not None:
            self.main.query_one(RunHeader).progress(msg.done, msg.total, msg.text)
        self.reload()

    # ---- charts, help, export ---------------------------------------------------------------------

    def action_charts(self, tab: str = "mlp") -> None:
        from reachtui.tui.screens.charts import ChartsScreen, chart_data

        if self.data is None or self.run_info is None:
            self.notify("no run is open", severity="warning")
            return
        try:
            cd = chart_data(self.data, self.run_info)
        except Exception as exc:  # noqa: BLE001 - a chart must never take the app down
            self.notify(f"{type(exc).__name__}: {exc}", title="charts", severity="error")
            return
        self.push_screen(ChartsScreen(cd, tab))

    def help_rows(self) -> list[tuple[str, str, str | None]]:
        """(keys, what, binding id) of the main screen's bindings, as they are now (a --keymap applied)."""
        main = self.screen_stack[0]
        by_id: dict[str, tuple[list[str], Binding]] = {}
        for _node, bindings_map in reversed(main._binding_chain):
            for key, bindings in bindings_map.key_to_bindings.items():
                for b in bindings:
                    if not b.description or not b.id:
                        continue
                    keys, _ = by_id.setdefault(b.id, ([], b))
                    if key not in keys:
                        keys.append(key)
        rows = []
        for bid, (keys, b) in by_id.items():
            display = " ".join(self.get_key_display(Binding(k, b.action)) for k in keys)
            rows.append((display, b.tooltip or b.description, bid))
        rows.append(("ctrl+p", "Command palette: every action by name", "app.palette"))
        return rows

    def action_help(self) -> None:
        from reachtui.tui.screens.modals import HelpScreen

        self.push_screen(HelpScreen(self.help_rows()))

    def export(self, table: str, fmt: str) -> Path | None:
        """Write a table of the open run through reachtui.tables (the questions table restricted to the
        rows on screen) to a file in the export folder; the path is shown."""
        from reachtui import tables
        from reachtui.table_formats import render

        run = self.run_info
        if run is None:
            self.notify("no run is open", severity="warning")
            return None
        try:
            built = tables.build_table(self.data.store, table, [run.id])
            if table == "questions" and (self.filter.kind != "all" or self._found is not None):
                shown = {r.qid for r in self.table.rows}
                col = built.column_names.index("question_id")
                built.rows = [row for row in built.rows if row[col] in shown]
                built.notes.append(f"filter: {self.filter.label()}")
            text = render(built, fmt)
        except ReachError as exc:
            self.notify(str(exc), severity="error")
            return None
        slug = self.filter.label().replace(" ", "-").replace("(", "").replace(")", "").replace("·", "")
        slug = "".join(ch for ch in slug if ch.isalnum() or ch in "-_")[:40]
        path = self.export_dir / f"run{run.id}-{table}" f"{'-' + slug if table == 'questions' else ''}.{fmt}"
        try:
            self.export_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc.strerror or exc}", title="export", severity="error")
            return None
        self.last_export = path.resolve()
        self.notify(f"{len(built.rows)} rows → {self.last_export}", title=f"export: {table} as {fmt}")
        self._refresh_chrome()
        return path

    def action_export(self, table: str, fmt: str) -> None:
        self.export(table, fmt)

    def store_runs(self) -> list[dict[str, Any]]:
        return self.data.runs() if self.data is not None else []

    # ---- which keys are live -----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The main screen's keys act only while the main screen is on top (not under charts or a modal)."""
        if action in GLOBAL_ACTIONS:
            return True
        if len(self.screen_stack) > 1 and action in MAIN_ACTIONS:
            return False
        return True

    # ---- errors and exit --------------------------------------------------------------------------

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state == WorkerState.ERROR:
            err = worker.error
            text = str(err) if isinstance(err, ReachError) else f"{type(err).__name__}: {err}"
            self.notify(text.splitlines()[0] if text else type(err).__name__, title=f"{worker.name} failed",
                        severity="error", timeout=10)
            if worker.group == "audit":
                self._audit_running = False
                self.main.query_one(RunHeader).progress(None, None)
                self.reload(force=True)
            if worker.group == "live":
                self.main.query_one(LivePane).clear(f"live run failed: {text.splitlines()[0] if text else ''}")

    async def action_quit(self) -> None:
        self._audit_cancel.set()
        self.workers.cancel_all()
        self.exit()

    def on_unmount(self) -> None:
        self._audit_cancel.set()
        if self.data is not None:
            self.data.close()


def binding_ids() -> list[str]:
    """Every remappable binding id of the main screen (`reachtui open --keymap`)."""
    return [b.id for b in (*ReachApp.BINDINGS, *QuestionTable.BINDINGS) if b.id]


GLOBAL_ACTIONS = {"quit", "help", "command_palette"}
MAIN_ACTIONS = {b.action.split("(")[0] for b in ReachApp.BINDINGS} - GLOBAL_ACTIONS


def live_generate(runner, protocol, question: dict[str, Any], iv: Intervention) -> dict[str, Any]:
    """One question under one intervention, graded by reachtui.grading: what the live pane shows."""
    from reachtui.grading import grade
    from reachtui.model.routes import format_route, format_silenced
    from reachtui.model.run import Decoding

    decoding = Decoding(max_new_tokens=protocol.max_new_tokens, temperature=protocol.temperature,
                        top_p=protocol.top_p, stop=tuple(protocol.stop))
    prompt = protocol.render_prompt(question["question"], runner.tokenizer)
    route = runner.check_route(iv.route())
    asked = time.perf_counter()
    with runner.lock:  # reentrant: generate() takes it again; held here to time the run apart from the wait
        t0 = time.perf_counter()
        gen = runner.generate([prompt], route=route, silenced=iv.silenced, decoding=decoding,
                              seeds=[protocol.seed])[0]
        seconds = time.perf_counter() - t0
    g = grade(gen.text, question["gold"], protocol.answer_format)
    return dict(prompt=prompt, gold=question["gold"], intervention=iv.describe(), text=gen.text, answer=g.answer,
                correct=g.correct, rule=g.rule, route=format_route(route), silenced=format_silenced(iv.silenced),
                new_tokens=gen.new_tokens, layers_executed=gen.layers_executed, seconds=seconds,
                waited=t0 - asked,
                default_text=None, default_answer=None, default_correct=None)
