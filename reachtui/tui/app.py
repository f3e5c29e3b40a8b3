"""The reachtui app: browse an audit question by question, filter failure sets, edit the layers of the
selected question live, apply an intervention to a whole set, look at the charts, export.

The app owns what outlives a screen: the store (read-only `AuditData`), the open run, the model (loaded
once, on first need, in whichever worker asks) and the workers. Workers live on the App
(`exit_on_error=False`), start engine jobs (`reachtui.engine`: the audit, a live run, an apply) and post
`reachtui.tui.messages`; one `Worker.StateChanged` handler turns a failed worker into a notification.
The main screen (`screens/main.py`) draws the run and takes the keys.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App
from textual.worker import Worker, WorkerState, get_current_worker

from reachtui.engine.progress import APPLY, DONE, attempts_rate
from reachtui.errors import DamagedStore, ReachError, error_line, sqlite_fault
from reachtui.model_names import stored_model
from reachtui.tui import actions
from reachtui.tui.data import AuditData, RunInfo
from reachtui.tui.intervention import LayerEditor
from reachtui.tui.launch import Launch
from reachtui.tui.messages import EngineProgress, LensSorted, LiveDone, ModelState, RowsLoaded, TraceDone
from reachtui.tui.palette import ReachCommands
from reachtui.tui.screens.main import MainScreen, shown_path
from reachtui.tui.state import QRow

START = time.perf_counter()
RELOAD_EVERY_S = 0.5


class ReachApp(App[None]):
    """`reachtui open`: the question-by-question audit browser."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "reachtui"
    COMMANDS = App.COMMANDS | {ReachCommands}
    COMMAND_PALETTE_BINDING = actions.PALETTE_KEY
    BINDINGS = actions.bindings("global")

    def __init__(self, store: str | Path, run_id: int | None = None, *, launch: Launch | None = None,
                 export_dir: str | Path | None = None, preloaded: Any = None,
                 keymap: dict[str, str] | None = None, compare: tuple[int, int] | None = None,
                 allow_unmatched: bool = False, check_store: bool = False) -> None:
        super().__init__()
        self.check_store = check_store      # check the store's integrity once the first frame is on screen
        self.fatal: ReachError | None = None   # why the app closed by itself (`reachtui open` prints it)
        self.compare = compare              # (run A, run B): the comparison view instead of the main screen
        self.allow_unmatched = allow_unmatched
        self.keymap = dict(keymap or {})
        if keymap:
            self.set_keymap(keymap)  # binding id -> key(s), as Posting does
        self.preloaded = preloaded  # a Future from reachtui.tui.data.preload, or None
        self.store_path = Path(store)
        self.requested_run = run_id
        self.launch = launch or Launch()
        self.export_dir = Path(export_dir) if export_dir else self.store_path.parent / "exports"
        self.data: AuditData | None = None
        self.run_info: RunInfo | None = None      # the open run, its rows and its frozen sets
        self.all_rows: list[QRow] = []
        self.frozen: dict[str, dict[str, Any]] = {}
        self.runner = None
        self.model_status = "not loaded · loads on the first live run"   # parts " · ", the header drops the last first
        self._model_lock = threading.Lock()
        self._audit_cancel = threading.Event()
        self._apply_cancel = threading.Event()
        self._writers: dict[threading.Event, str] = {}    # engine jobs writing to the store (set when done)
        self.audit_running = False
        self._audit_run_id: int | None = None
        self._last_reload = 0.0
        self._reload_pending = False
        self._phase_started: dict[tuple[int, str], float] = {}   # (run, phase) -> when its first event came
        self._audit_progress = None   # the audit's latest progress event: the bar shows it with the rows read after it
        self.last_export: Path | None = None
        self.last_live: dict[str, Any] | None = None
        self.last_apply: dict[str, Any] | None = None
        self.last_exploration: int | None = None
        self.last_trace = None        # the trace pane's trace (`reachtui.engine.trace.Trace`)
        self.lens_sorts: dict[tuple[int, str], list[dict[str, Any]]] = {}   # (run, probe) -> the lens over its set
        self.first_paint_s: float | None = None
        self.ready_at: float | None = None

    def get_default_screen(self):
        if self.compare is not None:
            from reachtui.tables import compare_runs
            from reachtui.tui.screens.compare import CompareScreen

            self._open_data()
            a, b = self.compare
            return CompareScreen(compare_runs(self.data.store, a, b, allow_unmatched=self.allow_unmatched))
        return MainScreen()

    @property
    def main(self) -> MainScreen:
        """The main screen (the bottom of the stack), also while charts, help or a modal is on top."""
        return self.screen_stack[0]

    # the main screen's state, as the tests and the palette read it
    table = property(lambda self: self.main.table)
    filter = property(lambda self: self.main.filter)
    intervention = property(lambda self: self.main.intervention)
    counters = property(lambda self: self.main.counters)

    def set_filter(self, kind: str, probe: str | None = None) -> None:
        self.main.set_filter(kind, probe)

    def main_ready(self) -> None:
        """The main screen is composed: open the store and the run, start the audit."""
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
        self.main.refresh_chrome()

    def on_ready(self) -> None:
        """The first frame is on screen (Textual sends Ready after it): log the start-up time, as Posting."""
        self.ready_at = time.time()
        self.first_paint_s = time.perf_counter() - START
        self.log(f"first paint {self.first_paint_s:.3f} s after import")
        if self.check_store:
            self._integrity_worker()

    @work(thread=True, exclusive=True, group="integrity", exit_on_error=False, name="integrity")
    def _integrity_worker(self) -> None:
        """`PRAGMA quick_check` of a large store after the first paint (`reachtui.commands.open`): a damaged
        store closes the app with the one line a small one gets before it starts."""
        from reachtui.store import Store

        try:
            Store(self.store_path, readonly=True, check=True).close()
        except ReachError as exc:
            self.call_from_thread(self._close_with, exc)

    def _store_failed(self, exc: Exception) -> None:
        """A read of the store failed: a damaged page closes the app with the damaged-store line (as the
        check would); anything else is a notification."""
        fault = sqlite_fault(exc, self.store_path) if isinstance(exc, sqlite3.DatabaseError) else exc
        if isinstance(fault, DamagedStore):
            self._close_with(fault)
        elif fault is None:
            raise exc
        else:
            self.notify(str(fault), title="store", severity="error")

    def _close_with(self, exc: ReachError) -> None:
        self.fatal = exc
        self.exit(return_code=getattr(exc, "exit_code", 2))

    def _open_data(self) -> None:
        if self.data is None and self.store_path.is_file():
            try:
                self.data = AuditData(self.store_path)
            except ReachError as exc:
                self.notify(str(exc), title="store", severity="error")

    # ---- the open run -----------------------------------------------------------------------------

    def _load_now(self, run_id: int) -> None:
        """Read a run on the UI thread (the first paint, a run picked from the palette)."""
        try:
            run = self.data.run(run_id)
            self._show_rows(run, self.data.rows(run), self.data.failure_sets(run_id))
        except (ReachError, sqlite3.DatabaseError) as exc:
            self._store_failed(exc)

    def _use_preloaded(self, run_id: int | None) -> None:
        fut, self.preloaded = self.preloaded, None
        try:
            result = fut.result()
        except (ReachError, sqlite3.DatabaseError) as exc:
            self._store_failed(exc)
            return
        if result is not None and run_id is not None and result[0].id != run_id:
            self._load_now(run_id)
        elif result is not None:
            self._show_rows(*result)

    def open_run(self, run_id: int) -> None:
        self.main.reset_view()
        self._load_now(run_id)
        self.main.refresh_chrome()

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
        self._reload_worker(self.run_info.id, self._audit_progress if self.audit_running else None)

    def _deferred_reload(self) -> None:
        self._reload_pending = False
        if self.is_running:
            self.reload(force=True)

    @work(thread=True, exclusive=True, group="reload", exit_on_error=False, name="reload")
    def _reload_worker(self, run_id: int, progress=None) -> None:
        """Read the run's rows; `progress` (the audit's event that asked for them, whose attempts are in the
        store already) goes with them, so the bar and the counters show one moment."""
        data = AuditData(self.store_path)
        try:
            run = data.run(run_id)
            loaded = RowsLoaded(run, data.rows(run), data.failure_sets(run_id), progress)
        finally:
            data.close()
        if not get_current_worker().is_cancelled:
            self.post_message(loaded)

    @on(RowsLoaded)
    def _rows_loaded(self, msg: RowsLoaded) -> None:
        if self.run_info is None or msg.run.id == self.run_info.id:
            self._show_rows(msg.run, msg.rows, msg.frozen)
            ev = msg.progress
            if ev is not None and self.audit_running and ev.run_id == msg.run.id:
                self.main.show_progress(ev.done, ev.total, self._progress_label(ev))

    def _progress_label(self, ev) -> str:
        """The audit bar's words: the phase, its count and, once this session generated some, attempts/s
        over the phase so far (the CLI bar's rate column, one rule)."""
        started = self._phase_started.setdefault((ev.run_id, ev.phase), time.monotonic())
        rate = attempts_rate(ev.generated, time.monotonic() - started)
        return f"audit: {ev.label} {ev.done}/{ev.total}" + (f" · {rate}" if rate else "")

    def _show_rows(self, run: RunInfo, rows: list[QRow], frozen: dict[str, dict[str, Any]]) -> None:
        new_run = self.run_info is None or self.run_info.id != run.id
        if frozen.keys() != self.frozen.keys():
            self.main.forget_members()
        self.run_info, self.all_rows, self.frozen = run, rows, frozen
        self.main.show_run(new_run)

    def store_runs(self) -> list[dict[str, Any]]:
        return self.data.runs() if self.data is not None else []

    # ---- the header's intervals -------------------------------------------------------------------

    def action_intervals(self) -> None:
        """Toggle the intervals in the detail pane's place: per probe reachable, gap, retained, chance control
        and excess with 95% intervals, as the summary export writes them, and its notes on gap and retained."""
        if self.main.intervals_shown:
            self.main.show_intervals(None)
        elif self.run_info is None:
            self.notify("no run is open", severity="warning")
        else:
            self.main.show_intervals("computing intervals (bootstrap over questions) …")
            self._intervals_worker(self.run_info.id)

    @work(thread=True, exclusive=True, group="intervals", exit_on_error=False, name="intervals")
    def _intervals_worker(self, run_id: int) -> None:
        from reachtui.store import Store
        from reachtui.tables import header_grid, summary_table

        with Store(self.store_path, readonly=True) as store:
            grid = header_grid(summary_table(store, [run_id]))     # the cells `reachtui export summary` writes
        if not get_current_worker().is_cancelled and self.main.intervals_shown:
            self.call_from_thread(self.main.show_intervals, grid if grid[1] else "no reachability probe in this run")

    # ---- the model --------------------------------------------------------------------------------

    def model_spec(self) -> str:
        if self.launch.model:
            return self.launch.model
        run = self.run_info
        if run is None:
            raise ReachError("no run is open, so there is no model to load")
        return stored_model(run.model, run.model_path)

    def ensure_runner(self):
        """The loaded model's Runner, loading it (once) in the calling worker thread."""
        with self._model_lock:
            if self.runner is None and self.launch.runner is not None:
                runner = self.runner = self.launch.runner
                self.post_message(ModelState(f"{runner.engine} ready at {runner.client.where} · {runner.num_layers} "
                                             f"layers (routes need the model in-process)", runner.num_layers))
            if self.runner is None:
                spec = self.model_spec()
                self.post_message(ModelState(f"loading {spec} …", loading=True))
                t0 = time.perf_counter()
                try:
                    runner = self.load_runner(spec)
                except Exception as exc:
                    # said where it stays (header, layer strip), not only in a notification that fades
                    self.post_message(ModelState(f"failed to load: {error_line(exc)}", failed=True))
                    raise
                loaded, self.runner = runner.loaded, runner
                self.post_message(ModelState(
                    f"{loaded.name} ready · {loaded.device} {loaded.dtype} · {runner.num_layers} layers "
                    f"· loaded in {time.perf_counter() - t0:.1f} s", runner.num_layers))
            return self.runner

    def load_runner(self, spec: str):
        """Load the model as `reachtui open` was told to (in the calling worker thread)."""
        from reachtui.model.run import load_runner

        where, access = self.launch.placement, self.launch.access
        return load_runner(spec, device=where.device, dtype=where.dtype, device_map=where.device_map,
                           offload_folder=where.offload_folder, allow_download=access.allow_download,
                           trust_remote_code=access.trust_remote_code, allow_pickle=access.allow_pickle,
                           allow_missing_weights=access.allow_missing_weights)

    @on(ModelState)
    def _model_state(self, msg: ModelState) -> None:
        self.model_status = msg.text
        if not self.audit_running:     # the audit's bar tells its own story; else the bar is the model's
            if msg.loading:
                self.main.show_progress(0, None, f"model: {msg.text}")
                self.notify(f"{msg.text} for the live run: once, a few seconds; keys stay live", title="model")
            else:
                self.main.show_progress(None, None)
        if msg.failed:
            self.main.model_problem(msg.text)
        iv = self.main.intervention
        if msg.num_layers and (iv is None or iv.num_layers != msg.num_layers):
            self.main.set_intervention(LayerEditor.identity(msg.num_layers))
        self.main.refresh_chrome()

    def protocol(self):
        """The open run's protocol (ReachError, one line, where this reachtui cannot read it)."""
        if self.run_info.protocol is None:
            raise ReachError(f"run {self.run_info.id}: its stored protocol cannot be read by this reachtui")
        return self.run_info.protocol

    # ---- engine jobs: a live run, an apply, the audit ---------------------------------------------

    def start_live_run(self, run: RunInfo, question: dict, default: dict | None, iv: LayerEditor | None) -> None:
        self._live_worker(run, question, default, iv)

    @work(thread=True, exclusive=True, group="live", exit_on_error=False, name="live run")
    def _live_worker(self, run: RunInfo, question: dict, default: dict | None, iv: LayerEditor | None) -> None:
        from reachtui.engine.live import live_run

        runner = self.ensure_runner()
        if iv is None or iv.num_layers != runner.num_layers:
            iv = LayerEditor.identity(runner.num_layers)
        result = asdict(live_run(runner, self.protocol(), question, iv.value))
        result.update(qid=question["qid"], intervention=iv.describe(), default_text=None, default_answer=None,
                      default_correct=None)
        if default is not None:
            result.update(default_text=default["text"] or "", default_answer=default["answer"],
                          default_correct=None if default["correct"] is None else bool(default["correct"]))
        if not get_current_worker().is_cancelled:
            self.post_message(LiveDone(result))

    @on(LiveDone)
    def _live_done(self, msg: LiveDone) -> None:
        self.last_live = msg.result
        self.main.show_live(msg.result)

    # ---- the trace pane: divergence and logit lens (reachtui.engine.trace) ------------------------

    def start_trace(self, question: dict, iv: LayerEditor | None, position: int | None = None) -> None:
        """Trace `question` under `iv` in a worker; a newer request cancels an older one."""
        self._trace_worker(question, iv, position)

    @work(thread=True, exclusive=True, group="trace", exit_on_error=False, name="trace")
    def _trace_worker(self, question: dict, iv: LayerEditor | None, position: int | None) -> None:
        from reachtui.engine.trace import Cancelled, trace_question

        worker = get_current_worker()
        runner = self.ensure_runner()
        if iv is None or iv.num_layers != runner.num_layers:
            iv = LayerEditor.identity(runner.num_layers)
        try:
            trace = trace_question(runner, self.protocol(), question, iv.value, position=position,
                                   cancelled=lambda: worker.is_cancelled)
        except Cancelled:
            return
        if not worker.is_cancelled:
            self.post_message(TraceDone(trace))

    def move_trace(self, position: int) -> None:
        """The trace on screen, read at another token (no generation: the runner kept its streams)."""
        self._trace_move_worker(self.last_trace, position)

    @work(thread=True, exclusive=True, group="trace", exit_on_error=False, name="trace")
    def _trace_move_worker(self, trace, position: int) -> None:
        from reachtui.engine.trace import move

        moved = move(self.runner, trace, position)
        if not get_current_worker().is_cancelled:
            self.post_message(TraceDone(moved))

    @on(TraceDone)
    def _trace_done(self, msg: TraceDone) -> None:
        self.last_trace = msg.trace
        self.main.show_trace(msg.trace)

    def action_lens_sort(self) -> None:
        """Sort the failure set shown by the logit lens over its members (computed once per run and set)."""
        from reachtui.tui.state import Filter, apply_filter

        main, run = self.main, self.run_info
        if run is None or main.filter.kind != "failure":
            self.notify("show a failure set first (f): L sorts it by the logit lens", severity="warning")
            return
        probe = main.filter.probe
        done = self.lens_sorts.get((run.id, probe))
        if done is not None:
            main.sort_by_lens(probe, done)
            return
        keys = [r.key for r in apply_filter(self.all_rows, run.probes, Filter("failure", probe),
                                            members=main.members_of(probe))]
        self.notify(f"tracing the {len(keys)} members of the failure set ({probe}) through the logit lens …",
                    title="lens sort")
        self._lens_sort_worker(run.id, probe, [self.data.question(k) for k in keys])

    @work(thread=True, exclusive=True, group="lens", exit_on_error=False, name="lens sort")
    def _lens_sort_worker(self, run_id: int, probe: str, questions: list[dict]) -> None:
        from reachtui.engine.trace import Cancelled, lens_rows

        worker = get_current_worker()
        runner = self.ensure_runner()
        try:
            rows = lens_rows(runner, self.protocol(), questions, cancelled=lambda: worker.is_cancelled)
        except Cancelled:
            return
        if not worker.is_cancelled:
            self.post_message(LensSorted(run_id, probe, rows))

    @on(LensSorted)
    def _lens_sorted(self, msg: LensSorted) -> None:
        from reachtui.engine.trace import TOP_K
        from reachtui.tables.lens import lens_table

        self.lens_sorts[(msg.run_id, msg.probe)] = msg.rows
        if self.run_info is not None and self.run_info.id == msg.run_id:
            self.main.sort_by_lens(msg.probe, msg.rows)
        note = lens_table(msg.rows, run_id=msg.run_id, set_name=f"failure:{msg.probe}", k=TOP_K).notes[-1] \
            if msg.rows else "the failure set is empty"
        self.notify(f"{note}; sorted: the latest push first", title="lens sort", timeout=10)

    def apply_intervention(self, probe: str) -> None:
        """Apply the edited intervention to failure:<probe> and the realized set (an engine job), or, when the
        run already holds that exploration complete, re-open it."""
        iv = self.main.intervention
        if self.run_info is None:
            return
        if iv is not None and iv.is_default:
            self.notify("edit the layers first (x skip, + repeat, m silence MLP, e type a route)", severity="warning")
            return
        if iv is not None and self.data is not None:
            from reachtui.engine.mlp import stored_exploration

            done = stored_exploration(self.data.store, self.run_info.id, probe, iv.value, iv.num_layers)
            if done is not None:      # the same attempts again would add nothing: show the stored ones
                self.main.reopen_exploration(done)
                self.notify(f"already applied: exploration #{done['id']} re-opened (o lists every exploration)",
                            title="apply")
                return
        self._apply_cancel.clear()
        self._apply_worker(self.run_info.id, probe, iv)

    @work(thread=True, exclusive=True, group="apply", exit_on_error=False, name="apply")
    def _apply_worker(self, run_id: int, probe: str, iv: LayerEditor | None) -> None:
        from reachtui.engine import mlp
        from reachtui.store import Store

        runner = self.ensure_runner()
        iv = iv if iv is not None and iv.num_layers == runner.num_layers else LayerEditor.identity(runner.num_layers)
        with self._storing("the apply's current chunk"), Store(self.store_path) as store:
            mlp.apply(store, runner, run_id, probe, iv.value,
                      on_event=lambda ev: self.post_message(EngineProgress(ev)), cancel=self._apply_cancel)

    def action_cancel_work(self) -> None:
        if any(w.group == "apply" and w.is_running for w in self.workers):
            self._apply_cancel.set()
            self.notify("cancelling after the current chunk")

    def show_apply(self, info: dict[str, Any]) -> None:
        self.last_apply = info
        self.main.show_applied(info)

    def _start_audit(self) -> None:
        self.audit_running = True
        self.model_status = "loading for the audit …"    # one story at start-up: the header and the bar agree
        self.main.show_progress(0, None, "audit: loading the model …")
        self._audit_worker()

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False, name="audit")
    def _audit_worker(self) -> None:
        with self._storing("the audit's current batch"):
            self.launch.audit_job(self.ensure_runner, lambda ev: self.post_message(EngineProgress(ev)),
                                  self._audit_cancel)

    @contextmanager
    def _storing(self, what: str):
        """Mark the calling engine job as one that writes to the store, until it ends (`wait_for_writers`)."""
        done = threading.Event()
        self._writers[done] = what
        try:
            yield
        finally:
            done.set()
            self._writers.pop(done, None)

    def wait_for_writers(self, say) -> None:
        """After quitting: let an audit batch or an apply chunk still being computed be stored (its job was
        cancelled and stops after it), saying so with `say(line)`; ctrl+c stops at once instead (what was
        not stored runs again when the run is resumed). Called once the terminal is given back."""
        writers = dict(self._writers)
        if not writers:
            return
        say(f"finishing {' and '.join(writers.values())} so that it is stored (ctrl+c stops now; the run resumes "
            f"either way) …")
        try:
            for done in writers:
                done.wait()
        except KeyboardInterrupt:
            say("stopped: what was not stored yet runs again when the run is resumed")

    def stop_audit(self) -> None:
        """Stop the background audit after its current batch (the run stays resumable: open it again)."""
        if self.audit_running:
            self._audit_cancel.set()
            self.notify("the audit stops after its current batch; `reachtui open` with the same options resumes it",
                        title="audit")

    @on(EngineProgress)
    def _engine_progress(self, msg: EngineProgress) -> None:
        ev = msg.progress
        if ev.phase == APPLY:
            self.show_apply(dict(ev.extra, done=ev.done, total=ev.total, status=ev.status))
            if ev.status == "complete":
                self.last_exploration = ev.extra["exploration_id"]
                self.notify(f"{ev.message}: repaired {ev.extra['repaired']}/{ev.extra['failure_n']}, broken "
                            f"{ev.extra['broken']}/{ev.extra['realized_n']} — stored as exploration "
                            f"#{self.last_exploration} (o re-opens it and lists the questions it changed)",
                            title="applied")
            return
        if self._audit_run_id is None:   # open the audit's run once; the user may browse away from it
            self._audit_run_id = ev.run_id
            self._open_data()
            if self.data is not None and (self.run_info is None or self.run_info.id != ev.run_id):
                self._load_now(ev.run_id)
        watching = self.run_info is not None and self.run_info.id == self._audit_run_id
        if ev.phase == DONE:
            self.audit_running = False
            self._audit_progress = None
            self.main.show_progress(None, None)
            if watching:
                self.reload(force=True)
            self.notify(f"the audit (run {ev.run_id}) finished: {ev.status}", title="audit")
        elif watching:
            self._phase_started.setdefault((ev.run_id, ev.phase), time.monotonic())
            self._audit_progress = ev      # shown with the rows read after it (`_rows_loaded`)
            self.reload()

    # ---- charts, help, export ---------------------------------------------------------------------

    def action_charts(self, tab: str = "mlp") -> None:
        from reachtui.tui.screens.charts import ChartsScreen, chart_data

        if self.data is None or self.run_info is None:
            self.notify("no run is open", severity="warning")
            return
        ev = self._audit_progress
        running = (f"now {ev.label} {ev.done}/{ev.total}" if ev is not None else "starting") if self.audit_running \
            else None
        try:
            cd = chart_data(self.data, self.run_info, running)
        except Exception as exc:  # noqa: BLE001 - a chart must never take the app down
            self.notify(error_line(exc), title="charts", severity="error")
            return
        self.push_screen(ChartsScreen(cd, tab))

    def help_rows(self) -> list[tuple[str, str, str]]:
        """(keys, what, binding id) of every action, as the keys are now (a --keymap applied)."""
        return actions.help_rows(self.keymap, self.get_key_display)

    def action_help(self) -> None:
        from reachtui.tui.screens.modals import HelpScreen

        self.push_screen(HelpScreen(self.help_rows()))

    def export(self, table: str, fmt: str) -> Path | None:
        """Write a table of the open run (the questions table as filtered now) to the export folder."""
        from reachtui.tui.export import export_table

        if self.run_info is None:
            self.notify("no run is open", severity="warning")
            return None
        main = self.main
        filtered = table == "questions" and (main.filter.kind != "all" or main.found is not None)
        try:
            path, n = export_table(self.data.store, self.run_info.id, table, fmt, self.export_dir,
                                   shown={r.qid for r in main.table.rows} if filtered else None,
                                   label=main.filter.label() if table == "questions" else None)
        except ReachError as exc:
            self.notify(str(exc), title="export", severity="error")
            return None
        self.last_export = path.resolve()
        self.notify(f"{n} rows → {shown_path(self.last_export)}", title=f"export: {table} as {fmt}")
        main.refresh_chrome()
        return path

    def action_export(self, table: str, fmt: str) -> None:
        self.export(table, fmt)

    # ---- errors and exit --------------------------------------------------------------------------

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        err = worker.error
        line = error_line(err)
        self.notify(line, title=f"{worker.name} failed", severity="error", timeout=10)
        if worker.group == "audit":
            self.audit_running = False
            self.main.show_progress(None, None)
            self.reload(force=True)
        if worker.group == "live":
            self.main.live_failed(f"live run failed: {line}")
        if worker.group == "trace":
            self.main.trace_failed(f"trace failed: {line}")

    def farewell(self) -> str | None:
        """The line the terminal keeps after quitting: where the open run is, and how to come back to it."""
        if self.run_info is None:
            return None
        stopped = " (its audit stops after the batch it is on)" if self.audit_running else ""
        return (f"run {self.run_info.id} is stored in {self.store_path}{stopped}; reopen it with "
                f"reachtui open --store {self.store_path} --run {self.run_info.id}")

    async def action_quit(self) -> None:
        """Quit at once: the engine's jobs are told to stop after the batch they are on, and `reachtui open`
        says where the run is stored and waits for that batch only after the terminal is given back."""
        self._audit_cancel.set()
        self._apply_cancel.set()
        self.workers.cancel_all()
        self.exit()

    def on_unmount(self) -> None:
        self._audit_cancel.set()
        self._apply_cancel.set()
        if self.data is not None:
            self.data.close()

