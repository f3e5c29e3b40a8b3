"""`reachtui compare RUN_A RUN_B`: a matched comparison of two runs (B against A), question by question.

Reads the store only; imports no torch, transformers or textual.
"""

from __future__ import annotations

import click

from reachtui.commands.options import refuse_options, store_option
from reachtui.commands.export import (bootstrap_options, emit, keep_formulas_option, open_store, pick_format,
                                      quiet_option, store_path_of)
from reachtui.output import check_output
from reachtui.errors import ReachError


@click.command("compare")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@store_option
@click.option("--format", "-f", "fmt", default=None, metavar="FORMAT",
              help="table (default), md, latex: scores and transitions for people; csv, tsv, json, "
                   "ndjson: one wide row per probe.")
@click.option("-o", "--output", default=None, metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
@click.option("--allow-unmatched", is_flag=True,
              help="Compare what is not matched too: other default deployments, or a probe with other settings "
                   "(a loud warning; every table is marked).")
@click.option("--list", "list_spec", default=None, metavar="TRANSITION",
              help="Print the question ids of one transition cell: MEASURE:CELL with MEASURE realized, "
                   "reachable (each probe) or a probe name, CELL gained, lost, kept or never (for reach also "
                   "expanded, shrunk, preserved, out-of-reach); e.g. reachable:lost = reachable in A, not in B.")
@keep_formulas_option
@quiet_option
@bootstrap_options
def compare(run_a, run_b, store_path, fmt, output, allow_unmatched, list_spec, keep_formulas, quiet, bootstrap,
            bootstrap_seed) -> None:
    """Compare RUN_B against RUN_A (run ids, 'latest', or model names: the model's latest complete run):
    per probe realized and reachable in each, their deltas (B - A) with 95% paired-bootstrap intervals, the
    question-level transitions (gained, lost, kept, never; for reach: expanded, shrunk, preserved,
    out-of-reach) and exact McNemar p-values, on the questions both runs have.

    Matched per probe: realized when the runs' default deployments agree (template, chat, system, few-shot,
    stop, max tokens, answer format, default decoding, seed, sampler), a probe when its own settings agree
    too; probes in one run only, or with other settings, are named and left out (--allow-unmatched
    compares them, marked).

    \b
      reachtui compare demo demo-tuned
      reachtui compare 1 2 --list reachable:lost
      reachtui compare 1 2 --format latex -o compare.tex
    """
    from reachtui.tables import formats as F
    from reachtui import tables as T
    from reachtui.tables.parquet import PARQUET

    explicit = fmt is not None
    if output is not None:      # a file that must never be written (the store) is named first, before its suffix
        check_output(output, store_path_of(store_path))
    fmt = pick_format(fmt, output, {}) if (explicit or output) else "table"
    if fmt not in ("csv", "tsv"):
        refuse_options(("keep_formulas",), f"to {fmt} output (only to csv, tsv)")
    if list_spec is not None:
        refuse_options(("bootstrap", "bootstrap_seed"), "to --list (question ids, no intervals)")
    store = open_store(store_path)
    try:
        a, b = store.resolve_run(run_a), store.resolve_run(run_b)
        comparison = T.compare_runs(store, a, b, allow_unmatched=allow_unmatched, bootstrap=bootstrap,
                                    seed=bootstrap_seed)
    finally:
        store.close()
    if list_spec is not None:
        listed = comparison.list_table(list_spec)
        if not explicit and output is None:
            # Plain ids, one per line (with the probe when it is not obvious): easy to pipe.
            for w in dict.fromkeys(listed.warnings):
                click.secho(f"WARNING: {w}", err=True, fg="red", bold=True)
            for n in () if quiet else listed.notes:
                click.echo(f"note: {n}", err=True)
            click.echo(listed.title, err=True)
            probes = {p for _m, p, _q in listed.rows}
            for _m, p, q in listed.rows:     # one id per line: a control character in one is shown, not run
                click.echo(f"{p}\t{F.shown(q, one_line=True)}" if len(probes) > 1 else F.shown(q, one_line=True))
            return
        emit([listed], fmt, output, store_path_of(store_path), quiet=quiet, formulas=keep_formulas)
        return
    if fmt in F.DATA_FORMATS or fmt == PARQUET:
        emit([comparison.table], fmt, output, store_path_of(store_path), quiet=quiet, formulas=keep_formulas)
    elif fmt in F.HUMAN_FORMATS:
        emit(T.compare_views(comparison), fmt, output, store_path_of(store_path), quiet=quiet)
    else:  # pragma: no cover - pick_format only returns known formats
        raise ReachError(f"unknown format {fmt!r}")
