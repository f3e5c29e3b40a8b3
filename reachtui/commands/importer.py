"""`reachtui import FILE --task TASK`: a run made from recorded generations (jsonl, an lm-eval
--log_samples file or an Inspect log), graded by reachtui's grader. The command parses its options, calls
`reachtui.engine.importing.import_file` (reading, checking, grading and the one write transaction live
there) and prints the notes, the run's summary table and its id.

Imports no torch, transformers or textual.
"""

from __future__ import annotations

import click

from reachtui.commands import numbers
from reachtui.commands.export import quiet_option
from reachtui.commands.options import store_option, task_option


@click.command("import")
@click.argument("file", metavar="FILE")
@task_option(required=False, help="The task the generations answer: a JSONL, CSV or parquet file, a `datasets` "
             "folder, hf:NAME[:CONFIG][:SPLIT] or demo; question ids match its ids. [default: the questions the "
             "file carries: an lm-eval row's doc and target, an Inspect sample's input and target]")
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help="jsonl (one attempt per line), lm-eval (a --log_samples file) or inspect (an Inspect AI "
                   "log; needs reachtui[inspect]); default: detected (.eval is inspect).")
@click.option("--model", default=None, metavar="NAME", help="Model name for the run (default: the file's name).")
@store_option
@click.option("--answer-format", default=None, metavar="FMT",
              help="number, math, choice or exact (default: choice for multiple-choice tasks, else number).")
@click.option("--filter", "filter_name", default=None, metavar="NAME",
              help="lm-eval: read this filter's rows (default: the first filter seen for each doc).")
@click.option("--protocol", "protocol_path", default=None, metavar="FILE.toml",
              help="The protocol the generations were made under (makes the run comparable with audits).")
@click.option("--realized-epoch", type=numbers.INT, default=None, metavar="N",
              help="inspect: the epoch read as the realized output (default 1); all epochs are sample attempts.")
@click.option("--allow-download", is_flag=True, help="Fetch an hf: task from the Hugging Face hub if not cached.")
@quiet_option
def import_(file, task_spec, task_name, task_fields, fmt, model, store_path, answer_format, filter_name, protocol_path,
            realized_epoch, allow_download, quiet) -> None:
    """Make a run from recorded generations in FILE, graded by reachtui's grader: realized vs reachable,
    failure sets and every table, without running a model.

    \b
      reachtui import generations.jsonl --task demo --model my-model
      reachtui import samples_gsm8k_2026-01-01.jsonl --task gsm8k.jsonl --format lm-eval --filter strict-match
      reachtui import logs/2026-12-03_gsm8k_abc.eval --task gsm8k.jsonl --format inspect
      reachtui import samples_gsm8k_2026-01-01.jsonl          # the questions from the rows' doc and target
    """
    from reachtui.engine.importing import import_file

    result = import_file(file, task_spec, fmt=fmt, model=model, store_path=store_path, answer_format=answer_format,
                         filter_name=filter_name, protocol_path=protocol_path,
                         realized_epoch=realized_epoch, task_name=task_name, task_fields=task_fields,
                         allow_download=allow_download)
    for n in () if quiet else result.notes:
        click.echo(f"note: {n}", err=True)
    from reachtui import tables as T
    from reachtui.tables.table import select
    from reachtui.commands.export import emit, open_store

    with open_store(store_path) as store:
        table = T.summary_table(store, [result.run_id])
    table = select(table, columns=["probe", "budget", "n", "realized", "reachable", "gap", "blind_vote",
                                     "blind_logprob", "failure_set_size"])
    table.title = (f"run {result.run_id} (imported, protocol {result.protocol_hash}): "
                   + " + ".join(f"{v} {k}" for k, v in result.attempts.items()) + " attempts")
    emit([table], "table", None, quiet=quiet)
    click.echo(f"run {result.run_id}")
