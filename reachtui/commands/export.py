"""`reachtui export TABLE`: a table out of the audit store, as csv/tsv/json/ndjson/md/latex.

Reads the store only (read-only connection); imports no torch, transformers or textual. Flags follow
`sqlite-utils rows` where they overlap (--where, -p/--param, -c/--column, --csv, --tsv, --nl,
--no-headers, --limit); -o is the output file here (sqlite-utils has no output file).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from reachtui.commands import numbers
from reachtui.commands.options import refuse_options, store_option
from reachtui.errors import ReachError
from reachtui.output import check_output, write_output
from reachtui.stats import MAX_BOOTSTRAP

_SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson",
                   ".md": "md", ".tex": "latex", ".txt": "table", ".parquet": "parquet"}
#: Suffixes of files other commands write: named in the line that refuses them.
_OTHER_SUFFIXES = {".pdf": "reachtui plot", ".png": "reachtui plot", ".svg": "reachtui plot",
                   ".eval": "reachtui export inspect"}
#: `reachtui export inspect`: not a table, a whole run as an Inspect AI log (reachtui.reports.inspect_export).
INSPECT = "inspect"
#: `reachtui export lens`: a table computed with the run's model (reachtui.engine.trace), not read from the store.
LENS = "lens"


def open_store(path: str | None):
    """The audit store, read-only (--store, else $REACHTUI_STORE, else ./store/reachtui.sqlite), checked
    first (`PRAGMA quick_check`): a damaged store is one line, not a table with rows missing."""
    from reachtui.store import Store

    return Store(store_path_of(path), readonly=True, check=True)


def pick_format(fmt: str | None, output: str | None, shorthands: dict[str, bool]) -> str:
    """--format, or one of --csv/--tsv/--nl/--json/-t, or the -o file's suffix; else a terminal table
    when stdout is a terminal and csv when it is not."""
    from reachtui.tables.formats import FORMATS
    from reachtui.tables.parquet import PARQUET

    known = FORMATS + (PARQUET,)
    chosen = [name for name, on in shorthands.items() if on]
    if fmt is not None:
        chosen.insert(0, fmt)
    if len(set(chosen)) > 1:
        raise ReachError(f"choose one output format, not {' and '.join(dict.fromkeys(chosen))}")
    if chosen:
        if chosen[0] not in known:
            raise ReachError(f"unknown format {chosen[0]!r}; choose one of {', '.join(known)}")
        return chosen[0]
    if output:
        suffix = Path(output).suffix.lower()
        if suffix in _SUFFIX_FORMATS:
            return _SUFFIX_FORMATS[suffix]
        if suffix:          # never a silent csv in a file whose name says otherwise
            other = f" ({_OTHER_SUFFIXES[suffix]} writes {suffix} files)" if suffix in _OTHER_SUFFIXES else ""
            raise ReachError(f"-o {output}: unknown suffix {suffix!r}{other}; use one of "
                             f"{', '.join(_SUFFIX_FORMATS)} or name the format with --format")
        return "csv"
    return "table" if sys.stdout.isatty() else "csv"


def store_path_of(path: str | None) -> Path:
    """The store a command reads: --store, else $REACHTUI_STORE, else ./store/reachtui.sqlite."""
    from reachtui.store import default_store_path

    return Path(path) if path else default_store_path()


def emit(tables, fmt: str, output: str | None, store: Path | None = None, *, quiet: bool = False, **style) -> None:
    """Print (or write to `output`, never the audit `store` or its files: `reachtui.output`) one or more
    tables; notes and warnings go to stderr for data formats (they are inside the text for md/latex/table).
    On a terminal, `table` is drawn by rich directly. `quiet`: no notes anywhere (--quiet; warnings stay).
    `style`: how people formats write them (`reachtui.tables.formats.render`)."""
    from dataclasses import replace

    from reachtui.tables.formats import DATA_FORMATS, nonfinite_note, render_many, shown, to_rich
    from reachtui.tables.parquet import PARQUET

    tables = [t.quiet() for t in tables] if quiet else list(tables)
    if fmt in ("json", "ndjson") and not quiet:     # JSON has no infinity: said beside the file
        tables = [replace(t, notes=[*t.notes, note]) if (note := nonfinite_note(t)) else t for t in tables]
    if fmt == PARQUET:     # the one binary format: a file, or stdout when it is not a terminal
        _emit_parquet(tables, output, store)
    elif output:       # the file first: a write that fails is then the only line
        write_output(output, render_many(tables, fmt, **style), store)
    for w in dict.fromkeys(w for t in tables for w in t.warnings):     # one line each, however many tables carry it
        click.secho(f"WARNING: {w}", err=True, fg="red", bold=True)
    if fmt in DATA_FORMATS or fmt == PARQUET or output:
        for t in tables:
            for n in t.notes:
                click.echo(f"note: {n}", err=True)
    if output or fmt == PARQUET:
        return
    if fmt == "table" and sys.stdout.isatty():
        from rich.console import Console

        console = Console()
        for t in tables:
            console.print(to_rich(t, inline_ci=style.get("inline_ci", False)))
            for n in t.notes:
                console.print(n, markup=False, highlight=False, style="dim")
        return
    text = render_many(tables, fmt, **style)
    if sys.stdout.isatty():        # an escape sequence in an output would be run by the terminal: shown instead
        text = shown(text)
    click.echo(text, nl=False, color=True)     # color=True: click would strip escape sequences from the data


def _emit_parquet(tables, output: str | None, store: Path | None) -> None:
    """One table as a parquet file: to -o FILE, or to stdout when it is not a terminal (bytes, no text)."""
    from reachtui.output import write_output_bytes
    from reachtui.tables.parquet import to_parquet

    if len(tables) != 1:
        raise ReachError("a parquet file holds one table: export one table at a time")
    if output is None and sys.stdout.isatty():
        raise ReachError("parquet is a binary format: write it with -o FILE.parquet or redirect stdout")
    data = to_parquet(tables[0])
    if output:
        write_output_bytes(output, data, store)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _finite(value: float, name: str) -> float:
    import math

    if not math.isfinite(value):
        raise ReachError(f"{name} must be a finite number of seconds, not {value}")
    return value



#: --quiet (export, compare, import).
quiet_option = click.option(
    "--quiet", "-q", is_flag=True,
    help="No notes: neither on stderr nor under the table in md, LaTeX or the terminal (warnings stay). Notes "
         "say what a table's cells mean (intervals, retained's blanks, left-out questions); each is printed only "
         "with the columns it explains.")

#: --keep-formulas (export, compare).
keep_formulas_option = click.option(
    "--keep-formulas", "keep_formulas", is_flag=True,
    help="csv/tsv: write text cells that start with = + - @ (or a tab, a CR) as they are. By default they get a "
         "leading ' so that a spreadsheet shows them instead of running them as formulas.")


def bootstrap_options(command):
    """--bootstrap B and --bootstrap-seed S (shared by export and compare)."""
    command = click.option("--bootstrap-seed", "bootstrap_seed", type=numbers.AsciiIntRange(min=0), default=0,
                           show_default=True, metavar="S",
                           help="Seed of the bootstrap intervals (the same seed repeats them exactly).")(command)
    return click.option("--bootstrap", "bootstrap", type=numbers.AsciiIntRange(0, MAX_BOOTSTRAP), default=1000,
                        show_default=True,
                        metavar="B", help="Bootstrap replicates for the 95% intervals of gap, excess, retained "
                                          "and compare's Δs (0: leave those intervals empty).")(command)


def _split_columns(columns: tuple[str, ...], columns_csv: str | None) -> list[str] | None:
    names = [c.strip() for c in columns if c.strip()]
    if columns_csv:
        names += [c.strip() for c in columns_csv.split(",") if c.strip()]
    return names or None


class _TablesHelp(click.Command):
    """`export`'s help lists the tables from their registry when it is shown (`reachtui --help` stays fast)."""

    def format_help_text(self, ctx, formatter):
        from reachtui.tables.registry import tables_help

        self.help = (self.help or "").replace("{tables}", "\n    ".join(tables_help()))
        super().format_help_text(ctx, formatter)


