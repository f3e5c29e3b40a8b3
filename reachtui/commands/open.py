"""`reachtui open [MODEL]`: the Textual app.

- `reachtui open MODEL [--task TASK] [protocol options as for audit]`: if the store holds a finished
  run of (model, task, protocol, limit) it opens at once; otherwise the audit starts in a background
  worker and the table fills live. The model then loads in a worker (status in the header). A demo model
  on the demo task with nothing that sizes the audit runs the quick demo (`QUICK_DEMO`); `--full` the whole.
- `reachtui open --store PATH [--run ID]`: browse a stored audit without loading any model: torch is
  not imported until a live action (enter, A) needs the model.

Nothing heavy is imported at module level: textual is imported inside the command, torch only by the
app's workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reachtui.commands import numbers, preflight
from reachtui.commands.options import (batch_size_option, mlp_scan_choice, model_access_options, new_option,
                                       placement_options, protocol_options, refuse_options, server_options, set_threads,
                                       store_option, task_option, threads_option)
from reachtui.errors import ReachError
from reachtui.settings import ModelAccess, Placement, ProtocolOptions, ServerFlags

if TYPE_CHECKING:
    from reachtui.tasks import Fields
    from reachtui.tui.launch import Launch


#: `reachtui open demo` without --limit, --budget, --protocol or --full: the quick demo, the demo task's first
#: 64 questions at budget 8 (sample and routes, then the MLP scan: 1,600 attempts), sized to finish within 2
#: minutes on 2 cores (tests/bench/bench_demo_open.py measures it); `--full` audits all 320 at the protocol's
#: budget (16), about 8 times the work.
QUICK_DEMO = {"limit": 64, "budget": 8}


def quick_demo(model: str, task_spec: str, *, full: bool, limit: int | None, budget: int | None,
               protocol_file: str | None) -> tuple[int | None, int | None]:
    """(limit, budget) of `open`: QUICK_DEMO's for a bundled demo model on the demo task when no option
    sizes the audit (so the first `reachtui open demo` is done in a minute or two), else as given."""
    from reachtui.assets import BUNDLED_MODELS

    if full or model not in BUNDLED_MODELS or task_spec != "demo" or (limit, budget, protocol_file) != (None,) * 3:
        return limit, budget
    return QUICK_DEMO["limit"], QUICK_DEMO["budget"]


def model_name_for(spec: str) -> str:
    """The name `load_model` gives a model (what the store calls it), found without importing torch."""
    from reachtui.model.load import model_name

    return model_name(spec)


def find_finished_run(store_path: Path, model: str, task, protocol, limit: int | None) -> int | None:
    """The latest complete run of (model, task, protocol, limit) in the store, or None."""
    if not store_path.is_file():
        return None
    from reachtui.engine.audit import finished_run
    from reachtui.store import Store

    with Store(store_path, readonly=True) as store:
        return finished_run(store, model_name=model_name_for(model), task=task, protocol=protocol, limit=limit)


def make_audit_job(store_path: Path, task, protocol, *, limit, batch_size, mlp_scan, new_run, skip_long=False,
                   fit=None):
    """The audit as the app's worker runs it: `job(get_runner, on_event(Progress), cancel) -> run_id`, with
    its own store connection (made in the worker's thread) and the app's shared Runner. `skip_long`, `fit`:
    as `run_audit` takes them (`fit`: what `prompts_fit` found before the app started)."""

    def job(get_runner, on_event, cancel) -> int:
        from reachtui.engine.audit import run_audit
        from reachtui.store import Store

        runner = get_runner()
        info = runner.info
        with Store(store_path) as store:
            result = run_audit(store, runner, model_name=info["name"], model_path=info["path"],
                               model_class=info["model_class"], task=task, protocol=protocol, limit=limit,
                               batch_size=batch_size, mlp_scan=mlp_scan, on_event=on_event, cancel=cancel,
                               versions=info, new=new_run, load_report=info.get("load_report"),
                               skip_long=skip_long, fit=fit)
        return result.run_id

    return job


class _StartsTheApp(click.Command):
    """`open`: its callback (`prepare`) makes every check of the options and returns what starts the app; the
    command then starts it. `serve` calls the callback alone, then serves."""

    def invoke(self, ctx: click.Context) -> None:
        start = super().invoke(ctx)
        start()


@click.command("open", cls=_StartsTheApp)
@click.argument("model", required=False)
@task_option(default="demo", note=" Used with MODEL.")
@store_option
@click.option("--run", "run_id", type=numbers.INT, default=None, help="Browse this run of the store.")
@protocol_options
@mlp_scan_choice
@new_option("Start a new audit run even if one matches.")
@click.option("--full", is_flag=True,
              help=f"With a demo model on the demo task: audit all of it at the protocol's budget (16) instead of "
                   f"the quick demo, its first {QUICK_DEMO['limit']} questions at budget {QUICK_DEMO['budget']} (the "
                   f"default when no --limit, --budget or --protocol is given).")
@placement_options
@batch_size_option
@threads_option("[default: $OMP_NUM_THREADS, else the free cores (cores less the load average), at most half]")
@server_options
@model_access_options
@click.option("--compare", "compare", nargs=2, default=None, metavar="A B",
              help="Compare two runs (ids, or model names: the model's latest complete run) question by question, "
                   "as `reachtui compare A B` does (no model is loaded).")
@click.option("--allow-unmatched", is_flag=True, help="With --compare: compare runs whose protocols differ.")
@click.option("--keymap", "keymap_file", type=click.Path(dir_okay=False), default=None,
              help='A TOML file of binding id = "key" (ids in the help screen), e.g. "filter.failure" = "F".')
def open_(model: str | None, task_spec: str, task_name: str | None, task_fields: Fields, store_path: str | None,
          run_id: int | None, protocol_options: ProtocolOptions, limit: int | None, skip_long: bool,
          mlp_scan: str | None, new_run: bool, full: bool, placement: Placement, batch_size: int | None,
          threads: int | None, server_flags: ServerFlags, access: ModelAccess, compare: tuple[str, str] | None,
          allow_unmatched: bool, keymap_file: str | None) -> Callable[[], None]:
    """Open the app: browse an audit question by question, filter failure sets, silence MLP blocks or
    edit the layer route of a question and see the answer change, apply that to a whole set.

    With MODEL (`demo`, a directory, a PEFT adapter directory, or a cached HF id) the audit runs in the background unless the
    store already has a finished run for it; without MODEL, browse the store (no model is loaded)."""
    # Every check `open` makes of its options before any UI (`serve` makes them too, before serving): one
    # line for a bad one. Returns what starts the app (`_StartsTheApp` starts it).
    from reachtui.commands import serving
    from reachtui.model.load import with_revision
    from reachtui.store import default_store_path
    from reachtui.tui.launch import Launch

    server = serving.server_of(server_flags, placement, threads=threads)
    if access.revision is not None and model is None:
        raise ReachError("--revision names a revision of MODEL: give MODEL")
    if server is not None and model is None:
        raise ReachError("--server generates for MODEL (its tokenizer renders the prompts): give MODEL")
    model = with_revision(model, access.revision) if model is not None else None
    set_threads(threads, interactive=True)   # torch loads later, in a worker: the environment is read then
    path = Path(store_path) if store_path else default_store_path()
    preflight.placement(placement)     # one line now, not a notification in the app
    keymap = read_keymap(keymap_file) if keymap_file is not None else None
    if compare is None:
        refuse_options(("allow_unmatched",), "without --compare")
    if model is None:      # browsing: the stored runs keep their own task and protocol
        refuse_options(AUDIT_OPTIONS, "without MODEL: they set up an audit, and browsing runs none (a stored run "
                                      "keeps its task and protocol)")
    browsing = Launch(placement=placement, access=access)
    if compare is not None:
        if model is not None:
            raise ReachError("--compare browses two stored runs: give no MODEL")
        refuse_options(("run_id",), "with --compare, which names its two runs")
        ids = compared_runs(path, compare, allow_unmatched)
        return lambda: _run_app(path, None, browsing, keymap=keymap, compare=ids, allow_unmatched=allow_unmatched)
    if model is None:
        check_now = not path.is_file() or path.stat().st_size <= CHECK_FIRST_BYTES
        check_browsable(path, run_id, check=check_now)

        def browse() -> None:
            from reachtui.tui.data import preload

            future = preload(path, run_id)   # the rows load while textual imports
            _run_app(path, run_id, browsing, preloaded=future, keymap=keymap, check_store=not check_now)

        return browse

    asked_scan = mlp_scan not in (None, "")
    limit, budget = quick_demo(model, task_spec, full=full, limit=limit, budget=protocol_options.budget,
                               protocol_file=protocol_options.file)
    protocol_options = replace(protocol_options, budget=budget)
    settings = preflight.settings_of(protocol_options, task_spec=task_spec, task_name=task_name,
                                     task_fields=task_fields, mlp_scan=mlp_scan, explicit_scan=False, limit=limit,
                                     batch_size=batch_size, allow_download=access.allow_download)
    protocol, task, mlp_scan = settings.protocol, settings.task, settings.mlp_scan
    runner = None
    if server is not None:        # connected now: a server that is down is one line, not a notice in the app
        protocol = serving.served_protocol(protocol, protocol_options, mlp_scan, scan_asked=asked_scan)
        mlp_scan = None
        runner = serving.connect(model, server, access)
        protocol = replace(protocol, engine=runner.engine)
    else:
        # a missing model, pickled weights, a --max-new-tokens over its positions: one line now, not in the app
        preflight.loadable(model, protocol.max_new_tokens, access)
    from reachtui.store import Store

    if path.is_file():            # a damaged store is one line now, not a notification in the app
        Store(path, readonly=True, check=True).close()
    if run_id is None and not new_run:
        run_id = find_finished_run(path, model, task, protocol, limit)
    job = None
    if run_id is None:
        # prompts over the model's positions: one line now (or left out with --skip-long), not in the app
        fit = preflight.prompts_fit(model, protocol, preflight.question_pairs(task, limit), access,
                                    skip_long=skip_long, server=runner)
        Store(path).close()       # the audit writes here: a read-only or damaged store is one line now
        job = make_audit_job(path, task, protocol, limit=limit, batch_size=batch_size, mlp_scan=mlp_scan,
                             new_run=new_run, skip_long=skip_long, fit=fit)
    launch = Launch(model=model, placement=placement, access=access, audit_job=job, runner=runner)
    return lambda: _run_app(path, run_id, launch, keymap=keymap)


def prepare(**params: Any) -> Callable[[], None]:
    """open's checks alone, from its option values as click parses them (`serve` makes them before serving):
    returns what starts the app."""
    assert open_.callback is not None        # the function under @click.command, with its options' decorators
    return open_.callback(**params)

#: open's options that set up an audit of MODEL (the task, the protocol, the run's batches).
AUDIT_OPTIONS = ("task_spec", "task_name", "question_field", "answer_field", "id_field", "choices_field",
                 "field_map", "task_preset", "probes", "budget", "temperature", "seed", "max_new_tokens", "protocol_file", "chat",
                 "system", "template", "answer_format", "stops", "fewshot_file", "limit", "mlp_scan", "new_run",
                 "batch_size", "skip_long", "full")


def compared_runs(path: Path, specs: tuple[str, str], allow_unmatched: bool) -> tuple[int, int]:
    """The two run ids `--compare A B` names (ids, 'latest', or model names), checked as `reachtui compare`
    checks them (matched protocols unless allowed), before any UI."""
    check_browsable(path, None)
    from reachtui.store import Store
    from reachtui.tables import compare_runs

    with Store(path, readonly=True) as store:
        ids = [store.resolve_run(spec) for spec in specs]
        compare_runs(store, ids[0], ids[1], allow_unmatched=allow_unmatched, bootstrap=0)
    return ids[0], ids[1]


#: `reachtui open --store` checks a store up to this size (`PRAGMA quick_check`, about 0.2 s per 100 MB)
#: before the app starts; a larger one beside the first paint, and the app closes with the same one line if
#: it is damaged. Nothing depends on the order: every writer (an apply from the app) checks the store again.
CHECK_FIRST_BYTES = 64 << 20


def check_browsable(path: Path, run_id: int | None, *, check: bool = True) -> None:
    """One clear line, before any UI, when there is nothing to browse: no store, no runs, no such run, and
    (with `check`) a damaged store."""
    if not path.is_file():
        raise ReachError(f"no audit store at {path}: run `reachtui open demo` (or `reachtui audit ...`) first")
    from reachtui.store import Store

    with Store(path, readonly=True, check=check) as store:
        if run_id is not None:
            store.get_run(run_id)
        elif store.latest_run() is None:
            raise ReachError(f"the store {path} has no runs yet")


def read_keymap(path: str) -> dict[str, str]:
    """`binding.id = "key"` lines (TOML); unknown ids are refused with the list of known ones."""
    from reachtui.inputs import KEYMAP, short_name
    from reachtui.parsing import toml_file

    raw = toml_file(path, f"--keymap {short_name(path)}", kind=KEYMAP)
    flat: dict[str, str] = {}
    from reachtui.tui.actions import binding_ids, canonical_keys, keymap_clash

    known = binding_ids()

    def unknown(name: str) -> ReachError:
        return ReachError(f"--keymap {path}: unknown binding id {name!r} (known: {', '.join(known)})")

    # "filter.failure" = "F" parses as a nested table, or as the quoted key itself: ids are section.name
    for section, value in raw.items():
        pairs = value.items() if isinstance(value, dict) else [(None, value)]
        for key, v in pairs:
            name = section if key is None else f"{section}.{key}"
            if name not in known:
                raise unknown(name)
            if not isinstance(v, str) or not v.strip():
                raise ReachError(f"--keymap {path}: {name} must be a key name like \"F\" or \"ctrl+f\"")
            keys = canonical_keys(v)
            if keys is None:
                shown = v if len(v) <= 40 else v[:37] + "..."
                raise ReachError(f"--keymap {path}: {name}: {shown!r} is not a key Textual knows (a character, or "
                                 f"a name like escape, f1, ctrl+f, shift+tab)")
            flat[name] = keys
    if clash := keymap_clash(flat):
        raise ReachError(f"--keymap {path}: {clash}")
    return flat


def _run_app(path: Path, run_id: int | None, launch: Launch, preloaded=None, keymap=None, **kw) -> None:
    import asyncio

    from reachtui.tui.app import ReachApp

    app = ReachApp(path, run_id, launch=launch, preloaded=preloaded, keymap=keymap, **kw)
    # a loop of its own: asyncio.run would wait, saying nothing, for an audit's batch in flight before returning
    app.run(loop=asyncio.new_event_loop())
    if app.fatal is None and (line := app.farewell()):
        click.echo(line, err=True)
    app.wait_for_writers(lambda line: click.echo(line, err=True))
    if app.fatal is not None:   # the store turned out damaged after the first paint: its one line
        raise app.fatal
    if app.return_code not in (None, 0):
        raise SystemExit(app.return_code)
    _leave_quickly()


def _leave_quickly() -> None:
    """Everything is stored and said: exit without the interpreter's teardown of a loaded torch, which took
    2.4-3.2 s after the app had closed (measured on a busy 2-core machine; nothing of ours runs in it)."""
    import os
    import sys

    if "torch" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


open_cmd = open_
