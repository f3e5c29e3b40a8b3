"""`reachtui audit MODEL --task TASK ...`: the audit, headless, with a progress bar and a summary table.

Heavy imports (the model) happen inside the command, never at import time. The progress bar goes to
stderr, the summary table and the run id to stdout. The first Ctrl-C (or SIGTERM, or SIGHUP) finishes the
batch in flight and leaves the run 'cancelled' (run the same command again to continue it); a second one
stops at once (the run is still resumable: every stored attempt is whole).
"""

from __future__ import annotations

import signal
from dataclasses import replace
import threading
import time
from pathlib import Path

import click

from reachtui.commands import numbers
from reachtui.commands.options import (batch_size_option, mlp_scan_flag, model_access_options, new_option,
                                       placement_options, protocol_options, set_threads, store_option, task_option,
                                       threads_option)
from reachtui.commands.preflight import loadable, placement, settings_of
from reachtui.engine.progress import DONE, FAILURE_SETS
from reachtui.errors import ReachError


def _ray_runner(model, address, protocol, **kw):
    """The Ray workers' runner. Prompts are rendered here: a chat template needs the tokenizer here too."""
    from reachtui.cluster import RayRunner

    tokenizer = None
    if protocol.chat:
        from reachtui.model.load import load_tokenizer

        tokenizer = load_tokenizer(model, trust_remote_code=kw["trust_remote_code"],
                                   allow_download=kw["allow_download"])
    runner = RayRunner(model, address=address, **kw)
    runner.tokenizer = tokenizer
    return runner


#: The signals that stop an audit as Ctrl-C does (where the system has them).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Bar:
    """Follows the engine's Progress events with a rich progress bar on stderr."""

    def __init__(self, console):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.progress = Progress(TextColumn("[bold]{task.description:<12}"), BarColumn(bar_width=24),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                 TextColumn("{task.fields[info]}"), console=console, transient=False)
        self.tasks: dict[str, int] = {}

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
            self.tasks[ev.phase] = self.progress.add_task(label, total=max(ev.total, 1), info="")
        empty = ev.total == 0         # nothing to do in this phase (no failure set to freeze): it is done
        if empty:
            ev = replace(ev, done=1)
        tid = self.tasks[ev.phase]
        if ev.phase == FAILURE_SETS:
            info = "nothing to freeze (no probe)" if empty else "frozen"
        else:
            info = f"{ev.correct} ok"
        self.progress.update(tid, completed=ev.done, total=max(ev.total, 1), info=info)


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
@model_access_options
def audit(model, task_spec, task_name, task_fields, probes, budget, temperature, seed, limit, mlp_scan, store_path,
          protocol_file, chat, system, template, answer_format, stops, fewshot_file, run_id, new_run, device, dtype,
          device_map, offload_folder, batch_size, max_new_tokens, threads, ray_address, workers, revision,
          trust_remote_code, allow_download, allow_pickle, allow_missing_weights):
    """Audit MODEL on TASK: realized (default decoding) vs reachable (some attempt of a probe) per
    question; every attempt stored, resumable. MODEL is `demo`, a directory, a PEFT adapter directory, or a
    cached HF id.

    Repeating the command of a complete run shows that run (nothing is generated); --new starts another."""
    from rich.console import Console

    from reachtui.engine.audit import check_given_run, completed_audit, holds_scan, run_audit
    from reachtui.model.load import model_name, with_revision
    from reachtui.store import check_creatable, default_store_path

    set_threads(threads)
    model = with_revision(model, revision)
    if run_id is not None and new_run:
        raise ReachError("--run and --new contradict each other")
    if ray_address is not None:
        from reachtui.cluster import check_options, import_ray

        if device_map is not None:
            raise ReachError("--device-map and --ray: each Ray worker loads the whole model on its own device")
        ray_address = check_options(ray_address, workers, device)
        import_ray()
    elif workers is not None:
        raise ReachError("--workers needs --ray")
    placement(device, device_map, offload_folder)     # before the store is touched
    settings = settings_of(locals(), explicit_scan=True)     # the options, by name
    protocol, task, mlp_scan = settings.protocol, settings.task, settings.mlp_scan
    # A store that is not there yet is made once the model has loaded: a model that cannot load leaves nothing
    store_file = Path(store_path) if store_path else default_store_path()
    fresh = run_id is None and not store_file.exists()
    if fresh:
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
                  f"{store.path} (--new starts another run)")
        return
    if done is not None:          # complete, but without the MLP scan asked for: add it to that run
        run_id = done
    loadable(model, protocol.max_new_tokens, allow_download=allow_download, allow_pickle=allow_pickle,
             allow_missing_weights=allow_missing_weights)

    err = Console(stderr=True)
    t_load = time.monotonic()
    if ray_address is None:
        from reachtui.model.load import load_model
        from reachtui.model.run import Runner, versions

        with err.status(f"loading {model} ..."):
            loaded = load_model(model, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                                allow_download=allow_download, device_map=device_map, offload_folder=offload_folder,
                                allow_pickle=allow_pickle, allow_missing_weights=allow_missing_weights)
            runner = Runner(loaded)
        info = dict(name=loaded.name, path=str(loaded.path), model_class=loaded.arch.model_class,
                    load_report=loaded.load_report, **versions(loaded))
        where = ""
    else:
        with err.status(f"starting Ray workers, each loading {model} ..."):
            runner = _ray_runner(model, ray_address, protocol, workers=workers, threads=threads or 1, device=device,
                                 dtype=dtype, trust_remote_code=trust_remote_code, allow_download=allow_download,
                                 allow_pickle=allow_pickle, allow_missing_weights=allow_missing_weights)
        info = runner.info
        where = f" on {runner.workers} Ray worker(s) of {info['threads']} thread(s)"
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
                               cancel=cancel, versions=info, new=new_run, load_report=info.get("load_report"))
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
    for line in getattr(runner, "losses", ()):
        err.print(f"[yellow]{line}[/]")

    print_closing(out, store, result.run_id)
    verb = "resumed and " if result.resumed else ""
    out.print(f"run {result.run_id}: {verb}{result.status} in {wall:.1f}s ({result.generated} attempts generated "
              f"now) - store {store.path}")
    if result.status != "complete":
        err.print(f"run {result.run_id} was cancelled; run the same command again to continue it")
        raise SystemExit(130)
