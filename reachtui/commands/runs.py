"""`reachtui runs [--store PATH] [--json]`: the runs in an audit store (reads only; no model, no torch)."""

from __future__ import annotations

import json

import click

from reachtui.commands.options import store_option


#: The table's columns; under WIDE columns the last two (batch, updated) are left out and the protocol hash is
#: cut to 8 characters (`--json` has them all).
COLUMNS = ("run", "model", "task", "protocol", "status", "Qs", "attempts", "real %", "batch", "updated")
WIDE = 100


def name_widths(columns: tuple[str, ...], rows: list[list[str]], width: int) -> dict[str, int]:
    """The model and task columns' widths for a table `width` wide: what the other columns leave (each as wide
    as its longest cell, one space between columns), the model two parts to the task's one where both do not
    fit, the task at least 6 and never more than it needs (the model the rest, at least 16)."""
    need = {c: max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)}
    room = width - sum(w for c, w in need.items() if c not in ("model", "task")) - (len(columns) - 1)
    if need["model"] + need["task"] <= room:
        return {"model": need["model"], "task": need["task"]}
    task = min(need["task"], max(6, room - need["model"], room // 3))
    return {"model": max(16, room - task), "task": task}


@click.command("runs")
@store_option
@click.option("--json", "as_json", is_flag=True, help="One JSON array of run objects on stdout.")
def runs(store_path, as_json):
    """List the audit runs in the store: model, task, protocol hash, status, progress, and the match keys
    (per probe: two runs compare on a probe when its key is the same in both; "realized" is the default
    deployment's)."""
    from reachtui.store import Store

    store = Store(store_path, readonly=True, check=True)
    try:
        rows = store.list_runs()
        for r in rows:
            spec = store.readable_protocol(r["id"])     # unreadable: listed as null, not a crash
            r["protocol"] = json.loads(spec.canonical_json()) if spec is not None else None
            r["match_keys"] = spec.match_keys() if spec is not None else None
        if as_json:
            for r in rows:
                r["events"] = store.run_events(r["id"])
            click.echo(json.dumps(rows, indent=2))
            return
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        from reachtui.tables.formats import shown

        if not rows:
            click.echo(f"no runs in {store.path}")
            return
        console = Console()
        wide = console.width >= WIDE       # narrower: batch and updated are left to --json
        t = Table(title=Text(shown(f"runs in {store.path}")), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 0), pad_edge=False)
        shown_columns = COLUMNS if wide else COLUMNS[:-2]
        table_rows = []
        for r in rows:
            done = r["n_realized_done"]
            realized = f"{100 * r['n_realized'] / done:.1f}" if done else "–"
            cells = (str(r["id"]), r["model"], r["task"], r["protocol_hash"][:None if wide else 8], r["status"],
                     str(r["n_questions"]),
                     str(r["n_attempts"]), realized, str(r["batch_size"] or "–"),
                     (r["updated_at"] or "")[5:16].replace("T", " "))
            table_rows.append([shown(str(c)) for c in cells[:len(shown_columns)]])
        widths = name_widths(shown_columns, table_rows, console.width)
        for c in shown_columns:
            numeric = c in ("run", "Qs", "attempts", "real %", "batch")
            # model and task may take more lines, folded (never cut); the other cells stay on one line
            t.add_column(c, justify="right" if numeric else "left", no_wrap=c not in widths, overflow="fold",
                         max_width=widths.get(c), min_width=widths.get(c))
        for row in table_rows:
            t.add_row(*(Text(c) for c in row))     # names are text, never markup
        console.print(t)
        console.print("match keys (two runs compare on a probe when its key is the same in both; realized: the "
                      "default deployment):", markup=False, highlight=False)
        for r in rows:
            keys = r["match_keys"]
            said = ", ".join(f"{p} {k[:8]}" for p, k in keys.items()) if keys else "its protocol cannot be read"
            console.print(f"  run {r['id']}: {said}", markup=False, highlight=False)
    finally:
        store.close()
