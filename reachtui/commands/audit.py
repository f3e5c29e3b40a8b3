"""`reachtui audit MODEL --task TASK ...`: the audit, headless, with a progress bar and a summary table.

Heavy imports (the model) happen inside the command, never at import time. The progress bar goes to
stderr, the summary table and the run id to stdout. The first Ctrl-C (or SIGTERM, or SIGHUP) finishes the
batch in flight and leaves the run 'cancelled' (run the same command again to continue it); a second one
stops at once (the run is still resumable: every stored attempt is whole).
"""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from reachtui.commands import numbers, preflight
from reachtui.commands.options import (batch_size_option, mlp_scan_flag, model_access_options, new_option,
                                       placement_options, protocol_options, server_options, set_threads, store_option,
                                       task_option, threads_option)
from reachtui.engine.progress import DONE, FAILURE_SETS, attempts_rate
from reachtui.errors import ReachError
from reachtui.settings import ModelAccess, Placement, ProtocolOptions, ServerFlags

if TYPE_CHECKING:
    from rich.progress import TaskID

    from reachtui.protocol import Protocol
    from reachtui.tasks import Fields


def _ray_runner(model: str, address: str, protocol: Protocol, *, workers: int | None, threads: int,
                placement: Placement, access: ModelAccess):
    """The Ray workers' runner. Prompts are rendered here: a chat template needs the tokenizer here too."""
    from reachtui.cluster import RayRunner

    tokenizer = None
    if protocol.chat:
        from reachtui.model.load import load_tokenizer

        tokenizer = load_tokenizer(model, trust_remote_code=access.trust_remote_code,
                                   allow_download=access.allow_download)
    runner = RayRunner(model, address=address, workers=workers, threads=threads, device=placement.device,
                       dtype=placement.dtype, trust_remote_code=access.trust_remote_code,
                       allow_download=access.allow_download, allow_pickle=access.allow_pickle,
                       allow_missing_weights=access.allow_missing_weights)
    runner.tokenizer = tokenizer
    return runner


#: The signals that stop an audit as Ctrl-C does (where the system has them).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Bar:
    """Follows the engine's Progress events with a rich progress bar on stderr, one line per phase: the
    attempts done of the phase's total, the time elapsed and left (each labelled), the rate of this session
    (attempts generated per second since the phase began here: stored ones resumed are not counted) and
    how many were correct."""

    def __init__(self, console, clock=time.monotonic):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        # the labelled columns take about 80 characters: the bar gets what the terminal has beyond them
        bar = min(24, console.width - 82)
        self.progress = Progress(TextColumn("[bold]{task.description:<12}"),
                                 *([BarColumn(bar_width=bar)] if bar >= 6 else []),
                                 MofNCompleteColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
                                 TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[rate]}"),
                                 TextColumn("{task.fields[info]}"), console=console, transient=False)
        self.tasks: dict[str, TaskID] = {}
        self.started: dict[str, float] = {}
        self.clock = clock

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def __call__(self, ev) -> None:
        if ev.phase == DONE:
            return
        label = ev.label
        if ev.phase not in self.tasks:
            self.tasks[ev.phase] = self.progress.add_task(label, total=max(ev.total, 1), info="", rate="")
            self.started[ev.phase] = self.clock()
        empty = ev.total == 0         # nothing to do in this phase (no failure set to freeze): it is done
        if empty:
            ev = replace(ev, done=1)
        tid = self.tasks[ev.phase]
        if ev.phase == FAILURE_SETS:
            info, rate = ("nothing to freeze (no probe)" if empty else "frozen"), ""
        else:
            info, rate = f"{ev.correct} ok", attempts_rate(ev.generated, self.clock() - self.started[ev.phase])
        self.progress.update(tid, completed=ev.done, total=max(ev.total, 1), info=info, rate=rate)


def _open_writer(store_path):
    """The audit store, opened to write for the length of the command."""
    from reachtui.store import Store

    store = Store(store_path)
    click.get_current_context().call_on_close(store.close)
    return store


def print_closing(out, store, run_id: int) -> None:
    """The closing table of a run and the notes under it (what `audit` prints when a run is done)."""
    from reachtui.tables.formats import to_rich
    from reachtui.tables.summary import closing

    table, lines = closing(store, run_id)
    out.print(to_rich(table, compact=True))
    for line in lines:
        out.print(line)
    events = store.run_events(run_id)
    sizes = [e["detail"] for e in events if e["kind"] == "batch_size"]
    if sizes:
        out.print(f"batch size {sizes[-1]}")
    for e in events:
        if e["kind"] == "out_of_memory":
            out.print(f"[yellow]{e['detail']}[/]")