@click.command("export", cls=_TablesHelp, short_help="Write a table of the audit store (csv ... LaTeX).")
@click.argument("table_name", metavar="TABLE")
@click.argument("run_args", nargs=-1, metavar="[RUN]...")
@click.option("--run", "runs", multiple=True, metavar="ID",
              help="Run id, 'latest' (the default), a model name (its latest complete run), or 'all'. Repeat for "
                   "several runs; the compare table takes two (A, then B).")
@store_option
@click.option("--format", "-f", "fmt", default=None, metavar="FORMAT",
              help="csv, tsv, json, ndjson, md, latex, table or parquet (default: table on a terminal, else "
                   "csv, or from the -o file's suffix; an unknown suffix is refused). parquet needs "
                   "reachtui[parquet].")
@click.option("--csv", "as_csv", is_flag=True, help="Same as --format csv.")
@click.option("--tsv", "as_tsv", is_flag=True, help="Same as --format tsv.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--nl", "as_nl", is_flag=True, help="Newline-delimited JSON: same as --format ndjson.")
@click.option("-t", "--table", "as_table", is_flag=True, help="Same as --format table.")
@click.option("-o", "--output", default=None, metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
@click.option("--where", default=None, metavar="SQL",
              help="Keep rows matching this SQL condition over the table's columns, e.g. "
                   "\"probe = 'routes' and gap > 0.1\" (run on a private copy; stopped after --where-timeout).")
@click.option("-p", "--param", "params", multiple=True, type=(str, str), metavar="NAME VALUE",
              help="Named :parameters for --where.")
@click.option("-c", "--column", "columns", multiple=True, metavar="NAME", help="A column to keep (repeatable).")
@click.option("--columns", "columns_csv", default=None, metavar="A,B", help="Columns to keep, comma-separated.")
@click.option("--order", default=None, metavar="SQL", help="Order rows, e.g. 'reachable desc'.")
@click.option("--where-timeout", "where_timeout", type=numbers.AsciiFloatRange(min=0, min_open=True), default=10.0,
              show_default=True, metavar="SECONDS", callback=lambda ctx, param, v: _finite(v, "--where-timeout"),
              help="Stop --where/--order SQL that runs longer than this (an endless recursive CTE).")
@click.option("--limit", type=numbers.INT, default=None, help="At most this many rows.")
@click.option("--no-headers", is_flag=True, help="Omit the header row (csv, tsv, md, latex).")
@click.option("--ci", "ci", type=click.Choice(["column", "inline"]), default="column", show_default=True,
              help="md, latex, table: each 95% interval in its own column (\"X CI\"), or inline beside its value "
                   "(\"80.3 [75.1, 85.0]\").")
@click.option("--caption", default=None, metavar="TEXT", help="latex: wrap the tabular in a table environment "
                                                              "with this caption.")
@click.option("--label", "latex_label", default=None, metavar="KEY", help="latex: the table environment's "
                                                                        "\\label (implies the environment).")
@click.option("--allow-unmatched", is_flag=True,
              help="compare table only: compare runs whose protocols differ (every row is marked).")
@click.option("--probe", "probe", default=None, metavar="PROBE",
              help="inspect: the probe whose attempts are the log's epochs; lens: the probe whose frozen failure set "
                   "is traced (default: sample if the run has it, else its first reachability probe).")
@keep_formulas_option
@quiet_option
@bootstrap_options
def export(table_name, run_args, runs, store_path, fmt, as_csv, as_tsv, as_json, as_nl, as_table, output, where,
           params, columns, columns_csv, order, where_timeout, limit, no_headers, ci, caption, latex_label,
           allow_unmatched, probe, keep_formulas, quiet, bootstrap, bootstrap_seed) -> None:
    """Write TABLE of the audit store, one of:

    \b
    {tables}
    inspect: one run as an Inspect AI log (-o FILE.eval; needs reachtui[inspect])
    lens: per member of failure:PROBE (--probe), where the logit lens ranks the gold token best
          along the route and where it last is in the top-5 (loads the run's model)

    Runs are given as RUN arguments or --run.

    Beside every reachability figure: the chance control (each question's attempts scored against
    another question's gold of the same answer stratum), excess = reachable - control, robust
    reachability (>= 2 correct attempts), the answer scatter, and 95% intervals as `<column>_lo` /
    `<column>_hi` (Wilson for proportions, a seeded bootstrap over questions for gap, excess and
    retained, a paired bootstrap for compare's Δs). `hits` is the hit-count distribution per probe.

    \b
      reachtui export summary                      # the latest run, as a terminal table or csv
      reachtui export questions --run 3 --where "realized = 0 and reachable_routes = 1" --columns question_id,gold
      reachtui export passk --format md
      reachtui export summary --format latex -o table1.tex
      reachtui export compare --run 1 --run 2 --json
      reachtui export passk base -o passk.parquet
      reachtui export inspect base -o base.eval
      reachtui export summary --columns probe,reachable,control,excess,excess_lo,excess_hi --format md
    """
    from reachtui import tables as T
    from reachtui.tables.formats import check_label
    from reachtui.tables.table import select

    check_label(latex_label)
    name = table_name.strip().lower()
    runs = tuple(run_args) + tuple(runs)
    if name == INSPECT:             # issue 28: not a table, a whole run in Inspect's log format
        _export_inspect(runs, store_path, output, probe, quiet)
        return
    if name not in T.TABLES + (LENS,):
        raise ReachError(f"unknown table {table_name!r}; choose one of {', '.join(T.TABLES + (INSPECT, LENS))}")
    if probe is not None and name != LENS:
        raise ReachError("--probe is for `reachtui export inspect` and `reachtui export lens`")
    if output is not None:      # a file that must never be written (the store) is named first, before its suffix
        check_output(output, store_path_of(store_path))
    fmt = pick_format(fmt, output, {"csv": as_csv, "tsv": as_tsv, "json": as_json, "ndjson": as_nl,
                                    "table": as_table})
    refuse_unused(name, fmt, T.registry.get(name) if name != LENS else None, sql=bool(where or order))
    if limit is not None and limit < 0:
        raise ReachError("--limit must be 0 or more")
    if limit is not None:
        limit = min(limit, 2**62)       # more rows than any table has (and still an SQLite integer)
    if name == LENS:
        table = _lens_table(runs, store_path, probe)
    else:
        table = _stored_table(name, runs, store_path, allow_unmatched, bootstrap, bootstrap_seed)
    chosen = _split_columns(columns, columns_csv)
    table = select(table, columns=chosen, where=where,
                     params=dict(params) if params else None, order=order, limit=limit, timeout=where_timeout)
    style = dict(headers=not no_headers, inline_ci=ci == "inline", caption=caption, label=latex_label,
                 formulas=keep_formulas)
    if name == "summary" and fmt == "table" and not chosen:
        emit(T.summary_views(table), fmt, output, store_path_of(store_path), quiet=quiet, **style)  # two narrower
        return
    emit([table], fmt, output, store_path_of(store_path), quiet=quiet, **style)


def _stored_table(name: str, runs: tuple[str, ...], store_path: str | None, allow_unmatched: bool, bootstrap: int,
                  bootstrap_seed: int):
    """Table `name` of the runs `runs`, read from the store."""
    from reachtui import tables as T

    spec = T.registry.get(name)
    store = open_store(store_path)
    try:
        run_ids = store.resolve_runs(runs)
        if spec.pair and len(run_ids) != 2:
            raise ReachError(f"the {name} table needs two runs: --run A --run B (or use `reachtui compare A B`)")
        return T.build_table(store, name, run_ids, allow_unmatched=allow_unmatched, bootstrap=bootstrap,
                             seed=bootstrap_seed)
    finally:
        store.close()


def _lens_table(runs: tuple[str, ...], store_path: str | None, probe: str | None):
    """`export lens`: the logit lens over the members of one run's frozen failure:PROBE, computed with the
    run's model under the run's protocol (`reachtui.engine.trace.lens_rows`; the store is only read)."""
    from reachtui.model_names import stored_model
    from reachtui.reports.inspect_export import default_probe
    from reachtui.tables import run_probes

    if len(runs) > 1:
        raise ReachError("export lens reads one run: give one RUN")
    with open_store(store_path) as store:
        run_id = store.resolve_run(runs[0] if runs else None)
        row = store.get_run(run_id)
        protocol = store.run_protocol(row)
        probe = probe or default_probe(run_probes(store, run_id))
        fs = store.get_failure_set(run_id, f"failure:{probe}")
        if fs is None:
            have = ", ".join(f["name"] for f in store.failure_sets(run_id)) or "none"
            raise ReachError(f"run {run_id} has no frozen failure set failure:{probe} (its sets: {have})")
        questions = [store.question(k) for k in store.failure_set_members(fs["id"])]
    from reachtui.commands.preflight import loadable
    from reachtui.engine.trace import TOP_K, lens_rows
    from reachtui.model.run import load_runner
    from reachtui.settings import ModelAccess
    from reachtui.tables.lens import lens_table

    from reachtui.commands.options import set_threads

    set_threads(None)           # torch's threads: the free cores (a busy machine slows down with more)
    model = stored_model(row["model"], row.get("model_path"))
    loadable(model, protocol.max_new_tokens, ModelAccess())      # no download, safetensors only, every weight
    rows = lens_rows(load_runner(model), protocol, questions)
    return lens_table(rows, run_id=run_id, set_name=fs["name"], k=TOP_K)


#: export's options that only some formats write, and those formats.
_FORMAT_OPTIONS = ((("no_headers",), ("csv", "tsv", "md", "latex")), (("ci",), ("md", "latex", "table")),
                   (("caption", "latex_label"), ("latex",)), (("keep_formulas",), ("csv", "tsv")))
#: What `export inspect` takes: the rest are a table's options.
_INSPECT_OPTIONS = ("table_name", "run_args", "runs", "store_path", "output", "probe", "quiet")


def refuse_unused(name: str, fmt: str, spec, *, sql: bool) -> None:
    """One line for an option given that table `name` in format `fmt` would not act on (`sql`: --where or
    --order given, which -p and --where-timeout serve; `spec`: the table's registry record, None for the lens
    table, which is of one run and has no bootstrap)."""
    for names, formats in _FORMAT_OPTIONS:
        if fmt not in formats:
            refuse_options(names, f"to {fmt} output (only to {', '.join(formats)})")
    if spec is None or not spec.pair:
        refuse_options(("allow_unmatched",), f"to the {name} table (only to a table of two runs: compare, "
                                             f"compare-questions)")
    if spec is None or not spec.bootstrap:
        refuse_options(("bootstrap", "bootstrap_seed"), f"to the {name} table (it has no bootstrap intervals; "
                                                        f"summary and compare have)")
    if not sql:
        refuse_options(("params", "where_timeout"), "without --where or --order")


def _export_inspect(runs: tuple[str, ...], store_path: str | None, output: str | None, probe: str | None,
                    quiet: bool = False) -> None:
    """One run (RUN or --run; the latest by default) written as an Inspect log to -o FILE.eval / FILE.json."""
    from reachtui import tables as T
    from reachtui.reports.inspect_export import check_log_path, write_inspect_log

    refuse_options([p.name for p in export.params if p.name not in _INSPECT_OPTIONS],
                   "to export inspect: it writes the whole run as an Inspect log, in the format -o's suffix names "
                   "(.eval or .json)")
    if len(runs) > 1:
        raise ReachError("export inspect writes one run: give one RUN")
    if output is None:
        raise ReachError("export inspect writes a file: -o FILE.eval (or FILE.json)")
    check_output(output, store_path_of(store_path))
    check_log_path(output)
    with open_store(store_path) as store:
        run_id = store.resolve_run(runs[0] if runs else None)
        written = write_inspect_log(store, run_id, output, probe=probe, store_path=store_path_of(store_path))
    for n in () if quiet else written.notes:
        click.echo(f"note: {n}", err=True)