@click.command("audit")
@click.argument("model")
@task_option()
@protocol_options
@mlp_scan_flag
@store_option
@click.option("--run", "run_id", type=numbers.INT, default=None,
              help="Continue this run (refused if the protocol differs). [default: the latest unfinished "
                   "run of the same model, task, protocol and limit; else, if one is complete, show it; else "
                   "a new run]")
@new_option("Start a new run even if an unfinished or complete one matches.")
@placement_options
@batch_size_option
@threads_option("[default: $OMP_NUM_THREADS, else the free cores: the cores less the load average, at least 1] "
                "With --ray: per worker, default 1.")
@click.option("--ray", "ray_address", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Generate on Ray workers (one model per GPU, else per --threads CPUs); this process grades "
                   "and stores every attempt. No ADDRESS: start Ray on this machine; auto or HOST:PORT: use "
                   "that running cluster. MODEL must load on every node. Needs reachtui[ray].")
@click.option("--workers", type=numbers.INT, default=None,
              help="Ray workers. [default: one per GPU in the cluster, else its CPUs // --threads]")
@server_options
@model_access_options
def audit(model: str, task_spec: str, task_name: str | None, task_fields: Fields, protocol_options: ProtocolOptions,
          limit: int | None, skip_long: bool, mlp_scan: str | None, store_path: str | None, run_id: int | None,
          new_run: bool, placement: Placement, batch_size: int | None, threads: int | None, ray_address: str | None,
          workers: int | None, server_flags: ServerFlags, access: ModelAccess) -> None:
    """Audit MODEL on TASK: realized (default decoding) vs reachable (some attempt of a probe) per
    question; every attempt stored, resumable. MODEL is `demo`, a directory, a PEFT adapter directory, or a
    cached HF id.

    Repeating the command of a complete run shows that run (nothing is generated); --new starts another."""
    from rich.console import Console

    from reachtui.commands import serving
    from reachtui.engine.audit import check_given_run, completed_audit, holds_scan, run_audit
    from reachtui.model.load import model_name, with_revision
    from reachtui.store import check_creatable, default_store_path
    from reachtui.tables.formats import shown

    server = serving.server_of(server_flags, placement, ray_address=ray_address, workers=workers, threads=threads)
    set_threads(threads)
    model = with_revision(model, access.revision)
    if run_id is not None and new_run:
        raise ReachError("--run and --new contradict each other")
    if ray_address is not None:
        from reachtui.cluster import check_options, import_ray

        if placement.device_map is not None:
            raise ReachError("--device-map and --ray: each Ray worker loads the whole model on its own device")
        ray_address = check_options(ray_address, workers, placement.device)
        import_ray()
    elif workers is not None:
        raise ReachError("--workers needs --ray")
    preflight.placement(placement)     # before the store is touched
    settings = preflight.settings_of(protocol_options, task_spec=task_spec, task_name=task_name,
                                     task_fields=task_fields, mlp_scan=mlp_scan, explicit_scan=True, limit=limit,
                                     batch_size=batch_size, allow_download=access.allow_download)
    protocol, task, mlp_scan = settings.protocol, settings.task, settings.mlp_scan
    questions = preflight.question_pairs(task, limit)
    err = Console(stderr=True)
    runner: Any = None
    if server is not None:        # the server's engine is part of the protocol: connect before the store
        protocol = serving.served_protocol(protocol, protocol_options, mlp_scan, scan_asked=True)
        runner = serving.connect(model, server, access, err)
        click.get_current_context().call_on_close(runner.close)
        protocol = replace(protocol, engine=runner.engine)

    def model_checks():
        """The model loads (a server holds its own), and the prompts fit it (or --skip-long names those to
        leave out): one line if not."""
        if server is None:
            preflight.loadable(model, protocol.max_new_tokens, access)
        return preflight.prompts_fit(model, protocol, questions, access, skip_long=skip_long, server=runner)

    # no store yet: nothing to show or resume, so the checks come first, and the store is made only once the
    # model has loaded (a model that cannot load, or fails a check at load, leaves no store and no folder)
    store_file = Path(store_path) if store_path else default_store_path()
    fresh = run_id is None and not store_file.exists()
    fit = None
    if fresh:
        fit = model_checks()
        check_creatable(store_file)
    store = None if fresh else _open_writer(store_path)
    out = Console()
    done, whole = None, False
    if run_id is not None:        # refuse before spending time on the model
        if check_given_run(store, run_id, task=task, protocol=protocol, limit=limit)["status"] == "complete":
            done, whole = run_id, holds_scan(store, run_id, mlp_scan)
    elif not new_run and not fresh:
        done, whole = completed_audit(store, model_name=model_name(model), task=task, protocol=protocol,
                                      limit=limit, mlp_scan=mlp_scan)
    if done is not None and whole:     # the same command again: show the run, generate nothing
        print_closing(out, store, done)
        out.print(f"run {done}: already complete (protocol {protocol.hash()}); nothing generated - store "
                  f"{store_file} (--new starts another run)")
        return
    if done is not None:          # complete, but without the MLP scan asked for: add it to that run
        run_id = done
    if fit is None:
        fit = model_checks()
    if fit.skipped:
        err.print(shown(fit.left_out_line()), markup=False, highlight=False, soft_wrap=True)

    t_load = time.monotonic()
    if server is not None:
        info = runner.info
        where = f" through {runner.engine} at {runner.client.where}"
    elif ray_address is None:
        from reachtui.model.run import Runner

        with err.status(f"loading {model} ..."):
            runner = Runner(preflight.load_placed(model, placement, access))
        info = runner.info
        where = ""
    else:
        with err.status(f"starting Ray workers, each loading {model} ..."):
            runner = _ray_runner(model, ray_address, protocol, workers=workers, threads=threads or 1,
                                 placement=placement, access=access)
        info = runner.info
        where = f" on {runner.workers} Ray worker(s) of {info['threads']} thread(s)"
    if server is not None:
        err.print(f"model {info['name']} ({info['model_class']}, {runner.num_layers} layers) generated{where}, "
                  f"{server.concurrency} requests at a time; protocol {protocol.hash()}")
    else:
        err.print(f"model {info['name']} ({info['model_class']}, {runner.num_layers} layers, {info['device']}, "
                  f"{info['dtype']}) loaded{where} in {time.monotonic() - t_load:.1f}s; protocol {protocol.hash()}")
    if store is None:
        store = _open_writer(store_path)

    cancel = threading.Event()
    hits = {"n": 0}
    current = {"run": None}

    def on_signal(signum, frame):
        """Ctrl-C, SIGTERM (a process manager, `kill`) and SIGHUP (the terminal closed) alike: the first stops
        after the batch in flight and leaves the run cancelled, resumable; a second stops at once."""
        hits["n"] += 1
        if hits["n"] == 1:
            cancel.set()
            what = "" if signum == signal.SIGINT else f"{signal.Signals(signum).name}: "
            try:
                err.print(f"[yellow]{what}stopping after the batch in flight (Ctrl-C again to stop at once)[/]")
            except OSError:          # SIGHUP: the terminal may be gone
                pass
        else:
            raise KeyboardInterrupt

    def follow(ev) -> None:
        current["run"] = ev.run_id
        bar(ev)

    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS} if main else {}
    t0 = time.monotonic()
    try:
        with _Bar(err) as bar:
            result = run_audit(store, runner, model_name=info["name"], model_path=info["path"],
                               model_class=info["model_class"], task=task, protocol=protocol, limit=limit,
                               run_id=run_id, batch_size=batch_size, mlp_scan=mlp_scan, on_event=follow,
                               cancel=cancel, versions=info, new=new_run, load_report=info.get("load_report"),
                               skip_long=skip_long, fit=fit)
    except KeyboardInterrupt:
        rid = current["run"] or "?"
        err.print(f"interrupted: run {rid} is resumable (run the same command again)")
        raise SystemExit(130) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if ray_address is not None:
            runner.close()
    wall = time.monotonic() - t0
    for line in runner.losses:
        err.print(f"[yellow]{line}[/]")

    print_closing(out, store, result.run_id)
    verb = "resumed and " if result.resumed else ""
    out.print(f"run {result.run_id}: {verb}{result.status} in {wall:.1f}s ({result.generated} attempts generated "
              f"now) - store {store.path}")
    if result.status != "complete":
        err.print(f"run {result.run_id} was cancelled; run the same command again to continue it")
        raise SystemExit(130)
